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

An agent's own private facts are read exactly, by ``facts_private_agent_idx``: it now holds each row's vector
and the columns of the scope and history filters too (while a vector fits a btree entry), so that read is an
index-only scan: ~1,100 rows of one agent at 100k facts on ~200 index pages instead of ~1,100 table pages
(the vector statement 7.5-10.9 -> 3.0-3.6 ms, ef_search 400, interleaved, load average ~7).
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
# A btree entry holds at most 2,704 bytes: up to this many numbers the vectors fit beside the agent.
_COVERED_MAX_DIM = 512


def _dim() -> int:
    return int(op.get_bind().exec_driver_sql("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").scalar())


def upgrade() -> None:
    dim = _dim()
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_shared_hnsw")
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_private_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_shared_hnsw ON {table} USING hnsw "
                   f"((embedding::halfvec({dim})) halfvec_cosine_ops) WHERE visibility <> 'private'")
    if dim <= _COVERED_MAX_DIM:
        op.execute("DROP INDEX IF EXISTS facts_private_agent_idx")
        op.execute("CREATE INDEX facts_private_agent_idx ON facts (agent_id) INCLUDE (id, visibility, team_id, "
                   "superseded_at, embedding) WHERE visibility = 'private'")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS facts_private_agent_idx")
    op.execute("CREATE INDEX facts_private_agent_idx ON facts (agent_id) WHERE visibility = 'private'")
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_shared_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_shared_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                   "WHERE visibility <> 'private'")
        op.execute(f"CREATE INDEX {table}_embedding_private_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                   "WHERE visibility = 'private'")
