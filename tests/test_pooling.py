"""The pool pings only connections left idle a while: a dead idle one is replaced unseen; a dead busy one costs one
request, and the next gets a fresh connection."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from factforge.errors import DatabaseError
from factforge.settings import Settings
from factforge.storage import pooling
from factforge.storage.db import conninfo
from factforge.storage.store import Store


def _store(db_url: str, tmp_path: Path) -> Store:
    return Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                         "FACTFORGE_EMBEDDER": "none", "FACTFORGE_DB_POOL_SIZE": "2"}))


def _kill_pooled(db_url: str, store: Store) -> None:
    """Terminate every connection the store's pool holds (as a server restart would), leaving them pooled."""
    with store.engine.connect() as a, store.engine.connect() as b:
        pids = [c.exec_driver_sql("SELECT pg_backend_pid()").scalar() for c in (a, b)]
    with psycopg.connect(conninfo(db_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(p) FROM unnest(%s::int[]) p", (pids,))


def test_an_idle_connection_killed_by_the_server_is_replaced_before_use(db_url: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(db_url, tmp_path)
    try:
        _kill_pooled(db_url, store)
        monkeypatch.setattr(pooling, "IDLE_PING_S", 0.0)  # every pooled connection now counts as idle
        assert store.turn_seen("nothing") is False  # no error: the ping found it dead, the pool made a new one
    finally:
        store.close()


def test_a_busy_pool_does_not_ping_and_recovers_after_one_failure(db_url: str, tmp_path: Path) -> None:
    store = _store(db_url, tmp_path)
    try:
        assert store.turn_seen("nothing") is False
        _kill_pooled(db_url, store)
        # Not pinged (used just now), so the one request that meets the dead connection fails (with
        # pool_pre_ping it would not, for a round trip more on every checkout)...
        with pytest.raises(DatabaseError):
            store.turn_seen("nothing")
        assert store.turn_seen("nothing") is False  # ...and the pool dropped its dead connections
    finally:
        store.close()
