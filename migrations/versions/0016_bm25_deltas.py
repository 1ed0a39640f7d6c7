"""BM25 statistics without hot rows: writers append deltas, a fold now and then adds them up.

Revision ID: 0016
Revises: 0015

The statistics triggers used to update one row per lexeme of every new document (``bm25_terms``) and the one
corpus row (``bm25_corpus``) in place. Common lexemes ("i", "like", "user") and the corpus row are in almost
every transaction, so concurrent writers queued on those rows' locks from their first insert to their commit:
with 8 clients of ``factforge serve``, PostgreSQL's backends spent ~90% of their samples waiting on
``Lock:transactionid`` behind the turn insert, and parallel bulk loads did not load faster than one.

Now each family (``bm25`` for facts, ``episode_bm25`` for episodes) has

* ``{family}_terms_base`` / ``{family}_corpus_base``: the folded statistics (the old tables, renamed);
* ``{family}_terms_delta`` / ``{family}_corpus_delta``: what statements added (+) or removed (-) since the
  last fold, one row per lexeme per statement, appended by the triggers and never updated, so writers take
  no lock that another writer waits for;
* views ``{family}_terms`` and ``{family}_corpus`` with the old names and columns: base plus deltas, so every
  reader sees exactly the statistics of the documents it can see committed, as before;
* ``factforge_{family}_fold()``: moves the deltas into the base in one statement each. A trigger calls it
  every ``FOLD_EVERY``-th statement (a sequence counts them); it takes a transaction-level advisory lock
  first and returns at once when another fold holds it, so only folds ever wait on the base rows' locks,
  and a fold never waits for a writer.

A delta of a removal carries no ``max_tf``/``min_dl``: those bounds stay as they were (a loose bound is still
a bound, as in 0011). The base tables lose their ``df >= 0`` check (a fold adds signed sums); the views clamp
at 0 as the triggers did.
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

FOLD_EVERY = 32

# family (bm25: facts, episode_bm25: turns) -> the advisory lock key of its fold
_FAMILIES = {"bm25": 7_402_161_901, "episode_bm25": 7_402_161_902}

_TF = "coalesce(array_length(u.positions, 1), 1)"


def _upgrade_family(family: str, lock: int) -> None:
    op.execute(f"ALTER TABLE {family}_terms RENAME TO {family}_terms_base")
    op.execute(f"ALTER TABLE {family}_corpus RENAME TO {family}_corpus_base")
    op.execute(f"ALTER TABLE {family}_terms_base DROP CONSTRAINT IF EXISTS {family}_terms_df_check")
    op.execute(f"ALTER INDEX IF EXISTS {family}_terms_pkey RENAME TO {family}_terms_base_pkey")
    op.execute(f"ALTER INDEX IF EXISTS {family}_corpus_pkey RENAME TO {family}_corpus_base_pkey")
    op.execute(f"INSERT INTO {family}_corpus_base VALUES (1, 0, 0) ON CONFLICT (id) DO NOTHING")
    op.execute(f"CREATE TABLE {family}_terms_delta (lexeme text NOT NULL, df bigint NOT NULL, max_tf integer, "
               "min_dl integer)")
    op.execute(f"CREATE INDEX {family}_terms_delta_lexeme_idx ON {family}_terms_delta (lexeme)")
    op.execute(f"CREATE TABLE {family}_corpus_delta (n_docs bigint NOT NULL, total_len bigint NOT NULL)")
    op.execute(f"CREATE SEQUENCE {family}_fold_seq")
    op.execute(
        f"""
        CREATE VIEW {family}_terms AS
        SELECT lexeme, greatest(0, sum(df))::bigint AS df, max(max_tf) AS max_tf, min(min_dl) AS min_dl
        FROM (SELECT lexeme, df, max_tf, min_dl FROM {family}_terms_base
              UNION ALL SELECT lexeme, df, max_tf, min_dl FROM {family}_terms_delta) x
        GROUP BY lexeme
        """
    )
    op.execute(
        f"""
        CREATE VIEW {family}_corpus AS
        SELECT 1::smallint AS id, greatest(0, coalesce(sum(n_docs), 0))::bigint AS n_docs,
               greatest(0, coalesce(sum(total_len), 0))::bigint AS total_len
        FROM (SELECT n_docs, total_len FROM {family}_corpus_base
              UNION ALL SELECT n_docs, total_len FROM {family}_corpus_delta) x
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION factforge_{family}_fold() RETURNS void LANGUAGE plpgsql AS $$
        BEGIN
            IF NOT pg_try_advisory_xact_lock({lock}) THEN
                RETURN;  -- another fold is under way; the deltas wait for the next one
            END IF;
            WITH d AS (DELETE FROM {family}_terms_delta RETURNING lexeme, df, max_tf, min_dl)
            INSERT INTO {family}_terms_base AS t (lexeme, df, max_tf, min_dl)
                SELECT lexeme, sum(df), max(max_tf), min(min_dl) FROM d GROUP BY lexeme ORDER BY lexeme
            ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df,
                max_tf = greatest(t.max_tf, excluded.max_tf), min_dl = least(t.min_dl, excluded.min_dl);
            WITH d AS (DELETE FROM {family}_corpus_delta RETURNING n_docs, total_len)
            UPDATE {family}_corpus_base SET n_docs = n_docs + s.n, total_len = total_len + s.len
                FROM (SELECT sum(n_docs) AS n, sum(total_len) AS len FROM d) s
                WHERE id = 1 AND s.n IS NOT NULL;
        END $$
        """
    )
    # sign 1: documents added; -1: removed. One delta row per lexeme per statement, one corpus delta row.
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION factforge_{family}_apply(docs tsvector[], sign integer) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            IF cardinality(docs) = 0 THEN
                RETURN;
            END IF;
            INSERT INTO {family}_terms_delta (lexeme, df, max_tf, min_dl)
                SELECT u.lexeme, sign * count(*), CASE WHEN sign > 0 THEN max({_TF}) END,
                       CASE WHEN sign > 0 THEN min(length(n.tsv)) END
                FROM unnest(docs) n(tsv), unnest(n.tsv) u GROUP BY u.lexeme;
            INSERT INTO {family}_corpus_delta (n_docs, total_len)
                SELECT sign * count(*), sign * coalesce(sum(length(d)), 0) FROM unnest(docs) d;
            IF nextval('{family}_fold_seq') % {FOLD_EVERY} = 0 THEN
                PERFORM factforge_{family}_fold();
            END IF;
        END $$
        """
    )
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION factforge_{family}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM {family}_terms_base;
            DELETE FROM {family}_terms_delta;
            DELETE FROM {family}_corpus_delta;
            UPDATE {family}_corpus_base SET n_docs = 0, total_len = 0;
            RETURN NULL;
        END $$
        """
    )


def upgrade() -> None:
    for family, lock in _FAMILIES.items():
        _upgrade_family(family, lock)
    # facts: inserts and deletes (an UPDATE of facts never changes its words: tsv is generated from content,
    # which is never updated). Episodes kept their own ins/del/upd triggers, which call the apply function.
    op.execute(
        """
        CREATE OR REPLACE FUNCTION factforge_bm25_ins() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM factforge_bm25_apply(ARRAY(SELECT tsv FROM new_rows), 1);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        """
        CREATE OR REPLACE FUNCTION factforge_bm25_del() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM factforge_bm25_apply(ARRAY(SELECT tsv FROM old_rows), -1);
            RETURN NULL;
        END $$
        """
    )
    op.execute("ANALYZE bm25_terms_base, episode_bm25_terms_base")


# -- downgrade: fold everything, and put the 0011 tables and functions back ------------------------------------

_FACTS_INS_0011 = """
        CREATE OR REPLACE FUNCTION factforge_bm25_ins() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO bm25_terms AS t (lexeme, df, max_tf, min_dl)
                SELECT u.lexeme, count(*), max({tf}), min(length(n.tsv)) FROM new_rows n, unnest(n.tsv) u
                GROUP BY u.lexeme ORDER BY u.lexeme
            ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df,
                max_tf = greatest(t.max_tf, excluded.max_tf), min_dl = least(t.min_dl, excluded.min_dl);
            UPDATE bm25_corpus SET n_docs = n_docs + s.n, total_len = total_len + s.len
                FROM (SELECT count(*) AS n, coalesce(sum(length(tsv)), 0) AS len FROM new_rows) s
                WHERE id = 1 AND s.n > 0;
            RETURN NULL;
        END $$
""".replace("{tf}", _TF)

_FACTS_DEL_0002 = """
        CREATE OR REPLACE FUNCTION factforge_bm25_del() RETURNS trigger LANGUAGE plpgsql AS $$
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

_FACTS_TRUNCATE_0002 = """
        CREATE OR REPLACE FUNCTION factforge_bm25_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM bm25_terms;
            UPDATE bm25_corpus SET n_docs = 0, total_len = 0;
            RETURN NULL;
        END $$
"""

_EPISODES_TRUNCATE_0010 = """
        CREATE OR REPLACE FUNCTION factforge_episode_bm25_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM episode_bm25_terms;
            DELETE FROM episode_bm25_corpus;
            RETURN NULL;
        END $$
"""

_EPISODES_APPLY_0011 = """
        CREATE OR REPLACE FUNCTION factforge_episode_bm25_apply(docs tsvector[], sign integer) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            IF cardinality(docs) = 0 THEN
                RETURN;
            END IF;
            IF sign > 0 THEN
                INSERT INTO episode_bm25_terms AS t (lexeme, df, max_tf, min_dl)
                    SELECT u.lexeme, count(*), max({tf}), min(length(n.tsv)) FROM unnest(docs) n(tsv), unnest(n.tsv) u
                    GROUP BY u.lexeme ORDER BY u.lexeme
                ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df,
                    max_tf = greatest(t.max_tf, excluded.max_tf), min_dl = least(t.min_dl, excluded.min_dl);
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
""".replace("{tf}", _TF)


def downgrade() -> None:
    for family in _FAMILIES:
        # the advisory lock is free here (the migration holds the only connection that matters)
        op.execute(f"SELECT factforge_{family}_fold()")
        op.execute(f"DROP VIEW {family}_terms, {family}_corpus")
        op.execute(f"UPDATE {family}_terms_base SET df = greatest(0, df)")
        op.execute(f"UPDATE {family}_corpus_base SET n_docs = greatest(0, n_docs), "
                   "total_len = greatest(0, total_len)")
    op.execute(_FACTS_INS_0011)
    op.execute(_FACTS_DEL_0002)
    op.execute(_FACTS_TRUNCATE_0002)
    op.execute(_EPISODES_APPLY_0011)
    op.execute(_EPISODES_TRUNCATE_0010)
    op.execute("DROP FUNCTION factforge_bm25_apply(tsvector[], integer)")
    for family in _FAMILIES:
        op.execute(f"DROP FUNCTION factforge_{family}_fold()")
        op.execute(f"DROP TABLE {family}_terms_delta, {family}_corpus_delta")
        op.execute(f"DROP SEQUENCE {family}_fold_seq")
        op.execute(f"ALTER TABLE {family}_terms_base RENAME TO {family}_terms")
        op.execute(f"ALTER TABLE {family}_corpus_base RENAME TO {family}_corpus")
        op.execute(f"ALTER INDEX {family}_terms_base_pkey RENAME TO {family}_terms_pkey")
        op.execute(f"ALTER INDEX {family}_corpus_base_pkey RENAME TO {family}_corpus_pkey")
        op.execute(f"ALTER TABLE {family}_terms ADD CONSTRAINT {family}_terms_df_check CHECK (df >= 0)")
