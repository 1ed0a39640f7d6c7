"""Each LLM call row keeps how many of its reply's items validation rejected, by reason.

Until now the counts lived only in the drain report; stored, `factforge stats` can sum them (issue 4).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # {reason: count}; rows written before this revision rejected nothing as far as anyone knows.
    op.execute("ALTER TABLE llm_calls ADD COLUMN rejections jsonb NOT NULL DEFAULT '{}'::jsonb")
    op.execute(
        "ALTER TABLE llm_calls ADD CONSTRAINT llm_calls_rejections_object CHECK (jsonb_typeof(rejections) = 'object')"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE llm_calls DROP COLUMN rejections")
