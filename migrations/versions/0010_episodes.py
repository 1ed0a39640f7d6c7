"""Episodes: the gate-passed turns themselves, searchable beside the facts; a message is stored once.

Revision ID: 0010
Revises: 0009

Only a small share of gate-passed chat turns leave a rule fact; the rest wait for an LLM. Until one answers
(or forever, where none runs) what those turns said must still be findable, so every turn that passes the
gatekeeper is an *episode*: its redacted user text becomes searchable by BM25 at once and by vector as soon
as the background embedder has run.

Design: the ``turns`` table grows up instead of a new table beside it. Every turn already has exactly one
row there (keyed by the same ``source_key`` as its facts' ``fact_sources``), holding the redacted message;
a second table would store the same text twice. A turn *is an episode* when it has a ``visibility``:
turns the gate dropped (small talk, questions, injections) keep ``visibility`` NULL, have no ``tsv`` and no
vector, and no search or reader ever sees them. Episodes are the user's own words, so they are private to
the agent unless settings widen that.

* ``id`` (uuid) names an episode in search hits, like a fact's id;
* ``user_name`` / ``assistant_name``: who spoke; ``entities``: the names found in the turn (and the
  speaker's); both are searchable words of the episode;
* ``valid_from``/``valid_to``: the time the turn speaks of ("yesterday" said on 8 May = 7 May), resolved
  against its timestamp like a fact's validity, so "when did ..." can be answered from an episode hit;
* ``tsv``: generated from name, text and entities (NULL unless an episode);
* ``embedding``: filled in batches by the background embedder (``factforge.models.embed.embed_pending``);
* BM25 statistics of episodes live in their own ``episode_bm25_terms``/``episode_bm25_corpus`` (kept by
  statement-level triggers like the facts' ones): episode and fact scores are ranked separately and fused.
* the reader role sees episodes in its scope (row-level security on ``turns``, an ``episodes`` view).

Facts no longer copy the message: ``fact_sources`` and ``facts.source_*_message`` of new rows reference the
turn by ``source_key`` and leave the text NULL (25/100/200 KB messages had grown the database by 4/32/107 MB,
one copy per fact and source). Existing copies that the turn holds too are cleared here.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

READER = "factforge_reader"

_SCOPE_POLICY = """
    visibility = 'global'
    OR (visibility = 'team' AND team_id = nullif(current_setting('factforge.team_id', true), ''))
    OR (visibility = 'private' AND agent_id = nullif(current_setting('factforge.agent_id', true), ''))
"""


def _for_reader(sql: str) -> None:
    """Run ``sql`` (which names the reader role) only if the role exists."""
    op.execute(f"DO $ff$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') THEN "
               f"EXECUTE $q${sql}$q$; END IF; END $ff$")


def upgrade() -> None:
    dim = op.get_bind().exec_driver_sql("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").scalar()
    op.execute(
        f"""
        ALTER TABLE turns
            ADD COLUMN id              uuid NOT NULL DEFAULT gen_random_uuid(),
            ADD COLUMN visibility      text CHECK (visibility IN ('private', 'team', 'global')),
            ADD COLUMN user_name       text,
            ADD COLUMN assistant_name  text,
            ADD COLUMN entities        text[] NOT NULL DEFAULT '{{}}',
            ADD COLUMN valid_from      timestamptz,
            ADD COLUMN valid_to        timestamptz,
            ADD COLUMN embedding       vector({int(dim)}),
            ADD COLUMN embedding_model text,
            ADD CONSTRAINT turns_private_has_agent CHECK (visibility <> 'private' OR agent_id IS NOT NULL),
            ADD CONSTRAINT turns_team_has_team CHECK (visibility <> 'team' OR team_id IS NOT NULL)
        """
    )
    # Existing gate-passed turns become private episodes (a secret-dropped message is no episode).
    op.execute(
        "UPDATE turns SET visibility = 'private' WHERE gate_reason IS NULL AND agent_id IS NOT NULL "
        "AND user_message IS NOT NULL AND user_message <> '[DROPPED: message contained a secret]'"
    )
    op.execute(
        """
        ALTER TABLE turns ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
            CASE WHEN visibility IS NOT NULL THEN
                to_tsvector('english'::regconfig, coalesce(user_name, '') || ' ' || coalesce(user_message, '')
                            || ' ' || factforge_array_text(entities))
            END) STORED
        """
    )
    op.execute("CREATE UNIQUE INDEX turns_id_uq ON turns (id)")
    op.execute("CREATE INDEX turns_agent_idx ON turns (agent_id)")
    op.execute("CREATE INDEX turns_scoped_tsv_gin ON turns USING gin "
               "(factforge_scoped_tsv(tsv, visibility, team_id, agent_id)) WITH (gin_pending_list_limit = 256) "
               "WHERE tsv IS NOT NULL")
    op.execute("CREATE INDEX turns_embedding_hnsw ON turns USING hnsw (embedding vector_cosine_ops)")
    op.execute("CREATE INDEX turns_unembedded_idx ON turns (created_at) "
               "WHERE visibility IS NOT NULL AND embedding IS NULL")

    # -- BM25 statistics of episodes, kept like the facts' (migration 0002).
    op.execute("CREATE TABLE episode_bm25_terms (lexeme text PRIMARY KEY, df bigint NOT NULL CHECK (df >= 0))")
    op.execute("CREATE TABLE episode_bm25_corpus (id smallint PRIMARY KEY CHECK (id = 1), n_docs bigint NOT NULL, "
               "total_len bigint NOT NULL)")
    op.execute("INSERT INTO episode_bm25_corpus SELECT 1, count(*), coalesce(sum(length(tsv)), 0) FROM turns "
               "WHERE tsv IS NOT NULL")
    op.execute("INSERT INTO episode_bm25_terms SELECT u.lexeme, count(*) FROM turns t, unnest(t.tsv) u "
               "GROUP BY u.lexeme")
    # One helper adds (sign 1) or removes (-1) a set of episode texts; the triggers hand it what changed.
    op.execute(
        """
        CREATE FUNCTION factforge_episode_bm25_apply(docs tsvector[], sign integer) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            IF cardinality(docs) = 0 THEN
                RETURN;
            END IF;
            IF sign > 0 THEN
                INSERT INTO episode_bm25_terms AS t (lexeme, df)
                    SELECT u.lexeme, count(*) FROM unnest(docs) d, unnest(d) u GROUP BY u.lexeme ORDER BY u.lexeme
                ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df;
            ELSE
                UPDATE episode_bm25_terms AS t SET df = greatest(0, t.df - x.n)
                    FROM (SELECT u.lexeme, count(*) AS n FROM unnest(docs) d, unnest(d) u GROUP BY u.lexeme) x
                    WHERE t.lexeme = x.lexeme;
            END IF;
            INSERT INTO episode_bm25_corpus AS c (id, n_docs, total_len)
                SELECT 1, greatest(0, sign * count(*)), greatest(0, sign * coalesce(sum(length(d)), 0))
                FROM unnest(docs) d
            ON CONFLICT (id) DO UPDATE SET
                n_docs = greatest(0, c.n_docs + sign * (SELECT count(*) FROM unnest(docs))),
                total_len = greatest(0, c.total_len + sign * (SELECT coalesce(sum(length(d)), 0) FROM unnest(docs) d));
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION factforge_episode_bm25_ins() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM factforge_episode_bm25_apply(ARRAY(SELECT tsv FROM new_rows WHERE tsv IS NOT NULL), 1);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE FUNCTION factforge_episode_bm25_del() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM factforge_episode_bm25_apply(ARRAY(SELECT tsv FROM old_rows WHERE tsv IS NOT NULL), -1);
            RETURN NULL;
        END $$
        """
    )
    # An UPDATE that left a row's words alone (its vector filled in, say) changes no statistic.
    op.execute(
        """
        CREATE FUNCTION factforge_episode_bm25_upd() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM factforge_episode_bm25_apply(ARRAY(
                SELECT o.tsv FROM old_rows o JOIN new_rows n ON n.id = o.id
                WHERE o.tsv IS NOT NULL AND o.tsv IS DISTINCT FROM n.tsv), -1);
            PERFORM factforge_episode_bm25_apply(ARRAY(
                SELECT n.tsv FROM old_rows o JOIN new_rows n ON n.id = o.id
                WHERE n.tsv IS NOT NULL AND o.tsv IS DISTINCT FROM n.tsv), 1);
            RETURN NULL;
        END $$
        """
    )
    op.execute("CREATE TRIGGER turns_bm25_ins AFTER INSERT ON turns REFERENCING NEW TABLE AS new_rows "
               "FOR EACH STATEMENT EXECUTE FUNCTION factforge_episode_bm25_ins()")
    op.execute("CREATE TRIGGER turns_bm25_upd AFTER UPDATE ON turns REFERENCING OLD TABLE AS old_rows "
               "NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION factforge_episode_bm25_upd()")
    op.execute("CREATE TRIGGER turns_bm25_del AFTER DELETE ON turns REFERENCING OLD TABLE AS old_rows "
               "FOR EACH STATEMENT EXECUTE FUNCTION factforge_episode_bm25_del()")
    op.execute(
        """
        CREATE FUNCTION factforge_episode_bm25_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM episode_bm25_terms;
            DELETE FROM episode_bm25_corpus;
            RETURN NULL;
        END $$
        """
    )
    op.execute("CREATE TRIGGER turns_bm25_truncate AFTER TRUNCATE ON turns "
               "FOR EACH STATEMENT EXECUTE FUNCTION factforge_episode_bm25_truncate()")

    # -- a message is stored once: copies the turn also holds are cleared.
    op.execute("UPDATE fact_sources s SET user_message = NULL, assistant_message = NULL FROM turns t "
               "WHERE t.key = s.source_key AND (s.user_message IS NOT NULL OR s.assistant_message IS NOT NULL)")
    op.execute("UPDATE facts f SET source_user_message = NULL, source_assistant_message = NULL "
               "WHERE (f.source_user_message IS NOT NULL OR f.source_assistant_message IS NOT NULL) "
               "AND EXISTS (SELECT 1 FROM fact_sources s JOIN turns t ON t.key = s.source_key WHERE s.fact_id = f.id)")

    # -- the reader role sees the episodes of its scope, never a dropped turn.
    op.execute(
        """
        CREATE VIEW episodes WITH (security_invoker = true) AS
        SELECT id, key AS source_key, session_id, activity_session, agent_id, team_id, visibility, user_name,
               assistant_name, user_message AS content, entities, message_ts, valid_from, valid_to, created_at
        FROM turns WHERE visibility IS NOT NULL
        """
    )
    op.execute("ALTER TABLE turns ENABLE ROW LEVEL SECURITY")
    _for_reader(f"CREATE POLICY turns_visible_to_reader ON turns FOR SELECT TO {READER} USING ({_SCOPE_POLICY})")
    _for_reader(f"GRANT SELECT ON turns, episodes TO {READER}")
    op.execute("ANALYZE turns")


def downgrade() -> None:
    _for_reader(f"REVOKE ALL ON turns FROM {READER}")
    op.execute("DROP VIEW IF EXISTS episodes")
    op.execute("DROP POLICY IF EXISTS turns_visible_to_reader ON turns")
    op.execute("ALTER TABLE turns DISABLE ROW LEVEL SECURITY")
    # Messages go back into the provenance rows that referenced them.
    op.execute("UPDATE fact_sources s SET user_message = t.user_message, assistant_message = t.assistant_message "
               "FROM turns t WHERE t.key = s.source_key AND s.user_message IS NULL AND s.assistant_message IS NULL")
    op.execute(
        """
        UPDATE facts f SET source_user_message = first.user_message, source_assistant_message = first.assistant_message
        FROM (SELECT DISTINCT ON (fact_id) fact_id, user_message, assistant_message FROM fact_sources
              ORDER BY fact_id, seen_at, id) first
        WHERE first.fact_id = f.id AND f.source_user_message IS NULL AND f.source_assistant_message IS NULL
        """
    )
    for trigger in ("turns_bm25_truncate", "turns_bm25_del", "turns_bm25_upd", "turns_bm25_ins"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON turns")
    op.execute("DROP FUNCTION IF EXISTS factforge_episode_bm25_truncate(), factforge_episode_bm25_ins(), "
               "factforge_episode_bm25_del(), factforge_episode_bm25_upd(), "
               "factforge_episode_bm25_apply(tsvector[], integer)")
    op.execute("DROP TABLE IF EXISTS episode_bm25_corpus, episode_bm25_terms")
    for index in ("turns_unembedded_idx", "turns_embedding_hnsw", "turns_scoped_tsv_gin", "turns_agent_idx",
                  "turns_id_uq"):
        op.execute(f"DROP INDEX IF EXISTS {index}")
    op.execute(
        """
        ALTER TABLE turns DROP CONSTRAINT IF EXISTS turns_private_has_agent,
            DROP CONSTRAINT IF EXISTS turns_team_has_team, DROP COLUMN tsv, DROP COLUMN embedding_model,
            DROP COLUMN embedding, DROP COLUMN valid_to, DROP COLUMN valid_from, DROP COLUMN entities, DROP COLUMN assistant_name, DROP COLUMN user_name,
            DROP COLUMN visibility, DROP COLUMN id
        """
    )
