"""Graphs a caller's scope can walk unfiltered: the global rows' graph, and a graph per team with many team rows.

Revision ID: 0023
Revises: 0022

Migration 0013's shared graph held every team's team rows and the global rows. A caller sees the global rows
and its own team's: at 1M facts (10 teams) about a quarter of that graph, so its walk was a filtered one that
needed ``hnsw.ef_search`` 1000 for recall@10 0.92-0.97 under a scope, at ~6 ms per table. Now the shared graph
is replaced by one over the global rows alone, and a team's team rows are read like an agent's private ones
(``factforge.storage.graphs``): exactly, found by team (``facts_team_idx``; episodes by 0019's
``turns_dl_team_idx``), or by a graph of the team's own once it has many (``DEFAULT_TEAM_GRAPH_MIN_ROWS``).
Every graph a search walks then holds only rows the caller may see. This upgrade builds the graphs of the
teams a database already holds (without them a large team's rows would be read exactly until ``factforge
embed graphs`` runs); like 0015's it wants a large ``maintenance_work_mem`` on a large database.
"""

from __future__ import annotations

from alembic import op

from factforge.settings import DEFAULT_TEAM_GRAPH_MIN_ROWS
from factforge.storage.graphs import drop_graphs, graph_candidates, graph_ddl

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

_TABLES = ("facts", "turns")
# The shared graph of 0015 (downgrade) and the global one, whose build takes a longer candidate list (see
# factforge.storage.search.GLOBAL_GRAPH_EF_CONSTRUCTION).
_GRAPH = "USING hnsw ((embedding::halfvec({dim})) halfvec_cosine_ops) WITH (m = 16, ef_construction = {efc})"


def _dim() -> int:
    return int(op.get_bind().exec_driver_sql("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").scalar())


def upgrade() -> None:
    dim = _dim()
    bind = op.get_bind()
    op.execute("CREATE INDEX facts_team_idx ON facts (team_id) WHERE visibility = 'team'")
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_shared_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_global_hnsw ON {table} {_GRAPH.format(dim=dim, efc=400)} "
                   "WHERE visibility = 'global'")
        raw = bind.connection.driver_connection  # psycopg's, in this transaction: it quotes the team in graph_ddl
        for team, _rows in graph_candidates(raw, table, DEFAULT_TEAM_GRAPH_MIN_ROWS, kind="team"):
            op.execute(graph_ddl(table, "team", team, dim, concurrently=False).as_string(raw))


def downgrade() -> None:
    dim = _dim()
    for table in _TABLES:
        drop_graphs(op.get_bind().exec_driver_sql, table, kinds=("team",))
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_global_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_shared_hnsw ON {table} {_GRAPH.format(dim=dim, efc=128)} "
                   "WHERE visibility <> 'private'")
    op.execute("DROP INDEX IF EXISTS facts_team_idx")
