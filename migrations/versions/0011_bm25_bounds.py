"""Per-lexeme score bounds for exact top-k BM25.

Revision ID: 0011
Revises: 0010

BM25 used to score a capped subset of the facts holding a query term (at most 300-500 per step); once more
visible facts held a term, the top 10 was drawn from an arbitrary subset (overlap 0.56 with exact BM25 in the
issue 19 measurement). Search now scores every candidate that could still enter the top k and skips the
rest by a bound that is provably safe (``factforge.storage.bm25``, MaxScore-style). The bound needs, per lexeme,
the largest term frequency of any document holding it (``max_tf``) and the shortest such document
(``min_dl``, in lexemes); the statistics triggers keep both for facts and episodes. On delete they are left
as they are: a bound that is too loose stays a bound (the next rebuild tightens it).
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

# BM25's tf of a lexeme in a tsvector: its number of positions (1 when stripped).
_TF = "coalesce(array_length(u.positions, 1), 1)"

_FACTS_INS = """
        CREATE OR REPLACE FUNCTION factforge_bm25_ins() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO bm25_terms AS t (lexeme, df{cols})
                SELECT u.lexeme, count(*){aggs} FROM new_rows n, unnest(n.tsv) u GROUP BY u.lexeme
                ORDER BY u.lexeme
            ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df{sets};
            UPDATE bm25_corpus SET n_docs = n_docs + s.n, total_len = total_len + s.len
                FROM (SELECT count(*) AS n, coalesce(sum(length(tsv)), 0) AS len FROM new_rows) s
                WHERE id = 1 AND s.n > 0;
            RETURN NULL;
        END $$
"""

_EPISODES_APPLY = """
        CREATE OR REPLACE FUNCTION factforge_episode_bm25_apply(docs tsvector[], sign integer) RETURNS void
        LANGUAGE plpgsql AS $$
        BEGIN
            IF cardinality(docs) = 0 THEN
                RETURN;
            END IF;
            IF sign > 0 THEN
                INSERT INTO episode_bm25_terms AS t (lexeme, df{cols})
                    SELECT u.lexeme, count(*){aggs} FROM unnest(docs) n(tsv), unnest(n.tsv) u
                    GROUP BY u.lexeme ORDER BY u.lexeme
                ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df{sets};
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

_BOUNDS = {"cols": ", max_tf, min_dl", "aggs": f", max({_TF}), min(length(n.tsv))",
           "sets": ", max_tf = greatest(t.max_tf, excluded.max_tf), min_dl = least(t.min_dl, excluded.min_dl)"}
_PLAIN = {"cols": "", "aggs": "", "sets": ""}


def upgrade() -> None:
    for terms, table, where in (("bm25_terms", "facts", ""), ("episode_bm25_terms", "turns", "WHERE n.tsv IS NOT NULL")):
        op.execute(f"ALTER TABLE {terms} ADD COLUMN max_tf integer, ADD COLUMN min_dl integer")
        op.execute(f"UPDATE {terms} t SET max_tf = b.max_tf, min_dl = b.min_dl FROM ("
                   f"SELECT u.lexeme, max({_TF}) AS max_tf, min(length(n.tsv)) AS min_dl "
                   f"FROM {table} n, unnest(n.tsv) u {where} GROUP BY u.lexeme) b WHERE b.lexeme = t.lexeme")
    op.execute(_FACTS_INS.format(**_BOUNDS))
    op.execute(_EPISODES_APPLY.format(**_BOUNDS))


def downgrade() -> None:
    op.execute(_FACTS_INS.format(**_PLAIN))
    op.execute(_EPISODES_APPLY.format(**_PLAIN).replace("unnest(docs) n(tsv), unnest(n.tsv) u",
                                                         "unnest(docs) d, unnest(d) u"))
    for terms in ("bm25_terms", "episode_bm25_terms"):
        op.execute(f"ALTER TABLE {terms} DROP COLUMN max_tf, DROP COLUMN min_dl")
