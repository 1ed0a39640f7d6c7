"""Each API key says how far the facts it writes may be shared.

Revision ID: 0020
Revises: 0019

Until now any agent key could publish a fact to every team (``visibility="global"``, or a category the server
routes to ``global``). ``api_keys.max_visibility`` is the widest scope a key's writes may reach: a request that asks
for more is refused, and facts and episodes that the server's settings would share further are stored at the
key's widest scope instead. Existing keys keep ``global`` (what they could do before).
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE api_keys ADD COLUMN max_visibility text NOT NULL DEFAULT 'global' "
        "CHECK (max_visibility IN ('private', 'team', 'global'))"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE api_keys DROP COLUMN max_visibility")
