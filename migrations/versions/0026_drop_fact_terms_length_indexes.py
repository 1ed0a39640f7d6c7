"""BM25's facts no longer walk document lengths: the three length indexes of ``fact_terms`` go.

Revision ID: 0026
Revises: 0025

Migration 0019 gave each visibility of ``fact_terms`` and ``turns`` a btree on ``length(tsv)`` (led by the team or
the agent) so that a common lexeme's BM25 step could walk the caller's shortest documents first. Since migration
0025 that step walks the lexeme's impact classes in the scoped text index instead (``factforge.storage.bm25``), and
no statement reads ``fact_terms`` by length any more: the indexes only cost every insert a btree entry.
``bench_load.py --facts 50000 --variants all,-dl_btrees --repeat 2`` (stop 39, alternating): 0.345 / 0.342 s of
server CPU per 1,000 facts with them, 0.337 / 0.308 without.

``turns`` keeps its three: the team's one, led by ``team_id``, is also how an exact read of a team's episodes
finds them (a team without a graph of its own; ``factforge.storage.search.graph_sql``).
"""

from __future__ import annotations

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

# (index suffix, leading key columns, the visibility's predicate), as migration 0019 made them.
_BRANCHES = (("global", "", "visibility = 'global'"),
             ("team", "team_id, ", "visibility = 'team'"),
             ("private", "agent_id, ", "visibility = 'private'"))


def upgrade() -> None:
    for name, _, _ in _BRANCHES:
        op.execute(f"DROP INDEX IF EXISTS fact_terms_dl_{name}_idx")


def downgrade() -> None:
    for name, lead, predicate in _BRANCHES:
        op.execute(f"CREATE INDEX IF NOT EXISTS fact_terms_dl_{name}_idx ON fact_terms ({lead}length(tsv)) "
                   f"WHERE {predicate}")
    op.execute("ANALYZE fact_terms")
