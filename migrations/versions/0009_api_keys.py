"""API keys of ``factforge serve``: stored hashed, each bound to an agent and team, or an analyst's.

Revision ID: 0009
Revises: 0008

A key is 256 random bits, so a single SHA-256 is enough to store it (nothing to guess from the hash, unlike a
password); the plain key is shown once, when it is created. ``role``: ``agent`` reads and writes as its agent
and team, ``readonly`` only reads that view, ``analyst`` reads every scope and writes nothing. A revoked key
stays (``revoked_at``) so `factforge keys list` can tell what it was.
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE api_keys (
            id bigserial PRIMARY KEY,
            key_hash text NOT NULL UNIQUE,
            prefix text NOT NULL,
            role text NOT NULL CHECK (role IN ('agent', 'readonly', 'analyst')),
            agent_id text,
            team_id text,
            name text,
            created_at timestamptz NOT NULL DEFAULT now(),
            last_used_at timestamptz,
            revoked_at timestamptz,
            CHECK (role = 'analyst' OR agent_id IS NOT NULL)
        )
        """
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS api_keys")
