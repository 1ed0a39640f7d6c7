"""An agent's private episodes carry their vectors in ``turns_private_agent_idx``, as its facts do (0013).

Revision ID: 0014
Revises: 0013

Search reads the caller's private episodes exactly (``factforge.storage.search.vector_sql``): every row of
the agent, its distance, sorted. Migration 0012's index found the rows by agent, and each was then read from
the table - one table page per episode, in no order. The index now holds each row's vector and the columns
of the scope filter too, and states the episodes' condition (``tsv IS NOT NULL``: a turn with words), so
that read is an index-only scan.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

# A btree entry holds at most 2,704 bytes: up to this many numbers the vectors fit beside the agent.
_COVERED_MAX_DIM = 512


def _dim() -> int:
    return int(op.get_bind().exec_driver_sql("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").scalar())


def upgrade() -> None:
    if _dim() <= _COVERED_MAX_DIM:
        op.execute("DROP INDEX IF EXISTS turns_private_agent_idx")
        op.execute("CREATE INDEX turns_private_agent_idx ON turns (agent_id) INCLUDE (id, visibility, team_id, "
                   "embedding) WHERE visibility = 'private' AND tsv IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS turns_private_agent_idx")
    op.execute("CREATE INDEX turns_private_agent_idx ON turns (agent_id) WHERE visibility = 'private'")
