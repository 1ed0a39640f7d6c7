"""Vectors of facts and episodes: what waits for one, storing them (the background pass, backfill), switching
the embedding model. The embedders themselves (the models) are :mod:`factforge.models.embed`'s."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

from ..errors import ValidationError
from ..settings import DEFAULT_TEAM_GRAPH_MIN_ROWS, get_settings
from .facts import merge_paraphrases
from .graphs import AGENT_GRAPH_MIN_ROWS, GraphBuild, build_owner_graphs, drop_graphs
from .search import vector_index_ddl, vector_storage_ddl

if TYPE_CHECKING:
    from .store import Store

__all__ = ["facts_without_embedding", "episodes_without_embedding", "set_embeddings", "reset_embedding_column",
           "Embedder", "EmbedReport", "embed_pending", "build_graphs", "backfill_all", "backfill", "reset_embeddings"]


class Embedder(Protocol):
    """What storage needs of an embedder (any of :mod:`factforge.models.embed`'s)."""

    model: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


# Rows waiting for a vector, oldest first, with the text to embed (and whose they are), up to %(n)s.
_WAITING = {
    "facts": "SELECT id, content AS text, agent_id, visibility, team_id FROM facts WHERE embedding IS NULL "
             "ORDER BY created_at, id LIMIT %(n)s",
    "episodes": "SELECT id, user_message AS text, agent_id, visibility, team_id FROM turns "
                "WHERE visibility IS NOT NULL AND embedding IS NULL ORDER BY created_at, id LIMIT %(n)s",
}


def facts_without_embedding(store: Store, n: int) -> list[tuple[UUID, str]]:
    """Up to ``n`` facts waiting for a vector, oldest first, with their content."""
    return [(r["id"], r["text"]) for r in store._all(_WAITING["facts"], {"n": n})]


def episodes_without_embedding(store: Store, n: int) -> list[tuple[UUID, str]]:
    """Up to ``n`` episodes waiting for a vector, oldest first, with the text to embed (speaker and words)."""
    return [(r["id"], r["text"]) for r in store._all(_WAITING["episodes"], {"n": n})]


def set_embeddings(store: Store, pairs: Sequence[tuple[UUID, Sequence[float]]], model: str, *,
                   table: str = "facts") -> None:
    """Store vectors by id in ``facts`` or, for episodes, ``turns``."""
    if table not in ("facts", "turns"):
        raise ValidationError(f"no vectors in table {table!r}")
    if not pairs:
        return
    with store._tx() as conn:
        _store_vectors(conn, pairs, model, table)


def _store_vectors(conn: Any, pairs: Sequence[tuple[UUID, Sequence[float]]], model: str, table: str) -> None:
    from pgvector import Vector

    rows = [{"v": Vector(list(vec)), "m": model, "id": fid} for fid, vec in pairs]
    # one executemany: psycopg pipelines the statements
    conn.exec_driver_sql(f"UPDATE {table} SET embedding = %(v)s, embedding_model = %(m)s WHERE id = %(id)s", rows)


def private_insert_trigger_ddl(table: str) -> str:
    """The trigger that copies a private row inserted with a vector into ``table``'s narrow copy of the private
    vectors (migrations 0027, 0028). Its WHEN names the vector: a row inserted without one (every turn and most facts
    with ``FACTFORGE_EMBED_IN=worker``) fires nothing, where an AFTER ROW trigger that fires costs its event and a
    PL/pgSQL call whatever the function then does (~70 us of backend CPU an insert). Naming the column keeps its type
    from changing: :func:`reset_embedding_column` drops the trigger around its ALTER and makes it again."""
    side = f"{table}_private_vectors"
    return (f"CREATE TRIGGER {side}_ins AFTER INSERT ON {table} FOR EACH ROW "
            f"WHEN (NEW.visibility = 'private' AND NEW.embedding IS NOT NULL) EXECUTE FUNCTION {side}_sync()")


def reset_embedding_column(store: Store, dim: int, model: str) -> int:
    """Make the vector column ``dim``-dimensional and drop vectors of other models; returns how many."""
    with store._tx() as conn:
        meta = dict(conn.exec_driver_sql("SELECT key, value FROM factforge_meta").fetchall())
        n = 0
        for table in ("facts", "turns"):
            if int(meta.get("embed_dim", 0)) != dim:
                # the shared one before migration 0023, the private one before 0013
                for graph in ("global", "shared", "private"):
                    conn.exec_driver_sql(f"DROP INDEX IF EXISTS {table}_embedding_{graph}_hnsw")
                # it may hold the vectors (private_index_ddl); agents' and teams' graphs are of the old dimension
                conn.exec_driver_sql(f"DROP INDEX IF EXISTS {table}_private_agent_idx")
                drop_graphs(conn.exec_driver_sql, table)
                # the insert trigger names the column (private_insert_trigger_ddl), which keeps its type
                conn.exec_driver_sql(f"DROP TRIGGER IF EXISTS {table}_private_vectors_ins ON {table}")
                conn.exec_driver_sql(f"ALTER TABLE {table} ALTER COLUMN embedding TYPE vector({int(dim)}) "
                                     "USING NULL")
                conn.exec_driver_sql(private_insert_trigger_ddl(table))
                # (a rewrite fires no trigger: the narrow copy of the private vectors, migration 0027, goes too)
                conn.exec_driver_sql(f"TRUNCATE {table}_private_vectors")
                conn.exec_driver_sql(vector_storage_ddl(table))  # the new type's storage was pgvector's
                conn.exec_driver_sql(f"UPDATE {table} SET embedding_model = NULL")
                for ddl in vector_index_ddl(table, dim):
                    conn.exec_driver_sql(ddl)
            # Episodes without a vector wait for one anyway; only facts are counted (the return value).
            only_vectors = " AND embedding IS NOT NULL" if table == "turns" else ""
            changed = conn.exec_driver_sql(
                f"UPDATE {table} SET embedding = NULL, embedding_model = NULL "
                f"WHERE embedding_model IS DISTINCT FROM %(m)s{only_vectors}", {"m": model}).rowcount
            n += changed if table == "facts" else 0
        conn.exec_driver_sql("UPDATE factforge_meta SET value = %(v)s WHERE key = 'embed_dim'", {"v": str(dim)})
        conn.exec_driver_sql("UPDATE factforge_meta SET value = %(v)s WHERE key = 'embed_model'", {"v": model})
    # Pooled connections cached the old vector type modifier: start afresh.
    store.engine.dispose()
    return int(n)


@dataclass(frozen=True, slots=True)
class EmbedReport:
    """What one :func:`embed_pending` pass embedded."""

    facts: int = 0
    episodes: int = 0
    merged: int = 0  # facts embedded and then merged into an older paraphrase (facts.merge_paraphrases)
    # (table, agent) of the private rows embedded: whose agent may now need a graph of its own (graphs)
    private_agents: frozenset[tuple[str, str]] = frozenset()
    # (table, team) of the team rows embedded: the same for teams
    team_owners: frozenset[tuple[str, str]] = frozenset()

    @property
    def total(self) -> int:
        return self.facts + self.episodes


# What a pass takes: rows waiting for a vector, oldest first, locked until its transaction ends. Rows another pass
# holds are skipped (SKIP LOCKED): with several processes writing to one database (``factforge serve``'s workers,
# a worker fleet) each kicks its own pass, and without the lock two passes took the same oldest rows and embedded
# them twice (1,787 episode updates for 1,096 episodes in bench_api's remember phase).
_CLAIM = {kind: f"{sql} FOR UPDATE SKIP LOCKED" for kind, sql in _WAITING.items()}

# Facts are claimed otherwise: writers update them after they are stored (a fact said again is a mention, a new fact
# supersedes older ones), and a pass that held their row locks through a model run stalled those writes (and
# deadlocked them with its own updates). A pass takes an advisory lock per fact instead (key: FACT_LOCK and the
# id's hash; another pass skips what one holds, a writer does not see them), for its connection's session, and
# gives each fact its vector (and merges it into an older paraphrase) in a transaction of its own. Without an
# ORDER BY outside the subquery, rows flow into the LIMIT one by one: locks are tried only until it is full.
FACT_LOCK = 0x6666  # the advisory lock namespace of facts being embedded
_CLAIM_FACTS = f"""
    SELECT id, text, agent_id, visibility, team_id FROM ({_WAITING["facts"].replace("%(n)s", "%(scan)s")}) AS waiting
    WHERE pg_try_advisory_lock({FACT_LOCK}, hashtext(id::text)) LIMIT %(n)s"""


def embed_pending(store: Store, embedder: Embedder, *, batch: int = 64, limit: int | None = None) -> EmbedReport:
    """Embed facts and episodes stored without a vector, ``batch`` texts per model call (and, for episodes, per
    transaction; each fact gets its vector and any paraphrase merge in one of its own: ``_embed_facts``).

    This is the background embedder's unit of work (``Memory``'s embedding thread, ``factforge embed
    backfill``, a worker process): ``remember()`` stores an episode's words at once (BM25 finds it at once)
    and leaves its vector to this. ``limit`` caps how many rows one call embeds (None: until none is left).
    Rows another pass is embedding are left to it. An :class:`EmbedderError` propagates; the rows stay without
    a vector for the next pass.
    """
    counts = {"facts": 0, "episodes": 0}
    merged = 0
    agents: set[tuple[str, str]] = set()
    teams: set[tuple[str, str]] = set()
    table = {"facts": "facts", "episodes": "turns"}
    for kind in ("facts", "episodes"):
        while limit is None or counts["facts"] + counts["episodes"] < limit:
            left = batch if limit is None else min(batch, limit - counts["facts"] - counts["episodes"])
            if kind == "facts":
                rows, n = _embed_facts(store, embedder, left)
                merged += n
            else:
                with store._tx() as conn:  # the rows stay locked while the model runs, then get their vectors
                    rows = conn.exec_driver_sql(_CLAIM[kind], {"n": left}).fetchall()
                    if rows:
                        vectors = embedder.embed([text for _, text, *_ in rows])
                        _store_vectors(conn, [(rid, vec) for (rid, *_), vec in zip(rows, vectors)],
                                       embedder.model, table[kind])
            if not rows:
                break
            agents.update((table[kind], agent) for _, _, agent, vis, _ in rows if vis == "private")
            teams.update((table[kind], team) for _, _, _, vis, team in rows if vis == "team" and team is not None)
            counts[kind] += len(rows)
    return EmbedReport(**counts, private_agents=frozenset(agents), team_owners=frozenset(teams), merged=merged)


def _embed_facts(store: Store, embedder: Embedder, n: int) -> tuple[list[Any], int]:
    """Up to ``n`` facts waiting for a vector, claimed (``_CLAIM_FACTS``), embedded and stored one transaction each,
    each merged into an older paraphrase if it has one (:func:`merge_paraphrases`: it was stored without the vector
    that would have told); returns the rows and how many were merged."""
    import psycopg

    from .pooling import autocommit_connection
    from .store import Tx

    try:
        with autocommit_connection(store.engine) as pg:
            # A few more than n are looked at: rows another pass holds are skipped.
            rows = pg.execute(_CLAIM_FACTS, {"n": n, "scan": 4 * n}).fetchall()
            merged = 0
            try:
                if rows:
                    vectors = embedder.embed([text for _, text, *_ in rows])
                    tx = Tx(pg, store.statement_listener)
                    for (rid, *_), vec in zip(rows, vectors):
                        with pg.transaction():
                            _store_vectors(tx, [(rid, vec)], embedder.model, "facts")
                            merged += merge_paraphrases(store, tx, [rid])
            finally:
                if rows and not pg.broken:
                    pg.execute(f"SELECT pg_advisory_unlock({FACT_LOCK}, hashtext(id::text)) FROM unnest(%(ids)s::uuid[]) id",
                               {"ids": [r[0] for r in rows]})
    except psycopg.Error as exc:
        raise store._database_error(exc) from exc
    return rows, merged


def build_graphs(store: Store, *, min_rows: int = AGENT_GRAPH_MIN_ROWS, team_min_rows: int | None = None,
                 agents: Iterable[tuple[str, str]] | None = None,
                 teams: Iterable[tuple[str, str]] | None = None) -> list[GraphBuild]:
    """Give each agent with at least ``min_rows`` private rows with a vector, and each team with at least
    ``team_min_rows`` (default :data:`~factforge.settings.DEFAULT_TEAM_GRAPH_MIN_ROWS`; 0: none) team rows, a
    graph of its own (:mod:`factforge.storage.graphs`): every such owner, or, when ``agents`` or ``teams`` is
    given, of those only (``(table, id)`` pairs, as :attr:`EmbedReport.private_agents` / ``team_owners``).
    Builds take seconds at 1M rows; searches and writes go on."""
    from .pooling import autocommit_connection

    team_min = DEFAULT_TEAM_GRAPH_MIN_ROWS if team_min_rows is None else team_min_rows
    wanted = [("agent", min_rows, agents), ("team", team_min, teams)]
    if agents is not None or teams is not None:  # only the owners named
        wanted = [(kind, m, named if named is not None else ()) for kind, m, named in wanted]
    made: list[GraphBuild] = []
    with autocommit_connection(store.engine) as conn:
        dim = int(conn.execute("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").fetchone()[0])
        for kind, least, named in wanted:
            if least <= 0:
                continue
            if named is None:
                made += build_owner_graphs(conn, dim, min_rows=least, kinds=(kind,))
                continue
            by_table: dict[str, set[str]] = {}
            for tbl, owner in named:
                by_table.setdefault(tbl, set()).add(owner)
            for tbl, owners in sorted(by_table.items()):
                made += build_owner_graphs(conn, dim, min_rows=least, owners=[(kind, o) for o in owners],
                                           tables=[tbl], kinds=(kind,))
    return made


def backfill_all(url: str, embedder: Embedder, *, batch: int = 64) -> EmbedReport:
    """Embed every fact and episode stored without a vector (e.g. written while the embedder was down)."""
    from .store import Store

    store = Store.open(get_settings().with_(database_url=url), check_embedder=False)
    try:
        return embed_pending(store, embedder, batch=batch)
    finally:
        store.close()


def backfill(url: str, embedder: Embedder, *, batch: int = 64) -> int:
    """:func:`backfill_all`; returns how many facts it embedded."""
    return backfill_all(url, embedder, batch=batch).facts


def reset_embeddings(url: str, embedder: Embedder) -> int:
    """Switch the schema to ``embedder``: the vector column takes its dimension (re-created if it differs),
    vectors made by any other model are dropped, and :func:`backfill` then re-embeds those facts."""
    from .store import Store

    store = Store.open(get_settings().with_(database_url=url), check_embedder=False)
    try:
        return store.reset_embedding_column(embedder.dim, embedder.model)
    finally:
        store.close()
