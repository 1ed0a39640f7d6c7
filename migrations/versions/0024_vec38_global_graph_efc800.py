"""The global rows' graphs are built with a candidate list of 800 (``ef_construction``; 400 since 0023).

Revision ID: 0024
Revises: 0023

Every search walks the global graph of facts and of episodes. At 1M facts + 1M episodes (bench/bench_search.py
data: sentences repeated in many scopes, near-duplicate vectors; 250 questions of two seeds) the graph of 0023
needed ``hnsw.ef_search`` 300 for recall@10 under a scope of 0.947 by id (facts; 1,485 buffers a walk); built
with 800 it gives 0.954 / 0.959 at 160 (1,050 buffers) and 0.972 / 0.974 at 300, so searches keep one
candidate per 250 global rows (``factforge.storage.search.GLOBAL_EF_SEARCH_ROWS``: 308 at 77k) for better recall,
and walk the agents' and teams' graphs with shorter lists than before. Episodes: 0.960 at 200
(1,773 buffers) before, 0.962 at 120 (1,260). A build takes about twice as long (77k global facts: ~290 s at load
~8, 2 cores), and this upgrade, like 0015's, wants a large ``maintenance_work_mem`` on a large database.
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

_TABLES = ("facts", "turns")


def _dim() -> int:
    return int(op.get_bind().exec_driver_sql("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").scalar())


def _global_graphs(ef_construction: int) -> None:
    dim = _dim()
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_global_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_global_hnsw ON {table} USING hnsw "
                   f"((embedding::halfvec({dim})) halfvec_cosine_ops) "
                   f"WITH (m = 16, ef_construction = {ef_construction}) "
                   "WHERE visibility = 'global'")


def upgrade() -> None:
    _global_graphs(800)


def downgrade() -> None:
    _global_graphs(400)
