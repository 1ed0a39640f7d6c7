"""BM25 term statistics kept by triggers, cross-agent views, a read-only role with row-level security.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

READER = "factforge_reader"


def upgrade() -> None:
    # -- BM25 statistics: document frequency per lexeme and corpus size, over every stored fact. Statement-level
    # triggers with transition tables: one update per statement, so COPY and batch inserts stay fast.
    op.execute("CREATE TABLE bm25_terms (lexeme text PRIMARY KEY, df bigint NOT NULL CHECK (df >= 0))")
    op.execute(
        "CREATE TABLE bm25_corpus (id smallint PRIMARY KEY CHECK (id = 1), n_docs bigint NOT NULL, "
        "total_len bigint NOT NULL)"
    )
    op.execute(
        "INSERT INTO bm25_corpus SELECT 1, count(*), coalesce(sum(length(tsv)), 0) FROM facts"
    )
    op.execute(
        "INSERT INTO bm25_terms SELECT u.lexeme, count(*) FROM facts f, unnest(f.tsv) u GROUP BY u.lexeme"
    )
    op.execute(
        """
        CREATE FUNCTION factforge_bm25_ins() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO bm25_terms AS t (lexeme, df)
                SELECT u.lexeme, count(*) FROM new_rows n, unnest(n.tsv) u GROUP BY u.lexeme
                ORDER BY u.lexeme
            ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df;
            UPDATE bm25_corpus SET n_docs = n_docs + s.n, total_len = total_len + s.len
                FROM (SELECT count(*) AS n, coalesce(sum(length(tsv)), 0) AS len FROM new_rows) s
                WHERE id = 1 AND s.n > 0;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION factforge_bm25_del() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE bm25_terms AS t SET df = greatest(0, t.df - d.n)
                FROM (SELECT u.lexeme, count(*) AS n FROM old_rows o, unnest(o.tsv) u GROUP BY u.lexeme) d
                WHERE t.lexeme = d.lexeme;
            UPDATE bm25_corpus SET n_docs = greatest(0, n_docs - s.n), total_len = greatest(0, total_len - s.len)
                FROM (SELECT count(*) AS n, coalesce(sum(length(tsv)), 0) AS len FROM old_rows) s
                WHERE id = 1 AND s.n > 0;
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER facts_bm25_ins AFTER INSERT ON facts REFERENCING NEW TABLE AS new_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION factforge_bm25_ins()"
    )
    op.execute(
        "CREATE TRIGGER facts_bm25_del AFTER DELETE ON facts REFERENCING OLD TABLE AS old_rows "
        "FOR EACH STATEMENT EXECUTE FUNCTION factforge_bm25_del()"
    )
    # TRUNCATE empties the statistics too (tests and `db reset` use it).
    op.execute(
        """
        CREATE FUNCTION factforge_bm25_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM bm25_terms;
            UPDATE bm25_corpus SET n_docs = 0, total_len = 0;
            RETURN NULL;
        END $$
        """
    )
    op.execute("CREATE TRIGGER facts_bm25_truncate AFTER TRUNCATE ON facts "
               "FOR EACH STATEMENT EXECUTE FUNCTION factforge_bm25_truncate()")

    # -- views for cross-agent questions (security_invoker: row-level security of the caller applies).
    op.execute(
        """
        CREATE VIEW team_patterns WITH (security_invoker = true) AS
        SELECT f.team_id, f.category, f.content,
               count(DISTINCT s.agent_id) AS agents,
               array_agg(DISTINCT s.agent_id) FILTER (WHERE s.agent_id IS NOT NULL) AS agent_ids,
               max(f.mention_count) AS mentions,
               min(f.first_seen_at) AS first_seen_at, max(f.last_seen_at) AS last_seen_at
        FROM facts f LEFT JOIN fact_sources s ON s.fact_id = f.id
        WHERE f.visibility IN ('team', 'global') AND f.superseded_at IS NULL
          AND f.category IN ('decision', 'policy', 'technology')
        GROUP BY f.team_id, f.category, f.content
        """
    )
    op.execute(
        """
        CREATE VIEW entity_facts WITH (security_invoker = true) AS
        SELECT e.name AS entity, e.type AS entity_type, f.id AS fact_id, f.content, f.category,
               f.visibility, f.agent_id, f.team_id, f.mention_count, f.last_seen_at
        FROM facts f CROSS JOIN LATERAL unnest(f.entities) AS x(name)
        JOIN entities e ON e.normalized_name = lower(x.name)
        WHERE f.superseded_at IS NULL
        """
    )
    op.execute(
        """
        CREATE VIEW recent_changes WITH (security_invoker = true) AS
        SELECT old.id AS old_id, old.content AS old_content, new.id AS new_id, new.content AS new_content,
               old.category, old.visibility, old.agent_id, old.team_id, old.superseded_at AS changed_at
        FROM facts old JOIN facts new ON new.id = old.superseded_by
        WHERE old.superseded_at IS NOT NULL
        """
    )
    op.execute(
        """
        CREATE VIEW current_facts WITH (security_invoker = true) AS
        SELECT id, content, category, confidence, extraction_method, rule_id, entities, subject, relation, slots,
               visibility, agent_id, team_id, source_session, source_activity_session, mention_count,
               first_seen_at, last_seen_at, valid_from, valid_to, explanation
        FROM facts WHERE superseded_at IS NULL
        """
    )

    # -- read-only role for SQL users; sessions say who they are with
    #    SET factforge.agent_id = '...'; SET factforge.team_id = '...';
    op.execute(
        f"""
        DO $$ BEGIN
            IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') THEN
                CREATE ROLE {READER} NOLOGIN;
            END IF;
        EXCEPTION WHEN insufficient_privilege THEN
            -- a managed server whose migration user may not create roles: the schema still works; row-level
            -- security is enabled with no reader policy, so other roles see nothing until the role exists
            RAISE NOTICE 'role {READER} not created (no CREATEROLE privilege): create it and run '
                         '"factforge db downgrade 0001 && factforge db upgrade" to grant it read access';
        END $$
        """
    )
    op.execute("ALTER TABLE facts ENABLE ROW LEVEL SECURITY")
    _for_reader(
        f"""
        CREATE POLICY facts_visible_to_reader ON facts FOR SELECT TO {READER} USING (
            visibility = 'global'
            OR (visibility = 'team' AND team_id = nullif(current_setting('factforge.team_id', true), ''))
            OR (visibility = 'private' AND agent_id = nullif(current_setting('factforge.agent_id', true), ''))
        )
        """
    )
    op.execute("ALTER TABLE fact_sources ENABLE ROW LEVEL SECURITY")
    _for_reader(
        f"""
        CREATE POLICY fact_sources_visible_to_reader ON fact_sources FOR SELECT TO {READER}
            USING (EXISTS (SELECT 1 FROM facts f WHERE f.id = fact_id))
        """
    )
    # Entities, their links and relationships are visible only through a fact the reader may see.
    op.execute("ALTER TABLE fact_entities ENABLE ROW LEVEL SECURITY")
    _for_reader(f"CREATE POLICY fact_entities_visible_to_reader ON fact_entities FOR SELECT TO {READER} "
               "USING (EXISTS (SELECT 1 FROM facts f WHERE f.id = fact_id))")
    op.execute("ALTER TABLE entities ENABLE ROW LEVEL SECURITY")
    _for_reader(f"CREATE POLICY entities_visible_to_reader ON entities FOR SELECT TO {READER} "
               "USING (EXISTS (SELECT 1 FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
               "WHERE fe.entity_id = entities.id))")
    op.execute("ALTER TABLE relationships ENABLE ROW LEVEL SECURITY")
    _for_reader(f"CREATE POLICY relationships_visible_to_reader ON relationships FOR SELECT TO {READER} "
               "USING (EXISTS (SELECT 1 FROM facts f WHERE f.id = fact_id))")
    _for_reader(f"GRANT USAGE ON SCHEMA public TO {READER}")
    _for_reader(
        f"GRANT SELECT ON facts, fact_sources, entities, fact_entities, relationships, fact_categories, "
        f"team_patterns, entity_facts, recent_changes, current_facts TO {READER}"
    )


def _for_reader(sql: str) -> None:
    """Run ``sql`` (which names the reader role) only if the role exists."""
    op.execute(f"DO $ff$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') THEN "
               f"EXECUTE $q${sql}$q$; END IF; END $ff$")


def downgrade() -> None:
    _for_reader(f"REVOKE ALL ON facts, fact_sources, entities, fact_entities, relationships, fact_categories "
               f"FROM {READER}")
    op.execute("DROP VIEW IF EXISTS current_facts, recent_changes, entity_facts, team_patterns")
    _for_reader(f"REVOKE USAGE ON SCHEMA public FROM {READER}")
    for table in ("relationships", "entities", "fact_entities"):
        op.execute(f"DROP POLICY IF EXISTS {table}_visible_to_reader ON {table}")
        op.execute(f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY")
    op.execute("DROP POLICY IF EXISTS fact_sources_visible_to_reader ON fact_sources")
    op.execute("ALTER TABLE fact_sources DISABLE ROW LEVEL SECURITY")
    op.execute("DROP POLICY IF EXISTS facts_visible_to_reader ON facts")
    op.execute("ALTER TABLE facts DISABLE ROW LEVEL SECURITY")
    op.execute("DROP TRIGGER IF EXISTS facts_bm25_truncate ON facts")
    op.execute("DROP TRIGGER IF EXISTS facts_bm25_del ON facts")
    op.execute("DROP TRIGGER IF EXISTS facts_bm25_ins ON facts")
    op.execute("DROP FUNCTION IF EXISTS factforge_bm25_truncate(), factforge_bm25_del(), factforge_bm25_ins()")
    op.execute("DROP TABLE IF EXISTS bm25_corpus, bm25_terms")
    # The role is cluster-wide and may be granted elsewhere: drop it only if nothing else depends on it.
    op.execute(
        f"""
        DO $$ BEGIN
            DROP ROLE IF EXISTS {READER};
        EXCEPTION WHEN dependent_objects_still_exist THEN
            RAISE NOTICE 'role {READER} kept: other objects depend on it';
        WHEN insufficient_privilege THEN
            RAISE NOTICE 'role {READER} kept: no CREATEROLE privilege to drop it';
        END $$
        """
    )
