"""Vector graphs of one owner's rows: an HNSW index over one agent's private rows, or one team's team rows, for
owners that have many.

A caller sees its own private rows, its team's team rows and the global ones. Each of the three is read on
its own (:func:`factforge.storage.search.vector_sql`): the global rows by the global graph (migration 0023),
which holds nothing else, and the caller's private and team rows exactly (an owner's covering btree, then a
sort), which costs in proportion to how many there are: at 1M facts + 1M episodes (50 agents in 10 teams,
60% private) an agent has 11k private facts and 18k private episodes, a team 35k team facts. For such an owner
a partial HNSW index over its rows alone (``WHERE visibility = 'private' AND agent_id = '<agent>'``,
``WHERE visibility = 'team' AND team_id = '<team>'``; the global graph's half-precision expression) gives the
same top 10 at a fraction of the cost: every graph a search walks holds only rows the caller may see, so the
walk is unfiltered and a short candidate list finds the nearest (see ``DEFAULT_AGENT_GRAPH_MIN_ROWS`` in
settings). Before 0023 the team and global rows were one graph over every team's rows, in which a caller's
scope was a small share: a filtered walk that needed 1,000 candidates at 1M facts and still missed.

The search statement asks for the graph by name (:func:`graph_name`) and uses it only when it exists and is
valid; otherwise the exact read runs, as before. A graph is made with ``CREATE INDEX CONCURRENTLY`` (writes go
on meanwhile; one that failed half-way is invalid, unused, and dropped and made again by the next build) for
each agent or team holding at least ``min_rows`` rows with a vector: by ``factforge worker`` after it
embedded an owner's rows, by ``factforge embed graphs``, and by migration 0023 for the teams a database
already holds. Changing the embedding dimension drops the graphs (:func:`drop_graphs`), as it drops the global
one; they are made again once enough rows carry the new vectors.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import DatabaseError, ValidationError
from ..settings import DEFAULT_AGENT_GRAPH_MIN_ROWS
from .search import GRAPH_EF_CONSTRUCTION, PRIVATE_ROWS, TEAM_GRAPH_EF_CONSTRUCTION, TEAM_ROWS

__all__ = ["AGENT_GRAPH_MIN_ROWS", "AGENT_GRAPH_EF_SEARCH", "TEAM_GRAPH_EF_SEARCH", "OWNER_KINDS", "GraphBuild",
           "graph_name",
           "agent_graph_name", "team_graph_name", "graph_exists_sql", "graph_ddl", "graph_candidates",
           "build_owner_graphs", "graph_counts", "drop_graphs"]

# The default of FACTFORGE_AGENT_GRAPH_MIN_ROWS (settings.py says why 4,000), for agents and teams alike.
AGENT_GRAPH_MIN_ROWS = DEFAULT_AGENT_GRAPH_MIN_ROWS

# The candidate lists an agent's and a team's graph are walked with. At 200 an agent's graph's top 10 equalled the
# exact read's for 60 of 60 bench questions on facts and 0.997 on episodes (100: 0.975 / 0.958). Since the global
# graph of migration 0024 finds more of a search's top 10, an agent's graph at 120 and a team's at 200 (by the
# global graph's size before: 305 at 1M facts) keep the whole search's recall@10 above what it was (1M facts + 1M
# episodes, search(mode="vector") under a scope by id, the bench's 100 questions / 150 others: facts 0.958 /
# 0.933 before, 0.972 / 0.974 with the new graph at the old lists, 0.968 / 0.968 with these; episodes 0.937 /
# 0.975, 0.953 / 0.979, 0.951 / 0.974), at ~1,400 fewer buffer reads a search.
AGENT_GRAPH_EF_SEARCH = 120
TEAM_GRAPH_EF_SEARCH = 200

# The owners of graphs: whose rows (the condition every read of them states, per table, so the planner can
# prove the index's) and the column naming the owner.
OWNER_KINDS = ("agent", "team")
_ROWS = {"agent": PRIVATE_ROWS, "team": TEAM_ROWS}
_COLUMN = {"agent": "agent_id", "team": "team_id"}
# The build-time candidate list per kind: a team's rows, like the global ones, repeat sentences said in many
# scopes (near-duplicate vectors), where a better-built graph needs a shorter walk (search.py says how much).
_EF_CONSTRUCTION = {"agent": GRAPH_EF_CONSTRUCTION, "team": TEAM_GRAPH_EF_CONSTRUCTION}


@dataclass(frozen=True, slots=True)
class GraphBuild:
    """One graph made by :func:`build_owner_graphs`: of agent or team ``owner`` (``kind``) in ``table``."""

    table: str
    kind: str
    owner: str
    rows: int
    seconds: float
    index: str


def _condition(table: str, kind: str) -> str:
    if kind not in _ROWS:
        raise ValidationError(f"graph owner kind {kind!r} must be one of {', '.join(OWNER_KINDS)}")
    if table not in _ROWS[kind]:
        raise ValidationError(f"no vectors in table {table!r}")
    return _ROWS[kind][table]


def graph_name(table: str, kind: str, owner: str) -> str:
    """The index name of agent or team ``owner``'s graph in ``table``: any id (quotes, any length) maps to a
    valid name. Two owners of a kind whose md5s share 16 hex digits would share a name; the second then has no
    graph (the index's condition names the first), and is read exactly: slower, never wrong."""
    _condition(table, kind)
    return f"{table}_{kind}_{hashlib.md5(owner.encode()).hexdigest()[:16]}_hnsw"


def agent_graph_name(table: str, agent_id: str) -> str:
    """:func:`graph_name` of an agent."""
    return graph_name(table, "agent", agent_id)


def team_graph_name(table: str, team_id: str) -> str:
    """:func:`graph_name` of a team."""
    return graph_name(table, "team", team_id)


def graph_exists_sql(table: str, kind: str, owner: str) -> str:
    """A condition that holds while ``owner``'s graph in ``table`` exists and is valid (built through)."""
    return (f"EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('{graph_name(table, kind, owner)}') "
            "AND indisvalid)")


def graph_ddl(table: str, kind: str, owner: str, dim: int, *, concurrently: bool = True) -> Any:
    """``CREATE INDEX [CONCURRENTLY]`` of ``owner``'s graph in ``table`` (a psycopg ``Composed``: the id is a
    quoted literal); the graph's shape is the global one's (``vector_index_ddl``), built with a shorter candidate
    list (a team's 400, an agent's 128). Migration 0023 builds in its transaction, so not concurrently."""
    from psycopg import sql

    cond = _condition(table, kind)
    how = "CONCURRENTLY " if concurrently else ""
    return sql.SQL("CREATE INDEX " + how + "IF NOT EXISTS {name} ON {table} USING hnsw "
                   "((embedding::halfvec({dim})) halfvec_cosine_ops) WITH (m = 16, ef_construction = {efc}) "
                   "WHERE " + cond + " AND " + _COLUMN[kind] + " = {owner}").format(
        name=sql.Identifier(graph_name(table, kind, owner)), table=sql.Identifier(table),
        dim=sql.SQL(str(int(dim))), efc=sql.SQL(str(int(_EF_CONSTRUCTION[kind]))), owner=sql.Literal(owner))


_GRAPHS = ("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
           "WHERE i.indrelid = %(table)s::regclass AND c.relname LIKE %(like)s")


def _graphs(execute: Callable[[str, dict[str, Any]], Any], table: str, kind: str) -> dict[str, bool]:
    """The ``kind`` graphs of ``table`` by index name: valid or not (a concurrent build that failed, or runs).
    ``execute`` is a psycopg connection's ``execute`` or a store transaction's ``exec_driver_sql``."""
    rows = execute(_GRAPHS, {"table": table, "like": f"{table}\\_{kind}\\_%\\_hnsw"}).fetchall()
    return {name: bool(valid) for name, valid in rows}


def graph_candidates(conn: Any, table: str, min_rows: int, owners: Iterable[str] | None = None,
                     kind: str = "agent") -> list[tuple[str, int]]:
    """``(owner, rows)`` of the agents or teams (``kind``; all, or those named) with at least ``min_rows``
    of their rows with a vector in ``table`` and no valid graph yet; most rows first. Counted on the owner's
    covering btree."""
    cond, column = _condition(table, kind), _COLUMN[kind]
    valid = {name for name, ok in _graphs(conn.execute, table, kind).items() if ok}
    named = None if owners is None else sorted(o for o in set(owners)
                                               if graph_name(table, kind, o) not in valid)
    if named == []:
        return []
    where = (f"{cond} AND {column} IS NOT NULL AND embedding IS NOT NULL"
             + ("" if named is None else f" AND {column} = ANY(%(owners)s)"))
    rows = conn.execute(f"SELECT {column}, count(*) FROM {table} WHERE {where} GROUP BY {column} "
                        f"HAVING count(*) >= %(m)s ORDER BY count(*) DESC, {column}",
                        {"owners": named, "m": int(min_rows)}).fetchall()
    return [(owner, int(n)) for owner, n in rows if graph_name(table, kind, owner) not in valid]


def build_owner_graphs(conn: Any, dim: int, *, min_rows: int = AGENT_GRAPH_MIN_ROWS,
                       owners: Iterable[tuple[str, str]] | None = None,
                       tables: Iterable[str] = ("facts", "turns"),
                       kinds: Iterable[str] = OWNER_KINDS) -> list[GraphBuild]:
    """Make the missing graphs of the owners over ``min_rows`` in ``tables``: of every agent and team
    (``kinds``), or of ``owners`` only (``(kind, id)`` pairs); returns what was made. ``conn`` is a psycopg
    connection in autocommit (``CREATE INDEX CONCURRENTLY`` runs outside any transaction); another builder's
    graph of the same owner is left to it."""
    import psycopg

    if min_rows < 1:
        raise ValidationError(f"min_rows must be at least 1, not {min_rows}")
    named = None if owners is None else list(owners)
    made: list[GraphBuild] = []
    for table in tables:
        for kind in kinds:
            ids = None if named is None else [o for k, o in named if k == kind]
            if ids == []:
                continue
            for owner, rows in graph_candidates(conn, table, min_rows, ids, kind):
                name = graph_name(table, kind, owner)
                started = time.perf_counter()
                try:
                    if _graphs(conn.execute, table, kind).get(name) is False:  # a build that failed half-way
                        conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                    conn.execute(graph_ddl(table, kind, owner, dim))
                except (psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation):
                    continue  # another worker is building it
                except psycopg.Error as exc:
                    raise DatabaseError(f"building the vector graph of {kind} {owner!r} in {table} failed: "
                                        f"{str(exc).strip()}") from exc
                made.append(GraphBuild(table, kind, owner, rows, round(time.perf_counter() - started, 3), name))
    return made


def graph_counts(execute: Callable[[str, dict[str, Any]], Any], kind: str = "agent") -> dict[str, int]:
    """How many valid ``kind`` graphs each table has (``factforge stats``); ``execute`` as for
    :func:`_graphs`."""
    return {table: sum(_graphs(execute, table, kind).values()) for table in _ROWS[kind]}


def drop_graphs(execute: Callable[[str, dict[str, Any]], Any], table: str,
                kinds: Iterable[str] = OWNER_KINDS) -> int:
    """Drop every agent and team graph (of ``kinds``) of ``table`` with ``execute`` (see :func:`_graphs`; in the
    caller's transaction); returns how many."""
    names = [name for kind in kinds for name in _graphs(execute, table, kind)]
    for name in names:
        execute(f"DROP INDEX IF EXISTS {name}", {})
    return len(names)
