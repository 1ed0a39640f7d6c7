"""Scoped hybrid search: HNSW vector neighbours + real BM25 over the stored tsvector, fused by RRF (k=60).

Two kinds of memory are ranked: *facts* and *episodes* (the gate-passed turns themselves, in ``turns``).
Each kind is ranked on its own (its own BM25 statistics, its own vector neighbours) and all rank lists are
fused by RRF, so a turn no rule could read yet is still found, and a fact is not crowded out by the episode
it came from: when both are found, the better ranked stands for both (``collapse``; see ``search``).

Scope is enforced in SQL on every path: an agent sees its own private facts and episodes, its team's team
ones and global ones. BM25 uses the term statistics that triggers keep in ``bm25_terms``/``bm25_corpus`` (document
frequency per lexeme, corpus size and total length), so IDF and length normalisation cost no scan.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache, partial
from itertools import groupby
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from ..errors import DatabaseError, EmbedderError, ValidationError
from .bm25 import (BM25_B, BM25_K1, SCOPED_TSV, bm25_query, bm25_query_from, bm25_ranks,  # noqa: F401 (re-exported)
                   bm25_ranks_sized, send_ranks, terms_sql, terms_sql_of)
from .scope import (episode_filters, fact_filters, own_session, rule_cases, scope_keys,  # noqa: F401 (scope_keys re-exported)
                    source_readable)

logger = logging.getLogger("factforge.search")

__all__ = ["SearchHit", "search", "KINDS", "RRF_K", "BM25_K1", "BM25_B"]

RRF_K = 60
MODES = ("hybrid", "vector", "bm25")
KINDS = ("fact", "episode")
MAX_K = 1000  # the most hits one search returns
# The candidate list (hnsw.ef_search) of the global and team graphs by default grows with the global graph: one
# candidate per EF_SEARCH_ROWS rows in it (the index's pg_class.reltuples, read in the query's own message), at
# least EF_SEARCH_MIN, at most pgvector's largest. Before migration 0023 one shared graph held every team's rows
# and the global ones, and a caller's scope was ~30% of it at 100k facts, ~25% at 1M: there recall@10 under a
# scope was 0.83 at 400 and 0.89 at 1000 (by id; 100 questions, private rows exact). Every graph now holds rows
# the caller may see only: at 1M facts the team's and the global graph (both built with ef_construction 400)
# give 0.943 / 0.953 / 0.957 / 0.960 at 200 / 250 / 300 / 400 (0.958 / 0.968 / 0.972 / 0.975 by distance), so
# 1M facts take ~300 (76k global rows); 1M episodes (32k global rows) 200: 0.965 (0.907 before at 1000). An
# agent's graph is walked in a statement of its own, with AGENT_GRAPH_EF_SEARCH (graphs.py). Since migration 0024
# each graph is: the team's with TEAM_GRAPH_EF_SEARCH (graphs.py), the global one (built with
# GLOBAL_GRAPH_EF_CONSTRUCTION) with one candidate per GLOBAL_EF_SEARCH_ROWS rows, at least GLOBAL_EF_SEARCH_MIN
# (see there); this rule stays for the one statement of a search with a narrowing filter.
EF_SEARCH_MIN = 200
EF_SEARCH_ROWS = 250
MAX_EF_SEARCH = 1000
# The global graph's own walk (migration 0024: built with ef_construction 800), one candidate per
# GLOBAL_EF_SEARCH_ROWS rows of it, at least GLOBAL_EF_SEARCH_MIN: 308 for 77k global facts, 128 for 32k global
# episodes. At 1M facts + 1M episodes (bench_search data), recall@10 of
# search(mode="vector") under a scope, by id, for the bench's 100 questions / 150 others (seed 99): facts 0.958 /
# 0.933 with the graph of 0023 at 308 (1,485 buffers a walk), 0.972 / 0.974 with the new one (1,720); episodes
# 0.937 / 0.975 at 200 (1,773 buffers), 0.953 / 0.979 at 128 (~1,300). The new graph at 160 (1,050 buffers) gives
# facts 0.954 / 0.959: its recall steps up between 250 and 300 candidates on this data (the bench repeats
# sentences with small differences, near-duplicate clusters a walk must take in whole).
GLOBAL_EF_SEARCH_MIN = 120
GLOBAL_EF_SEARCH_ROWS = 250
EF_SEARCH = None  # search()'s default: by the global graph's size, as above
# How search() fuses the rank lists of the kinds (LoCoMo dev, conversation 1, evidence recall@10 LLM off:
# calibrated 0.71, per-kind 0.68, joint 0.59; see bench/eval_locomo.py):
# - calibrated: RRF over each kind's vector and BM25 lists, a kind's rank scaled by (all documents / that kind's
#   documents), so rank 1 of a few facts does not count as much as rank 1 of many episodes;
# - per-kind: plain RRF over the four lists;
# - joint: one list per path over both kinds (short facts then win on distance and length).
FUSIONS = ("calibrated", "per-kind", "joint")


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One result, when it held and why it was found: its rank on each path (None = not found there) and
    fused score.

    ``kind`` is "fact" or "episode" (a stored turn: ``content`` is its words, ``category``/``method`` are
    "episode"). Dates: ``valid_from``/``valid_to`` (the time the fact or turn speaks of, when stated),
    ``first_seen_at``/``last_seen_at``, and ``source_ts``/``session_id``/``speaker`` of the (first) turn it
    came from. ``related`` names what was folded into this hit: a fact's own episode, or an episode's facts.
    ``evidence`` (facts): the words it came from - its folded episode's text, else the sentence it was
    extracted from (never more of another scope's private message than that sentence). ``when``: the time its
    words speak of, described against the day they were said ("the week before 9 June 2023"; set by
    ``Memory.search``, None where the words name no time).
    """

    id: UUID
    content: str
    category: str
    confidence: float
    method: str
    visibility: str
    agent_id: str | None
    team_id: str | None
    entities: tuple[str, ...]
    fused_score: float
    vector_rank: int | None
    bm25_rank: int | None
    vector_distance: float | None
    bm25_score: float | None
    superseded_at: datetime | None
    last_seen_at: datetime
    kind: str = "fact"
    first_seen_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    source_ts: datetime | None = None
    session_id: str | None = None
    speaker: str | None = None
    related: tuple[UUID, ...] = ()
    evidence: str | None = None
    when: str | None = None


# Cosine distance beyond which a vector neighbour that BM25 did not also find is left out, for the default
# local embedder (MiniLM int8). Measured with bench/vector_cutoff.py on LoCoMo (questions against the facts
# the rules store from each conversation): at 0.80 the vector half finds a fact of an evidence turn among its
# 10 nearest for 71.4% of questions (74.8% with no cut-off) and returns 8.3 instead of 10 facts; on the
# bundled team chat, unrelated neighbours sit at 0.83-0.98 and paraphrases that matter ("dark theme" ->
# "User prefers dark mode") at 0.50. Other embedders have other distance scales: no cut-off unless given.
LOCAL_MAX_DISTANCE = 0.80
_EXCLUDED = re.compile(r'(?:^|\s)(-(?:"[^"]*"|[^\s"]+))')


def _vector_filter(query: str, params: dict[str, Any]) -> str:
    """The vector half's share of the query's operators: a fact with an excluded term (``-Jenkins``,
    ``-"exact phrase"``) is excluded on every path, not only where the words are matched."""
    excluded = _EXCLUDED.findall(query)
    if not excluded:
        return ""
    params["q_not"] = " ".join(excluded)
    return " AND ts_match_vq(f.tsv, websearch_to_tsquery('english', %(q_not)s))"


def _agreeing(ranks_v: dict[str, tuple[int, float]], ranks_b: dict[str, tuple[int, float]],
              max_distance: float | None) -> dict[str, tuple[int, float]]:
    """The vector neighbours worth returning: those BM25 also found, and the others within ``max_distance``."""
    if max_distance is None:
        return ranks_v
    return {fid: rd for fid, rd in ranks_v.items() if rd[1] <= max_distance or fid in ranks_b}  # (the cheap test first)


_ITERATIVE: dict[str, bool] = {}


def _has_iterative_scan(conn: Any, source: Any) -> bool:
    """Whether the server's pgvector (>= 0.8) has iterative index scans; asked once per database."""
    key = source if isinstance(source, str) else str(getattr(source, "url", id(source)))
    if key not in _ITERATIVE:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        version = tuple(int(p) for p in re.findall(r"\d+", row[0])[:2]) if row else (0, 0)
        _ITERATIVE[key] = version >= (0, 8)
    return _ITERATIVE[key]


@contextmanager
def _connection(source: Any, *, need_vector: bool) -> Iterator[Any]:
    """A psycopg connection in autocommit: pooled from a Store, or a new one for a URL.

    A search only reads, and each statement stands alone (a row deleted between two of them is left out), so
    it needs no transaction: without one, no BEGIN and no ROLLBACK round trip (two of a vector search's five)."""
    import psycopg

    if isinstance(source, str):
        from .db import conninfo

        with psycopg.connect(conninfo(source), autocommit=True) as conn:
            if need_vector:
                from pgvector.psycopg import register_vector

                register_vector(conn)
            yield conn
        return
    from .pooling import autocommit_connection

    with autocommit_connection(source.engine) as conn:  # vector types were registered when the pool opened it
        yield conn


def vector_sql(table: str, where: str, params: dict[str, Any], dim: int, *, graphs: Iterable[str] = (),
               private: bool = True) -> str:
    """The ``%(n)s`` nearest rows of ``table`` to ``%(v)s`` (``dim`` numbers) under ``where``: each kind of row
    the caller may see read on its own, merged - the global rows by the global graph (migration 0023), which
    holds nothing else, and the caller's team rows and own private rows exactly (by the owner's btree, then
    sorted) or, for the owner kinds in ``graphs`` ("agent", "team"), by the owner's graph while it has a valid
    one (:func:`graph_sql`). Every graph walked holds only rows the caller may see: the walk is unfiltered, and a
    short candidate list finds the nearest (the shared graph of every team's rows before 0023 needed 1,000 at 1M
    facts and still missed). The analyst's view (no agent, no team) reads every private and team row exactly.
    The graphs hold half-precision copies of the vectors: they are walked by that distance, and the rows found
    are ranked by the full one. ``private=False`` leaves the caller's private rows out (a statement of their
    own reads them, :func:`vector_statements`). ``where`` need not state a scoped caller's visibility rule
    (``fact_filters(..., scope=False)``): every branch reads one of its cases (``scope.rule_cases``) by its
    own condition."""
    scoped = "v_agent" in params or "v_team" in params
    walked = set(graphs)
    parts = []
    for kind in ("agent", "team") if private else ("team",):
        if params.get(_OWNER_PARAM[kind]) is not None:
            parts.append(f"({graph_sql(table, kind, where, params, dim)})" if kind in walked
                         else _nearest(table, f"{_OWN[kind]} AND {where}", _EXACT_ORDER))
        elif not scoped:  # the analyst's view; a team-only caller has no private rows, an agent alone no team's
            parts.append(_nearest(table, f"f.{_ROWS_OF[kind][table]} AND {where}", _EXACT_ORDER))
    parts.append(_nearest(table, f"{_GLOBAL} AND {where}", _graph_order(dim)))
    return f"SELECT id, d FROM ({' UNION ALL '.join(parts)}) x ORDER BY d LIMIT %(n)s"


# A private branch's order: by the exact distance, an exact scan and sort, off any index order (see _nearest)
_EXACT_ORDER = "exact"


def _graph_order(dim: int) -> str:
    half = f"::halfvec({int(dim)})"
    return f"f.embedding{half} <=> %(v)s{half}"


def _nearest(table: str, where: str, order: str) -> str:
    if order == _EXACT_ORDER:
        # Each row's distance once: ordered by "(f.embedding <=> v) + 0", a row's vector was read (a fact's from
        # TOAST) and compared twice, for the column and for the sort key (216 facts: 1,336 buffers, now 688).
        # OFFSET 0 keeps the sort above the scan, off any index order, as the "+ 0" did.
        return (f"(SELECT id, d FROM (SELECT f.id, f.embedding <=> %(v)s AS d FROM {table} f WHERE {where} "
                "AND f.embedding IS NOT NULL OFFSET 0) exact ORDER BY d LIMIT %(n)s)")
    return (f"(SELECT f.id, f.embedding <=> %(v)s AS d FROM {table} f WHERE {where} AND f.embedding IS NOT NULL "
            f"ORDER BY {order} LIMIT %(n)s)")


# The global rows, and the caller's own rows of each owner kind: the visibility rule's cases (scope.rule_cases);
# and the parameter naming the owner.
_GLOBAL, _TEAM_OWN, _AGENT_OWN = rule_cases("f")
_OWN = {"agent": _AGENT_OWN, "team": _TEAM_OWN}
_OWNER_PARAM = {"agent": "v_agent", "team": "v_team"}


def graph_sql(table: str, kind: str, where: str, params: dict[str, Any], dim: int) -> str:
    """The ``%(n)s`` nearest of the caller's own private rows (``kind`` "agent") or its team's team rows
    ("team") of ``table`` under ``where``: by the owner's graph while it has a valid one
    (:mod:`factforge.storage.graphs`), else exactly, as in :func:`vector_sql` (an agent's rows under
    :data:`PRIVATE_VECTORS_WHERE` from its table's narrow copy of them). Both are in the statement; a condition read
    once per statement runs one of them."""
    from .graphs import graph_exists_sql

    owner = params.get(_OWNER_PARAM[kind])
    if owner is None:
        raise ValidationError(f"a {kind} graph is read for one {kind}: {_OWNER_PARAM[kind]} is missing")
    have = graph_exists_sql(table, kind, owner)
    mine = f"{_OWN[kind]} AND {where}"
    exact = (_nearest(f"{table}_private_vectors", f"f.agent_id = %(v_agent)s AND NOT {have}", _EXACT_ORDER)
             if kind == "agent" and where == PRIVATE_VECTORS_WHERE.get(table) else
             _nearest(table, f"{mine} AND NOT {have}", _EXACT_ORDER))
    return f"SELECT id, d FROM ({_nearest(table, f'{mine} AND {have}', _graph_order(dim))} UNION ALL {exact}) x"


# What an agent's rows in ``facts_private_vectors`` / ``turns_private_vectors`` (migration 0027) are besides private
# and with a vector: the rows of the vector branches' default filter (a fact not superseded, a turn with words).
# Under exactly this filter an agent without a graph has its rows read from there: the same ids and vectors in
# narrow rows (an agent's 2,790 episodes and 928 facts: 1.95-2.1 -> 1.25 ms of PostgreSQL's CPU a search), where
# the scan of ``facts`` and ``turns`` deformed every wide row to its filter columns. Any other filter (history, a
# moment, an excluded word) reads the table itself.
PRIVATE_VECTORS_WHERE = {"facts": "f.superseded_at IS NULL", "turns": "f.tsv IS NOT NULL"}


# A btree entry holds at most 2,704 bytes: the agent's private rows carry their vectors in their index (an
# index-only scan) up to this many numbers; beyond, the index holds the agent only (rows read from the table).
COVERED_MAX_DIM = 512


# The agents' and teams' graphs' build-time candidate list; the shared graph's before migration 0023 (0015;
# pgvector's default is 64). At 1M facts + 1M
# episodes, recall@10 under a scope by distance (200 queries): 0.856 -> 0.905 at ef_search 400, 0.915 -> 0.969
# at 1000, the statement no slower; a build takes longer (312 s for the 1M facts' shared rows at load ~15).
# 112 was measured in stop 35 (5.5% fewer buffer accesses per insert, recall@10 at 100k unchanged) and not taken:
# its recall at 1M, where the margin is thin, was not measured (bench/README.md).
GRAPH_EF_CONSTRUCTION = 128
# The teams' graphs' (migration 0023), and the global graph's before migration 0024. These rows repeat the same few
# thousand sentences with small differences (bench_search's data: near-duplicate vectors), where a walk needs a
# long list, and a better-built graph needs a shorter one. At 1M facts, 100 questions, recall@10 of one graph's
# rows alone at ef_search 100 / 200 / 400 (/ 1000): the global graph (77k rows) 0.764 / 0.852 / 0.884 / 0.977
# built with 128, 0.818 / 0.916 / 0.952 / 0.998 with 400 (m 32 and 256: 0.737 / 0.840 / 0.924 / 0.988); a team's
# (35k rows) 0.851 / 0.918 / 0.995 with 128, 0.924 / 0.992 / - with 400. A build takes longer (the global graph
# 109 s against 41 s, a team's ~40 s against ~17 s, load ~10-15); an agent's graph, whose rows are one
# speaker's, keeps 128.
TEAM_GRAPH_EF_CONSTRUCTION = 400
# The global graph's (migration 0024), which every search walks: see GLOBAL_EF_SEARCH_MIN for what it buys.
GLOBAL_GRAPH_EF_CONSTRUCTION = 800


def vector_index_ddl(table: str, dim: int, ef_construction: int = GLOBAL_GRAPH_EF_CONSTRUCTION) -> list[str]:
    """The statements that make ``table``'s vector indexes as migrations 0013-0023 left them, for ``dim``
    numbers: the HNSW graph over half-precision copies of the global rows' vectors (what :func:`vector_sql`
    walks) and the agent's private rows with what the private branch reads (:func:`private_index_ddl`). A
    team's team rows are found by a btree without vectors (migration 0023 for facts, 0019's length index for
    episodes); agents' and teams' own graphs are made apart (:mod:`factforge.storage.graphs`).
    ``ef_construction``: the graph's build-time candidate list (benchmarks try others)."""
    return [global_graph_ddl(table, dim, ef_construction), private_index_ddl(table, dim)]


def global_graph_ddl(table: str, dim: int, ef_construction: int = GLOBAL_GRAPH_EF_CONSTRUCTION) -> str:
    """The HNSW graph of ``table``'s global rows (migration 0023), over half-precision copies of their vectors."""
    return (f"CREATE INDEX {table}_embedding_global_hnsw ON {table} USING hnsw ((embedding::halfvec({int(dim)})) "
            f"halfvec_cosine_ops) WITH (m = 16, ef_construction = {int(ef_construction)}) "
            "WHERE visibility = 'global'")


def vector_storage_ddl(table: str) -> str:
    """The statement that keeps ``table``'s vectors in their rows (migration 0022): pgvector's types are ``STORAGE
    EXTERNAL``, so a fact of ~2.2 KB had its vector in the TOAST table, and the exact read of an agent's private
    facts fetched every one through the TOAST index (~900 facts: 2,788 instead of 288 buffers, 1.5 instead of
    0.5 ms). Remaking the column (a new dimension) resets its storage to the type's: state it again after."""
    if table not in _PRIVATE_COVER:
        raise ValidationError(f"no vectors in table {table!r}")
    return f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN"


# The condition every read of an agent's private rows states, per table (an episode is a turn with words): the
# covering index's and the agent graphs' (factforge.storage.graphs) conditions, which the planner proves from it.
PRIVATE_ROWS = {"facts": "visibility = 'private'", "turns": "visibility = 'private' AND tsv IS NOT NULL"}
# The same for a team's team rows: its btree's and the team graphs' condition.
TEAM_ROWS = {"facts": "visibility = 'team'", "turns": "visibility = 'team' AND tsv IS NOT NULL"}
_ROWS_OF = {"agent": PRIVATE_ROWS, "team": TEAM_ROWS}
# What the exact private branch of vector_sql reads of a row besides the agent (the scope filter's columns,
# facts' history filter), and the condition above.
_PRIVATE_COVER = {"facts": ("id, visibility, team_id, superseded_at, embedding", PRIVATE_ROWS["facts"]),
                  "turns": ("id, visibility, team_id, embedding", PRIVATE_ROWS["turns"])}


def private_index_ddl(table: str, dim: int) -> str:
    """An agent's private rows of ``table`` (facts or turns), by agent: with each row's vector and the
    columns of the scope filter (facts: and of the history filter), so that the exact private branch of
    :func:`vector_sql` is an index-only scan (at 100k facts, ~1,100 rows of one agent on ~200 index pages
    instead of ~1,100 table pages: 1.5 instead of 2.9 ms; migration 0013 for facts, 0014 for episodes).
    Beyond :data:`COVERED_MAX_DIM` numbers the index holds the agent only (rows read from the table)."""
    cover, where = _PRIVATE_COVER[table]
    if dim <= COVERED_MAX_DIM:
        return f"CREATE INDEX {table}_private_agent_idx ON {table} (agent_id) INCLUDE ({cover}) WHERE {where}"
    return f"CREATE INDEX {table}_private_agent_idx ON {table} (agent_id) WHERE visibility = 'private'"


def ef_search_sql(table: str, ef_search: int | None, n: int, graph: str = "team") -> str:
    """The statement that sets ``hnsw.ef_search`` for the rest of its transaction: ``ef_search``, or by default
    by the size of ``table``'s global graph (see :data:`EF_SEARCH_ROWS`, and :data:`GLOBAL_EF_SEARCH_ROWS` for
    the walk of the global graph itself, ``graph`` "global"); never below ``n`` (past the candidate list the
    iterative scan goes on for more rows) nor above pgvector's largest."""
    return f"SELECT set_config('hnsw.ef_search', {_ef_search_value(table, ef_search, n, graph)}, true); "


# The default candidate list per graph walked: (at least, one per this many rows of the table's global graph)
_EF_RULES = {"team": (EF_SEARCH_MIN, EF_SEARCH_ROWS), "global": (GLOBAL_EF_SEARCH_MIN, GLOBAL_EF_SEARCH_ROWS)}


def _ef_search_value(table: str, ef_search: int | None, n: int, graph: str = "team",
                     sized: Mapping[str, float] | None = None) -> str:
    """``ef_search`` as the SQL text of a value: a literal, or the rule of ``graph`` by the table's global graph
    (:data:`_EF_RULES`), read in the statement itself or, given ``sized`` (:func:`_global_sizes`: the rule's
    ``greatest(least, rows / per)`` read a moment ago), worked out here, so that statements whose candidate lists
    come out the same share one settings statement (:func:`_send_kinds_vectors`)."""
    if ef_search is not None:
        return f"'{int(min(max(ef_search, n), MAX_EF_SEARCH))}'"
    if table not in _PRIVATE_COVER:
        raise ValidationError(f"no vectors in table {table!r}")
    if sized is not None:
        # as PostgreSQL works out the statement below: greatest and least over real, then ::int rounds half to even
        return f"'{round(min(MAX_EF_SEARCH, max(n, sized[graph])))}'"
    least, rows = _EF_RULES[graph]
    return (f"least({MAX_EF_SEARCH}, greatest({int(n)}, {least}, {_global_rows(table)} / {rows}))::int::text")


def _global_rows(table: str) -> str:
    """SQL: the number of rows of ``table``'s global graph that PostgreSQL last counted (NULL without one)."""
    return f"(SELECT reltuples FROM pg_class WHERE oid = to_regclass('{table}_embedding_global_hnsw'))"


# How long a process keeps what its global graphs' sizes make of the candidate lists (:func:`_global_sizes`).
# pg_class.reltuples moves only when VACUUM, ANALYZE or an index build counts the rows again, so a reading some
# seconds old is the value a statement would read, or the one before it (one candidate per 250 rows either way).
GLOBAL_SIZES_S = 30.0
_SIZES: dict[str, tuple[float, dict[str, dict[str, float]]]] = {}
_SIZES_SQL = "SELECT " + ", ".join(
    f"greatest({least}, {_global_rows(table)} / {rows})::float8"
    for table in ("facts", "turns") for least, rows in (_EF_RULES["team"], _EF_RULES["global"]))


def _global_sizes(conn: Any, source: Any) -> dict[str, dict[str, float]]:
    """table -> graph rule ("team", "global") -> ``greatest(least, rows / per)`` of :data:`_EF_RULES` by the
    table's global graph, read at most every :data:`GLOBAL_SIZES_S` seconds per database: one statement each
    time instead of one settings statement per table on every search (see :func:`_ef_search_value`)."""
    key = source if isinstance(source, str) else str(getattr(source, "url", id(source)))
    now = time.monotonic()
    cached = _SIZES.get(key)
    if cached is not None and now - cached[0] < GLOBAL_SIZES_S:
        return cached[1]
    f_team, f_global, t_team, t_global = conn.execute(_SIZES_SQL, prepare=True).fetchone()
    sizes = {"facts": {"team": f_team, "global": f_global}, "turns": {"team": t_team, "global": t_global}}
    _SIZES[key] = (now, sizes)
    return sizes


def _settings_sql(table: str, ef_search: int | None, n: int, iterative: bool, generic: bool = False,
                  graph: str = "team", sized: Mapping[str, float] | None = None) -> str:
    """One statement that sets a vector statement's HNSW settings for the rest of the transaction
    (:func:`ef_search_sql` for ``graph``, and pgvector >= 0.8's iterative scan in relaxed order). ``generic``: the
    statement runs by its generic plan from its first run (its owners are literals, so a generic plan walks the
    owner's graph as a custom one does; planning its branches against every partial index of the table cost
    ~0.5 ms a statement at 1M facts, with 60 graphs)."""
    relaxed = ", set_config('hnsw.iterative_scan', 'relaxed_order', true)" if iterative else ""
    plans = f", set_config('plan_cache_mode', '{'force_generic_plan' if generic else 'auto'}', true)"
    return (f"SELECT set_config('hnsw.ef_search', {_ef_search_value(table, ef_search, n, graph, sized)}, true)"
            f"{relaxed}{plans}")


@dataclass(frozen=True, slots=True)
class _QueryVector:
    """A query vector as pgvector's ``Vector``, made once per search: each statement of each kind binds it."""

    value: Any
    dim: int

    @classmethod
    def of(cls, vector: Sequence[float]) -> _QueryVector:
        import numpy as np
        from pgvector import Vector

        return cls(Vector(np.asarray(vector, dtype=np.float32)), len(vector))


# A rank list: id -> (rank, score). A search carries its ids as their text (PostgreSQL's canonical form, read with
# ::text), UUIDs again only in its hits: hashing a UUID runs Python code (~1,300 dict operations a search), a str's
# hash is C and kept, and a UUID was dumped by Python code for each id the lookups send (fusion and collapse 206 ->
# 125 us a search, the 12 bench queries' rank lists).
_Id = str  # an id as its text
_Ranks = dict[_Id, tuple[int, float]]


def _send_kinds_vectors(conn: Any, kinds: Sequence[_Kind], vector_where: Mapping[str, str], vector: _QueryVector,
                        n: int, ef_search: int | None, iterative: bool,
                        sized: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, Callable[[], _Ranks]]:
    """Sends the vector statements of ``kinds`` on ``conn``, in the pipeline its caller holds open; returns, per
    kind, what reads its ranks once the pipeline is synced.

    Each statement follows its HNSW settings in one pipeline ended by one Sync, so one implicit transaction that
    the settings last for: statements that need the same settings (an agent's graph of facts and of episodes)
    are sent one after the other, after one settings statement. Each statement is prepared, its vector bound (in
    binary), and runs by its generic plan (from its first run where its settings say so, :func:`_settings_sql`;
    else PostgreSQL's own choice after five runs). Sent as one simple-protocol message with the vector as a
    literal, the statements were planned anew on every search: 1.5-2 ms of a kind's 4-5 ms of PostgreSQL CPU at
    ~1k rows (bench_api).

    ``sized`` (:func:`_global_sizes`, per table): the candidate lists are worked out here and the settings state
    them as numbers, so that statements whose lists come out the same share one settings statement and go as one
    statement (an agent without a graph and a small global graph: the agent's rows and the global rows of both
    kinds, 120 candidates each; 4 settings and 4 vector statements of a search, 2 and 2 now)."""
    planned = []
    for kind in kinds:
        args = {**kind.params, "v": vector.value}
        owners = tuple((name, kind.params[name]) for name in _OWNER_PARAM.values() if name in kind.params)
        rules = tuple(sorted(sized[kind.table].items())) if sized is not None else None
        for place, (settings, query) in enumerate(_statements_of(kind.table, vector_where[kind.name], owners,
                                                                 vector.dim, n, ef_search, iterative,
                                                                 not kind.narrowed, rules)):
            planned.append((settings, kind.name, query, args, place))
    planned.sort(key=lambda p: p[0])  # stable: the same settings side by side, each kind's statements in order
    # (the statement's place among its kind's, cursor, which of the cursor's statement's parts) per kind
    found: dict[str, list[tuple[int, Any, int]]] = {kind.name: [] for kind in kinds}
    for settings, group in groupby(planned, key=lambda p: p[0]):
        conn.execute(settings, prepare=True)  # once per text: the same text reads the same values in one transaction
        for batch in _batches(list(group)):
            cur = conn.execute(_together(tuple(item[2] for item in batch)),
                               {key: value for item in batch for key, value in item[3].items()}, prepare=True)
            for part, (_, name, _, _, place) in enumerate(batch):
                found[name].append((place, cur, part))
    fetched: dict[int, list[Any]] = {}

    def rows_of(cur: Any, part: int) -> list[tuple[Any, Any]]:
        if id(cur) not in fetched:
            fetched[id(cur)] = cur.fetchall()
        return [(fid, d) for p, fid, d in fetched[id(cur)] if p == part]

    def reader(cursors: list[tuple[int, Any, int]]) -> Callable[[], _Ranks]:
        def ranks() -> _Ranks:
            # each kind's statements' rows in the order of its statements, whichever went together: rows at the
            # same distance keep their order in the stable sort below
            rows = [row for _, cur, part in sorted(cursors, key=lambda c: c[0]) for row in rows_of(cur, part)]
            # relaxed_order may return neighbours slightly out of order: rank by the exact distance.
            return {fid: (rank, float(d)) for rank, (fid, d) in enumerate(sorted(rows, key=lambda r: r[1])[:n], 1)}

        return ranks

    return {name: reader(cursors) for name, cursors in found.items()}


_Planned = tuple[str, str, str, dict[str, Any], int]  # settings, kind, statement, parameters, place in its kind's


def _batches(group: list[_Planned]) -> list[list[_Planned]]:
    """The statements of one settings group (settings, kind, statement, parameters, place), in batches sent as one
    statement each: the statements that need the same settings (an agent's facts and episodes, and the global
    rows of both while their lists are as long) together, as their parameters agree (the same caller's; a
    parameter of the same name with two values keeps them apart). One statement instead of several: one to bind,
    run and read (bench_api, 8 clients: 2 of a search's 16 statements)."""
    batches: list[list[_Planned]] = []
    for item in group:
        last = batches[-1] if batches else None
        if (last is not None
                and all(other[3].get(key, value) == value for other in last for key, value in item[3].items()
                        if key != "v")
                and all(other[3]["v"] is item[3]["v"] for other in last)):
            last.append(item)
        else:
            batches.append([item])
    return batches


@lru_cache(maxsize=256)
def _together(queries: tuple[str, ...]) -> str:
    """One statement of ``queries`` (each of rows ``id, d``), each row led by its query's place in ``queries``, its
    id as text (see :data:`_Ranks`)."""
    return " UNION ALL ".join(f"SELECT {i} AS part, id::text, d FROM ({query}) q{i}" for i, query in enumerate(queries))


def vector_statements(table: str, where: str, params: dict[str, Any], dim: int, n: int, ef_search: int | None,
                      iterative: bool = True, own_graph: bool = True, sized: Mapping[str, float] | None = None
                      ) -> list[tuple[str, str]]:
    """What one vector search of ``table`` runs, as (settings, statement) pairs, one statement per graph walked,
    each with the candidate list its graph needs: the agent's own rows (:func:`graph_sql`, its graph walked with
    :data:`~factforge.storage.graphs.AGENT_GRAPH_EF_SEARCH` candidates), its team's (:func:`graph_sql`,
    :data:`~factforge.storage.graphs.TEAM_GRAPH_EF_SEARCH`) and the global rows (:func:`global_sql`, by the
    global graph's size, :data:`GLOBAL_EF_SEARCH_ROWS`), or ``ef_search`` for all; the neighbours of the
    statements, merged by distance, are the top ``n``. ``own_graph=False`` (a narrowing filter): one statement,
    the agent's rows read exactly (a walk of its graph may stop before it meets a rare match; the team's and the
    global graph are walked on by the iterative scan, as the shared graph was, with :func:`ef_search_sql`'s
    list). The analyst's view (no agent, no team): one statement, every private and team row read exactly
    (:func:`vector_sql`), the global graph walked. ``n`` is written into the statements: a prepared statement's
    generic plan then knows its limit, as a one-off plan did. ``sized``: the table's global graph's rules read a
    moment ago (:func:`_global_sizes`), so the settings state their candidate lists as numbers (else each settings
    statement reads the graph's size itself)."""
    from .graphs import AGENT_GRAPH_EF_SEARCH, TEAM_GRAPH_EF_SEARCH

    # the limit and the owners written into the statement text (see _settings_sql's ``generic``)
    values = {"n": str(int(n)), **{name: _literal(params.get(name)) for name in _OWNER_PARAM.values()}}

    def written(statement: str) -> str:  # one pass: a written owner's text is not read for placeholders again
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group()) if m.group(1) else m.group(), statement)

    if not own_graph:
        return [(_settings_sql(table, ef_search, n, iterative, sized=sized),
                 written(vector_sql(table, where, params, dim, graphs=("team",))))]
    walk_global = _settings_sql(table, ef_search, n, iterative, generic=True, graph="global", sized=sized)
    if "v_agent" not in params and "v_team" not in params:  # the analyst's view
        return [(walk_global, written(vector_sql(table, where, params, dim)))]
    out = []
    if params.get("v_agent") is not None:
        own = _settings_sql(table, AGENT_GRAPH_EF_SEARCH if ef_search is None else ef_search, n, iterative,
                            generic=True)
        out.append((own, written(graph_sql(table, "agent", where, params, dim))))
    if params.get("v_team") is not None:
        team = _settings_sql(table, TEAM_GRAPH_EF_SEARCH if ef_search is None else ef_search, n, iterative,
                             generic=True)
        out.append((team, written(graph_sql(table, "team", where, params, dim))))
    out.append((walk_global, written(global_sql(table, where, dim))))
    return out


def global_sql(table: str, where: str, dim: int) -> str:
    """The ``%(n)s`` nearest global rows of ``table`` to ``%(v)s`` under ``where``, by the global graph."""
    rows = _nearest(table, f"{_GLOBAL} AND {where}", _graph_order(dim))
    return f"SELECT id, d FROM {rows} x"


@lru_cache(maxsize=512)
def _statements_of(table: str, where: str, owners: tuple[tuple[str, Any], ...], dim: int, n: int,
                   ef_search: int | None, iterative: bool, own_graph: bool,
                   sized: tuple[tuple[str, float], ...] | None = None) -> tuple[tuple[str, str], ...]:
    """:func:`vector_statements` for the owner parameters ``owners`` ((name, value) of those given) and ``sized``
    (its items): the same arguments make the same text, so a process makes each once, not on every search (90 us
    a hybrid search)."""
    return tuple(vector_statements(table, where, dict(owners), dim, n, ef_search, iterative, own_graph,
                                   dict(sized) if sized is not None else None))


# psycopg's named placeholders, and its escaped percent sign (read as a whole, so that "%%(n)s" is no placeholder)
_PLACEHOLDER = re.compile(r"%%|%\((\w+)\)s")


def _literal(value: Any) -> str:
    """``value`` (an agent or team id, or None) as an SQL literal in a statement that psycopg reads for its
    placeholders: an escape string (``E'...'``, read the same whatever the server's standard_conforming_strings),
    its backslashes and quotes doubled for PostgreSQL, its percent signs for psycopg."""
    if value is None:
        return "NULL"
    text = str(value)
    if "\x00" in text:
        raise ValidationError("an id must not contain a NUL character")
    return "E'" + text.replace("\\", "\\\\").replace("'", "''").replace("%", "%%") + "'"


_EXECUTOR: list[ThreadPoolExecutor] = []
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """One small thread pool per process for the vector half of hybrid searches."""
    if _EXECUTOR:
        return _EXECUTOR[0]
    with _EXECUTOR_LOCK:
        if not _EXECUTOR:
            _EXECUTOR.append(ThreadPoolExecutor(max_workers=4, thread_name_prefix="factforge-search"))
        return _EXECUTOR[0]


class _InFlight:
    """How many searches this process runs at this moment."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    @contextmanager
    def one(self) -> Iterator[int]:
        """Counts one search for the block; yields how many run, this one included."""
        with self._lock:
            self.count += 1
            now = self.count
        try:
            yield now
        finally:
            with self._lock:
                self.count -= 1


_IN_FLIGHT = _InFlight()


def _vectors_on_own_connection(source: Any, kinds: Sequence[_Kind], vector_where: Mapping[str, str],
                               vector: _QueryVector, n: int, ef_search: int | None,
                               sized: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, _Ranks]:
    """The vector ranks of ``kinds`` from another pooled connection: one pipeline, one round trip."""
    with _connection(source, need_vector=True) as conn:
        iterative = _has_iterative_scan(conn, source)
        with conn.pipeline():
            read = _send_kinds_vectors(conn, kinds, vector_where, vector, n, ef_search, iterative, sized)
        return {name: ranks() for name, ranks in read.items()}


@dataclass(frozen=True, slots=True)
class _Kind:
    """One kind of memory to rank: its table for vectors, its table for BM25 and its filter."""

    name: str
    table: str
    terms_table: str
    where: str
    params: dict[str, Any]
    # A filter beyond scope and history (categories, dates, entity, method): the caller's private rows are
    # then read exactly, never from the agent's graph, whose walk may stop before it meets a rare match.
    narrowed: bool = False
    # ``where`` without the caller's scope rule, for the vector branches (None: ``where``). Each branch reads
    # one part of the caller's view by its own condition (vector_sql: the caller's private rows, its team's
    # team rows, the global rows), which implies the rule: checked again on every row it cost PostgreSQL
    # 0.1 ms per 1,000 rows read exactly (an agent's 2,790 episodes: 1.23 -> 1.10 ms of CPU, 929 facts
    # 0.59 -> 0.48).
    branch_where: str | None = None


def _kinds(kinds: Iterable[str] | None, agent_id: str | None, team_id: str | None, cats: Sequence[str],
           include_history: bool, since: datetime | None, until: datetime | None, entity: str | None,
           method: str | None) -> list[_Kind]:
    wanted = list(dict.fromkeys(kinds)) if kinds is not None else list(KINDS)
    for kind in wanted:
        if kind not in KINDS:
            raise ValidationError(f"kind {kind!r} must be one of {', '.join(KINDS)}")
    if not wanted:
        raise ValidationError(f"kinds must name at least one of {', '.join(KINDS)}")
    out = []
    if "fact" in wanted:
        facts_where = partial(fact_filters, agent_id, team_id, include_history=include_history, categories=cats,
                              since=since, until=until, entity=entity or None, method=method)
        where, params = facts_where()
        branch = facts_where(scope=False)[0]
        # Scope and history live in the narrow fact_terms too; other filters need the facts table itself.
        narrowed = bool(cats or since or until or entity or method)
        out.append(_Kind("fact", "facts", "facts" if narrowed else "fact_terms", where, params, narrowed, branch))
    # Episodes have no category or extraction method: such a filter asks for facts only.
    if "episode" in wanted and not cats and not method:
        episodes_where = partial(episode_filters, agent_id, team_id, since=since, until=until, entity=entity or None)
        where, params = episodes_where()
        branch = episodes_where(scope=False)[0]
        out.append(_Kind("episode", "turns", "turns", where, params, bool(since or until or entity), branch))
    return out


def search(
    source: Any, query: str, *, agent_id: str | None, team_id: str | None = None, k: int = 10,
    embedder: Any = None, categories: Iterable[str] | None = None, include_history: bool = False,
    since: datetime | None = None, until: datetime | None = None, entity: str | None = None,
    method: str | None = None, mode: Literal["hybrid", "vector", "bm25"] | str = "hybrid",
    kinds: Iterable[str] | None = None, collapse: bool = True,
    fusion: Literal["calibrated", "per-kind", "joint"] | str = "calibrated", candidates: int | None = None,
    ef_search: int | None = EF_SEARCH, max_distance: float | None | Literal["auto"] = "auto",
) -> list[SearchHit]:
    """The ``k`` best facts and episodes for ``query`` that the caller may see; see the module docstring.

    ``max_distance``: vector neighbours farther than this (cosine distance) that BM25 did not find are left
    out, so fewer, better facts come back; "auto" is ``LOCAL_MAX_DISTANCE`` for the local embedder, else none.

    ``ef_search``: the HNSW candidate list of every graph walked (the global one, the team's and the agent's);
    None: the global graph by its size, one per :data:`GLOBAL_EF_SEARCH_ROWS` rows, 120 to 1000, a team's graph
    :data:`~factforge.storage.graphs.TEAM_GRAPH_EF_SEARCH` and an agent's
    :data:`~factforge.storage.graphs.AGENT_GRAPH_EF_SEARCH` (with a narrowing filter, the team's and the global
    graph by :data:`EF_SEARCH_ROWS`). At 1M facts (bench/bench_search.py data) recall@10 under a scope is 0.968
    by id (see :data:`GLOBAL_EF_SEARCH_MIN`).

    ``source`` is a :class:`~factforge.store.Store` (its pooled connections are reused: no connection
    set-up per query) or a database URL (one connection for this call). ``kinds``: "fact", "episode" or both
    (default; a category or method filter means facts only). ``collapse``: a fact and the episode it came
    from count once, as the better ranked of the two, with the other in its ``related``. ``fusion``: how
    the rank lists of the kinds are fused, one of :data:`FUSIONS` (see there).
    """
    import psycopg

    _check_arguments(query, k, mode, fusion)
    n = candidates or max(40, k * 4)
    cats = list(categories or ())
    plan = _kinds(kinds, agent_id, team_id, cats, include_history, since, until, entity, method)
    for kind in plan:
        kind.params.update(q=query, n=n)
    # The vector half obeys the query's exclusions too (-Jenkins), for every kind.
    vector_where = {kind.name: (kind.branch_where or kind.where) + _vector_filter(query, kind.params) for kind in plan}
    if max_distance == "auto":
        max_distance = _auto_distance(embedder)
    vector = _query_vector(query, embedder, mode)
    try:
        with _IN_FLIGHT.one() as running, _connection(source, need_vector=vector is not None) as conn:
            ranks, sizes = _rank_lists(conn, source, plan, vector_where, query, vector, mode, n, ef_search,
                                       max_distance, running)
            kind_of = {rid: name for (name, _path), found in ranks.items() for rid in found}
            fused = _fuse(conn, plan, ranks, fusion, sizes)
            # ties by id, its text: fixed-width lowercase hex, in the order of its 128-bit number
            order = sorted(fused, key=lambda i: (-fused[i], i))
            top, related = _collapse(order, _links(conn, order, kind_of) if collapse else {}, kind_of, k)
            if not top:
                return []
            # A fact's best episode among its group comes back as its evidence.
            folded = {rid: next((x for x in related.get(rid, ()) if kind_of[x] == "episode"), None) for rid in top
                      if kind_of[rid] == "fact"}
            rows = _rows(conn, [i for i in top if kind_of[i] == "fact"],
                         [i for i in top if kind_of[i] == "episode"] + [e for e in folded.values() if e],
                         agent_id, team_id)
    except psycopg.Error as exc:
        raise DatabaseError(f"search failed: {str(exc).strip().splitlines()[0]}") from None
    # A row deleted between the two queries is left out.
    return [_hit(rid, rows, kind_of[rid], ranks, fused, related.get(rid, ()), folded.get(rid))
            for rid in top if rid in rows]


def _check_arguments(query: str, k: int, mode: str, fusion: str) -> None:
    if mode not in MODES:
        raise ValidationError(f"search mode {mode!r} must be one of {', '.join(MODES)}")
    if fusion not in FUSIONS:
        raise ValidationError(f"fusion {fusion!r} must be one of {', '.join(FUSIONS)}")
    if not isinstance(k, int) or k < 1 or k > MAX_K:
        raise ValidationError(f"k must be an integer between 1 and {MAX_K}")
    if not query or not query.strip():
        raise ValidationError("query must not be empty")


def _auto_distance(embedder: Any) -> float | None:
    """The vector cut-off of ``max_distance="auto"``: :data:`LOCAL_MAX_DISTANCE` for the local embedder."""
    from ..settings import LOCAL_EMBED_MODEL

    return LOCAL_MAX_DISTANCE if getattr(embedder, "model", None) == LOCAL_EMBED_MODEL else None


def _query_vector(query: str, embedder: Any, mode: str) -> list[float] | None:
    """The query's embedding, or None (no embedder, keyword mode, or the embedder failed: keywords only)."""
    vector = None
    if mode != "bm25" and embedder is not None:
        try:
            vector = embedder.embed([query])[0]
        except EmbedderError as exc:
            logger.warning("query embedding failed (%s); keyword search only", exc)
    if mode == "vector" and vector is None:
        raise ValidationError("vector search needs an embedder (FACTFORGE_EMBEDDER is 'none' or it failed)")
    return vector


def _rank_lists(conn: Any, source: Any, plan: Sequence[_Kind], vector_where: Mapping[str, str], query: str,
                vector: list[float] | None, mode: str, n: int, ef_search: int | None,
                max_distance: float | None, running: int = 1
                ) -> tuple[dict[tuple[str, str], _Ranks], dict[str, int]]:
    """(kind, path) -> {id: (rank, score)} for each kind's vector and BM25 path; fact and episode ids are
    distinct UUIDs. Vector neighbours too far away that BM25 did not find are left out (:func:`_agreeing`).
    Also each kind's number of documents, as its BM25 statistics read it (none in vector mode).

    Two round trips on ``conn`` whatever the number of kinds: BM25's first statement (every kind's term
    statistics, in one) with the vector statements that stay on ``conn``, then BM25's second statement of every
    kind.
    ``running``: how many searches this process runs at the moment, this one included."""
    ranks: dict[tuple[str, str], _Ranks] = {}
    sizes: dict[str, int] = {}
    qvector = _QueryVector.of(vector) if vector is not None else None
    searched = [kind for kind in plan if mode != "vector"]
    here = list(plan) if qvector is not None else []
    pending = []
    # the global graphs' sizes, read a moment ago (one statement every GLOBAL_SIZES_S seconds)
    sized = _global_sizes(conn, source) if qvector is not None and ef_search is None else None
    if qvector is not None and not isinstance(source, str) and (mode == "hybrid" or len(plan) > 1) and running <= 1:
        # While no other search runs in this process: each kind's HNSW queries on a pooled connection of its own,
        # while this one does BM25 (hybrid), or the first kind's (vector); at 1M facts + 1M episodes each kind's
        # statements take ~8-9 ms, so the halves and the kinds run side by side. With others running the cores
        # have work anyway, and a connection more costs a pool checkout, a thread hop and a round trip for
        # nothing: every statement goes on this connection, the vector ones in BM25's first round trip
        # (bench_api, 8 clients, 2.9k episodes and 1k facts of the agent: CPU per search 7.5 -> 6.7 ms, API and
        # PostgreSQL, with the kinds on one other connection; 5.59 -> 5.12 ms with none).
        aside = plan if mode == "hybrid" else plan[1:]
        here = [kind for kind in here if kind not in aside]
        groups = [[kind] for kind in aside]
        pending = [_executor().submit(_vectors_on_own_connection, source, group, vector_where, qvector, n, ef_search,
                                      sized) for group in groups]
    iterative = _has_iterative_scan(conn, source) if here else False
    # The vector statements on this connection go with BM25's top-n statements when there are any: every settings
    # statement of a kind's own graphs (vector_statements) forces generic plans for the rest of its transaction,
    # as the top-n statements need (bm25.send_ranks), so no statement of its own sets it (one statement a search).
    vectors_later = bool(searched) and all(not kind.narrowed for kind in here)
    read: dict[str, Callable[[], _Ranks]] = {}
    with conn.pipeline():  # (never empty: a search that reaches here has a kind, and each kind a path)
        # every kind's term statistics in one statement
        terms = (conn.execute(terms_sql_of([kind.terms_table for kind in searched]), {"q": query}, prepare=True)
                 if searched else None)
        if qvector is not None and here and not vectors_later:
            read = _send_kinds_vectors(conn, here, vector_where, qvector, n, ef_search, iterative, sized)
    term_rows: list[list[Any]] = [[] for _ in searched]
    for row in terms.fetchall() if terms is not None else ():
        term_rows[row[0]].append(row[1:])
    built = {}
    for kind, rows in zip(searched, term_rows):
        built[kind.name], sizes[kind.name] = bm25_query_from(rows, kind.where, {**kind.params, "n": n}, query,
                                                             kind.terms_table, text_ids=True)
    statements = {name: statement for name, statement in built.items() if statement is not None}
    scored = {}
    vectors_now = qvector is not None and bool(here) and vectors_later
    if statements or vectors_now:  # (an empty pipeline would still wait for the server)
        with conn.pipeline():
            if vectors_now and qvector is not None:
                read = _send_kinds_vectors(conn, here, vector_where, qvector, n, ef_search, iterative, sized)
            scored = dict(zip(statements, send_ranks(conn, list(statements.values()), generic_set=vectors_now)))
    for name, found in read.items():
        ranks[name, "vector"] = found()
    for kind in searched:
        rows = scored[kind.name].fetchall() if kind.name in scored else []
        ranks[kind.name, "bm25"] = {rid: (rank, float(score)) for rank, (rid, score) in enumerate(rows, 1)}
    for job in pending:
        for name, found_aside in job.result().items():
            ranks[name, "vector"] = found_aside
    for kind in plan:
        if (kind.name, "vector") in ranks:
            ranks[kind.name, "vector"] = _agreeing(ranks[kind.name, "vector"],
                                                   ranks.get((kind.name, "bm25"), {}), max_distance)
    return ranks, sizes


def _fuse(conn: Any, plan: Sequence[_Kind], ranks: dict[tuple[str, str], _Ranks],
          fusion: str, sizes: Mapping[str, int]) -> dict[str, float]:
    """Reciprocal rank fusion of the rank lists (see :func:`search`'s ``fusion``): id -> fused score.
    ``sizes``: the kinds' numbers of documents already read (the others are asked for)."""
    fused: dict[str, float] = {}
    scale = _rank_scale(conn, plan, sizes) if fusion == "calibrated" else {}
    for (name, _path), found in (_joint(ranks) if fusion == "joint" else ranks).items():
        for rid, (rank, _) in found.items():
            fused[rid] = fused.get(rid, 0.0) + 1.0 / (RRF_K + rank * scale.get(name, 1.0))
    return fused


def _hit(rid: str, rows: Mapping[str, Any], kind: str, ranks: dict[tuple[str, str], _Ranks],
         fused: Mapping[str, float], related: Sequence[str], episode: str | None) -> SearchHit:
    """One result: its row, its ranks on each path, and the episode folded into it (its ``evidence``)."""
    r = rows[rid]
    v, b = ranks.get((kind, "vector"), {}).get(rid), ranks.get((kind, "bm25"), {}).get(rid)
    return SearchHit(
        id=UUID(rid), content=r["content"], category=r["category"], confidence=float(r["confidence"]),
        method=r["method"], visibility=r["visibility"], agent_id=r["agent_id"], team_id=r["team_id"],
        entities=tuple(r["entities"] or ()),
        fused_score=max(fused[x] for x in (rid, *related)),  # the group's place in the ranking
        vector_rank=v[0] if v else None,
        bm25_rank=b[0] if b else None, vector_distance=v[1] if v else None, bm25_score=b[1] if b else None,
        superseded_at=r["superseded_at"], last_seen_at=r["last_seen_at"], kind=kind,
        first_seen_at=r["first_seen_at"], valid_from=r["valid_from"], valid_to=r["valid_to"],
        source_ts=r["source_ts"], session_id=r["session_id"], speaker=r["speaker"],
        related=tuple(UUID(x) for x in related),
        evidence=rows[episode]["content"] if episode is not None and episode in rows else r.get("evidence"),
    )


def _joint(ranks: dict[tuple[str, str], _Ranks]) -> dict[tuple[str, str], _Ranks]:
    """One rank list per path over every kind: vector neighbours by cosine distance (one embedder, so one
    scale), BM25 by score (the same formula, each kind with its own term statistics)."""
    out: dict[tuple[str, str], _Ranks] = {}
    for path in ("vector", "bm25"):
        scored = [(rid, score) for (_kind, p), found in ranks.items() if p == path
                  for rid, (_rank, score) in found.items()]
        scored.sort(key=lambda x: (x[1] if path == "vector" else -x[1], x[0]))  # (ties by id, as search())
        if scored:
            out["all", path] = {rid: (rank, score) for rank, (rid, score) in enumerate(scored, 1)}
    return out


def _rank_scale(conn: Any, plan: Sequence[_Kind], known: Mapping[str, int]) -> dict[str, float]:
    """How far down a list of every kind each kind's rank r would be: r * (all documents / this kind's).

    Rank 1 of 80 facts is not as good a match as rank 1 of 400 episodes; without this, RRF would give a
    small kind half of the top k whatever its matches are worth."""
    if len(plan) < 2:
        return {}
    sizes = dict(known)
    if not all(k.name in sizes for k in plan):  # vector mode: no statistics read yet
        facts, episodes = conn.execute(
            "SELECT coalesce((SELECT n_docs FROM bm25_corpus WHERE id = 1), 0), "
            "coalesce((SELECT n_docs FROM episode_bm25_corpus WHERE id = 1), 0)").fetchone()
        sizes = {"fact": int(facts), "episode": int(episodes)}
    if not all(sizes[k.name] for k in plan):  # one kind is empty: nothing to weigh against
        return {}
    total = sum(sizes[k.name] for k in plan)
    return {k.name: total / sizes[k.name] for k in plan}


def _ids(name: str) -> str:
    """SQL: the ``uuid[]`` parameter ``name`` for ``= ANY(...)``, handed over through an InitPlan.

    The hits' rows are looked up by id (the unique index, whatever the ids). Given the array itself, the planner
    costs each run's own plan by its array: a few ids always look cheaper than the generic plan's guess, so
    PostgreSQL planned the prepared statement anew on every search, never settling on its generic plan
    (bench_api, 8 clients: the three lookups planned 3,096 times in 2,458 searches, an eighth of search's time
    in PostgreSQL; 116 times in 1,179 searches with this). Through an InitPlan the array is unknown to both plans
    alike, and after five runs the generic plan is kept: the same plan (the unique index), not planned again.

    Sent in binary (``%b``): the ids are their text (:data:`_Ranks`), a binary ``text[]`` that psycopg writes in C
    and PostgreSQL casts. (As UUIDs in text format, psycopg ran a regex over each id and PostgreSQL parsed it: with
    70 ids a lookup cost 140 us of Python and 60 us of PostgreSQL CPU; 50 and 20-27 us as binary UUIDs, each
    dumped by Python code.)"""
    return f"CAST((SELECT %({name})b::uuid[]) AS uuid[])"


def _links(conn: Any, order: Sequence[str], kind_of: dict[str, str]) -> dict[str, set[str]]:
    """Which candidate facts came from which candidate episodes (both ways), through ``fact_sources``."""
    facts = [i for i in order if kind_of[i] == "fact"]
    episodes = [i for i in order if kind_of[i] == "episode"]
    if not facts or not episodes:
        return {}
    links: dict[str, set[str]] = {}
    for fid, eid in conn.execute(
            "SELECT s.fact_id::text, t.id::text FROM fact_sources s JOIN turns t ON t.key = s.source_key "
            f"WHERE s.fact_id = ANY({_ids('f')}) AND t.id = ANY({_ids('e')})",
            {"f": facts, "e": episodes}).fetchall():
        links.setdefault(fid, set()).add(eid)
        links.setdefault(eid, set()).add(fid)
    return links


def _collapse(order: Sequence[_Id], links: Mapping[_Id, set[_Id]], kind_of: Mapping[_Id, str], k: int
              ) -> tuple[list[_Id], dict[_Id, list[_Id]]]:
    """The first ``k`` hits of ``order``, where an episode is its facts' evidence rather than a hit of its own:
    an episode ranked below one of its facts is folded into that fact (``related``); an episode ranked above
    its facts keeps its place but the first of them takes the slot, the episode folded into it. Two facts of
    one turn are different information and keep a slot each."""
    slots: list[_Id] = []
    related: dict[_Id, list[_Id]] = {}
    slot_of: dict[_Id, int] = {}  # a placed id (or folded episode) -> its slot
    for rid in order:
        if kind_of[rid] == "episode":
            # folded into the best-ranked of its facts placed so far (links are sets: their order says nothing)
            holder = min((slot_of[f] for f in links.get(rid, ()) if f in slot_of), default=None)
            if holder is not None:
                related.setdefault(slots[holder], []).append(rid)
                slot_of[rid] = holder
                continue
        else:
            # the fact's own episode holds a slot no fact has claimed yet: the fact takes it over (of two such
            # episodes, the better-ranked one's)
            free = min((slot_of[e] for e in links.get(rid, ()) if e in slot_of
                        and kind_of[slots[slot_of[e]]] == "episode"), default=None)
            if free is not None:
                episode = slots[free]
                slots[free] = rid
                related[rid] = [episode, *related.pop(episode, [])]
                slot_of[rid] = free
                continue
        if len(slots) < k:
            slot_of[rid] = len(slots)
            slots.append(rid)
    return slots, related


def _rows(conn: Any, fact_ids: Sequence[str], episode_ids: Sequence[str], agent_id: str | None = None,
          team_id: str | None = None) -> dict[str, dict[str, Any]]:
    """The stored columns of the hits, facts with the time, session and speaker of their first source that the
    caller may read: a team fact first said in another agent's private conversation does not tell who spoke
    there or in which session (:func:`~factforge.storage.facts.sources` hides them the same way).

    Facts and episodes in one statement (the episodes' columns as a fact's): one to bind, run and read instead of
    two (a kind without hits looks up an empty list of ids, which reads nothing)."""
    cur = conn.execute(_rows_sql(agent_id, team_id),
                       {"ids": list(fact_ids), "episode_ids": list(episode_ids), "v_agent": agent_id,
                        "v_team": team_id})
    # the names of the statement's columns, known here: psycopg makes cur.description anew from the result's
    # column types on each call, 18 objects (50 us a search)
    return {r[0]: dict(zip(ROW_COLUMNS, r)) for r in cur.fetchall()}


# The columns of _rows' statement, in order (tests/test_search.py checks them against the statement's description).
ROW_COLUMNS = ("id", "content", "category", "confidence", "method", "visibility", "agent_id", "team_id", "entities",
               "superseded_at", "last_seen_at", "first_seen_at", "valid_from", "valid_to", "source_ts", "session_id",
               "speaker", "evidence")


@lru_cache(maxsize=256)
def _rows_sql(agent_id: str | None, team_id: str | None) -> str:
    return f"{_fact_rows(agent_id, team_id)} UNION ALL {_EPISODE_ROWS}"


def _fact_rows(agent_id: str | None, team_id: str | None) -> str:
    return f"""
        (SELECT f.id::text AS id, f.content, f.category, f.confidence, f.extraction_method AS method, f.visibility,
               f.agent_id, f.team_id, f.entities, f.superseded_at, f.last_seen_at, f.first_seen_at,
               f.valid_from, f.valid_to, src.message_ts AS source_ts,
               coalesce(src.session_id, src.activity_session,
                        {own_session(agent_id, team_id, "source_session")},
                        {own_session(agent_id, team_id, "source_activity_session")}) AS session_id,
               src.user_name AS speaker, f.explanation->'span'->>'text' AS evidence
        FROM facts f LEFT JOIN LATERAL (
            SELECT s.message_ts, s.session_id, s.activity_session, t.user_name FROM fact_sources s
            LEFT JOIN turns t ON t.key = s.source_key WHERE s.fact_id = f.id AND {source_readable(agent_id, team_id)}
            ORDER BY s.seen_at, s.id LIMIT 1
        ) src ON true
        WHERE f.id = ANY({_ids("ids")}))"""


_EPISODE_ROWS = f"""
        (SELECT id::text AS id, user_message AS content, 'episode' AS category, 1.0::real AS confidence, 'episode' AS method,
               visibility, agent_id, team_id, entities, NULL::timestamptz AS superseded_at,
               coalesce(message_ts, created_at) AS last_seen_at, coalesce(message_ts, created_at) AS first_seen_at,
               valid_from, valid_to, message_ts AS source_ts, coalesce(session_id, activity_session) AS session_id,
               user_name AS speaker, NULL::text AS evidence
        FROM turns WHERE id = ANY({_ids("episode_ids")}) AND visibility IS NOT NULL)"""
