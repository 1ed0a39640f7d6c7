"""Forgetting: facts, mentions, and a session's or agent's records, in one transaction."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..errors import ValidationError
from .scope import same_scope_as
from .stats import miss_hash

if TYPE_CHECKING:
    from .store import Store

__all__ = ["forget"]


def forget(store: Store, *, dry_run: bool = False, fact_id: str | None = None, agent_id: str | None = None,
           session_id: str | None = None, category: str | None = None, text: str | None = None,
           team_id: str | None = None) -> int:
    """Forget facts; returns how many facts are deleted (or would be, with ``dry_run``).

    ``fact_id``, ``category``, ``text`` and ``team_id`` select facts. ``session_id`` and ``agent_id`` select
    *mentions*: their sources are removed, and a fact goes only when no other mention keeps it (a team fact
    another agent also said stays, with that agent's source). With no fact selector, the session's or
    agent's stored messages, queued work and pattern misses go too. Whatever a deleted fact had superseded
    is current again; entities and relationships nothing refers to any more are removed; queued LLM work
    of a forgotten fact's sources is dropped so a later drain cannot bring it back. Episodes (stored turns)
    go with their session or agent; a ``text`` or ``team_id`` selection clears the episodes it covers too
    (a fact id or category selects facts only).
    """
    sel = _Selection.of(fact_id=fact_id, agent_id=agent_id, session_id=session_id, category=category, text=text,
                        team_id=team_id)
    params = sel.params
    with store._tx() as conn:
        doomed = [r[0] for r in conn.exec_driver_sql(sel.doomed_sql(), params).fetchall()]
        if dry_run:
            return len(doomed)
        params["doomed"] = doomed
        keys = _drop_mentions(conn, sel)
        entity_ids = {r[0] for r in conn.exec_driver_sql(
            "SELECT entity_id FROM fact_entities WHERE fact_id = ANY(%(doomed)s)", params).fetchall()}
        for src, dst in conn.exec_driver_sql(
                "DELETE FROM relationships WHERE fact_id = ANY(%(doomed)s) RETURNING source_id, target_id",
                params).fetchall():
            entity_ids |= {src, dst}
        _delete_facts(conn, params)
        _drop_orphans(conn, entity_ids, keys)
        if sel.only_scope:
            _forget_scope_records(conn, params, session_id, agent_id)
        elif fact_id is None and category is None:
            _forget_episodes(conn, params, text=text is not None, team=team_id is not None,
                             agent=agent_id is not None, session=session_id is not None)
        return len(doomed)


@dataclass
class _Selection:
    """What a forget call selects: conditions on facts (``f``), on their mentions (``s``), and the mention
    conditions restated on facts stored without any source row (``legacy``)."""

    facts: list[str]
    sources: list[str]
    legacy: list[str]
    params: dict[str, Any]
    only_scope: bool  # a session or agent only: its records go too

    @classmethod
    def of(cls, *, fact_id: str | None, agent_id: str | None, session_id: str | None, category: str | None,
           text: str | None, team_id: str | None) -> _Selection:
        fact_clauses: list[str] = []
        params: dict[str, Any] = {}
        if fact_id is not None:
            try:
                params["id"] = UUID(str(fact_id))
            except ValueError:
                raise ValidationError(f"not a fact id: {fact_id!r}") from None
            fact_clauses.append("f.id = %(id)s")
        if team_id is not None:
            fact_clauses.append("f.team_id = %(team)s")
            params["team"] = team_id
        if category is not None:
            fact_clauses.append("f.category = %(category)s")
            params["category"] = category
        if text is not None:
            fact_clauses.append("f.content ILIKE %(text)s")
            params["text"] = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        source_clauses: list[str] = []
        legacy: list[str] = []
        if agent_id is not None:
            source_clauses.append("s.agent_id = %(agent)s")
            legacy.append("f.agent_id = %(agent)s")
            params["agent"] = agent_id
        if session_id is not None:
            source_clauses.append("(s.session_id = %(session)s OR s.activity_session = %(session)s)")
            legacy.append("(f.source_session = %(session)s OR f.source_activity_session = %(session)s)")
            params["session"] = session_id
        if not fact_clauses and not source_clauses:
            raise ValidationError("forget needs a selector (fact_id, agent_id, session_id, category, text)")
        only_scope = fact_id is None and category is None and text is None and bool(source_clauses)
        return cls(fact_clauses, source_clauses, legacy, params, only_scope)

    @property
    def fwhere(self) -> str:
        return " AND ".join(self.facts) or "TRUE"

    @property
    def swhere(self) -> str:
        return " AND ".join(self.sources) or "FALSE"

    def doomed_sql(self) -> str:
        """The facts that go: selected, and (with a mention selection) kept by no other mention."""
        if not self.sources:
            return f"SELECT f.id FROM facts f WHERE {self.fwhere}"
        swhere = self.swhere
        return (
            f"SELECT f.id FROM facts f WHERE {self.fwhere} AND ("
            f"(EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id AND {swhere})"
            f" AND NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id AND NOT coalesce({swhere}, false)))"
            f" OR (NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id) AND {' AND '.join(self.legacy)}))"
        )


def _drop_mentions(conn: Any, sel: _Selection) -> set[str]:
    """Remove the selected mentions of facts that survive (their provenance columns then tell of their earliest
    remaining mention); returns the source keys of every removed mention and of the doomed facts' mentions."""
    params = sel.params
    dropped = conn.exec_driver_sql(
        f"DELETE FROM fact_sources s USING facts f WHERE f.id = s.fact_id AND {sel.fwhere} AND {sel.swhere} "
        "AND NOT s.fact_id = ANY(%(doomed)s) RETURNING s.fact_id, s.source_key", params).fetchall()
    keys = {r[1] for r in dropped}
    keys |= {r[0] for r in conn.exec_driver_sql(
        "SELECT source_key FROM fact_sources WHERE fact_id = ANY(%(doomed)s)", params).fetchall()}
    survivors: dict[UUID, int] = {}
    for fid, _key in dropped:
        survivors[fid] = survivors.get(fid, 0) + 1
    for fid, n in survivors.items():
        conn.exec_driver_sql(
            """
            UPDATE facts f SET mention_count = greatest(1, f.mention_count - %(n)s),
                source_session = (SELECT x.id FROM sessions x WHERE x.id = first.session_id),
                source_user_message = first.user_message,
                source_assistant_message = first.assistant_message,
                source_activity_session = first.activity_session,
                agent_id = CASE WHEN f.visibility = 'private' THEN f.agent_id
                                ELSE coalesce(first.agent_id, f.agent_id) END
            FROM (SELECT * FROM fact_sources WHERE fact_id = %(id)s ORDER BY seen_at, id LIMIT 1) first
            WHERE f.id = %(id)s
            """,
            {"id": fid, "n": n},
        )
    return keys


def _delete_facts(conn: Any, params: Mapping[str, Any]) -> None:
    """Delete the doomed facts; whatever they had superseded is current again, unless the same fact was stated
    afresh meanwhile (that row stays current)."""
    replaced = [r[0] for r in conn.exec_driver_sql(
        "SELECT id FROM facts WHERE superseded_by = ANY(%(doomed)s) AND NOT id = ANY(%(doomed)s) "
        "ORDER BY superseded_at DESC, id", params).fetchall()]
    conn.exec_driver_sql("DELETE FROM facts WHERE id = ANY(%(doomed)s)", params)
    for fid in replaced:
        conn.exec_driver_sql(
            f"""
            UPDATE facts f SET superseded_at = NULL, superseded_by = NULL, valid_to = NULL
            WHERE f.id = %(id)s AND f.superseded_by IS NULL AND NOT EXISTS (
                SELECT 1 FROM facts c WHERE c.superseded_at IS NULL AND c.content_hash = f.content_hash
                  AND {same_scope_as("c", "f")})
            """,
            {"id": fid},
        )


def _drop_orphans(conn: Any, entity_ids: set[int], keys: set[str]) -> None:
    """Entities nothing refers to any more, and queued LLM work of the forgotten mentions (so a later drain
    cannot bring them back)."""
    if entity_ids:
        conn.exec_driver_sql(
            "DELETE FROM entities e WHERE e.id = ANY(%(ids)s) "
            "AND NOT EXISTS (SELECT 1 FROM fact_entities fe WHERE fe.entity_id = e.id) "
            "AND NOT EXISTS (SELECT 1 FROM relationships r WHERE r.fact_id IS NOT NULL "
            "AND (r.source_id = e.id OR r.target_id = e.id))",
            {"ids": sorted(entity_ids)},
        )
    if keys:
        conn.exec_driver_sql("DELETE FROM extraction_queue WHERE source_key = ANY(%(keys)s)",
                             {"keys": sorted(keys)})


def _forget_episodes(conn: Any, params: Mapping[str, Any], *, text: bool, team: bool, agent: bool,
                     session: bool) -> None:
    """The episodes a ``text``/``team_id`` selection (with agent or session) covers stop being episodes:
    their words, names and vector go, the turn's key stays (so re-ingesting it stays a no-op)."""
    clauses = ["visibility IS NOT NULL"]
    if text:
        clauses.append("user_message ILIKE %(text)s")
    if team:
        clauses.append("team_id = %(team)s")
    if agent:
        clauses.append("agent_id = %(agent)s")
    if session:
        clauses.append("(session_id = %(session)s OR activity_session = %(session)s)")
    conn.exec_driver_sql(
        f"UPDATE turns SET visibility = NULL, user_message = NULL, assistant_message = NULL, user_name = NULL, "
        f"assistant_name = NULL, entities = '{{}}', embedding = NULL, embedding_model = NULL "
        f"WHERE {' AND '.join(clauses)}", params)


def _forget_scope_records(conn: Any, params: Mapping[str, Any], session_id: str | None,
                          agent_id: str | None) -> None:
    """A forgotten session's or agent's messages, queued work and pattern misses."""
    if session_id is not None:
        turns = "(session_id = %(session)s OR activity_session = %(session)s)"
        if agent_id is not None:
            turns += " AND agent_id = %(agent)s"
    else:
        turns = "agent_id = %(agent)s"
    texts = [r[0] for r in conn.exec_driver_sql(
        f"SELECT user_message FROM turns WHERE {turns} AND user_message IS NOT NULL", params).fetchall()]
    hashes = sorted({miss_hash(t) for t in texts})
    owners = []
    if session_id is not None:
        owners.append("%(session)s = ANY(session_ids)")
    if agent_id is not None:
        owners.append("%(agent)s = ANY(agent_ids)")
    # Misses recorded before they kept their provenance are matched by the forgotten messages' text.
    conn.exec_driver_sql(
        f"DELETE FROM pattern_misses WHERE ({' AND '.join(owners)}) "
        "OR (session_ids = '{}' AND agent_ids = '{}' AND text_hash = ANY(%(hashes)s))",
        {**params, "hashes": hashes},
    )
    conn.exec_driver_sql(f"DELETE FROM turns WHERE {turns}", params)
    queue = []
    if session_id is not None:
        queue.append("(payload->>'session_id' = %(session)s OR payload->>'activity_session' = %(session)s)")
    if agent_id is not None:
        queue.append("payload->>'agent_id' = %(agent)s")
    conn.exec_driver_sql(f"DELETE FROM extraction_queue WHERE {' AND '.join(queue)}", params)
    if session_id is not None and agent_id is None:
        conn.exec_driver_sql("DELETE FROM sessions WHERE id = %(session)s", params)
    elif agent_id is not None:
        # The agent's sessions stay (another agent's turns may share the id, and go with it), but not the agent's
        # words in them: an activity's intent is its owner's.
        only = " AND id = %(session)s" if session_id is not None else ""
        conn.exec_driver_sql(f"UPDATE sessions SET intent = NULL WHERE agent_id = %(agent)s{only} "
                             "AND intent IS NOT NULL", params)

