"""``factforge_scoped_tsv`` without a subquery: the same tsvector for a fraction of the CPU.

Revision ID: 0021
Revises: 0020

Every fact (``fact_terms``) and episode (``turns``) written evaluates ``factforge_scoped_tsv`` (migration 0006) for
its scoped text index. Its SQL body builds the keyed lexemes with ``ARRAY(SELECT ... FROM unnest(...))``; a
subquery keeps PostgreSQL from inlining an SQL function, so each row ran it through the SQL-function executor
(a plan and an executor per call): 45-75 us a row, at 30k facts loaded without the HNSW graph the larger part of
what every index and trigger but the graph cost together.

The body is now PL/pgSQL made of simple expressions, which PL/pgSQL evaluates without an executor: the lexemes
joined by line breaks with the key in front of each, split again (no lexeme ``to_tsvector`` makes holds a line
break; a document whose split comes out with more pieces than it has lexemes, or whose lexemes are over 1,000
bytes together and so may hold one keyed by its md5, takes a loop over its lexemes instead). The result is the
same tsvector for every input (tests/test_migrations.py compares the two bodies), so the indexes built on it stay
as they are; the name, arguments, IMMUTABLE, PARALLEL SAFE and 0017's COST 1000 (a PL/pgSQL function is never
inlined either, so the planner's estimate is the same) are kept.
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

HEAD = ("CREATE OR REPLACE FUNCTION factforge_scoped_tsv(tsv tsvector, visibility text, team_id text, "
        "agent_id text) RETURNS tsvector")

# Built-in functions only: CREATE INDEX evaluates the expression with a search_path of pg_catalog.
PLPGSQL_BODY = r"""
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

# migration 0006's body (0017 gave it COST 1000)
SQL_BODY = """
    SELECT tsv || array_to_tsvector(ARRAY(
        SELECT k.key || ' ' || CASE WHEN octet_length(l) > 1000 THEN md5(l) ELSE l END
        FROM unnest(tsvector_to_array(tsv)) l,
             (SELECT CASE visibility WHEN 'global' THEN 'g'
                                     WHEN 'team' THEN 't' || md5(coalesce(team_id, ''))
                                     WHEN 'private' THEN 'p' || md5(coalesce(agent_id, ''))
                                     ELSE 'n' END AS key) k))
"""


def function_sql(body: str, language: str, name: str = "factforge_scoped_tsv") -> str:
    """The statement that makes ``name`` with ``body`` in ``language``, declared as 0006 and 0017 left it."""
    head = HEAD.replace("factforge_scoped_tsv", name, 1)
    return f"{head} LANGUAGE {language} IMMUTABLE PARALLEL SAFE COST 1000 AS $fn${body}$fn$"


def upgrade() -> None:
    op.execute(function_sql(PLPGSQL_BODY, "plpgsql"))


def downgrade() -> None:
    op.execute(function_sql(SQL_BODY, "sql"))
