"""Document lengths an index can walk, per scope, for BM25's common lexemes.

Revision ID: 0019
Revises: 0018

Exact top-k BM25 (``factforge.storage.bm25``) scores, in the step of a common lexeme, the n shortest documents
first: their real scores give the bar (``theta``) that lets the step skip the others. It found those n by
reading *every* visible document of the lexeme for its length: "where is the user based" keeps the lexeme
"user" alone, held by 36k of one caller's facts at 1M, and reading them took 45 of the statement's 62 ms,
though the bar then skipped scoring nearly all of them.

These partial btree indexes order each scope's rows by length (``length(tsv)``: BM25's document length here,
the number of distinct lexemes), one index per visibility, keyed by the column that the visibility rule
compares with the caller: global rows by length alone, team rows by team and length, private rows by agent
and length. The step now walks the caller's global, team and private rows from the lexeme's shortest
document upwards and stops at the n-th that holds the lexeme (or after a bounded number of rows). A row is
in exactly one of the three, so a write adds one btree entry per row; nothing else changes (no column, no
trigger: the expression is the tsvector's own length).
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# (index suffix, leading key columns, the visibility's predicate); each table adds its own condition.
_BRANCHES = (("global", "", "visibility = 'global'"),
             ("team", "team_id, ", "visibility = 'team'"),
             ("private", "agent_id, ", "visibility = 'private'"))
# turns holds every stored turn; only those with a visibility and words are episodes that search reads.
_TABLES = {"fact_terms": "", "turns": " AND tsv IS NOT NULL"}


def upgrade() -> None:
    for table, extra in _TABLES.items():
        for name, lead, predicate in _BRANCHES:
            op.execute(f"CREATE INDEX {table}_dl_{name}_idx ON {table} ({lead}length(tsv)) "
                       f"WHERE {predicate}{extra}")
        op.execute(f"ANALYZE {table}")


def downgrade() -> None:
    for table in _TABLES:
        for name, _, _ in _BRANCHES:
            op.execute(f"DROP INDEX IF EXISTS {table}_dl_{name}_idx")
