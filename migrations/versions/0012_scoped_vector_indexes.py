"""Vector indexes split by visibility: one HNSW graph for shared rows, one for private rows.

Revision ID: 0012
Revises: 0011

A caller sees its own private rows, its team's and the global ones. With one HNSW graph over everything, a
caller's filter passes a few percent of the graph (episodes are 90% private, spread over every agent): the
iterative index scan walks thousands of invisible neighbours per query (episodes at 100k: p50 27 ms, p95 99
ms). Search now asks two questions (``factforge.storage.search``): the caller's private rows, by the btree
on the agent (exact, when the planner finds the set small) or the private graph, and the shared rows (team
and global) by the shared graph, in which the caller's filter passes a large share. Every row is in exactly
one graph, so a load maintains as many HNSW entries as before.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_TABLES = ("facts", "turns")


def upgrade() -> None:
    for table in _TABLES:
        op.execute(f"DROP INDEX IF EXISTS {table}_embedding_hnsw")
        op.execute(f"CREATE INDEX {table}_embedding_shared_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                   "WHERE visibility <> 'private'")
        op.execute(f"CREATE INDEX {table}_embedding_private_hnsw ON {table} USING hnsw (embedding vector_cosine_ops) "
                   "WHERE visibility = 'private'")
        op.execute(f"CREATE INDEX {table}_private_agent_idx ON {table} (agent_id) WHERE visibility = 'private'")


def downgrade() -> None:
    for table in _TABLES:
        for index in ("private_agent_idx", "embedding_private_hnsw", "embedding_shared_hnsw"):
            op.execute(f"DROP INDEX IF EXISTS {table}_{index}")
        op.execute(f"CREATE INDEX {table}_embedding_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)")
