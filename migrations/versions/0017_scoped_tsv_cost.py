"""The planner learns what ``factforge_scoped_tsv`` costs.

Revision ID: 0017
Revises: 0016

``factforge_scoped_tsv`` (migration 0006) rebuilds a document's tsvector with every lexeme keyed by its scope:
an md5 of the scope per row, a string per lexeme, a new tsvector. It was declared with the default cost of an
SQL function (100 operators), so on a small table the planner found a scan of every row cheaper than the GIN
index on that expression, and the scan evaluated the function on each row, once per query lexeme: on a memory
of 500 episodes a three-word search spent 9-13 ms per step in it (~18 us a row) where the index answers in
0.2 ms, and the bench's recurring searches ran at p50 20-60 ms instead of 1-5 ms. Priced at 1,000 operators
(about what ten lexemes' md5s and strings cost against one comparison), every table size takes the index. The
function's body and the indexes built on it are unchanged: only the planner's estimate moves.
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

SIGNATURE = "factforge_scoped_tsv(tsvector, text, text, text)"
COST = 1000


def upgrade() -> None:
    op.execute(f"ALTER FUNCTION {SIGNATURE} COST {COST}")


def downgrade() -> None:
    op.execute(f"ALTER FUNCTION {SIGNATURE} COST 100")
