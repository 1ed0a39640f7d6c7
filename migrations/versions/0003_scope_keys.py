"""One current row per fact and scope: team facts keyed by team, global facts by content only.

0001 keyed every current fact by (content, visibility, agent, team), so the same team or global fact
said by two agents became two rows. Now: private rows are keyed by agent and team, team rows by team,
global rows by content alone. Existing duplicates are merged (sources, entity links, relationships and
supersession links move to the oldest row; mention counts add up).

Pattern misses also remember which sessions and agents produced them, so forgetting one removes them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

READER = "factforge_reader"

_TEAM_PATTERNS = """
    CREATE VIEW team_patterns WITH (security_invoker = true) AS
    SELECT f.team_id, f.category, f.content,
           count(DISTINCT s.agent_id) AS agents,
           array_agg(DISTINCT s.agent_id) FILTER (WHERE s.agent_id IS NOT NULL) AS agent_ids,
           {mentions} AS mentions,
           min(f.first_seen_at) AS first_seen_at, max(f.last_seen_at) AS last_seen_at
    FROM facts f LEFT JOIN fact_sources s ON s.fact_id = f.id
    WHERE f.visibility IN ('team', 'global') AND f.superseded_at IS NULL
      AND f.category IN ('decision', 'policy', 'technology')
    GROUP BY f.team_id, f.category, f.content
"""


def _grant_reader() -> None:
    """Re-grant the re-created view to the reader role, if 0002 could create it (see there)."""
    op.execute(f"DO $ff$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') THEN "
               f"GRANT SELECT ON team_patterns TO {READER}; END IF; END $ff$")


def upgrade() -> None:
    # Foreign keys that point at facts need an index on their side, or every deleted fact scans the table
    # (forgetting or merging 100k facts of a 1M-fact table took hours without these).
    op.execute("CREATE INDEX facts_superseded_by_idx ON facts (superseded_by) WHERE superseded_by IS NOT NULL")
    op.execute("CREATE INDEX relationships_fact_idx ON relationships (fact_id) WHERE fact_id IS NOT NULL")
    op.execute("CREATE INDEX relationships_target_idx ON relationships (target_id)")
    op.execute("CREATE INDEX facts_source_session_idx ON facts (source_session) WHERE source_session IS NOT NULL")
    op.execute("CREATE INDEX turns_session_idx ON turns (session_id)")
    # Which row each duplicate folds into: the oldest current row of its new key.
    op.execute(
        """
        CREATE TEMP TABLE factforge_merge AS
        SELECT id AS dup_id, keep_id FROM (
            SELECT id, first_value(id) OVER (
                PARTITION BY content_hash, visibility, CASE WHEN visibility = 'team' THEN team_id ELSE '' END
                ORDER BY first_seen_at, created_at, id) AS keep_id
            FROM facts WHERE superseded_at IS NULL AND visibility IN ('team', 'global')
        ) m WHERE id <> keep_id
        """
    )
    op.execute(
        """
        UPDATE facts k SET mention_count = k.mention_count + d.mentions,
            first_seen_at = least(k.first_seen_at, d.first_seen), last_seen_at = greatest(k.last_seen_at, d.last_seen),
            confidence = greatest(k.confidence, d.confidence)
        FROM (SELECT m.keep_id, sum(f.mention_count) AS mentions, min(f.first_seen_at) AS first_seen,
                     max(f.last_seen_at) AS last_seen, max(f.confidence) AS confidence
              FROM factforge_merge m JOIN facts f ON f.id = m.dup_id GROUP BY m.keep_id) d
        WHERE k.id = d.keep_id
        """
    )
    op.execute(
        """
        INSERT INTO fact_sources (fact_id, source_key, session_id, activity_session, agent_id, user_message,
                                  assistant_message, message_ts, seen_at)
        SELECT m.keep_id, s.source_key, s.session_id, s.activity_session, s.agent_id, s.user_message,
               s.assistant_message, s.message_ts, s.seen_at
        FROM fact_sources s JOIN factforge_merge m ON m.dup_id = s.fact_id ORDER BY s.id
        ON CONFLICT (fact_id, source_key) DO NOTHING
        """
    )
    op.execute(
        "INSERT INTO fact_entities (fact_id, entity_id) SELECT m.keep_id, fe.entity_id FROM fact_entities fe "
        "JOIN factforge_merge m ON m.dup_id = fe.fact_id ON CONFLICT DO NOTHING"
    )
    op.execute("UPDATE relationships r SET fact_id = m.keep_id FROM factforge_merge m WHERE r.fact_id = m.dup_id")
    op.execute("UPDATE facts f SET superseded_by = m.keep_id FROM factforge_merge m WHERE f.superseded_by = m.dup_id")
    op.execute("DELETE FROM facts WHERE id IN (SELECT dup_id FROM factforge_merge)")
    op.execute("DROP TABLE factforge_merge")

    op.execute("DROP INDEX facts_current_scope_uq")
    op.execute(
        "CREATE UNIQUE INDEX facts_current_private_uq ON facts (content_hash, agent_id, coalesce(team_id, '')) "
        "WHERE superseded_at IS NULL AND visibility = 'private'"
    )
    op.execute(
        "CREATE UNIQUE INDEX facts_current_team_uq ON facts (content_hash, team_id) "
        "WHERE superseded_at IS NULL AND visibility = 'team'"
    )
    op.execute(
        "CREATE UNIQUE INDEX facts_current_global_uq ON facts (content_hash) "
        "WHERE superseded_at IS NULL AND visibility = 'global'"
    )
    op.execute("CREATE INDEX fact_sources_agent_idx ON fact_sources (agent_id)")
    op.execute("CREATE INDEX fact_sources_activity_idx ON fact_sources (activity_session)")

    # One row per fact now, so its mentions are its sources (max() of per-agent rows undercounted).
    op.execute("DROP VIEW team_patterns")
    op.execute(_TEAM_PATTERNS.format(mentions="count(s.id)"))
    _grant_reader()

    op.execute("ALTER TABLE pattern_misses ADD COLUMN session_ids text[] NOT NULL DEFAULT '{}', "
               "ADD COLUMN agent_ids text[] NOT NULL DEFAULT '{}'")


def downgrade() -> None:
    op.execute("ALTER TABLE pattern_misses DROP COLUMN IF EXISTS session_ids, DROP COLUMN IF EXISTS agent_ids")
    op.execute("DROP VIEW team_patterns")
    op.execute(_TEAM_PATTERNS.format(mentions="max(f.mention_count)"))
    _grant_reader()
    op.execute("DROP INDEX IF EXISTS facts_superseded_by_idx")
    op.execute("DROP INDEX IF EXISTS relationships_fact_idx")
    op.execute("DROP INDEX IF EXISTS relationships_target_idx")
    op.execute("DROP INDEX IF EXISTS facts_source_session_idx")
    op.execute("DROP INDEX IF EXISTS turns_session_idx")
    op.execute("DROP INDEX IF EXISTS fact_sources_activity_idx")
    op.execute("DROP INDEX IF EXISTS fact_sources_agent_idx")
    op.execute("DROP INDEX IF EXISTS facts_current_global_uq")
    op.execute("DROP INDEX IF EXISTS facts_current_team_uq")
    op.execute("DROP INDEX IF EXISTS facts_current_private_uq")
    # Merged rows stay merged: one row per new key is also at most one row per old (wider) key.
    op.execute(
        """
        CREATE UNIQUE INDEX facts_current_scope_uq ON facts
            (content_hash, visibility, coalesce(agent_id, ''), coalesce(team_id, ''))
            WHERE superseded_at IS NULL
        """
    )
