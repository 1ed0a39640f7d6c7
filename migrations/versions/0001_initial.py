"""Initial schema: facts with pgvector + tsvector, provenance, sessions, entities, relationships, queue.

Revision ID: 0001
Revises:
Create Date: 2026-11-23
"""

from __future__ import annotations

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _embed_dim() -> int:
    attrs = op.get_context().config.attributes if op.get_context().config is not None else {}
    dim = attrs.get("embed_dim")
    if dim is None:
        from factforge.settings import get_settings

        dim = get_settings().embed_dim
    return int(dim)


def _embed_model() -> str:
    attrs = op.get_context().config.attributes if op.get_context().config is not None else {}
    model = attrs.get("embed_model")
    if model is None:
        from factforge.settings import get_settings

        s = get_settings()
        from factforge.settings import LOCAL_EMBED_MODEL

        model = s.embed_model if s.embedder == "ollama" else LOCAL_EMBED_MODEL
    return str(model)


CATEGORIES = ("preference", "policy", "technology", "decision", "temporal", "identity", "instruction", "other")


def upgrade() -> None:
    dim = _embed_dim()
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")

    op.execute(
        """
        CREATE TABLE factforge_meta (
            key   text PRIMARY KEY,
            value text NOT NULL
        )
        """
    )
    op.execute(
        "INSERT INTO factforge_meta (key, value) VALUES ('embed_dim', %s), ('embed_model', %s)"
        % (f"'{dim}'", "'" + _embed_model().replace("'", "''") + "'")
    )

    # A lookup table rather than a CHECK so new categories are one INSERT, no migration.
    op.execute("CREATE TABLE fact_categories (name text PRIMARY KEY, description text)")
    op.execute(
        "INSERT INTO fact_categories (name) VALUES " + ", ".join(f"('{c}')" for c in CATEGORIES)
    )

    op.execute(
        """
        CREATE TABLE sessions (
            id            text PRIMARY KEY,
            kind          text NOT NULL DEFAULT 'conversation' CHECK (kind IN ('conversation', 'activity')),
            agent_id      text,
            team_id       text,
            intent        text,
            metadata      jsonb NOT NULL DEFAULT '{}'::jsonb,
            turn_count    integer NOT NULL DEFAULT 0,
            started_at    timestamptz NOT NULL DEFAULT now(),
            last_seen_at  timestamptz NOT NULL DEFAULT now()
        )
        """
    )

    # One row per remembered turn / observed dialogue, keyed by a hash of its content and provenance:
    # re-ingesting the same input finds the key and adds nothing (resumable, idempotent).
    op.execute(
        """
        CREATE TABLE turns (
            key                text PRIMARY KEY,
            session_id         text REFERENCES sessions(id) ON DELETE CASCADE,
            activity_session   text,
            agent_id           text,
            team_id            text,
            user_message       text,
            assistant_message  text,
            message_ts         timestamptz,
            gate_reason        text,
            fact_count         integer NOT NULL DEFAULT 0,
            created_at         timestamptz NOT NULL DEFAULT now()
        )
        """
    )

    op.execute("CREATE FUNCTION factforge_array_text(text[]) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE "
               "AS $$ SELECT coalesce(array_to_string($1, ' '), '') $$")

    op.execute(
        f"""
        CREATE TABLE facts (
            id                        uuid PRIMARY KEY DEFAULT gen_random_uuid(),
            content                   text NOT NULL CHECK (length(content) > 0),
            category                  text NOT NULL REFERENCES fact_categories(name),
            confidence                real NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
            extraction_method         text NOT NULL CHECK (extraction_method IN ('pattern', 'llm', 'inline')),
            rule_id                   text,
            entities                  text[] NOT NULL DEFAULT '{{}}',
            subject                   text,
            relation                  text,
            slots                     jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            explanation               jsonb NOT NULL DEFAULT '{{}}'::jsonb,
            source_session            text REFERENCES sessions(id) ON DELETE SET NULL,
            source_user_message       text,
            source_assistant_message  text,
            source_activity_session   text,
            agent_id                  text,
            team_id                   text,
            visibility                text NOT NULL DEFAULT 'private'
                                      CHECK (visibility IN ('private', 'team', 'global')),
            embedding                 vector({dim}),
            embedding_model           text,
            tsv                       tsvector GENERATED ALWAYS AS (
                                          to_tsvector('english'::regconfig,
                                                      content || ' ' || factforge_array_text(entities))
                                      ) STORED,
            content_hash              text NOT NULL,
            mention_count             integer NOT NULL DEFAULT 1 CHECK (mention_count >= 1),
            first_seen_at             timestamptz NOT NULL DEFAULT now(),
            last_seen_at              timestamptz NOT NULL DEFAULT now(),
            valid_from                timestamptz,
            valid_to                  timestamptz,
            superseded_by             uuid REFERENCES facts(id) ON DELETE SET NULL,
            superseded_at             timestamptz,
            created_at                timestamptz NOT NULL DEFAULT now(),
            CONSTRAINT facts_private_has_agent CHECK (visibility <> 'private' OR agent_id IS NOT NULL),
            CONSTRAINT facts_team_has_team CHECK (visibility <> 'team' OR team_id IS NOT NULL),
            CONSTRAINT facts_valid_range CHECK (valid_to IS NULL OR valid_from IS NULL OR valid_to >= valid_from)
        )
        """
    )
    # Idempotent writes: one current row per normalised content and scope.
    op.execute(
        """
        CREATE UNIQUE INDEX facts_current_scope_uq ON facts
            (content_hash, visibility, coalesce(agent_id, ''), coalesce(team_id, ''))
            WHERE superseded_at IS NULL
        """
    )
    op.execute("CREATE INDEX facts_embedding_hnsw ON facts USING hnsw (embedding vector_cosine_ops)")
    op.execute("CREATE INDEX facts_tsv_gin ON facts USING gin (tsv)")
    op.execute("CREATE INDEX facts_category_idx ON facts (category)")
    op.execute("CREATE INDEX facts_scope_idx ON facts (visibility, agent_id, team_id)")
    op.execute("CREATE INDEX facts_created_idx ON facts (created_at DESC)")
    op.execute("CREATE INDEX facts_entities_gin ON facts USING gin (entities)")
    op.execute("CREATE INDEX facts_subject_relation_idx ON facts (subject, relation) WHERE superseded_at IS NULL")

    # Every mention of a fact, never overwritten: who said it, where, when.
    op.execute(
        """
        CREATE TABLE fact_sources (
            id                 bigserial PRIMARY KEY,
            fact_id            uuid NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
            source_key         text NOT NULL,
            session_id         text,
            activity_session   text,
            agent_id           text,
            user_message       text,
            assistant_message  text,
            message_ts         timestamptz,
            seen_at            timestamptz NOT NULL DEFAULT now(),
            UNIQUE (fact_id, source_key)
        )
        """
    )
    op.execute("CREATE INDEX fact_sources_session_idx ON fact_sources (session_id)")

    op.execute(
        """
        CREATE TABLE entities (
            id               bigserial PRIMARY KEY,
            name             text NOT NULL,
            normalized_name  text NOT NULL,
            type             text NOT NULL,
            aliases          text[] NOT NULL DEFAULT '{}',
            mention_count    integer NOT NULL DEFAULT 1,
            first_seen_at    timestamptz NOT NULL DEFAULT now(),
            last_seen_at     timestamptz NOT NULL DEFAULT now(),
            UNIQUE (normalized_name, type)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE fact_entities (
            fact_id    uuid NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
            entity_id  bigint NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            PRIMARY KEY (fact_id, entity_id)
        )
        """
    )
    op.execute("CREATE INDEX fact_entities_entity_idx ON fact_entities (entity_id)")
    op.execute(
        """
        CREATE TABLE relationships (
            id              bigserial PRIMARY KEY,
            source_id       bigint NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            target_id       bigint NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
            label           text NOT NULL CHECK (label ~ '^[a-z][a-z0-9_]*$'),
            fact_id         uuid REFERENCES facts(id) ON DELETE SET NULL,
            mention_count   integer NOT NULL DEFAULT 1,
            first_seen_at   timestamptz NOT NULL DEFAULT now(),
            last_seen_at    timestamptz NOT NULL DEFAULT now(),
            CHECK (source_id <> target_id),
            UNIQUE (source_id, target_id, label)
        )
        """
    )

    # Work that waits for the LLM. A row leaves only when its facts are stored (status 'done')
    # or it has failed max attempts (status 'failed', kept for inspection).
    op.execute(
        """
        CREATE TABLE extraction_queue (
            id            bigserial PRIMARY KEY,
            source_key    text NOT NULL UNIQUE,
            payload       jsonb NOT NULL,
            status        text NOT NULL DEFAULT 'pending'
                          CHECK (status IN ('pending', 'processing', 'done', 'failed')),
            attempts      integer NOT NULL DEFAULT 0,
            last_error    text,
            next_try_at   timestamptz NOT NULL DEFAULT now(),
            locked_at     timestamptz,
            created_at    timestamptz NOT NULL DEFAULT now(),
            updated_at    timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute("CREATE INDEX extraction_queue_ready_idx ON extraction_queue (next_try_at) WHERE status = 'pending'")

    # Cost accounting for every LLM call.
    op.execute(
        """
        CREATE TABLE llm_calls (
            id              bigserial PRIMARY KEY,
            at              timestamptz NOT NULL DEFAULT now(),
            model           text NOT NULL,
            ok              boolean NOT NULL,
            prompt_tokens   integer NOT NULL DEFAULT 0,
            output_tokens   integer NOT NULL DEFAULT 0,
            latency_ms      real NOT NULL DEFAULT 0,
            error           text
        )
        """
    )

    # Informative messages no pattern answered, so rule writers know what to add next.
    op.execute(
        """
        CREATE TABLE pattern_misses (
            text_hash      text PRIMARY KEY,
            text           text NOT NULL,
            count          integer NOT NULL DEFAULT 1,
            first_seen_at  timestamptz NOT NULL DEFAULT now(),
            last_seen_at   timestamptz NOT NULL DEFAULT now()
        )
        """
    )


def downgrade() -> None:
    for table in (
        "pattern_misses", "llm_calls", "extraction_queue", "relationships", "fact_entities", "entities",
        "fact_sources", "facts", "turns", "sessions", "fact_categories", "factforge_meta",
    ):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    op.execute("DROP FUNCTION IF EXISTS factforge_array_text(text[])")
