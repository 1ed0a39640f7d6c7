"""Shared fixtures. Storage tests run against a real embedded PostgreSQL + pgvector server, never a mock.

``FACTFORGE_TEST_DATABASE_URL`` points the suite at an existing server instead (it must be disposable:
the schema is dropped and re-created).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LC_ALL", "C.UTF-8")
os.environ.setdefault("LANG", "C.UTF-8")

TEST_EMBED_DIM = 384

# Every table the schema owns, in an order TRUNCATE ... CASCADE accepts.
DATA_TABLES = (
    "fact_entities", "relationships", "fact_sources", "facts", "entities", "turns", "sessions",
    "extraction_queue", "llm_calls", "pattern_misses",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (each over ~10 s on a loaded machine) run first, the rest in file order after them.

    The suite runs on two processes (pytest-xdist, ``--dist loadgroup``: one test at a time to the process that
    runs low): a long test dealt out last keeps one process busy while the other has nothing left, so the long
    ones go out first and the many short ones fill the gaps. Every process collects the same order, as xdist
    requires.
    """
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A migrated database for the whole test session (SQLAlchemy URL, psycopg driver)."""
    from alembic import command
    from alembic.config import Config

    external = os.environ.get("FACTFORGE_TEST_DATABASE_URL")
    tmp: Path | None = None
    if external:
        url = external
    else:
        from tests.servers import wheel_server

        tmp = Path(tempfile.mkdtemp(prefix="fft"))
        server = wheel_server(tmp / "pg")
        url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
    cfg = Config(str(Path(__file__).resolve().parent.parent / "alembic.ini"))
    from factforge.settings import LOCAL_EMBED_MODEL

    # The schema is created for the offline default embedder, so Memory/Store open it without a mismatch.
    cfg.attributes.update(url=url, embed_dim=TEST_EMBED_DIM, embed_model=LOCAL_EMBED_MODEL)
    if external:
        command.downgrade(cfg, "base")
    command.upgrade(cfg, "head")
    yield url
    if tmp is not None:
        server.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


# Tables a test's data never goes into: the schema's own records, and the API keys (tests make their own).
KEPT_TABLES = frozenset({"alembic_version", "factforge_meta", "fact_categories", "api_keys"})
# Per database and set of tables: the rows of the tables a TRUNCATE leaves non-empty (the bm25 corpus totals its
# trigger writes back), as they were right after the last TRUNCATE.
_EMPTIED: dict[tuple[str, frozenset[str]], dict[str, str]] = {}


@pytest.fixture
def sent_sql(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every statement psycopg's ``Connection.execute`` runs while the test does ("" for a
    composed one), and of every one sent through a ``RawCursor`` (BM25's top-n statements, with their $n
    placeholders), in order; the test may clear it between steps."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.Connection.execute
    raw_execute = psycopg.RawCursor.execute

    def traced(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(query if isinstance(query, str) else "")
        return execute(self, query, *args, **kwargs)

    def raw_traced(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(query if isinstance(query, str) else "")
        return raw_execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", traced)
    monkeypatch.setattr(psycopg.RawCursor, "execute", raw_traced)
    return sent


@pytest.fixture
def db_url(pg_server_url: str) -> Iterator[str]:
    """The session database, emptied before each test."""
    import psycopg

    conninfo = pg_server_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        existing = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        tables = [t for t in DATA_TABLES if t in existing]
        extra = sorted(existing - set(DATA_TABLES) - {"alembic_version", "factforge_meta", "fact_categories"})
        # Tables added by later migrations are emptied too.
        tables += [t for t in extra if t.startswith("ff_")]  # bm25_* follow facts via its TRUNCATE trigger
        key = (conninfo, frozenset(existing))
        checked = sorted(existing - KEPT_TABLES)
        if tables and (key not in _EMPTIED or _changed_since_emptied(conn, checked, _EMPTIED[key])):
            conn.execute("TRUNCATE " + ", ".join(tables) + " RESTART IDENTITY CASCADE")
            _EMPTIED[key] = {t: rows for t in checked if (rows := _rows(conn, t)) is not None}
    yield pg_server_url


def _rows(conn: Any, table: str) -> str | None:
    """Every row of ``table`` as text, in a fixed order (None when it has none)."""
    return conn.execute(f'SELECT string_agg(x::text, chr(10) ORDER BY x::text) FROM "{table}" x').fetchone()[0]


def _changed_since_emptied(conn: Any, tables: list[str], emptied: dict[str, str]) -> bool:
    """Whether any of ``tables`` differs from how the last TRUNCATE left it (``emptied``: the rows of those it left
    non-empty; the others empty, with no page at all), or a sequence of theirs (a serial or identity column's) has
    handed out a value.

    An empty table is checked by its size, not its rows: a test whose insert rolled back (or that deleted what it
    wrote) leaves pages of dead rows, and an ANALYZE over them records pages without rows, from which the planner
    estimates one row whatever the table later holds (a table without a sequence, such as ``turns``, showed nothing
    else had happened).

    TRUNCATE gives every table and index new files, ~0.15 s a test with the suite's two processes on 2 cores, and
    most tests that take ``db_url`` follow one that wrote nothing (or one that took ``db_url`` and emptied the
    database already): when nothing changed since the last TRUNCATE, ``TRUNCATE ... RESTART IDENTITY`` would change
    nothing either.
    """
    differs = " OR ".join(
        f'(SELECT string_agg(x::text, chr(10) ORDER BY x::text) FROM "{t}" x) IS DISTINCT FROM %s' if t in emptied
        else f"pg_relation_size('\"{t}\"') > 0" for t in tables)
    changed = conn.execute(
        f"SELECT ({differs}) OR EXISTS (SELECT FROM pg_sequences s JOIN pg_class q ON q.relname = s.sequencename "
        "  AND q.relnamespace = 'public'::regnamespace "
        "JOIN pg_depend d ON d.objid = q.oid AND d.deptype IN ('a', 'i') "
        "JOIN pg_class t ON t.oid = d.refobjid "
        "WHERE s.schemaname = 'public' AND s.last_value IS NOT NULL AND t.relname = ANY(%s))",
        [*(emptied[t] for t in tables if t in emptied), tables]).fetchone()
    return bool(changed[0])
