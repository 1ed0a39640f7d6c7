"""A narrow copy of each fact's search terms and scope for BM25 candidates.

Revision ID: 0005
Revises: 0004

BM25 candidate search reads the rows the text index finds. In ``facts`` those rows are wide (an embedding of
1.5 KB, provenance, explanations): at 1M facts the table is 2.2 GB and a query reads thousands of scattered
pages. ``fact_terms`` holds only the tsvector and the scope columns (about 120 bytes a row, 116 MB at 1M
facts, which stays cached), kept in step with ``facts`` by statement-level triggers; deleting a fact deletes
its row by cascade.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_COLUMNS = "id, tsv, visibility, agent_id, team_id, superseded_at"


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE fact_terms (
            id             uuid PRIMARY KEY REFERENCES facts(id) ON DELETE CASCADE,
            tsv            tsvector NOT NULL,
            visibility     text NOT NULL,
            agent_id       text,
            team_id        text,
            superseded_at  timestamptz
        )
        """
    )
    op.execute(f"INSERT INTO fact_terms ({_COLUMNS}) SELECT {_COLUMNS} FROM facts")
    op.execute("CREATE INDEX fact_terms_tsv_gin ON fact_terms USING gin (tsv)")
    op.execute(
        f"""
        CREATE FUNCTION factforge_terms_ins() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO fact_terms ({_COLUMNS}) SELECT {_COLUMNS} FROM new_rows;
            RETURN NULL;
        END $$
        """
    )
    # Any UPDATE of facts fires this (a column list is not allowed with transition tables); rows whose
    # search columns did not change (a mention count going up) are skipped by the WHERE.
    op.execute(
        """
        CREATE FUNCTION factforge_terms_upd() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE fact_terms t SET tsv = n.tsv, visibility = n.visibility, agent_id = n.agent_id,
                                    team_id = n.team_id, superseded_at = n.superseded_at
            FROM new_rows n
            WHERE t.id = n.id AND (t.tsv, t.visibility, t.agent_id, t.team_id, t.superseded_at)
                  IS DISTINCT FROM (n.tsv, n.visibility, n.agent_id, n.team_id, n.superseded_at);
            RETURN NULL;
        END $$
        """
    )
    op.execute("CREATE TRIGGER facts_terms_ins AFTER INSERT ON facts REFERENCING NEW TABLE AS new_rows "
               "FOR EACH STATEMENT EXECUTE FUNCTION factforge_terms_ins()")
    op.execute("CREATE TRIGGER facts_terms_upd AFTER UPDATE ON facts REFERENCING NEW TABLE AS new_rows "
               "FOR EACH STATEMENT EXECUTE FUNCTION factforge_terms_upd()")
    op.execute("ANALYZE fact_terms")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS facts_terms_upd ON facts")
    op.execute("DROP TRIGGER IF EXISTS facts_terms_ins ON facts")
    op.execute("DROP FUNCTION IF EXISTS factforge_terms_upd(), factforge_terms_ins()")
    op.execute("DROP TABLE IF EXISTS fact_terms")
