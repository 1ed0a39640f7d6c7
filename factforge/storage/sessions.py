"""Sessions and turns: who said what, once (a turn's key makes a re-run a no-op).

Plain operations over a :class:`~factforge.storage.store.Store` (its connections and transactions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..settings import VISIBILITIES
from .queue import ENQUEUE_CONFLICT, ENQUEUE_INSERT, enqueue_params
from .records import check_text
from .stats import MISS_CONFLICT, MISS_INSERT, MISS_VALUES, miss_params

if TYPE_CHECKING:
    from .store import Store

__all__ = ["upsert_session", "turn_seen", "seen_keys", "record_turn", "last_assistant_message"]


# Opening a session that exists touches it. A session belongs to the agent (and team) that opened it: another
# agent using the same id records its own turns, but never rewrites the owner's intent.
_SESSION_CONFLICT = (
    "ON CONFLICT (id) DO UPDATE SET last_seen_at = now(), "
    "intent = CASE WHEN ss.agent_id IS NOT DISTINCT FROM excluded.agent_id "
    "AND ss.team_id IS NOT DISTINCT FROM excluded.team_id "
    "THEN coalesce(excluded.intent, ss.intent) ELSE ss.intent END")
# record_turn's session part when it opens the session too, only if the turn's key was free (t has its row): a
# turn seen before writes nothing.
_OPEN_SESSION = (
    "s AS (INSERT INTO sessions AS ss (id, kind, agent_id, team_id, intent, turn_count) "
    "SELECT %(session)s, %(kind)s, %(agent)s, %(team)s, %(intent)s, 1 WHERE EXISTS (SELECT FROM t) "
    + _SESSION_CONFLICT + ", turn_count = ss.turn_count + 1) ")


def upsert_session(store: Store, session_id: str, *, kind: str = "conversation", agent_id: str | None = None,
                   team_id: str | None = None, intent: str | None = None) -> None:
    for name, value in (("session_id", session_id), ("agent_id", agent_id), ("team_id", team_id),
                        ("intent", intent)):
        check_text(name, value)
    with store._tx() as conn:
        conn.exec_driver_sql(
            "INSERT INTO sessions AS ss (id, kind, agent_id, team_id, intent) "
            "VALUES (%(session)s, %(kind)s, %(agent)s, %(team)s, %(intent)s) " + _SESSION_CONFLICT,
            {"session": session_id, "kind": kind, "agent": agent_id, "team": team_id, "intent": intent},
        )


def turn_seen(store: Store, key: str) -> bool:
    return bool(store._read("SELECT 1 AS one FROM turns WHERE key = %(k)s", {"k": key}))


def seen_keys(store: Store, keys: Sequence[str]) -> set[str]:
    """Which of ``keys`` are recorded turns (one query for a whole group of input lines)."""
    if not keys:
        return set()
    return {r["key"] for r in store._read("SELECT key FROM turns WHERE key = ANY(%(k)s)", {"k": list(keys)})}


def record_turn(store: Store, key: str, *, session_id: str | None = None, activity_session: str | None = None,
                agent_id: str | None = None, team_id: str | None = None, user_message: str | None = None,
                assistant_message: str | None = None, message_ts: datetime | None = None,
                gate_reason: str | None = None, fact_count: int = 0, episode: str | None = None,
                user_name: str | None = None, assistant_name: str | None = None,
                entities: Sequence[str] = (), valid_from: datetime | None = None,
                valid_to: datetime | None = None, session_kind: str | None = None,
                intent: str | None = None, queue_item: Mapping[str, Any] | None = None,
                miss: str | None = None, last: bool = False) -> bool:
    """Record a turn; False if its key is already taken (a re-run, or a concurrent writer of the same
    turn, which this waits for). Called first in the turn's transaction, so the key and the turn's facts
    commit together.

    ``episode`` is the visibility of the turn as a searchable episode (None: not an episode, e.g. the gate
    dropped it); the turn holds the one stored copy of its messages, which its facts' sources reference.

    ``session_kind``: also open the session (or touch it), as :func:`upsert_session` would, in the same
    statement: one round trip per turn instead of two.

    ``queue_item``: queue the turn for the LLM under its key (:func:`~factforge.storage.queue.enqueue`), and
    ``miss``: count these words as a pattern miss (:func:`~factforge.storage.stats.record_miss`, of the turn's
    session or activity and agent), both in the same statement and only if the key was free. ``last``: the
    caller sends no other statement in this transaction (see :meth:`Tx.exec_driver_sql`)."""
    for name, value in (("key", key), ("session_id", session_id), ("intent", intent),
                        ("activity_session", activity_session), ("agent_id", agent_id), ("team_id", team_id), ("user_message", user_message),
                        ("assistant_message", assistant_message), ("gate_reason", gate_reason),
                        ("user_name", user_name), ("assistant_name", assistant_name),
                        *(("entity", e) for e in entities)):
        check_text(name, value)
    if episode is not None and episode not in VISIBILITIES:
        raise ValidationError(f"visibility {episode!r} must be one of {', '.join(VISIBILITIES)}")
    params = {"key": key, "session": session_id, "activity": activity_session, "agent": agent_id,
              "team": team_id, "user": user_message, "assistant": assistant_message, "ts": message_ts,
              "reason": gate_reason, "n": fact_count, "vis": episode, "user_name": user_name,
              "assistant_name": assistant_name, "entities": list(dict.fromkeys(entities)),
              "valid_from": valid_from, "valid_to": valid_to, "kind": session_kind, "intent": intent}
    work = ""
    if queue_item is not None:
        params.update(enqueue_params(key, queue_item))
        work += f", q AS ({ENQUEUE_INSERT} SELECT %(k)s, %(p)s::jsonb WHERE EXISTS (SELECT FROM t) {ENQUEUE_CONFLICT})"
        if miss is not None:
            params.update(miss_params(miss, session_id or activity_session, agent_id))
            work += f", m AS ({MISS_INSERT} SELECT {MISS_VALUES} WHERE EXISTS (SELECT FROM t) {MISS_CONFLICT})"
    with store._tx() as conn:
        # One round trip: the session counts the turn (and the queue takes its work) only if its key was free.
        inserted = conn.exec_driver_sql(
            "WITH t AS (INSERT INTO turns (key, session_id, activity_session, agent_id, team_id, user_message, "
            "assistant_message, message_ts, gate_reason, fact_count, visibility, user_name, assistant_name, "
            "entities, valid_from, valid_to) VALUES (%(key)s, %(session)s, %(activity)s, %(agent)s, %(team)s, "
            "%(user)s, %(assistant)s, %(ts)s, %(reason)s, %(n)s, %(vis)s, %(user_name)s, %(assistant_name)s, "
            "%(entities)s, %(valid_from)s, %(valid_to)s) ON CONFLICT (key) DO NOTHING RETURNING key), "
            + (_OPEN_SESSION if session_kind is not None and session_id is not None else
               "s AS (UPDATE sessions SET turn_count = turn_count + 1, last_seen_at = now() "
               "WHERE id = %(session)s AND EXISTS (SELECT FROM t)) ")
            + work + " SELECT key FROM t",
            params, last=last,
        ).first()
    return inserted is not None


def last_assistant_message(store: Store, session_id: str, *, agent_id: str, team_id: str | None) -> str | None:
    """The assistant's reply in this agent's latest turn of a session (what a bare "yes" confirms).

    Session ids are chosen by callers, so another agent (or team) can use the same one: only the caller's
    own turns count, or agent C answering "yes" in agent A's session would store A's reply as C's facts.
    """
    rows = store._read("SELECT assistant_message FROM turns WHERE session_id = %(s)s AND agent_id = %(a)s "
                     "AND team_id IS NOT DISTINCT FROM %(t)s "
                     "ORDER BY created_at DESC, message_ts DESC NULLS LAST LIMIT 1",
                     {"s": session_id, "a": agent_id, "t": team_id})
    return rows[0]["assistant_message"] if rows else None

