"""PostgreSQL storage of facts: idempotent writes, provenance, scopes, supersession, the LLM queue.

All SQL of the write path lives here. Reads for search live in :mod:`factforge.search`. A :class:`Store`
is safe to share between threads (SQLAlchemy's pool hands each call its own connection).

Lifecycle, by rule:

* the same fact again (same normalised content, same scope) is a *mention*: ``mention_count`` grows and a
  ``fact_sources`` row records where it was said; nothing is duplicated;
* a paraphrase (cosine similarity >= ``FACTFORGE_DEDUP_SIMILARITY``, same category, same entities, same
  slots) is a mention of the fact already stored;
* a fact that makes an older one outdated (``patterns/supersession.yaml``) marks it superseded: the old row
  stays, with ``superseded_at``/``superseded_by``, so history and ``as_of`` queries keep working.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from ..errors import DatabaseError, NotFoundError, ValidationError
from ..rules.lifecycle import SupersessionRules
from ..settings import VISIBILITIES, Settings
from ..types import Entity, Fact, Relationship

logger = logging.getLogger("factforge.store")

__all__ = ["Provenance", "QueueItem", "Miss", "Scope", "Store", "StoredFact", "content_hash", "normalize_content"]

_PUNCT_END = re.compile(r"[\s.!?;:,。！？；：，]+$")
_SPACES = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(?:a|an|the)\s+")


def normalize_content(content: str) -> str:
    """The form two facts are compared in: NFKC, case-folded, single spaces, no articles, no trailing
    punctuation ("The user prefers the dark mode." and "User prefers dark mode" are the same fact)."""
    text = unicodedata.normalize("NFKC", content).casefold().strip()
    text = _SPACES.sub(" ", text)
    text = _ARTICLES.sub("", text)
    return _PUNCT_END.sub("", text)


def content_hash(content: str) -> str:
    return hashlib.sha256(normalize_content(content).encode("utf-8")).hexdigest()


def _miss_hash(text: str) -> str:
    return hashlib.sha256(normalize_content(text)[:2000].encode()).hexdigest()


MAX_TX_ATTEMPTS = 5
RETRY_SQLSTATES = frozenset({"40001", "40P01", "23505"})  # serialization failure, deadlock, unique race


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_text(name: str, value: str | None) -> None:
    """PostgreSQL text cannot hold a NUL byte, and UTF-8 cannot encode a lone surrogate: say so before SQL."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, not {type(value).__name__}")
    bad = _UNSTORABLE.search(value)
    if bad is not None:
        what = "a NUL byte" if bad.group() == "\x00" else f"a lone surrogate (U+{ord(bad.group()):04X})"
        raise ValidationError(f"{name} contains {what}")


def check_fact(fact: Fact) -> None:
    """Reject values the database would refuse, with a clear error, before any SQL runs."""
    from ..types import CATEGORIES, METHODS

    if not isinstance(fact.content, str) or not fact.content.strip():
        raise ValidationError("a fact needs non-empty content")
    for name, value in (("content", fact.content), ("subject", fact.subject), ("relation", fact.relation),
                        ("rule_id", fact.rule_id), *((f"entity {e!r}", e) for e in fact.entities)):
        check_text(f"fact {name}", value)
    if fact.category not in CATEGORIES:
        raise ValidationError(f"category {fact.category!r} must be one of {', '.join(CATEGORIES)}")
    if fact.method not in METHODS:
        raise ValidationError(f"extraction method {fact.method!r} must be one of {', '.join(METHODS)}")
    if not isinstance(fact.confidence, (int, float)) or not 0.0 <= float(fact.confidence) <= 1.0:
        raise ValidationError(f"confidence {fact.confidence!r} must be between 0 and 1")
    if fact.valid_from and fact.valid_to and fact.valid_to < fact.valid_from:
        raise ValidationError("valid_to is before valid_from")


def normalize_entity(name: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", name).casefold().strip())


@dataclass(frozen=True, slots=True)
class Scope:
    """Who may see a fact: ``private`` to one agent, ``team`` to one team, or ``global``."""

    agent_id: str | None
    team_id: str | None = None
    visibility: str = "private"

    def __post_init__(self) -> None:
        if self.visibility not in VISIBILITIES:
            raise ValidationError(f"visibility {self.visibility!r} must be one of {', '.join(VISIBILITIES)}")
        if self.visibility == "private" and not self.agent_id:
            raise ValidationError("a private fact needs an agent_id")
        if self.visibility == "team" and not self.team_id:
            raise ValidationError("a team fact needs a team_id")
        check_text("agent_id", self.agent_id)
        check_text("team_id", self.team_id)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a fact came from."""

    source_key: str
    session_id: str | None = None
    user_message: str | None = None
    assistant_message: str | None = None
    activity_session: str | None = None
    message_ts: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("source_key", "session_id", "user_message", "assistant_message", "activity_session"):
            check_text(name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class StoredFact:
    """A fact as stored. ``action``: 'new', 'mention' (same fact again) or 'paraphrase' (near duplicate)."""

    id: UUID
    content: str
    category: str
    confidence: float
    method: str
    rule_id: str | None
    entities: tuple[str, ...]
    subject: str | None
    relation: str | None
    slots: Mapping[str, Any]
    explanation: Mapping[str, Any]
    visibility: str
    agent_id: str | None
    team_id: str | None
    source_session: str | None
    source_activity_session: str | None
    mention_count: int
    first_seen_at: datetime
    last_seen_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None
    superseded_by: UUID | None
    superseded_at: datetime | None
    created_at: datetime
    action: str = "stored"
    supersedes: tuple[UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueItem:
    id: int
    source_key: str
    payload: Mapping[str, Any]
    attempts: int


@dataclass(frozen=True, slots=True)
class Miss:
    text: str
    count: int
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    agents: int = 0  # how many agents' users said it


_FACT_COLS = (
    "id, content, category, confidence, extraction_method, rule_id, entities, subject, relation, slots, "
    "explanation, visibility, agent_id, team_id, source_session, source_activity_session, mention_count, "
    "first_seen_at, last_seen_at, valid_from, valid_to, superseded_by, superseded_at, created_at"
)


def _stored(row: Mapping[str, Any], action: str = "stored", supersedes: Sequence[UUID] = ()) -> StoredFact:
    return StoredFact(
        id=row["id"], content=row["content"], category=row["category"], confidence=float(row["confidence"]),
        method=row["extraction_method"], rule_id=row["rule_id"], entities=tuple(row["entities"] or ()),
        subject=row["subject"], relation=row["relation"], slots=row["slots"] or {},
        explanation=row["explanation"] or {}, visibility=row["visibility"], agent_id=row["agent_id"],
        team_id=row["team_id"], source_session=row["source_session"],
        source_activity_session=row["source_activity_session"], mention_count=row["mention_count"],
        first_seen_at=row["first_seen_at"], last_seen_at=row["last_seen_at"], valid_from=row["valid_from"],
        valid_to=row["valid_to"], superseded_by=row["superseded_by"], superseded_at=row["superseded_at"],
        created_at=row["created_at"], action=action, supersedes=tuple(supersedes),
    )


def _explanation_json(fact: Fact) -> str:
    data = asdict(fact.explanation)
    return json.dumps(data, ensure_ascii=False, default=str)


# The key of "the same fact in the same scope" (migration 0003's partial unique indexes): a private fact is
# one agent's in one team, a team fact the team's whoever said it, a global fact everybody's.
_CONFLICT_TARGET = {
    "private": "(content_hash, agent_id, coalesce(team_id, '')) WHERE superseded_at IS NULL AND visibility = 'private'",
    "team": "(content_hash, team_id) WHERE superseded_at IS NULL AND visibility = 'team'",
    "global": "(content_hash) WHERE superseded_at IS NULL AND visibility = 'global'",
}


def same_scope(alias: str, visibility: str, *, vis: str = "visibility", agent: str = "agent",
               team: str = "team") -> str:
    """SQL: row ``alias`` is in the scope of the given visibility, agent and team parameters."""
    if visibility == "private":
        return (f"{alias}.visibility = 'private' AND {alias}.agent_id = %({agent})s "
                f"AND {alias}.team_id IS NOT DISTINCT FROM %({team})s")
    if visibility == "team":
        return f"{alias}.visibility = 'team' AND {alias}.team_id = %({team})s"
    return f"{alias}.visibility = %({vis})s"


def visible_clause(agent_id: str | None, team_id: str | None, alias: str = "f") -> tuple[str, dict[str, Any]]:
    """SQL restricting facts to what an agent may see (everything when both are None: the analyst's view)."""
    if agent_id is None and team_id is None:
        return "TRUE", {}
    return (
        f"({alias}.visibility = 'global'"
        f" OR ({alias}.visibility = 'team' AND {alias}.team_id = %(v_team)s)"
        f" OR ({alias}.visibility = 'private' AND {alias}.agent_id = %(v_agent)s))",
        {"v_team": team_id, "v_agent": agent_id},
    )


class Store:
    """The facts database. Open with :meth:`open`; it migrates a new database to the current schema."""

    def __init__(self, url: str, settings: Settings, engine: Any) -> None:
        self.url = url
        self.settings = settings
        self.engine = engine
        self.rules = SupersessionRules.from_dir(settings.patterns_dir)
        self._recognizer: Any = None  # entities.yaml, loaded when the first entity is stored
        # The open unit of work of each thread (see unit_of_work); other threads keep their own transactions.
        self._local = threading.local()

    @classmethod
    def open(cls, settings: Settings, *, check_embedder: bool = True) -> Store:
        from sqlalchemy.exc import SQLAlchemyError

        from . import db
        from .pooling import create_pooled_engine

        url = db.database_url(settings)
        db.ensure_schema(url, settings, check_embedder=check_embedder)
        try:
            engine = create_pooled_engine(url, pool_size=settings.db_pool_size)
            with engine.connect():
                pass
        except SQLAlchemyError as exc:
            raise DatabaseError(db.describe_connect_error(exc, url)) from None
        return cls(url, settings, engine)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            bound = self._bound()
            if bound is not None:  # part of this thread's unit of work: it commits at the end of the unit
                yield bound
                return
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise self._database_error(getattr(exc, "orig", None) or exc) from exc

    def _database_error(self, orig: BaseException) -> DatabaseError:
        """One line for a failed statement; a full disk says which disk and what to do."""
        from .embedded import disk_full_error

        first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        if disk_full_error(self.settings.home, orig) is not None:
            where = (f"the embedded server's disk (FACTFORGE_HOME={self.settings.home})"
                     if self.settings.database_url is None else "the database server's disk")
            return DatabaseError(f"{where} is full ({first}): free some space; this write was rolled back, "
                                 "nothing else was lost")
        return DatabaseError(f"database error: {first}")

    def _bound(self) -> Any:
        return getattr(self._local, "conn", None)

    @contextmanager
    def unit_of_work(self, *, savepoints: bool = True) -> Iterator[None]:
        """Run every write of this thread in one transaction until the block ends (a batch of turns).

        It commits when the block ends and rolls back if it raises, so either all of it is stored or none.
        Inside it a conflicting write (deadlock, serialisation failure) is not retried: the transaction is
        aborted by then, the :class:`DatabaseError` ends the unit and the caller redoes the work without it.
        Work registered with :meth:`after_commit` runs once the commit is done. A nested call joins the
        outer unit. ``savepoints=False``: the unit holds one call, so a failing call ends the unit anyway and
        the savepoint around it (two round trips) is left out.
        """
        if self._bound() is not None:
            yield
            return
        hooks: list[Callable[[], object]] = []
        with self._tx() as conn:
            self._local.conn, self._local.hooks, self._local.savepoints = conn, hooks, savepoints
            try:
                yield
            finally:
                self._local.conn = self._local.hooks = None
                self._local.savepoints = True
        for hook in hooks:
            hook()

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Inside a unit of work, undo only this block's writes if it raises; elsewhere, do nothing."""
        from sqlalchemy.exc import SQLAlchemyError

        conn = self._bound()
        if conn is None or not self._local.savepoints:
            yield
            return
        # Plain SQL rather than Connection.begin_nested(): one round trip each way, a sixth of the cost per turn.
        try:
            conn.exec_driver_sql("SAVEPOINT ff_call")
            try:
                yield
            except BaseException:
                conn.exec_driver_sql("ROLLBACK TO SAVEPOINT ff_call")
                raise
            conn.exec_driver_sql("RELEASE SAVEPOINT ff_call")
        except SQLAlchemyError as exc:
            raise self._database_error(getattr(exc, "orig", None) or exc) from exc

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One call's writes as one transaction: its own when none is open, else a savepoint of the open unit
        of work (so a failing call inside a batch leaves nothing behind and the batch goes on)."""
        if self._bound() is not None:
            with self.savepoint():
                yield
        else:
            with self.unit_of_work():
                yield

    def retryable(self, exc: DatabaseError) -> bool:
        """Whether a failed write is a conflict with a concurrent writer (deadlock, serialisation, unique race)
        that a fresh transaction may redo; never inside an open unit of work (it is aborted by then)."""
        code = getattr(getattr(exc.__cause__, "orig", None), "sqlstate", None)
        return code in RETRY_SQLSTATES and self._bound() is None

    def after_commit(self, hook: Callable[[], object]) -> None:
        """Call ``hook`` once this thread's unit of work has committed (at once outside one); the same hook
        registered twice in a unit runs once."""
        hooks = getattr(self._local, "hooks", None)
        if hooks is None:
            hook()
        elif hook not in hooks:
            hooks.append(hook)

    def _all(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Mapping[str, Any]]:
        with self._tx() as conn:
            return [dict(r) for r in conn.exec_driver_sql(sql, dict(params or {})).mappings()]

    # -- sessions and turns --------------------------------------------------------------------------

    def upsert_session(self, session_id: str, *, kind: str = "conversation", agent_id: str | None = None,
                       team_id: str | None = None, intent: str | None = None) -> None:
        for name, value in (("session_id", session_id), ("agent_id", agent_id), ("team_id", team_id),
                            ("intent", intent)):
            check_text(name, value)
        with self._tx() as conn:
            conn.exec_driver_sql(
                "INSERT INTO sessions (id, kind, agent_id, team_id, intent) "
                "VALUES (%(id)s, %(kind)s, %(agent)s, %(team)s, %(intent)s) "
                "ON CONFLICT (id) DO UPDATE SET last_seen_at = now(), "
                # A session belongs to the agent (and team) that opened it: another agent using the same id
                # records its own turns, but never rewrites the owner's intent.
                "intent = CASE WHEN sessions.agent_id IS NOT DISTINCT FROM excluded.agent_id "
                "AND sessions.team_id IS NOT DISTINCT FROM excluded.team_id "
                "THEN coalesce(excluded.intent, sessions.intent) ELSE sessions.intent END",
                {"id": session_id, "kind": kind, "agent": agent_id, "team": team_id, "intent": intent},
            )

    def turn_seen(self, key: str) -> bool:
        return bool(self._all("SELECT 1 AS one FROM turns WHERE key = %(k)s", {"k": key}))

    def seen_keys(self, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` are recorded turns (one query for a whole group of input lines)."""
        if not keys:
            return set()
        return {r["key"] for r in self._all("SELECT key FROM turns WHERE key = ANY(%(k)s)", {"k": list(keys)})}

    def record_turn(self, key: str, *, session_id: str | None = None, activity_session: str | None = None,
                    agent_id: str | None = None, team_id: str | None = None, user_message: str | None = None,
                    assistant_message: str | None = None, message_ts: datetime | None = None,
                    gate_reason: str | None = None, fact_count: int = 0, episode: str | None = None,
                    user_name: str | None = None, assistant_name: str | None = None,
                    entities: Sequence[str] = (), valid_from: datetime | None = None,
                    valid_to: datetime | None = None) -> bool:
        """Record a turn; False if its key is already taken (a re-run, or a concurrent writer of the same
        turn, which this waits for). Called first in the turn's transaction, so the key and the turn's facts
        commit together.

        ``episode`` is the visibility of the turn as a searchable episode (None: not an episode, e.g. the gate
        dropped it); the turn holds the one stored copy of its messages, which its facts' sources reference."""
        for name, value in (("key", key), ("session_id", session_id), ("activity_session", activity_session),
                            ("agent_id", agent_id), ("team_id", team_id), ("user_message", user_message),
                            ("assistant_message", assistant_message), ("gate_reason", gate_reason),
                            ("user_name", user_name), ("assistant_name", assistant_name),
                            *(("entity", e) for e in entities)):
            check_text(name, value)
        if episode is not None and episode not in VISIBILITIES:
            raise ValidationError(f"visibility {episode!r} must be one of {', '.join(VISIBILITIES)}")
        with self._tx() as conn:
            # One round trip: the session counts the turn only if its key was free.
            inserted = conn.exec_driver_sql(
                "WITH t AS (INSERT INTO turns (key, session_id, activity_session, agent_id, team_id, user_message, "
                "assistant_message, message_ts, gate_reason, fact_count, visibility, user_name, assistant_name, "
                "entities, valid_from, valid_to) VALUES (%(key)s, %(session)s, %(activity)s, %(agent)s, %(team)s, "
                "%(user)s, %(assistant)s, %(ts)s, %(reason)s, %(n)s, %(vis)s, %(user_name)s, %(assistant_name)s, "
                "%(entities)s, %(valid_from)s, %(valid_to)s) ON CONFLICT (key) DO NOTHING RETURNING key), "
                "s AS (UPDATE sessions SET turn_count = turn_count + 1, last_seen_at = now() "
                "WHERE id = %(session)s AND EXISTS (SELECT FROM t)) "
                "SELECT key FROM t",
                {"key": key, "session": session_id, "activity": activity_session, "agent": agent_id,
                 "team": team_id, "user": user_message, "assistant": assistant_message, "ts": message_ts,
                 "reason": gate_reason, "n": fact_count, "vis": episode, "user_name": user_name,
                 "assistant_name": assistant_name, "entities": list(dict.fromkeys(entities)),
                 "valid_from": valid_from, "valid_to": valid_to},
            ).first()
        return inserted is not None

    def set_turn_fact_count(self, key: str, n: int) -> None:
        """How many facts the turn gave (known once they are stored, after the turn took its key)."""
        with self._tx() as conn:
            conn.exec_driver_sql("UPDATE turns SET fact_count = %(n)s WHERE key = %(k)s", {"n": n, "k": key})

    def last_assistant_message(self, session_id: str, *, agent_id: str, team_id: str | None) -> str | None:
        """The assistant's reply in this agent's latest turn of a session (what a bare "yes" confirms).

        Session ids are chosen by callers, so another agent (or team) can use the same one: only the caller's
        own turns count, or agent C answering "yes" in agent A's session would store A's reply as C's facts.
        """
        rows = self._all("SELECT assistant_message FROM turns WHERE session_id = %(s)s AND agent_id = %(a)s "
                         "AND team_id IS NOT DISTINCT FROM %(t)s "
                         "ORDER BY created_at DESC, message_ts DESC NULLS LAST LIMIT 1",
                         {"s": session_id, "a": agent_id, "t": team_id})
        return rows[0]["assistant_message"] if rows else None

    # -- facts ---------------------------------------------------------------------------------------

    def save(
        self,
        facts: Sequence[Fact],
        scope: Scope,
        provenance: Provenance,
        *,
        entities: Sequence[Entity] = (),
        relationships: Sequence[Relationship] = (),
        embeddings: Sequence[Sequence[float] | None] | None = None,
        embedding_model: str | None = None,
    ) -> list[StoredFact]:
        """Store facts in one transaction; the same fact again becomes a mention, never a duplicate row."""
        if embeddings is not None and len(embeddings) != len(facts):
            raise ValidationError(f"{len(facts)} facts but {len(embeddings)} embeddings")
        for fact in facts:
            check_fact(fact)
        # Entities in a stable order: concurrent writers then lock rows in the same order.
        entities = sorted(entities, key=lambda e: (normalize_entity(self._canonical(e.name)), e.type))
        for attempt in range(1, MAX_TX_ATTEMPTS + 1):
            try:
                out: list[StoredFact] = []
                with self._tx() as conn:
                    entity_ids = self._upsert_entities(conn, entities)
                    for i, fact in enumerate(facts):
                        vector = embeddings[i] if embeddings is not None else None
                        out.append(self._save_one(conn, fact, scope, provenance, vector, embedding_model))
                    for sf in out:
                        self._link_entities(conn, sf, entity_ids, entities)
                    if relationships:
                        self._save_relationships(conn, relationships, entity_ids, out[0].id if out else None)
                return out
            except DatabaseError as exc:
                # Deadlocks and serialisation failures between concurrent writers are retried, never surfaced.
                code = getattr(getattr(exc.__cause__, "orig", None), "sqlstate", None)
                if code not in RETRY_SQLSTATES or attempt == MAX_TX_ATTEMPTS or self._bound() is not None:
                    raise
                logger.info("concurrent write conflict (%s); retrying (%d)", code, attempt)
                time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def _save_one(self, conn: Any, fact: Fact, scope: Scope, prov: Provenance, vector: Sequence[float] | None,
                  embedding_model: str | None) -> StoredFact:
        from pgvector import Vector

        h = content_hash(fact.content)
        seen = prov.message_ts or datetime.now(timezone.utc)
        params: dict[str, Any] = {
            "content": fact.content.strip(), "category": fact.category, "confidence": float(fact.confidence),
            "method": fact.method, "rule_id": fact.rule_id, "entities": list(fact.entities),
            "subject": fact.subject, "relation": fact.relation, "slots": json.dumps(dict(fact.slots), default=str),
            "explanation": _explanation_json(fact), "session": prov.session_id,
            "user_msg": prov.user_message, "assistant_msg": prov.assistant_message,
            "activity": prov.activity_session, "agent": scope.agent_id, "team": scope.team_id,
            "visibility": scope.visibility, "embedding": Vector(list(vector)) if vector is not None else None,
            "model": embedding_model if vector is not None else None, "hash": h, "seen": seen,
            "valid_from": fact.valid_from, "valid_to": fact.valid_to,
        }
        if params["session"] is not None:
            exists = conn.exec_driver_sql("SELECT 1 FROM sessions WHERE id = %(s)s", {"s": params["session"]}).first()
            if not exists:
                params["session"] = None
        row = None
        action = "new"
        if vector is not None:
            row = self._paraphrase_of(conn, fact, scope, params)
            if row is not None:
                action = "paraphrase"
        if row is None:
            row = conn.exec_driver_sql(
                f"""
                INSERT INTO facts (content, category, confidence, extraction_method, rule_id, entities, subject,
                    relation, slots, explanation, source_session, source_user_message, source_assistant_message,
                    source_activity_session, agent_id, team_id, visibility, embedding, embedding_model,
                    content_hash, first_seen_at, last_seen_at, valid_from, valid_to)
                VALUES (%(content)s, %(category)s, %(confidence)s, %(method)s, %(rule_id)s, %(entities)s,
                    %(subject)s, %(relation)s, %(slots)s::jsonb, %(explanation)s::jsonb, %(session)s,
                    %(user_msg)s, %(assistant_msg)s, %(activity)s, %(agent)s, %(team)s, %(visibility)s,
                    %(embedding)s, %(model)s, %(hash)s, %(seen)s, %(seen)s, %(valid_from)s, %(valid_to)s)
                ON CONFLICT {_CONFLICT_TARGET[scope.visibility]}
                DO UPDATE SET mention_count = facts.mention_count + 1,
                    last_seen_at = greatest(facts.last_seen_at, excluded.last_seen_at),
                    confidence = greatest(facts.confidence, excluded.confidence),
                    embedding = coalesce(facts.embedding, excluded.embedding),
                    embedding_model = coalesce(facts.embedding_model, excluded.embedding_model)
                RETURNING {_FACT_COLS}, (xmax = 0) AS inserted
                """,
                params,
            ).mappings().one()
            action = "new" if row["inserted"] else "mention"
        added_source = conn.exec_driver_sql(
            "INSERT INTO fact_sources (fact_id, source_key, session_id, activity_session, agent_id, user_message, "
            "assistant_message, message_ts) VALUES (%(id)s, %(key)s, %(src_session)s, %(activity)s, %(agent)s, "
            "%(user_msg)s, %(assistant_msg)s, %(ts)s) ON CONFLICT (fact_id, source_key) DO NOTHING RETURNING id",
            # The session as said, even unregistered (no foreign key here): forgetting it must find the mention.
            {**params, "id": row["id"], "key": prov.source_key, "ts": prov.message_ts, "src_session": prov.session_id},
        ).first()
        if action != "new" and added_source is None:
            # The same source said it again (a retried queue item): not a new mention.
            row = conn.exec_driver_sql(
                f"UPDATE facts SET mention_count = greatest(1, mention_count - 1) WHERE id = %(id)s "
                f"AND %(undo)s RETURNING {_FACT_COLS}",
                {"id": row["id"], "undo": action == "mention"},
            ).mappings().first() or row
        superseded: list[UUID] = []
        if action == "new":
            superseded = self._supersede(conn, {**row, "embedding": params["embedding"]}, seen)
        return _stored(row, action, superseded)

    def _paraphrase_of(self, conn: Any, fact: Fact, scope: Scope, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        threshold = self.settings.dedup_similarity
        cand = conn.exec_driver_sql(
            f"""
            SELECT {_FACT_COLS}, 1 - (embedding <=> %(embedding)s) AS similarity FROM facts
            WHERE superseded_at IS NULL AND embedding IS NOT NULL AND category = %(category)s
              AND {same_scope("facts", scope.visibility)} AND content_hash <> %(hash)s
            ORDER BY embedding <=> %(embedding)s LIMIT 1
            """,
            params,
        ).mappings().first()
        if cand is None or float(cand["similarity"]) < threshold:
            return None
        if {normalize_entity(e) for e in cand["entities"]} != {normalize_entity(e) for e in fact.entities}:
            return None
        if cand["slots"] and fact.slots:
            # Slots both rules captured must agree ("two dogs" / "three dogs" differ); a slot only one rule has
            # (the verb of "likes" in "User likes dark mode" vs "User prefers dark mode") is wording.
            old_slots, new_slots = dict(cand["slots"]), dict(fact.slots)
            if any(normalize_content(str(old_slots[k])) != normalize_content(str(new_slots[k]))
                   for k in old_slots.keys() & new_slots.keys() if k != "verb"):
                return None
        old_words, new_words = normalize_content(cand["content"]).split(), normalize_content(fact.content).split()
        if sorted(old_words) == sorted(new_words):
            # Same words in another order ("X over Y" / "Y over X"): a different claim, not a paraphrase.
            return None
        return conn.exec_driver_sql(
            f"UPDATE facts SET mention_count = mention_count + 1, "
            f"last_seen_at = greatest(last_seen_at, %(seen)s), confidence = greatest(confidence, %(confidence)s) "
            f"WHERE id = %(id)s RETURNING {_FACT_COLS}",
            {"id": cand["id"], "seen": params["seen"], "confidence": params["confidence"]},
        ).mappings().one()

    def _supersede(self, conn: Any, new: Mapping[str, Any], at: datetime) -> list[UUID]:
        """Apply the supersession rules to a newly stored fact; returns the ids it made outdated."""
        done: list[UUID] = []
        for rule in self.rules.for_fact(new["category"], new["relation"]):
            where, params = rule.sql(new)
            if where is None:
                continue
            rows = conn.exec_driver_sql(
                f"""
                UPDATE facts AS f SET superseded_at = %(at)s, superseded_by = %(new_id)s,
                    valid_to = CASE WHEN f.valid_to IS NULL THEN greatest(coalesce(f.valid_from, %(at)s), %(at)s)
                                    ELSE f.valid_to END
                WHERE f.superseded_at IS NULL AND f.id <> %(new_id)s
                  AND {same_scope("f", new["visibility"], vis="vis")}
                  AND f.first_seen_at <= %(at)s
                  AND {where}
                RETURNING f.id
                """,
                {**params, "at": at, "new_id": new["id"], "vis": new["visibility"], "team": new["team_id"],
                 "agent": new["agent_id"]},
            ).fetchall()
            if rows:
                logger.info("rule %s: %s supersedes %d fact(s)", rule.id, new["content"], len(rows))
            done += [r[0] for r in rows]
        return done

    def _canonical(self, name: str) -> str:
        """The gazetteer's spelling of a name ("postgres" -> "PostgreSQL"), else the name as given."""
        if self._recognizer is None:
            from ..rules.ner import EntityRecognizer

            self._recognizer = EntityRecognizer.from_dir(self.settings.patterns_dir)
        return self._recognizer.canonical(name) or name.strip()

    def _upsert_entities(self, conn: Any, entities: Sequence[Entity]) -> dict[str, int]:
        ids: dict[str, int] = {}
        for ent in entities:
            norm = normalize_entity(ent.name)
            if not norm or norm in ids:
                continue
            canon = self._canonical(ent.name)
            cnorm = normalize_entity(canon)
            # Another spelling of a known name is the same entity; the spelling is kept as an alias.
            row = conn.exec_driver_sql(
                "INSERT INTO entities AS e (name, normalized_name, type, aliases) "
                "VALUES (%(name)s, %(norm)s, %(type)s, %(aliases)s) "
                "ON CONFLICT (normalized_name, type) DO UPDATE SET mention_count = e.mention_count + 1, "
                "last_seen_at = now(), aliases = CASE WHEN excluded.aliases <@ e.aliases THEN e.aliases "
                "ELSE e.aliases || excluded.aliases END RETURNING id",
                {"name": canon, "norm": cnorm, "type": ent.type,
                 "aliases": [ent.name.strip()] if cnorm != norm else []},
            ).one()
            ids[norm] = ids.setdefault(cnorm, row[0])
        return ids

    def _entity_id(self, conn: Any, name: str, ids: dict[str, int], type_: str = "concept") -> int:
        norm = normalize_entity(name)
        if norm in ids:
            return ids[norm]
        canon = self._canonical(name)
        cnorm = normalize_entity(canon)
        aliases = [name.strip()] if cnorm != norm else []
        row = conn.exec_driver_sql(
            "SELECT id FROM entities WHERE normalized_name = %(n)s ORDER BY mention_count DESC, id LIMIT 1", {"n": cnorm}
        ).first()
        if row is None:
            row = conn.exec_driver_sql(
                "INSERT INTO entities (name, normalized_name, type, aliases) VALUES (%(name)s, %(n)s, %(t)s, %(a)s) "
                "ON CONFLICT (normalized_name, type) DO UPDATE SET last_seen_at = now() RETURNING id",
                {"name": canon, "n": cnorm, "t": type_, "a": aliases},
            ).one()
        if aliases:
            conn.exec_driver_sql("UPDATE entities SET aliases = aliases || %(a)s WHERE id = %(id)s "
                                 "AND NOT %(a)s <@ aliases", {"id": row[0], "a": aliases})
        ids[norm] = ids[cnorm] = row[0]
        return row[0]

    def _link_entities(self, conn: Any, fact: StoredFact, ids: dict[str, int], entities: Sequence[Entity]) -> None:
        types = {normalize_entity(e.name): e.type for e in entities}
        for name in fact.entities:
            if not name.strip():
                continue
            eid = self._entity_id(conn, name, ids, types.get(normalize_entity(name), "concept"))
            conn.exec_driver_sql(
                "INSERT INTO fact_entities (fact_id, entity_id) VALUES (%(f)s, %(e)s) ON CONFLICT DO NOTHING",
                {"f": fact.id, "e": eid},
            )

    def _save_relationships(self, conn: Any, rels: Sequence[Relationship], ids: dict[str, int],
                            fact_id: UUID | None) -> None:
        for rel in rels:
            src, dst = self._entity_id(conn, rel.source, ids), self._entity_id(conn, rel.target, ids)
            if src == dst:
                continue
            conn.exec_driver_sql(
                "INSERT INTO relationships (source_id, target_id, label, fact_id) VALUES (%(s)s, %(t)s, %(l)s, %(f)s) "
                "ON CONFLICT (source_id, target_id, label) DO UPDATE SET "
                "mention_count = relationships.mention_count + 1, last_seen_at = now()",
                {"s": src, "t": dst, "l": rel.label, "f": fact_id},
            )

    def facts(
        self,
        *,
        agent_id: str | None = None,
        team_id: str | None = None,
        categories: Iterable[str] | None = None,
        include_history: bool = False,
        as_of: datetime | None = None,
        session_id: str | None = None,
        entity: str | None = None,
        limit: int = 100,
    ) -> list[StoredFact]:
        """Facts visible to an agent (all facts when agent and team are None), newest first.

        ``as_of``: the facts that were current at that moment (superseded ones included if they were
        still current then). ``include_history``: superseded facts too.
        """
        where, params = visible_clause(agent_id, team_id)
        clauses = [where]
        if as_of is not None:
            # A stated validity ("since March", "until Friday") wins over when we first heard of the fact;
            # the end is the stated one or the supersession, whichever came first (least() skips NULLs).
            clauses.append("coalesce(f.valid_from, f.first_seen_at) <= %(as_of)s "
                           "AND (least(f.valid_to, f.superseded_at) IS NULL OR least(f.valid_to, f.superseded_at) > %(as_of)s)")
            params["as_of"] = as_of
        elif not include_history:
            clauses.append("f.superseded_at IS NULL")
        cats = list(categories or ())
        if cats:
            clauses.append("f.category = ANY(%(cats)s)")
            params["cats"] = cats
        if session_id is not None:
            clauses.append("(f.source_session = %(session)s OR f.source_activity_session = %(session)s)")
            params["session"] = session_id
        if entity is not None:
            clauses.append("EXISTS (SELECT 1 FROM unnest(f.entities) e WHERE lower(e) = lower(%(entity)s))")
            params["entity"] = entity
        params["limit"] = max(1, int(limit))
        rows = self._all(
            f"SELECT {_FACT_COLS} FROM facts f WHERE {' AND '.join(clauses)} "
            "ORDER BY f.last_seen_at DESC, f.created_at DESC LIMIT %(limit)s",
            params,
        )
        return [_stored(r) for r in rows]

    def get(self, fact_id: UUID | str) -> StoredFact:
        try:
            fid = UUID(str(fact_id))
        except ValueError:
            raise ValidationError(f"not a fact id: {fact_id!r}") from None
        rows = self._all(f"SELECT {_FACT_COLS} FROM facts WHERE id = %(id)s", {"id": fid})
        if not rows:
            raise NotFoundError(f"no fact with id {fact_id}")
        return _stored(rows[0])

    def sources(self, fact_id: UUID | str, *, agent_id: str | None = None,
                team_id: str | None = None) -> list[dict[str, Any]]:
        """Every place a fact was said (provenance), oldest first.

        The message is the one stored copy in ``turns`` (older rows kept their own copy). With a caller's
        scope (``agent_id``/``team_id``), a message the caller may not read - another agent's private turn
        behind a team or global fact - is replaced by the evidence: the sentence the fact came from
        (``evidence``), never the private message around it; ``redacted`` says so. Without a scope: the
        analyst's view, every message.
        """
        try:
            fid = UUID(str(fact_id))
        except ValueError:
            raise ValidationError(f"not a fact id: {fact_id!r}") from None
        if agent_id is None and team_id is None:
            readable = "TRUE"
        else:
            # The turn's own scope: an episode's visibility, a turn that is none stays its agent's own.
            readable = ("CASE coalesce(t.visibility, 'private') WHEN 'global' THEN true "
                        "WHEN 'team' THEN t.team_id = %(v_team)s "
                        "ELSE coalesce(t.agent_id, s.agent_id) = %(v_agent)s END")
        rows = self._all(
            f"""
            SELECT s.source_key, s.session_id, s.activity_session, s.agent_id,
                   coalesce(s.user_message, t.user_message) AS user_message,
                   coalesce(s.assistant_message, t.assistant_message) AS assistant_message,
                   s.message_ts, s.seen_at, t.id AS episode_id, t.user_name, t.assistant_name,
                   f.explanation->'span'->>'text' AS evidence, coalesce({readable}, false) AS readable
            FROM fact_sources s JOIN facts f ON f.id = s.fact_id LEFT JOIN turns t ON t.key = s.source_key
            WHERE s.fact_id = %(id)s ORDER BY s.seen_at, s.id
            """,
            {"id": fid, "v_agent": agent_id, "v_team": team_id},
        )
        for row in rows:
            readable_row = row.pop("readable")
            row["redacted"] = not readable_row
            if not readable_row:
                row["user_message"] = row["assistant_message"] = row["episode_id"] = None
        return rows

    def forget(self, *, dry_run: bool = False, fact_id: str | None = None, agent_id: str | None = None,
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
        legacy: list[str] = []  # the same selection on facts stored without any source row
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
        fwhere = " AND ".join(fact_clauses) or "TRUE"
        if source_clauses:
            swhere = " AND ".join(source_clauses)
            doomed_sql = (
                f"SELECT f.id FROM facts f WHERE {fwhere} AND ("
                f"(EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id AND {swhere})"
                f" AND NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id AND NOT coalesce({swhere}, false)))"
                f" OR (NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = f.id) AND {' AND '.join(legacy)}))"
            )
        else:
            swhere = "FALSE"
            doomed_sql = f"SELECT f.id FROM facts f WHERE {fwhere}"
        only_scope = fact_id is None and category is None and text is None and bool(source_clauses)
        with self._tx() as conn:
            doomed = [r[0] for r in conn.exec_driver_sql(doomed_sql, params).fetchall()]
            if dry_run:
                return len(doomed)
            params["doomed"] = doomed
            # Mentions the selection removes from facts that survive.
            dropped = conn.exec_driver_sql(
                f"DELETE FROM fact_sources s USING facts f WHERE f.id = s.fact_id AND {fwhere} AND {swhere} "
                "AND NOT s.fact_id = ANY(%(doomed)s) RETURNING s.fact_id, s.source_key", params).fetchall()
            keys = {r[1] for r in dropped}
            keys |= {r[0] for r in conn.exec_driver_sql(
                "SELECT source_key FROM fact_sources WHERE fact_id = ANY(%(doomed)s)", params).fetchall()}
            survivors: dict[UUID, int] = {}
            for fid, _key in dropped:
                survivors[fid] = survivors.get(fid, 0) + 1
            for fid, n in survivors.items():
                # The fact's own provenance columns now tell of its earliest remaining mention.
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
            entity_ids = {r[0] for r in conn.exec_driver_sql(
                "SELECT entity_id FROM fact_entities WHERE fact_id = ANY(%(doomed)s)", params).fetchall()}
            for src, dst in conn.exec_driver_sql(
                    "DELETE FROM relationships WHERE fact_id = ANY(%(doomed)s) RETURNING source_id, target_id",
                    params).fetchall():
                entity_ids |= {src, dst}
            replaced = [r[0] for r in conn.exec_driver_sql(
                "SELECT id FROM facts WHERE superseded_by = ANY(%(doomed)s) AND NOT id = ANY(%(doomed)s) "
                "ORDER BY superseded_at DESC, id", params).fetchall()]
            conn.exec_driver_sql("DELETE FROM facts WHERE id = ANY(%(doomed)s)", params)
            for fid in replaced:
                # Current again, unless the same fact was stated afresh meanwhile (that row stays current).
                conn.exec_driver_sql(
                    """
                    UPDATE facts f SET superseded_at = NULL, superseded_by = NULL, valid_to = NULL
                    WHERE f.id = %(id)s AND f.superseded_by IS NULL AND NOT EXISTS (
                        SELECT 1 FROM facts c WHERE c.superseded_at IS NULL AND c.content_hash = f.content_hash
                          AND c.visibility = f.visibility
                          AND (f.visibility = 'global' OR c.team_id IS NOT DISTINCT FROM f.team_id)
                          AND (f.visibility <> 'private' OR c.agent_id = f.agent_id))
                    """,
                    {"id": fid},
                )
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
            if only_scope:
                self._forget_scope_records(conn, params, session_id, agent_id)
            elif fact_id is None and category is None:
                self._forget_episodes(conn, params, text=text is not None, team=team_id is not None,
                                      agent=agent_id is not None, session=session_id is not None)
            return len(doomed)

    def _forget_episodes(self, conn: Any, params: Mapping[str, Any], *, text: bool, team: bool, agent: bool,
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

    def _forget_scope_records(self, conn: Any, params: Mapping[str, Any], session_id: str | None,
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
        hashes = sorted({_miss_hash(t) for t in texts})
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

    # -- embeddings ----------------------------------------------------------------------------------

    def facts_without_embedding(self, n: int) -> list[tuple[UUID, str]]:
        return [(r["id"], r["content"]) for r in self._all(
            "SELECT id, content FROM facts WHERE embedding IS NULL ORDER BY created_at, id LIMIT %(n)s", {"n": n})]

    def episodes_without_embedding(self, n: int) -> list[tuple[UUID, str]]:
        """Up to ``n`` episodes waiting for a vector, oldest first, with the text to embed (speaker and words)."""
        return [(r["id"], r["text"]) for r in self._all(
            "SELECT id, user_message AS text FROM turns "
            "WHERE visibility IS NOT NULL AND embedding IS NULL ORDER BY created_at, id LIMIT %(n)s", {"n": n})]

    def set_embeddings(self, pairs: Sequence[tuple[UUID, Sequence[float]]], model: str, *,
                       table: str = "facts") -> None:
        """Store vectors by id in ``facts`` or, for episodes, ``turns``."""
        from pgvector import Vector

        if table not in ("facts", "turns"):
            raise ValidationError(f"no vectors in table {table!r}")
        rows = [{"v": Vector(list(vec)), "m": model, "id": fid} for fid, vec in pairs]
        if not rows:
            return
        with self._tx() as conn:  # one executemany: psycopg pipelines the statements
            conn.exec_driver_sql(f"UPDATE {table} SET embedding = %(v)s, embedding_model = %(m)s WHERE id = %(id)s",
                                 rows)

    def reset_embedding_column(self, dim: int, model: str) -> int:
        """Make the vector column ``dim``-dimensional and drop vectors of other models; returns how many."""
        with self._tx() as conn:
            meta = dict(conn.exec_driver_sql("SELECT key, value FROM factforge_meta").fetchall())
            n = 0
            for table in ("facts", "turns"):
                if int(meta.get("embed_dim", 0)) != dim:
                    for graph in ("shared", "private"):  # one HNSW graph per visibility (migration 0012)
                        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {table}_embedding_{graph}_hnsw")
                    conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({int(dim)}) "
                                         "USING NULL")
                    conn.exec_driver_sql(f"UPDATE {table} SET embedding_model = NULL")
                    for graph, vis in (("shared", "<>"), ("private", "=")):
                        conn.exec_driver_sql(f"CREATE INDEX {table}_embedding_{graph}_hnsw ON {table} USING hnsw "
                                             f"(embedding vector_cosine_ops) WHERE visibility {vis} 'private'")
                # Episodes without a vector wait for one anyway; only facts are counted (the return value).
                only_vectors = " AND embedding IS NOT NULL" if table == "turns" else ""
                changed = conn.exec_driver_sql(
                    f"UPDATE {table} SET embedding = NULL, embedding_model = NULL "
                    f"WHERE embedding_model IS DISTINCT FROM %(m)s{only_vectors}", {"m": model}).rowcount
                n += changed if table == "facts" else 0
            conn.exec_driver_sql("UPDATE factforge_meta SET value = %(v)s WHERE key = 'embed_dim'", {"v": str(dim)})
            conn.exec_driver_sql("UPDATE factforge_meta SET value = %(v)s WHERE key = 'embed_model'", {"v": model})
        # Pooled connections cached the old vector type modifier: start afresh.
        self.engine.dispose()
        return int(n)

    def known_entities(self, n: int = 20, *, agent_id: str | None = None, team_id: str | None = None) -> list[str]:
        """The most mentioned entities of current facts the caller may see (its private facts, its team's facts,
        global facts). They go into an LLM prompt, so with no scope given only global facts' entities count."""
        if agent_id is None and team_id is None:
            where, params = "f.visibility = 'global'", {}
        else:
            where, params = visible_clause(agent_id, team_id)
        return [r["name"] for r in self._all(
            f"SELECT e.name FROM entities e WHERE EXISTS (SELECT 1 FROM fact_entities fe JOIN facts f ON f.id = "
            f"fe.fact_id WHERE fe.entity_id = e.id AND f.superseded_at IS NULL AND {where}) "
            "ORDER BY e.mention_count DESC, e.last_seen_at DESC, e.name LIMIT %(n)s", {**params, "n": n})]

    # -- the LLM queue -------------------------------------------------------------------------------

    def enqueue(self, source_key: str, payload: Mapping[str, Any]) -> bool:
        """Queue work for the LLM; the same source twice is queued once. Returns whether it was added."""
        with self._tx() as conn:
            row = conn.exec_driver_sql(
                "INSERT INTO extraction_queue (source_key, payload) VALUES (%(k)s, %(p)s::jsonb) "
                "ON CONFLICT (source_key) DO NOTHING RETURNING id",
                {"k": source_key, "p": json.dumps(dict(payload), ensure_ascii=False, default=str)},
            ).first()
        return row is not None

    # -- queue claims: the one place that decides who works on an item and for how long -----------------
    #
    # A worker claims an item by setting status 'processing' and locked_at; the claim lasts
    # ``Settings.queue_claim_seconds`` (FACTFORGE_QUEUE_CLAIM_SECONDS). A worker that stops cleanly gives its
    # claims back (release_claims); one that is killed leaves them to expire, after which any worker may
    # take the item again. An expired claim costs an attempt, so an item that kills its worker every time
    # still ends as 'failed'.

    def claim_due(self, n: int = 1, *, stale_after_s: float | None = None) -> list[QueueItem]:
        """Take up to n due items (pending, or processing under a claim that has expired).

        Items that never errored come first: one the model keeps failing on must not hold up fresh work, and
        a failure right after a fresh item succeeded is then known to be the item's own."""
        rows = self._all(
            """
            UPDATE extraction_queue SET status = 'processing', locked_at = now(), attempts = attempts + 1,
                updated_at = now()
            WHERE id IN (
                SELECT id FROM extraction_queue
                WHERE (status = 'pending' AND next_try_at <= now())
                   OR (status = 'processing' AND locked_at < now() - make_interval(secs => %(stale)s))
                ORDER BY (last_error IS NOT NULL), id LIMIT %(n)s FOR UPDATE SKIP LOCKED)
            RETURNING id, source_key, payload, attempts, (last_error IS NOT NULL) AS errored
            """,
            {"n": n, "stale": self.claim_seconds if stale_after_s is None else stale_after_s},
        )
        rows.sort(key=lambda r: (r["errored"], r["id"]))
        return [QueueItem(r["id"], r["source_key"], r["payload"], r["attempts"]) for r in rows]

    @property
    def claim_seconds(self) -> float:
        """How long a claim lasts before another worker may take the item."""
        return self.settings.claim_seconds

    def release_claims(self, item_ids: Sequence[int]) -> None:
        """Give claimed items back at once, attempt not counted (a worker stopping before it finished them)."""
        if item_ids:
            self._all("UPDATE extraction_queue SET status = 'pending', attempts = greatest(0, attempts - 1), "
                      "locked_at = NULL, updated_at = now(), next_try_at = now() "
                      "WHERE id = ANY(%(ids)s) AND status = 'processing' RETURNING id", {"ids": list(item_ids)})

    def fail(self, item_id: int, error: str, max_attempts: int) -> str:
        """Record a failed attempt: back off exponentially, or mark 'failed' (kept, never deleted)."""
        rows = self._all(
            """
            UPDATE extraction_queue SET
                status = CASE WHEN attempts >= %(max)s THEN 'failed' ELSE 'pending' END,
                last_error = %(err)s, locked_at = NULL, updated_at = now(),
                next_try_at = now() + make_interval(secs => least(3600, 5 * power(2, attempts)))
            WHERE id = %(id)s RETURNING status
            """,
            {"id": item_id, "err": error[:2000], "max": max_attempts},
        )
        return rows[0]["status"] if rows else "missing"

    def release(self, item_id: int, error: str, retry_in_s: float = 30.0) -> None:
        """Give an item back without counting the attempt (the LLM was unreachable, not wrong)."""
        self._all(
            "UPDATE extraction_queue SET status = 'pending', attempts = greatest(0, attempts - 1), "
            "last_error = %(err)s, locked_at = NULL, updated_at = now(), "
            "next_try_at = now() + make_interval(secs => %(s)s) WHERE id = %(id)s RETURNING id",
            {"id": item_id, "err": error[:2000], "s": retry_in_s},
        )

    def complete(self, item_id: int, attempts: int | None = None) -> bool:
        """Mark an item done. With ``attempts`` (the claim's count, a fencing token), only if that claim still
        holds it: False when it expired and another worker took the item meanwhile."""
        fence = " AND status = 'processing' AND attempts = %(attempts)s" if attempts is not None else ""
        return bool(self._all("UPDATE extraction_queue SET status = 'done', locked_at = NULL, last_error = NULL, "
                              f"updated_at = now() WHERE id = %(id)s{fence} RETURNING id",
                              {"id": item_id, "attempts": attempts}))

    def retry_failed(self) -> int:
        """Put every failed item back in the queue (after fixing the model or the prompt)."""
        return len(self._all("UPDATE extraction_queue SET status = 'pending', attempts = 0, next_try_at = now(), "
                             "updated_at = now() WHERE status = 'failed' RETURNING id"))

    def queue_counts(self) -> dict[str, int]:
        rows = self._all("SELECT status, count(*) AS n FROM extraction_queue GROUP BY status")
        counts = {s: 0 for s in ("pending", "processing", "done", "failed")}
        counts.update({r["status"]: int(r["n"]) for r in rows})
        return counts

    def queue_waiting(self) -> list[dict[str, Any]]:
        """Pending items not yet due (backing off after an error), grouped by their last error: ``error``,
        ``items``, ``next_try_at`` (the earliest)."""
        return self._all(
            "SELECT last_error AS error, count(*) AS items, min(next_try_at) AS next_try_at FROM extraction_queue "
            "WHERE status = 'pending' AND next_try_at > now() GROUP BY last_error ORDER BY min(next_try_at)")

    def record_llm_call(self, model: str, ok: bool, prompt_tokens: int, output_tokens: int, latency_ms: float,
                        error: str | None, *, rejections: Mapping[str, int] | None = None) -> None:
        """Account for one HTTP call to the model; ``rejections`` counts its reply's dropped items by reason."""
        counts = {str(k): int(v) for k, v in (rejections or {}).items() if int(v)}
        self._all(
            "INSERT INTO llm_calls (model, ok, prompt_tokens, output_tokens, latency_ms, error, rejections) "
            "VALUES (%(m)s, %(ok)s, %(pt)s, %(ot)s, %(ms)s, %(e)s, %(r)s::jsonb) RETURNING id",
            {"m": model, "ok": ok, "pt": int(prompt_tokens), "ot": int(output_tokens), "ms": float(latency_ms),
             "e": error[:2000] if error else None, "r": json.dumps(counts, sort_keys=True)},
        )

    def record_miss(self, text: str, *, session_id: str | None = None, agent_id: str | None = None) -> None:
        """Count an informative message that no pattern answered (for rule writers: `patterns misses`).

        ``session_id``/``agent_id`` say whose message it was, so forgetting them removes it too."""
        self._all(
            "INSERT INTO pattern_misses AS p (text_hash, text, session_ids, agent_ids) VALUES (%(h)s, %(t)s, "
            "%(sessions)s, %(agents)s) ON CONFLICT (text_hash) DO UPDATE SET count = p.count + 1, "
            "last_seen_at = now(), "
            "session_ids = (SELECT coalesce(array_agg(DISTINCT x), '{}') FROM unnest(p.session_ids || excluded.session_ids) x), "
            "agent_ids = (SELECT coalesce(array_agg(DISTINCT x), '{}') FROM unnest(p.agent_ids || excluded.agent_ids) x) "
            "RETURNING count",
            {"h": _miss_hash(text), "t": text[:2000], "sessions": [session_id] if session_id else [],
             "agents": [agent_id] if agent_id else []},
        )

    def top_misses(self, n: int = 20) -> list[Miss]:
        return [Miss(r["text"], int(r["count"]), r["first_seen_at"], r["last_seen_at"], int(r["agents"]))
                for r in self._all(
            "SELECT text, count, first_seen_at, last_seen_at, cardinality(agent_ids) AS agents FROM pattern_misses "
            "ORDER BY count DESC, last_seen_at DESC LIMIT %(n)s", {"n": n})]

    def stats(self) -> dict[str, Any]:
        """Counts for `factforge stats`: facts by category/method/scope, turns, gate drops, queue, LLM cost."""
        one = self._all(
            """
            SELECT
              (SELECT count(*) FROM facts WHERE superseded_at IS NULL) AS facts,
              (SELECT count(*) FROM facts WHERE superseded_at IS NOT NULL) AS superseded,
              (SELECT count(*) FROM turns) AS turns,
              (SELECT count(*) FROM turns WHERE visibility IS NOT NULL) AS episodes,
              (SELECT count(*) FROM turns WHERE visibility IS NOT NULL AND embedding IS NULL) AS episodes_without_vector,
              (SELECT count(*) FROM entities) AS entities,
              (SELECT count(*) FROM relationships) AS relationships,
              (SELECT count(*) FROM facts WHERE embedding IS NULL AND superseded_at IS NULL) AS facts_without_vector,
              (SELECT count(*) FROM llm_calls) AS llm_calls,
              (SELECT count(*) FROM llm_calls WHERE NOT ok) AS llm_errors,
              (SELECT coalesce(sum(prompt_tokens), 0) FROM llm_calls) AS llm_prompt_tokens,
              (SELECT coalesce(sum(output_tokens), 0) FROM llm_calls) AS llm_output_tokens,
              (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FROM llm_calls WHERE ok) AS llm_median_ms,
              (SELECT coalesce(sum(count), 0) FROM pattern_misses) AS pattern_misses,
              (SELECT count(*) FROM turns WHERE gate_reason IS NULL) AS turns_passed_gate,
              (SELECT count(*) FROM turns t WHERE t.gate_reason IS NULL
                  AND EXISTS (SELECT 1 FROM extraction_queue q WHERE q.source_key = t.key)) AS turns_needing_llm
            """
        )[0]
        out: dict[str, Any] = {k: (float(v) if isinstance(v, float) else (int(v) if v is not None else None))
                               for k, v in one.items()}

        def grouped(sql: str) -> dict[str, int]:
            return {str(r["k"]): int(r["n"]) for r in self._all(sql)}

        passed = out.get("turns_passed_gate") or 0
        # The headline figure: of the turns that could carry a fact, the share no HIGH rule answered.
        out["llm_share"] = round((out.get("turns_needing_llm") or 0) / passed, 4) if passed else None
        out["by_category"] = grouped("SELECT category AS k, count(*) AS n FROM facts WHERE superseded_at IS NULL GROUP BY 1 ORDER BY 1")
        out["by_method"] = grouped("SELECT extraction_method AS k, count(*) AS n FROM facts WHERE superseded_at IS NULL GROUP BY 1 ORDER BY 1")
        out["by_visibility"] = grouped("SELECT visibility AS k, count(*) AS n FROM facts WHERE superseded_at IS NULL GROUP BY 1 ORDER BY 1")
        out["llm_rejections"] = grouped(
            "SELECT r.key AS k, sum(r.value::bigint) AS n FROM llm_calls, jsonb_each_text(llm_calls.rejections) r "
            "GROUP BY 1 ORDER BY 1")
        out["dropped_by_reason"] = grouped("SELECT gate_reason AS k, count(*) AS n FROM turns WHERE gate_reason IS NOT NULL GROUP BY 1 ORDER BY 1")
        out["queue"] = self.queue_counts()
        return out
