"""Fact writes and reads: idempotent writes, mentions, paraphrase merge, supersession; listing and provenance.

* the same fact again (same normalised content, same scope) is a *mention*: ``mention_count`` grows and a
  ``fact_sources`` row records where it was said; nothing is duplicated;
* a paraphrase (cosine similarity >= ``FACTFORGE_DEDUP_SIMILARITY``, same category, same entities, same
  slots) is a mention of the fact already stored;
* a fact that makes an older one outdated (``patterns/supersession.yaml``) marks it superseded: the old row
  stays, with ``superseded_at``/``superseded_by``, so history and ``as_of`` queries keep working.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..errors import DatabaseError, NotFoundError, ValidationError
from ..types import Entity, Fact, Relationship, Supersession, content_hash, normalize_content
from .entities import canonical, link_entities, normalize_entity, save_relationships, upsert_entities
from .records import FACT_COLS, Provenance, Scope, StoredFact, check_fact, stored
from .scope import (CONFLICT_TARGET, fact_filters, own_session, same_scope, same_scope_as, source_readable,
                    visible)

if TYPE_CHECKING:
    from .store import Store

logger = logging.getLogger("factforge.store")

__all__ = ["save", "merge_paraphrases", "facts", "get", "sources", "MAX_TX_ATTEMPTS", "RETRY_SQLSTATES", "sqlstate"]

MAX_TX_ATTEMPTS = 5
RETRY_SQLSTATES = frozenset({"40001", "40P01", "23505"})  # serialization failure, deadlock, unique race


def sqlstate(exc: DatabaseError) -> str | None:
    """The SQLSTATE of the server error behind ``exc`` (psycopg's own, or wrapped by SQLAlchemy), if any."""
    cause = exc.__cause__
    return getattr(getattr(cause, "orig", None) or cause, "sqlstate", None)


def _explanation_json(fact: Fact) -> str:
    data = asdict(fact.explanation)
    return json.dumps(data, ensure_ascii=False, default=str)


def save(store: Store, facts: Sequence[Fact],
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
    entities = sorted(entities, key=lambda e: (normalize_entity(canonical(store, e.name)), e.type))
    for attempt in range(1, MAX_TX_ATTEMPTS + 1):
        try:
            out: list[StoredFact] = []
            with store._tx() as conn:
                entity_ids = upsert_entities(store, conn, entities)
                for i, fact in enumerate(facts):
                    vector = embeddings[i] if embeddings is not None else None
                    out.append(_save_one(store, conn, fact, scope, provenance, vector, embedding_model))
                for sf in out:
                    link_entities(store, conn, sf, entity_ids, entities)
                if relationships:
                    save_relationships(store, conn, relationships, entity_ids, out[0].id if out else None)
            return out
        except DatabaseError as exc:
            # Deadlocks and serialisation failures between concurrent writers are retried, never surfaced.
            code = sqlstate(exc)
            if code not in RETRY_SQLSTATES or attempt == MAX_TX_ATTEMPTS or store._bound() is not None:
                raise
            logger.info("concurrent write conflict (%s); retrying (%d)", code, attempt)
            time.sleep(0.01 * attempt)
    raise AssertionError("unreachable")


def _fact_params(fact: Fact, scope: Scope, prov: Provenance, vector: Sequence[float] | None,
                 embedding_model: str | None) -> dict[str, Any]:
    """The parameters of a fact's row and of its source's."""
    from pgvector import Vector

    params: dict[str, Any] = {
        "content": fact.content.strip(), "category": fact.category, "confidence": float(fact.confidence),
        "method": fact.method, "rule_id": fact.rule_id, "entities": list(fact.entities),
        "subject": fact.subject, "relation": fact.relation, "slots": json.dumps(dict(fact.slots), default=str),
        "explanation": _explanation_json(fact), "session": prov.session_id,
        "user_msg": prov.user_message, "assistant_msg": prov.assistant_message,
        "activity": prov.activity_session, "agent": scope.agent_id, "team": scope.team_id,
        "visibility": scope.visibility, "embedding": Vector(list(vector)) if vector is not None else None,
        "model": embedding_model if vector is not None else None, "hash": content_hash(fact.content),
        "seen": prov.message_ts or datetime.now(timezone.utc), "valid_from": fact.valid_from, "valid_to": fact.valid_to,
        "key": prov.source_key, "ts": prov.message_ts,
    }
    return params


# Where a fact was said: the session as said, even unregistered (no foreign key here), so that forgetting the
# session finds the mention.
_SOURCE_INSERT = ("INSERT INTO fact_sources (fact_id, source_key, session_id, activity_session, agent_id, "
                  "user_message, assistant_message, message_ts)")
_SOURCE_VALUES = "%(key)s, %(session)s, %(activity)s, %(agent)s, %(user_msg)s, %(assistant_msg)s, %(ts)s"
_SOURCE_CONFLICT = "ON CONFLICT (fact_id, source_key) DO NOTHING RETURNING id"


def _save_one(store: Store, conn: Any, fact: Fact, scope: Scope, prov: Provenance, vector: Sequence[float] | None,
              embedding_model: str | None) -> StoredFact:
    params = _fact_params(fact, scope, prov, vector, embedding_model)
    seen = params["seen"]
    row = None
    action = "new"
    if vector is not None:
        row = _paraphrase_of(store, conn, fact, scope, params)
        if row is not None:
            action = "paraphrase"
    if row is None:
        # One round trip: the fact (new, or one more mention of the same content in its scope) and its source.
        row = conn.exec_driver_sql(
            f"""
            WITH f AS (
            INSERT INTO facts (content, category, confidence, extraction_method, rule_id, entities, subject,
                relation, slots, explanation, source_session, source_user_message, source_assistant_message,
                source_activity_session, agent_id, team_id, visibility, embedding, embedding_model,
                content_hash, first_seen_at, last_seen_at, valid_from, valid_to)
            VALUES (%(content)s, %(category)s, %(confidence)s, %(method)s, %(rule_id)s, %(entities)s,
                %(subject)s, %(relation)s, %(slots)s::jsonb, %(explanation)s::jsonb,
                (SELECT s.id FROM sessions s WHERE s.id = %(session)s),  -- only a registered session
                %(user_msg)s, %(assistant_msg)s, %(activity)s, %(agent)s, %(team)s, %(visibility)s,
                %(embedding)s, %(model)s, %(hash)s, %(seen)s, %(seen)s, %(valid_from)s, %(valid_to)s)
            ON CONFLICT {CONFLICT_TARGET[scope.visibility]}
            DO UPDATE SET mention_count = facts.mention_count + 1,
                last_seen_at = greatest(facts.last_seen_at, excluded.last_seen_at),
                confidence = greatest(facts.confidence, excluded.confidence),
                embedding = coalesce(facts.embedding, excluded.embedding),
                embedding_model = coalesce(facts.embedding_model, excluded.embedding_model)
            RETURNING {FACT_COLS}, (xmax = 0) AS inserted),
            src AS ({_SOURCE_INSERT} SELECT f.id, {_SOURCE_VALUES} FROM f {_SOURCE_CONFLICT})
            SELECT f.*, EXISTS (SELECT FROM src) AS added_source FROM f
            """,
            params,
        ).mappings().one()
        action = "new" if row["inserted"] else "mention"
        added_source = bool(row["added_source"])
    else:
        added_source = conn.exec_driver_sql(
            f"{_SOURCE_INSERT} VALUES (%(id)s, {_SOURCE_VALUES}) {_SOURCE_CONFLICT}", {**params, "id": row["id"]},
        ).first() is not None
    if action != "new" and not added_source:
        # The same source said it again (a retried queue item): not a new mention.
        row = conn.exec_driver_sql(
            f"UPDATE facts SET mention_count = greatest(1, mention_count - 1) WHERE id = %(id)s "
            f"AND %(undo)s RETURNING {FACT_COLS}",
            {"id": row["id"], "undo": action == "mention"},
        ).mappings().first() or row
    superseded: list[UUID] = []
    # A new fact may retire older ones. So may another agent's mention of a team "User ..." fact, or another
    # team's mention of a global "Team ..." fact: for that agent (team) it is new - its own user (team) says so now -
    # and what it said before goes (see _supersede).
    if action == "new" or (row["subject"] == store.settings.user_subject and row["agent_id"] != scope.agent_id) or (
            row["subject"] == store.settings.team_subject and row["team_id"] != scope.team_id):
        decisions = store.supersession(fact, vector is not None)
        superseded = _supersede(store, conn, {**row, "agent_id": scope.agent_id, "team_id": scope.team_id,
                                              "embedding": params["embedding"]}, seen, decisions)
    return stored(row, action, superseded)


def _paraphrase_of(store: Store, conn: Any, fact: Fact, scope: Scope,
                   params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stored fact this one paraphrases (its mention counted), or None."""
    cand = conn.exec_driver_sql(
        f"""
        SELECT {FACT_COLS}, 1 - (embedding <=> %(embedding)s) AS similarity FROM facts
        WHERE superseded_at IS NULL AND embedding IS NOT NULL AND category = %(category)s
          AND {same_scope("facts", scope.visibility)} AND content_hash <> %(hash)s
        ORDER BY embedding <=> %(embedding)s LIMIT 1
        """,
        params,
    ).mappings().first()
    if cand is None or not _paraphrases(store, cand, fact.content, fact.entities, fact.slots):
        return None
    return conn.exec_driver_sql(
        f"UPDATE facts SET mention_count = mention_count + 1, "
        f"last_seen_at = greatest(last_seen_at, %(seen)s), confidence = greatest(confidence, %(confidence)s) "
        f"WHERE id = %(id)s RETURNING {FACT_COLS}",
        {"id": cand["id"], "seen": params["seen"], "confidence": params["confidence"]},
    ).mappings().one()


def _paraphrases(store: Store, cand: Mapping[str, Any], content: str, entities: Iterable[str],
                 slots: Mapping[str, Any] | None) -> bool:
    """Whether a fact saying ``content`` (with ``entities``, ``slots``) paraphrases the stored ``cand``, the
    nearest by vector (its ``similarity``): the same thing in other words, not another claim."""
    if float(cand["similarity"]) < store.settings.dedup_similarity:
        return False
    if {normalize_entity(e) for e in cand["entities"]} != {normalize_entity(e) for e in entities}:
        return False
    if cand["slots"] and slots:
        # Slots both rules captured must agree ("two dogs" / "three dogs" differ); a slot only one rule has
        # (the verb of "likes" in "User likes dark mode" vs "User prefers dark mode") is wording.
        old_slots, new_slots = dict(cand["slots"]), dict(slots)
        if any(normalize_content(str(old_slots[k])) != normalize_content(str(new_slots[k]))
               for k in old_slots.keys() & new_slots.keys() if k != "verb"):
            return False
    old_words, new_words = normalize_content(cand["content"]).split(), normalize_content(content).split()
    # Same words in another order ("X over Y" / "Y over X"): a different claim, not a paraphrase.
    return sorted(old_words) != sorted(new_words)


def merge_paraphrases(store: Store, conn: Any, fact_ids: Sequence[UUID]) -> int:
    """Merge each of the given facts, just given a vector after being stored without one, into the older current
    fact of its scope that it paraphrases, as :func:`save` would have made it a mention of that fact had it had
    the vector then; returns how many were merged. Oldest first, so two paraphrases stored without vectors end
    as one. The merged fact's mentions, entity links and relationships go to the older one, then it goes (its id
    with it): what a writer with ``FACTFORGE_EMBED_IN=worker`` leaves to the worker that embeds its facts."""
    rows = conn.exec_driver_sql(
        f"""
        SELECT f.id AS new_id, f.content AS new_content, f.entities AS new_entities, f.slots AS new_slots,
               f.confidence AS new_confidence, f.first_seen_at AS new_first, f.last_seen_at AS new_last, g.*
        FROM facts f CROSS JOIN LATERAL (
            SELECT {', '.join('g.' + c.strip() for c in FACT_COLS.split(','))},
                   1 - (g.embedding <=> f.embedding) AS similarity
            FROM facts g
            WHERE g.superseded_at IS NULL AND g.embedding IS NOT NULL AND g.category = f.category
              AND {same_scope_as("g", "f")} AND g.content_hash <> f.content_hash
              AND (g.created_at, g.id) < (f.created_at, f.id)
            ORDER BY g.embedding <=> f.embedding LIMIT 1) g
        WHERE f.id = ANY(%(ids)s) AND f.superseded_at IS NULL AND f.embedding IS NOT NULL
        ORDER BY f.created_at, f.id
        """,
        {"ids": list(fact_ids)},
    ).mappings()
    merged: set[UUID] = set()
    for row in rows:
        # An older fact of the same batch merged already is gone: its paraphrase keeps to the fact it went into.
        if row["id"] in merged or not _paraphrases(store, row, row["new_content"], row["new_entities"],
                                                  row["new_slots"]):
            continue
        new, old = row["new_id"], row["id"]
        conn.exec_driver_sql(
            """
            WITH moved AS (
                UPDATE fact_sources s SET fact_id = %(old)s WHERE s.fact_id = %(new)s
                  AND NOT EXISTS (SELECT FROM fact_sources o WHERE o.fact_id = %(old)s AND o.source_key = s.source_key)
                RETURNING 1)
            UPDATE facts SET mention_count = mention_count + (SELECT count(*) FROM moved),
                first_seen_at = least(first_seen_at, %(first)s), last_seen_at = greatest(last_seen_at, %(last)s),
                confidence = greatest(confidence, %(confidence)s)
            WHERE id = %(old)s
            """,
            {"old": old, "new": new, "first": row["new_first"], "last": row["new_last"],
             "confidence": row["new_confidence"]})
        conn.exec_driver_sql("INSERT INTO fact_entities (fact_id, entity_id) SELECT %(old)s, entity_id "
                             "FROM fact_entities WHERE fact_id = %(new)s ON CONFLICT DO NOTHING", {"old": old, "new": new})
        conn.exec_driver_sql("UPDATE relationships SET fact_id = %(old)s WHERE fact_id = %(new)s", {"old": old, "new": new})
        conn.exec_driver_sql("UPDATE facts SET superseded_by = %(old)s WHERE superseded_by = %(new)s",
                             {"old": old, "new": new})
        conn.exec_driver_sql("DELETE FROM facts WHERE id = %(new)s", {"new": new})
        logger.info("%s paraphrases %s: merged into it", row["new_content"], row["content"])
        merged.add(new)
    return len(merged)


def supersession_sql(decision: Supersession, vector: Any) -> tuple[str, dict[str, Any]]:
    """A decision as a WHERE condition on ``facts f`` (``vector``: the new fact's embedding)."""
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if decision.relations:
        # through an InitPlan, as search._ids: given the array itself, PostgreSQL costs each run's own plan by it,
        # finds it cheaper than the generic plan's guess and plans the prepared UPDATE anew on every run
        clauses.append("f.relation = ANY(CAST((SELECT %(r_relations)s::text[]) AS text[]))")
        params["r_relations"] = list(decision.relations)
    for i, (name, value) in enumerate(decision.equal):
        key = f"r_same{i}"
        if name.startswith("slot:"):
            clauses.append(f"lower(f.slots->>'{_identifier(name[5:])}') = lower(%({key})s)")
        elif name in _SAME_FIELDS:
            clauses.append(f"f.{name} = %({key})s")
        else:
            raise ValidationError(f"supersession rule {decision.rule_id}: cannot compare {name!r}")
        params[key] = value
    for j, (old_slots, value) in enumerate(decision.link):
        key = f"r_link{j}"
        params[key] = value
        clauses.append("(" + " OR ".join(f"lower(f.slots->>'{_identifier(s)}') = lower(%({key})s)"
                                         for s in old_slots) + ")")
    for j, (slot, marker, text) in enumerate(decision.suffix):
        key, slot = f"r_suffix{j}", _identifier(slot)
        params[key] = text
        params[key + "m"] = marker
        clauses.append(f"strpos(f.slots->>'{slot}', %({key}m)s) > 0 AND lower(btrim(substr(f.slots->>'{slot}', "
                       f"strpos(f.slots->>'{slot}', %({key}m)s) + length(%({key}m)s)))) = %({key})s")
    if decision.similar_above is not None:
        clauses.append("f.embedding IS NOT NULL AND 1 - (f.embedding <=> %(r_vec)s) >= %(r_sim)s")
        params["r_vec"] = vector
        params["r_sim"] = decision.similar_above
    return " AND ".join(clauses), params


_SAME_FIELDS = ("subject", "relation", "category")


def _identifier(name: str) -> str:
    """A slot name goes into SQL text: only an identifier may (the rule loader checks it; this makes sure)."""
    if not name.isidentifier():
        raise ValidationError(f"slot name {name!r} is not an identifier")
    return name


def _supersede(store: Store, conn: Any, new: Mapping[str, Any], at: datetime,
               decisions: Sequence[Supersession]) -> list[UUID]:
    """Apply the supersession decisions for a newly stored fact; returns the ids it made outdated."""
    done: list[UUID] = []
    # "User ..." is each agent's own user: in a team fact said by two agents it names two people, so what one
    # agent's user changes retires only what that agent said. Likewise "Team ..." is each team's own: in a global
    # fact it names the team that said it, and one team's change of mind retires only its own team's facts. A
    # named subject ("Maria") is one.
    speaker = ("AND f.agent_id IS NOT DISTINCT FROM %(agent)s" if new["subject"] == store.settings.user_subject else
               "AND f.team_id IS NOT DISTINCT FROM %(team)s" if new["subject"] == store.settings.team_subject else "")
    for decision in decisions:
        where, params = supersession_sql(decision, new["embedding"])
        rows = conn.exec_driver_sql(
            f"""
            UPDATE facts AS f SET superseded_at = %(at)s, superseded_by = %(new_id)s,
                valid_to = CASE WHEN f.valid_to IS NULL THEN greatest(coalesce(f.valid_from, %(at)s), %(at)s)
                                ELSE f.valid_to END
            WHERE f.superseded_at IS NULL AND f.id <> %(new_id)s
              AND {same_scope("f", new["visibility"], vis="vis")}
              AND f.first_seen_at <= %(at)s {speaker}
              AND {where}
            RETURNING f.id
            """,
            {**params, "at": at, "new_id": new["id"], "vis": new["visibility"], "team": new["team_id"],
             "agent": new["agent_id"]},
        ).fetchall()
        if rows:
            logger.info("rule %s: %s supersedes %d fact(s)", decision.rule_id, new["content"], len(rows))
        done += [r[0] for r in rows]
    return done


# A listing names the session a fact was first said in only to its own agent (scope.own_session).
_SESSION_COLS = "source_session, source_activity_session"
if _SESSION_COLS not in FACT_COLS:  # else the listing below would name every agent's sessions
    raise RuntimeError("FACT_COLS no longer lists source_session, source_activity_session together")


def facts(store: Store, *,
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
    where, params = fact_filters(agent_id, team_id, include_history=include_history, as_of=as_of,
                                 categories=categories, session_id=session_id, entity=entity, scope_index=True)
    params["limit"] = max(1, int(limit))
    sessions = ", ".join(f"{own_session(agent_id, team_id, c)} AS {c}" for c in _SESSION_COLS.split(", "))
    rows = store._all(
        f"SELECT {FACT_COLS.replace(_SESSION_COLS, sessions)} FROM facts f WHERE {where} "
        "ORDER BY f.last_seen_at DESC, f.created_at DESC LIMIT %(limit)s",
        params,
    )
    return [stored(r) for r in rows]


def get(store: Store, fact_id: UUID | str) -> StoredFact:
    try:
        fid = UUID(str(fact_id))
    except ValueError:
        raise ValidationError(f"not a fact id: {fact_id!r}") from None
    rows = store._all(f"SELECT {FACT_COLS} FROM facts WHERE id = %(id)s", {"id": fid})
    if not rows:
        raise NotFoundError(f"no fact with id {fact_id}")
    return stored(rows[0])


def sources(store: Store, fact_id: UUID | str, *, agent_id: str | None = None,
            team_id: str | None = None) -> list[dict[str, Any]]:
    """Every place a fact was said (provenance), oldest first.

    The message is the one stored copy in ``turns`` (older rows kept their own copy). With a caller's
    scope (``agent_id``/``team_id``), a message the caller may not read - another agent's private turn
    behind a team or global fact - is replaced by the evidence: the sentence the fact came from
    (``evidence``), never the private message around it, its speakers' names or its session; ``redacted``
    says so. A fact the caller may not see has no sources for it. Without a scope: the analyst's view,
    every message.
    """
    try:
        fid = UUID(str(fact_id))
    except ValueError:
        raise ValidationError(f"not a fact id: {fact_id!r}") from None
    # The fact itself must be the caller's to see: of a fact it may not see, the caller learns nothing (not even
    # that it exists); of each source, the turn's own scope decides.
    readable = source_readable(agent_id, team_id)
    fact_visible, _ = visible("f", agent_id, team_id)
    rows = store._all(
        f"""
        SELECT s.source_key, s.session_id, s.activity_session, s.agent_id,
               coalesce(s.user_message, t.user_message) AS user_message,
               coalesce(s.assistant_message, t.assistant_message) AS assistant_message,
               s.message_ts, s.seen_at, t.id AS episode_id, t.user_name, t.assistant_name,
               f.explanation->'span'->>'text' AS evidence, coalesce({readable}, false) AS readable
        FROM fact_sources s JOIN facts f ON f.id = s.fact_id LEFT JOIN turns t ON t.key = s.source_key
        WHERE s.fact_id = %(id)s AND {fact_visible} ORDER BY s.seen_at, s.id
        """,
        {"id": fid, "v_agent": agent_id, "v_team": team_id},
    )
    for row in rows:
        readable_row = row.pop("readable")
        row["redacted"] = not readable_row
        if not readable_row:
            # Who spoke and in which session belong to that private conversation too; so does the turn's key, a
            # hash of its session with its agent, time and words (which would confirm a guessed session id).
            for column in ("user_message", "assistant_message", "episode_id", "user_name", "assistant_name",
                           "session_id", "activity_session", "source_key"):
                row[column] = None
    return rows

