"""Sessions belong to their agent: the turn a bare "yes" confirms is looked up per agent and team.

Revision ID: 0008
Revises: 0006

Session ids are chosen by callers, so two agents can use the same one; a "yes" must confirm the asking
agent's own last reply, never another agent's (issue 18: agent C answering "yes" in agent A's session got
A's assistant sentence stored as C's facts). The lookup reads turns by (session, agent) newest first; this
index serves it and, by its leading column, everything the old index on ``turns (session_id)`` served.
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("CREATE INDEX turns_session_agent_idx ON turns (session_id, agent_id, created_at DESC)")
    op.execute("DROP INDEX IF EXISTS turns_session_idx")


def downgrade() -> None:
    op.execute("CREATE INDEX IF NOT EXISTS turns_session_idx ON turns (session_id)")
    op.execute("DROP INDEX IF EXISTS turns_session_agent_idx")
