"""One HNSW graph per table, over half-precision copies of the shared rows' vectors; no private graph.

Revision ID: 0013
Revises: 0012

A load into a table with its graphs in place spent nearly all its time inserting into them, one row at a
time (issue 19: 20k facts, no graph 4,025 facts/s, both graphs 321). The private graph served only the
analyst's view: an agent's own private rows are read exactly, by the agent's btree (migration 0012). Without
it a load maintains the shared graph only (~40% of facts, ~10% of episodes); the analyst's private rows are
read exactly too. The shared graph now holds ``embedding::halfvec(dim)``: half the bytes per element, and
pgvector's half-precision distance is 3-5x faster than the full one here; search walks it by that
expression and ranks what it finds by the full-precision distance (``factforge.storage.search``).
Loading into a table with the graphs in place (40k rows into 20k, alternating, load average 5-7): both
float graphs ~600 rows/s, the half-precision shared graph alone ~1,800.
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_TABLES = ("facts", "turns")


def _dim() -> int:
    return int(op.get_bind().exec_driver_sql("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").scalar())


def upgrade() -> None:
    dim = _dim()
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_shared_hnsw")
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_private_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_shared_hnsw ON {table} USING hnsw "
                   f"((embedding::halfvec({dim})) halfvec_cosine_ops) WHERE visibility <> 'private'")


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_shared_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_shared_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                   "WHERE visibility <> 'private'")
        op.execute(f"CREATE INDEX {table}_embedding_private_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                   "WHERE visibility = 'private'")
