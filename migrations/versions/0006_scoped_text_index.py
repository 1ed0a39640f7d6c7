"""BM25 candidates by a text index that knows each fact's scope.

Revision ID: 0006
Revises: 0005

The text index of ``fact_terms`` returned every fact with the query's words, and the scope filter then threw
away the ~90% that belong to other agents and teams -- after reading their rows, each on its own page (at 1M
facts, 4,800 rows read for 1,000 kept). The new index holds each fact's lexemes twice: as they are (for the
analyst's all-scopes view) and prefixed with the fact's *scope key* and a space (``factforge_scoped_tsv``):
``g`` for global, ``t`` + md5(team) for team, ``p`` + md5(agent) for private facts. A search asks for each
term in the caller's scope keys, so the index intersects the posting lists of facts the caller may see; the
exact scope condition still runs on the rows found. No parsed lexeme contains a space; the md5 lets an id of
any length fit, and a lexeme over 1,000 bytes is keyed by its md5 for the same reason. The plain index on
``tsv`` goes: a search step that wants no index scans with ``ts_match_vq`` (``factforge.storage.search.bm25_sql``).

The text indexes search uses keep GIN's *pending list* small (``gin_pending_list_limit`` 256kB instead of
4MB): new facts' entries wait in an unsorted list that every search reads through until it is merged, which
cost 3-4 ms per index probe at only 3,000 freshly loaded facts. Without the list at all (``fastupdate =
off``) a bulk load of 1M facts ran at 6,400 facts/s instead of 11,700; a small list keeps most of the
batching and bounds what a search reads.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Built-in functions only: CREATE INDEX evaluates the expression with a search_path of pg_catalog.
    op.execute(
        """
        CREATE FUNCTION factforge_scoped_tsv(tsv tsvector, visibility text, team_id text, agent_id text)
        RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
            SELECT tsv || array_to_tsvector(ARRAY(
                SELECT k.key || ' ' || CASE WHEN octet_length(l) > 1000 THEN md5(l) ELSE l END
                FROM unnest(tsvector_to_array(tsv)) l,
                     (SELECT CASE visibility WHEN 'global' THEN 'g'
                                             WHEN 'team' THEN 't' || md5(coalesce(team_id, ''))
                                             WHEN 'private' THEN 'p' || md5(coalesce(agent_id, ''))
                                             ELSE 'n' END AS key) k))
        $$
        """
    )
    op.execute("CREATE INDEX fact_terms_scoped_gin ON fact_terms USING gin "
               "(factforge_scoped_tsv(tsv, visibility, team_id, agent_id)) WITH (gin_pending_list_limit = 256)")
    op.execute("DROP INDEX fact_terms_tsv_gin")
    op.execute("ALTER INDEX facts_tsv_gin SET (gin_pending_list_limit = 256)")
    op.execute("SELECT gin_clean_pending_list('facts_tsv_gin'::regclass)")
    op.execute("ANALYZE fact_terms")


def downgrade() -> None:
    op.execute("ALTER INDEX facts_tsv_gin RESET (gin_pending_list_limit)")
    op.execute("CREATE INDEX fact_terms_tsv_gin ON fact_terms USING gin (tsv)")
    op.execute("DROP INDEX fact_terms_scoped_gin")
    op.execute("DROP FUNCTION factforge_scoped_tsv(tsvector, text, text, text)")
