"""Entities and relationships: one row per name (another spelling of a known name is an alias of it)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from ..types import Entity, Relationship
from .records import StoredFact
from .scope import visible

if TYPE_CHECKING:
    from .store import Store

__all__ = ["normalize_entity", "known_entities"]

_SPACES = re.compile(r"\s+")


def normalize_entity(name: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", name).casefold().strip())


def canonical(store: Store, name: str) -> str:
    """The spelling the rules gave the store for a name ("postgres" -> "PostgreSQL"), else the name as given."""
    return store.canonical_name(name) or name.strip()


def upsert_entities(store: Store, conn: Any, entities: Sequence[Entity]) -> dict[str, int]:
    ids: dict[str, int] = {}
    for ent in entities:
        norm = normalize_entity(ent.name)
        if not norm or norm in ids:
            continue
        canon = canonical(store, ent.name)
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


def entity_id(store: Store, conn: Any, name: str, ids: dict[str, int], type_: str = "concept") -> int:
    norm = normalize_entity(name)
    if norm in ids:
        return ids[norm]
    canon = canonical(store, name)
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


def link_entities(store: Store, conn: Any, fact: StoredFact, ids: dict[str, int], entities: Sequence[Entity]) -> None:
    types = {normalize_entity(e.name): e.type for e in entities}
    for name in fact.entities:
        if not name.strip():
            continue
        eid = entity_id(store, conn, name, ids, types.get(normalize_entity(name), "concept"))
        conn.exec_driver_sql(
            "INSERT INTO fact_entities (fact_id, entity_id) VALUES (%(f)s, %(e)s) ON CONFLICT DO NOTHING",
            {"f": fact.id, "e": eid},
        )


def save_relationships(store: Store, conn: Any, rels: Sequence[Relationship], ids: dict[str, int],
                        fact_id: UUID | None) -> None:
    for rel in rels:
        src, dst = entity_id(store, conn, rel.source, ids), entity_id(store, conn, rel.target, ids)
        if src == dst:
            continue
        conn.exec_driver_sql(
            "INSERT INTO relationships (source_id, target_id, label, fact_id) VALUES (%(s)s, %(t)s, %(l)s, %(f)s) "
            "ON CONFLICT (source_id, target_id, label) DO UPDATE SET "
            "mention_count = relationships.mention_count + 1, last_seen_at = now()",
            {"s": src, "t": dst, "l": rel.label, "f": fact_id},
        )


def known_entities(store: Store, n: int = 20, *, agent_id: str | None = None, team_id: str | None = None) -> list[str]:
    """The most mentioned entities of current facts the caller may see (its private facts, its team's facts,
    global facts). They go into an LLM prompt, so with no scope given only global facts' entities count."""
    where, params = visible("f", agent_id, team_id, analyst="f.visibility = 'global'", scope_index=True)
    return [r["name"] for r in store._all(
        f"SELECT e.name FROM entities e WHERE EXISTS (SELECT 1 FROM fact_entities fe JOIN facts f ON f.id = "
        f"fe.fact_id WHERE fe.entity_id = e.id AND f.superseded_at IS NULL AND {where}) "
        "ORDER BY e.mention_count DESC, e.last_seen_at DESC, e.name LIMIT %(n)s", {**params, "n": n})]

