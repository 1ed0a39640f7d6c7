"""An agent's own vector graph: an HNSW index over one agent's private rows, for agents that have many.

Search reads the caller's private facts and episodes exactly (:func:`factforge.storage.search.vector_sql`: the
agent's covering btree, then a sort), which costs in proportion to how many the agent has: ~1,100 facts per
agent at 100k facts, 1.5 ms; 11k facts and 18k episodes per agent at 1M + 1M (50 agents, 60% private),
10 + 16 ms of every vector search. For such an agent a partial HNSW index over its private rows alone
(``WHERE visibility = 'private' AND agent_id = '<agent>'``, the shared graph's half-precision expression)
gives the same top 10 at a fraction of the cost (see ``DEFAULT_AGENT_GRAPH_MIN_ROWS`` in settings).

The search statement asks for the graph by name (:func:`agent_graph_name`) and uses it only when it exists
and is valid; otherwise the exact read runs, as before. A graph is made with ``CREATE INDEX CONCURRENTLY``
(writes go on meanwhile; one that failed half-way is invalid, unused, and dropped and made again by the next
build) for each agent holding at least ``min_rows`` private rows with a vector: by ``factforge worker`` after
it embedded an agent's rows, and by ``factforge embed graphs``. Changing the embedding dimension drops the
graphs (:func:`drop_agent_graphs`), as it drops the shared one; they are made again once enough rows carry
the new vectors.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import DatabaseError, ValidationError
from ..settings import DEFAULT_AGENT_GRAPH_MIN_ROWS
from .search import GRAPH_EF_CONSTRUCTION, PRIVATE_ROWS

__all__ = ["AGENT_GRAPH_MIN_ROWS", "AGENT_GRAPH_EF_SEARCH", "GraphBuild", "agent_graph_name", "agent_graph_ddl",
           "agent_graph_exists_sql", "graph_candidates", "build_agent_graphs", "graph_counts",
           "drop_agent_graphs"]

# The default of FACTFORGE_AGENT_GRAPH_MIN_ROWS (settings.py says why 4,000).
AGENT_GRAPH_MIN_ROWS = DEFAULT_AGENT_GRAPH_MIN_ROWS

# The candidate list an agent's graph is walked with (the shared graph's grows with that graph, up to 1,000:
# on an agent's graph that would visit most of it, 6-8 ms at 11k rows). At 200 its top 10 equalled the exact
# read's for 60 of 60 bench questions on facts and 0.997 on episodes (100: 0.975 / 0.958).
AGENT_GRAPH_EF_SEARCH = 200

# What an agent's private rows are, per table: the condition the search statement states too, so the planner
# can prove the index's.
_PRIVATE = PRIVATE_ROWS


@dataclass(frozen=True, slots=True)
class GraphBuild:
    """One agent graph made by :func:`build_agent_graphs`."""

    table: str
    agent_id: str
    rows: int
    seconds: float
    index: str


def _check_table(table: str) -> str:
    if table not in _PRIVATE:
        raise ValidationError(f"no vectors in table {table!r}")
    return _PRIVATE[table]


def agent_graph_name(table: str, agent_id: str) -> str:
    """The index name of ``agent_id``'s graph in ``table``: any agent id (quotes, any length) maps to a valid
    name. Two agents whose md5s share 16 hex digits would share a name; the second then has no graph (the
    index's condition names the first), and is read exactly: slower, never wrong."""
    _check_table(table)
    return f"{table}_agent_{hashlib.md5(agent_id.encode()).hexdigest()[:16]}_hnsw"


def agent_graph_exists_sql(table: str, agent_id: str) -> str:
    """A condition that holds while ``agent_id``'s graph in ``table`` exists and is valid (built through)."""
    return (f"EXISTS (SELECT 1 FROM pg_index WHERE indexrelid = to_regclass('{agent_graph_name(table, agent_id)}') "
            "AND indisvalid)")


def agent_graph_ddl(table: str, agent_id: str, dim: int) -> Any:
    """``CREATE INDEX CONCURRENTLY`` of ``agent_id``'s graph in ``table`` (a psycopg ``Composed``: the agent id
    is a quoted literal); the graph's shape is the shared one's (``vector_index_ddl``)."""
    from psycopg import sql

    cond = _check_table(table)
    return sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING hnsw "
                   "((embedding::halfvec({dim})) halfvec_cosine_ops) WITH (m = 16, ef_construction = {efc}) "
                   "WHERE " + cond + " AND agent_id = {agent}").format(
        name=sql.Identifier(agent_graph_name(table, agent_id)), table=sql.Identifier(table),
        dim=sql.SQL(str(int(dim))), efc=sql.SQL(str(int(GRAPH_EF_CONSTRUCTION))), agent=sql.Literal(agent_id))


_GRAPHS = ("SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
           "WHERE i.indrelid = %(table)s::regclass AND c.relname LIKE %(like)s")


def _graphs(execute: Callable[[str, dict[str, Any]], Any], table: str) -> dict[str, bool]:
    """The agent graphs of ``table`` by index name: valid or not (a concurrent build that failed, or runs).
    ``execute`` is a psycopg connection's ``execute`` or a store transaction's ``exec_driver_sql``."""
    rows = execute(_GRAPHS, {"table": table, "like": f"{table}\\_agent\\_%\\_hnsw"}).fetchall()
    return {name: bool(valid) for name, valid in rows}


def graph_candidates(conn: Any, table: str, min_rows: int,
                     agents: Iterable[str] | None = None) -> list[tuple[str, int]]:
    """``(agent_id, rows)`` of the agents (all, or those named) with at least ``min_rows`` private rows with
    a vector in ``table`` and no valid graph yet; most rows first. Counted on the agent's covering btree."""
    cond = _check_table(table)
    valid = {name for name, ok in _graphs(conn.execute, table).items() if ok}
    named = None if agents is None else sorted(a for a in set(agents) if agent_graph_name(table, a) not in valid)
    if named == []:
        return []
    where = f"{cond} AND embedding IS NOT NULL" + ("" if named is None else " AND agent_id = ANY(%(agents)s)")
    rows = conn.execute(f"SELECT agent_id, count(*) FROM {table} WHERE {where} GROUP BY agent_id "
                        "HAVING count(*) >= %(m)s ORDER BY count(*) DESC, agent_id",
                        {"agents": named, "m": int(min_rows)}).fetchall()
    return [(agent, int(n)) for agent, n in rows if agent_graph_name(table, agent) not in valid]


def build_agent_graphs(conn: Any, dim: int, *, min_rows: int = AGENT_GRAPH_MIN_ROWS,
                       agents: Iterable[str] | None = None,
                       tables: Iterable[str] = ("facts", "turns")) -> list[GraphBuild]:
    """Make the missing graphs of the agents (all, or those named) over ``min_rows`` in ``tables``; returns
    what was made. ``conn`` is a psycopg connection in autocommit (``CREATE INDEX CONCURRENTLY`` runs outside
    any transaction); another builder's graph of the same agent is left to it."""
    import psycopg

    if min_rows < 1:
        raise ValidationError(f"min_rows must be at least 1, not {min_rows}")
    names = None if agents is None else list(agents)
    made: list[GraphBuild] = []
    for table in tables:
        for agent, rows in graph_candidates(conn, table, min_rows, names):
            name = agent_graph_name(table, agent)
            started = time.perf_counter()
            try:
                if _graphs(conn.execute, table).get(name) is False:  # a build that failed half-way: start again
                    conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
                conn.execute(agent_graph_ddl(table, agent, dim))
            except (psycopg.errors.DuplicateTable, psycopg.errors.UniqueViolation):
                continue  # another worker is building it
            except psycopg.Error as exc:
                raise DatabaseError(f"building the vector graph of agent {agent!r} in {table} failed: "
                                    f"{str(exc).strip()}") from exc
            made.append(GraphBuild(table, agent, rows, round(time.perf_counter() - started, 3), name))
    return made


def graph_counts(execute: Callable[[str, dict[str, Any]], Any]) -> dict[str, int]:
    """How many valid agent graphs each table has (``factforge stats``); ``execute`` as for :func:`_graphs`."""
    return {table: sum(_graphs(execute, table).values()) for table in _PRIVATE}


def drop_agent_graphs(execute: Callable[[str, dict[str, Any]], Any], table: str) -> int:
    """Drop every agent graph of ``table`` with ``execute`` (see :func:`_graphs`; in the caller's
    transaction); returns how many."""
    names = list(_graphs(execute, table))
    for name in names:
        execute(f"DROP INDEX IF EXISTS {name}", {})
    return len(names)
