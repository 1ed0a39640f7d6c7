"""The private vectors' insert triggers fire only for a row inserted with a vector.

Revision ID: 0028
Revises: 0027

Migration 0027's ``*_private_vectors_ins`` fired for every private row inserted and left the vector to its function,
so a row inserted without one (every turn and most facts with ``FACTFORGE_EMBED_IN=worker``; the embed worker's
UPDATE copies them later) paid for an AFTER ROW trigger that did nothing: 2,000 one-row inserts, backend CPU, no
trigger 245 us an insert, 0027's 318, an empty PL/pgSQL function behind the same WHEN 310, 0027's function behind
this WHEN 250. The WHEN names the vector column now, so ``factforge embed reset`` drops and remakes the trigger
around its ALTER of the column's type (``factforge.storage.embeddings.reset_embedding_column``).
"""

from __future__ import annotations

from alembic import op

from factforge.storage.embeddings import private_insert_trigger_ddl

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ("facts", "turns"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_private_vectors_ins ON {table}")
        op.execute(private_insert_trigger_ddl(table))


def downgrade() -> None:
    for table in ("facts", "turns"):
        side = f"{table}_private_vectors"
        op.execute(f"DROP TRIGGER IF EXISTS {side}_ins ON {table}")
        op.execute(f"CREATE TRIGGER {side}_ins AFTER INSERT ON {table} FOR EACH ROW "
                   f"WHEN (NEW.visibility = 'private') EXECUTE FUNCTION {side}_sync()")
