"""The connection pool behind a :class:`factforge.storage.store.Store`: checked only when it may have gone stale.

SQLAlchemy's ``pool_pre_ping`` asks the server on *every* checkout whether the connection is still alive: one
round trip more for each key check, each remember and each half of a hybrid search (a search checks out three
connections), about a sixth of a search's time on loopback. A connection handed back moments ago is alive
unless the server restarted in those moments, so here only a connection that sat idle in the pool longer than
``IDLE_PING_S`` is pinged; a dead one is replaced before anyone sees it. A server restart inside that window
costs one request a ``DatabaseError`` (503 from the API): the failed statement tells SQLAlchemy the server went
away, which then drops every pooled connection older than the failure, so the next request gets fresh ones.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["IDLE_PING_S", "autocommit_connection", "create_pooled_engine"]

# Long enough that a busy server never pings, short enough that a quiet one (where a restart is likelier to
# have happened unseen, e.g. overnight) pings the first connection it takes.
IDLE_PING_S = 10.0

_CHECKED_IN = "factforge_checked_in"


def create_pooled_engine(url: str, *, pool_size: int, max_overflow: int = 4) -> Any:
    """A SQLAlchemy engine whose pool pings only connections idle for more than ``IDLE_PING_S`` seconds, with
    pgvector's types registered on every new connection."""
    from sqlalchemy import create_engine, event
    from sqlalchemy.exc import DisconnectionError

    # Last in, first out: the few connections a steady load needs stay the ones in use, and stay warm (a server
    # backend's catalog caches and plans, psycopg's statements prepared after five runs); first in, first out
    # spread the load over every connection a burst had ever opened (a server's warm-up, hybrid searches
    # holding two at once), each warming up on its own.
    engine = create_engine(url, pool_size=pool_size, max_overflow=max_overflow, pool_use_lifo=True)

    @event.listens_for(engine, "connect")
    def _register(dbapi_conn: Any, record: Any) -> None:
        from pgvector.psycopg import register_vector

        register_vector(dbapi_conn)
        record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_conn: Any, record: Any) -> None:
        if record is not None:
            record.info[_CHECKED_IN] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_conn: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get(_CHECKED_IN, 0.0) <= IDLE_PING_S:
            return
        try:
            engine.dialect.do_ping(dbapi_conn)  # SQLAlchemy's own ping (what pool_pre_ping runs)
        except Exception as exc:  # noqa: BLE001 - any failure means: not usable, take another
            raise DisconnectionError(str(exc)) from exc  # the pool replaces it and checks out again

    return engine


@contextmanager
def autocommit_connection(engine: Any) -> Iterator[Any]:
    """A pooled psycopg connection in autocommit for the block (reads that need no transaction: no BEGIN and
    no ROLLBACK round trip), back in transaction mode for the pool's other users afterwards. A connection on
    which a statement failed is thrown away, not given back (it may be broken). The pool's own errors (a
    failed connect) come from ``engine.raw_connection()`` as they are."""
    import psycopg

    raw = engine.raw_connection()
    try:
        conn = raw.driver_connection
        conn.autocommit = True  # the pool hands out idle connections, so this sends nothing
        try:
            yield conn
        finally:
            if not conn.broken:
                conn.autocommit = False
    except psycopg.Error:
        raw.invalidate()
        raise
    finally:
        raw.close()
