"""Facts' and episodes' vectors stay in their rows (``STORAGE MAIN``), not in the TOAST table.

Revision ID: 0022
Revises: 0021

pgvector's types are ``STORAGE EXTERNAL``: a row over ~2 KB has its largest such value moved to the table's TOAST
table. A fact is ~2.2 KB with its 384 numbers (1.5 KB; content, text vector, explanation, entities besides), so
every fact's vector was stored out of line, and the exact read of an agent's private facts (search's vector half)
fetched each one through the TOAST index: at the API benchmark's ~900 private facts of one agent 2,788 buffers
and 1.5 ms a search, 288 buffers and 0.5 ms with the vectors in their rows (EXPLAIN ANALYZE), and PostgreSQL's
CPU per hybrid search 4.5 -> 2.8-3.3 ms with the same hits. With ``MAIN`` the other columns are compressed or
moved out first and the vector only as a last resort (a vector too large for a row still goes out of line).

A changed storage applies to the rows written from then on: existing rows keep their vectors where they are
until rewritten (``VACUUM FULL facts, turns`` rewrites them, holding an exclusive lock meanwhile). The dimension
change of ``factforge embed reset`` remakes the column and sets ``MAIN`` again
(``factforge.storage.search.vector_storage_ddl``).
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_TABLES = ("facts", "turns")


def upgrade() -> None:
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE MAIN")


def downgrade() -> None:
    for table in _TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTERNAL")  # pgvector's own
