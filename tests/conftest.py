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
        if tables:
            conn.execute("TRUNCATE " + ", ".join(tables) + " RESTART IDENTITY CASCADE")
    yield pg_server_url
