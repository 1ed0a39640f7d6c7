"""The scoped text index also keys each lexeme by its *impact class*: its term frequency and its document's length.

Revision ID: 0025
Revises: 0024

BM25 scores a lexeme's document by its term frequency (tf, higher scores more) and the document's length (dl,
shorter scores more); the scoped text index (migrations 0006, 0021) lists a lexeme's documents in no such order, so
a step of a common lexeme read every document the caller may see to find its best n (bench questions at 1M facts +
1M episodes: 2,000-16,500 documents, 2 us each, the whole BM25 tail). ``factforge_scoped_tsv`` now adds, for each
lexeme of a document, ``<scope key> <lexeme> <t>.<d>`` beside ``<scope key> <lexeme>``: ``t`` its tf (1, 2, 3, or 4
for 4 and more) and ``d`` the document's length class (the length below 16, above it the length with all but its
four highest bits cleared: 16, 18, .., 30, 32, 36, .., 60, 64, 72, ..). A class holds documents of one bound, so
``factforge.storage.bm25`` reads a common lexeme's classes in order of their bound and stops when what is left cannot
enter the top n (impact-ordered postings, as search engines keep them). The plain and the scoped keys stay, so
every statement that used the index works as before.

The classes need each lexeme's positions (``unnest``, a subquery): the function costs ~17 us more a row (PL/pgSQL,
at load ~6) and the index holds half as many entries again. Both indexes are rebuilt (at 1M rows: minutes).
"""

from __future__ import annotations

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

HEAD = ("CREATE OR REPLACE FUNCTION factforge_scoped_tsv(tsv tsvector, visibility text, team_id text, "
        "agent_id text) RETURNS tsvector")

# Built-in functions only: CREATE INDEX evaluates the expression with a search_path of pg_catalog.
CLASSED_BODY = r"""
DECLARE
    lexemes text[];
    joined text;
    key text;
    keyed text[];
    classed text[];
    l text;
    dl int;
    s int;
BEGIN
    IF tsv IS NULL THEN
        RETURN NULL;
    END IF;
    lexemes := tsvector_to_array(tsv);
    IF cardinality(lexemes) = 0 THEN
        RETURN tsv;
    END IF;
    key := CASE visibility WHEN 'global' THEN 'g'
                           WHEN 'team' THEN 't' || md5(coalesce(team_id, ''))
                           WHEN 'private' THEN 'p' || md5(coalesce(agent_id, ''))
                           ELSE 'n' END || ' ';
    dl := cardinality(lexemes);
    IF dl >= 16 THEN  -- keep the four highest bits
        s := length(ltrim(dl::bit(32)::text, '0')) - 4;
        dl := (dl >> s) << s;
    END IF;
    classed := ARRAY(SELECT key || CASE WHEN octet_length(x.lexeme) > 1000 THEN md5(x.lexeme) ELSE x.lexeme END
                            || ' ' || least(coalesce(array_length(x.positions, 1), 1), 4) || '.' || dl
                     FROM unnest(tsv) x);
    joined := array_to_string(lexemes, E'\n');
    IF octet_length(joined) <= 1000 THEN
        keyed := string_to_array(key || replace(joined, E'\n', E'\n' || key), E'\n');
        IF cardinality(keyed) = cardinality(lexemes) THEN
            RETURN tsv || array_to_tsvector(keyed || classed);
        END IF;
    END IF;
    keyed := '{}';
    FOREACH l IN ARRAY lexemes LOOP
        keyed := keyed || (key || CASE WHEN octet_length(l) > 1000 THEN md5(l) ELSE l END);
    END LOOP;
    RETURN tsv || array_to_tsvector(keyed || classed);
END
"""

# 0021's body: the scope key before each lexeme, no classes
PLAIN_BODY = r"""
DECLARE
    lexemes text[];
    joined text;
    key text;
    keyed text[];
    l text;
BEGIN
    IF tsv IS NULL THEN
        RETURN NULL;
    END IF;
    lexemes := tsvector_to_array(tsv);
    IF cardinality(lexemes) = 0 THEN
        RETURN tsv;
    END IF;
    key := CASE visibility WHEN 'global' THEN 'g'
                           WHEN 'team' THEN 't' || md5(coalesce(team_id, ''))
                           WHEN 'private' THEN 'p' || md5(coalesce(agent_id, ''))
                           ELSE 'n' END || ' ';
    joined := array_to_string(lexemes, E'\n');
    IF octet_length(joined) <= 1000 THEN
        keyed := string_to_array(key || replace(joined, E'\n', E'\n' || key), E'\n');
        IF cardinality(keyed) = cardinality(lexemes) THEN
            RETURN tsv || array_to_tsvector(keyed);
        END IF;
    END IF;
    keyed := '{}';
    FOREACH l IN ARRAY lexemes LOOP
        keyed := keyed || (key || CASE WHEN octet_length(l) > 1000 THEN md5(l) ELSE l END);
    END LOOP;
    RETURN tsv || array_to_tsvector(keyed);
END
"""

_INDEXES = ("fact_terms_scoped_gin", "turns_scoped_tsv_gin")


def function_sql(body: str) -> str:
    """The statement that makes ``factforge_scoped_tsv`` with ``body``, declared as 0021 left it."""
    return f"{HEAD} LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE COST 1000 AS $fn${body}$fn$"


def _rebuild(body: str) -> None:
    op.execute(function_sql(body))
    for index in _INDEXES:  # the function's values changed: the indexes built on it are rebuilt
        op.execute(f"REINDEX INDEX {index}")


def upgrade() -> None:
    _rebuild(CLASSED_BODY)


def downgrade() -> None:
    _rebuild(PLAIN_BODY)
