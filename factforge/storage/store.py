"""The facts database: a thin :class:`Store` (connections, transactions) over plain storage operations.

Each group of operations is a module of plain functions over a store - :mod:`.sessions` (sessions and turns),
:mod:`.facts` (writes, dedup, paraphrase merge, supersession, listing), :mod:`.entities`, :mod:`.forget`,
:mod:`.embeddings`, :mod:`.queue` (LLM work and call accounting), :mod:`.stats` - and the Store exposes
them as its methods. Who may see what is :mod:`.scope`'s; reads for search live in :mod:`.search`.
A :class:`Store` is safe to share between threads (SQLAlchemy's pool hands each call its own connection).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import DatabaseError
from ..settings import Settings
from ..types import Fact, Supersession, content_hash, normalize_content
from . import embeddings as _embeddings
from . import entities as _entities
from . import facts as _facts
from . import forget as _forget
from . import queue as _queue
from . import sessions as _sessions
from . import stats as _stats
from .entities import normalize_entity
from .facts import MAX_TX_ATTEMPTS, RETRY_SQLSTATES, sqlstate
from .records import Miss, Provenance, QueueItem, Scope, StoredFact, check_fact, check_text

__all__ = ["Provenance", "QueueItem", "Miss", "Scope", "Store", "StoredFact", "content_hash", "normalize_content"]

# What a new fact supersedes (the fact, whether it has a vector) and an entity name's known spelling (None:
# unknown): decided by the rules, given to the store when it is opened.
Supersede = Callable[[Fact, bool], Sequence[Supersession]]
Canonical = Callable[[str], "str | None"]


def _no_supersession(fact: Fact, has_vector: bool) -> Sequence[Supersession]:
    return ()


def _no_canonical_name(name: str) -> str | None:
    return None


# Importable from here as before the split.
_REEXPORTED = (normalize_entity, MAX_TX_ATTEMPTS, RETRY_SQLSTATES, check_fact, check_text)


class Rows:
    """The result of one statement: psycopg's cursor, read the way the storage modules need."""

    __slots__ = ("_cur",)

    def __init__(self, cur: Any) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return int(self._cur.rowcount)

    def first(self) -> Any:
        return self._cur.fetchone()

    def one(self) -> Any:
        rows = self._cur.fetchall()
        if len(rows) != 1:
            raise DatabaseError(f"expected one row, got {len(rows)}")
        return rows[0]

    def fetchall(self) -> list[Any]:
        return list(self._cur.fetchall())

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur)

    def mappings(self) -> Mappings:
        # The names straight from the result (as psycopg's dict_row reads them): cursor.description makes a
        # Column object per column first, ~0.1 ms for a fact's 25 columns.
        # (``_encoding`` is psycopg's cached client encoding; the public lookup if a version lacks it)
        res = self._cur.pgresult
        enc = getattr(self._cur, "_encoding", None) or self._cur.connection.info.encoding
        names = [res.fname(i).decode(enc) for i in range(res.nfields)]
        return Mappings(dict(zip(names, row)) for row in self._cur)


class Mappings(list[dict[str, Any]]):
    """Rows as dicts by column name."""

    def first(self) -> dict[str, Any] | None:
        return self[0] if self else None

    def one(self) -> dict[str, Any]:
        if len(self) != 1:
            raise DatabaseError(f"expected one row, got {len(self)}")
        return self[0]


class Tx:
    """One transaction's connection. Statements go straight to psycopg: SQLAlchemy pools the connections, but
    its result objects and transaction bookkeeping cost ~50 µs a statement and ~110 µs a commit (measured),
    a sixth of a remembered turn's CPU. ``exec_driver_sql`` has the call shape of SQLAlchemy's: one dict of
    named ``%(x)s`` parameters (a list of dicts runs the statement once per dict)."""

    __slots__ = ("_pg", "_listen", "_begun", "one_call", "_sent", "_ended")

    def __init__(self, pg: Any, listen: Callable[[str], object] | None) -> None:
        self._pg, self._listen, self._begun = pg, listen, False
        # one_call: the transaction holds one library call (the unit's opener says so, see Store.unit_of_work)
        self.one_call = self._sent = self._ended = False

    def exec_driver_sql(self, sql: str, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None = None,
                        *, last: bool = False) -> Rows:
        """Run one statement in this transaction. ``last``: the caller's call sends nothing after it. When the
        transaction holds only that call and this is its first statement, it is the transaction's only one: it
        is sent alone, committed by the server as it ends (autocommit), without a BEGIN and a COMMIT round trip
        each (a remembered turn without facts is one statement: three round trips fewer)."""
        if self._ended:
            raise RuntimeError("a statement after the transaction's last one")
        alone = last and self.one_call and not self._sent and not isinstance(params, (list, tuple))
        self._sent = True
        if self._listen is not None:
            if not self._begun and not alone:
                self._begun = True
                self._listen("BEGIN")
            self._listen(sql)
        cur = self._pg.cursor()
        if isinstance(params, (list, tuple)):
            cur.executemany(sql, params)
        elif alone:
            self._ended = True
            self._alone(cur, sql, params)
        else:  # always with parameters, as SQLAlchemy does: "%%" is one "%" in every statement
            cur.execute(sql, params if params is not None else {})
        return Rows(cur)

    def _alone(self, cur: Any, sql: str, params: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None) -> None:
        """Send one statement outside the transaction, committed by the server as it ends (autocommit)."""
        self._pg.autocommit = True  # idle (nothing sent yet): this sends nothing
        try:
            cur.execute(sql, params if params is not None else {})
        finally:
            self._pg.autocommit = False

    def read(self, sql: str, params: Mapping[str, Any] | None = None) -> Rows:
        """Run one read. While the transaction has sent nothing it goes alone, in autocommit: no BEGIN and COMMIT
        round trips for it, and the call's write after it may still go alone (a bare "yes" reads the reply it
        confirms, then writes its turn: one round trip each instead of four). Under READ COMMITTED a statement
        sees the same committed rows in a transaction or out of one; once the transaction has begun, the read
        runs in it and sees its writes (a batch's earlier turns)."""
        if self._sent or self._ended:
            return self.exec_driver_sql(sql, params)
        if self._listen is not None:
            self._listen(sql)
        cur = self._pg.cursor()
        self._alone(cur, sql, params)
        return Rows(cur)


class Store:
    """The facts database. Open with :meth:`open`; it migrates a new database to the current schema."""

    def __init__(self, url: str, settings: Settings, engine: Any, *, supersession: Supersede | None = None,
                 canonical_name: Canonical | None = None) -> None:
        self.url = url
        self.settings = settings
        self.engine = engine
        # Decided by the rules, applied here (see factforge.memory.open_store): what a new fact supersedes,
        # and the known spelling of an entity name. Without them nothing is superseded and names stay as given.
        self.supersession: Supersede = supersession or _no_supersession
        self.canonical_name: Canonical = canonical_name or _no_canonical_name
        # The open unit of work of each thread (see unit_of_work); other threads keep their own transactions.
        self._local = threading.local()
        # Called with each statement's SQL (and BEGIN / COMMIT) before it is sent: for diagnostics and tests
        # (bench_api --statements), None in normal use.
        self.statement_listener: Callable[[str], object] | None = None

    @classmethod
    def open(cls, settings: Settings, *, check_embedder: bool = True, supersession: Supersede | None = None,
             canonical_name: Canonical | None = None) -> Store:
        from sqlalchemy.exc import SQLAlchemyError

        from . import db
        from .pooling import create_pooled_engine

        url = db.database_url(settings)
        db.ensure_schema(url, settings, check_embedder=check_embedder)
        try:
            engine = create_pooled_engine(url, pool_size=settings.db_pool_size)
            with engine.connect():
                pass
        except SQLAlchemyError as exc:
            raise DatabaseError(db.describe_connect_error(exc, url)) from None
        return cls(url, settings, engine, supersession=supersession, canonical_name=canonical_name)

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _tx(self) -> Iterator[Tx]:
        """This thread's unit of work if one is open, else a transaction of its own, committed at the end."""
        import psycopg
        from sqlalchemy.exc import SQLAlchemyError

        bound = self._bound()
        if bound is not None:  # part of this thread's unit of work: it commits at the end of the unit
            try:
                yield bound
            except psycopg.Error as exc:
                raise self._database_error(exc) from exc
            return
        try:
            pooled = self.engine.raw_connection()  # the pool's checkout (and idle ping), see .pooling
        except (SQLAlchemyError, psycopg.Error) as exc:  # a failed connect comes unwrapped from here
            raise self._database_error(getattr(exc, "orig", None) or exc) from exc
        pg = pooled.driver_connection
        if pg.autocommit:  # left so by a failed reader; setting it on an idle connection sends nothing
            pg.autocommit = False
        try:
            listen = self.statement_listener
            tx = Tx(pg, listen)
            yield tx
            if listen is not None and tx._begun:
                listen("COMMIT")
            pg.commit()
        except psycopg.Error as exc:
            self._abandon(pooled, exc)
            raise self._database_error(exc) from exc
        except BaseException:
            self._abandon(pooled, None)
            raise
        finally:
            pooled.close()  # back to the pool

    def _abandon(self, pooled: Any, exc: BaseException | None) -> None:
        """Roll back a failed transaction. A connection the server dropped is thrown away with every other
        pooled one (they likely went with the same restart), as SQLAlchemy does when its own statement fails."""
        import psycopg

        pg = pooled.driver_connection
        if not pg.broken:
            try:
                pg.rollback()
                return
            except psycopg.Error as rollback_failed:
                exc = exc or rollback_failed
        pooled.invalidate(exc)
        self.engine.dispose(close=False)

    def _database_error(self, orig: BaseException) -> DatabaseError:
        """One line for a failed statement; a full disk says which disk and what to do."""
        from .embedded import disk_full_error

        first = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        if disk_full_error(self.settings.home, orig) is not None:
            where = (f"the embedded server's disk (FACTFORGE_HOME={self.settings.home})"
                     if self.settings.database_url is None else "the database server's disk")
            return DatabaseError(f"{where} is full ({first}): free some space; this write was rolled back, "
                                 "nothing else was lost")
        return DatabaseError(f"database error: {first}")

    def _bound(self) -> Any:
        return getattr(self._local, "conn", None)

    @contextmanager
    def unit_of_work(self, *, savepoints: bool = True, one_call: bool = False) -> Iterator[None]:
        """Run every write of this thread in one transaction until the block ends (a batch of turns).

        It commits when the block ends and rolls back if it raises, so either all of it is stored or none.
        Inside it a conflicting write (deadlock, serialisation failure) is not retried: the transaction is
        aborted by then, the :class:`DatabaseError` ends the unit and the caller redoes the work without it.
        Work registered with :meth:`after_commit` runs once the commit is done. A nested call joins the
        outer unit. ``savepoints=False``: the unit holds one call, so a failing call ends the unit anyway and
        the savepoint around it (two round trips) is left out. ``one_call``: the unit holds one call (as with
        ``savepoints=False``), which may nest its own savepoints. Either lets that call's only statement go
        alone, without a BEGIN and a COMMIT (see :meth:`Tx.exec_driver_sql`).
        """
        if self._bound() is not None:
            yield
            return
        hooks: list[Callable[[], object]] = []
        with self._tx() as conn:
            conn.one_call = one_call or not savepoints
            self._local.conn, self._local.hooks, self._local.savepoints = conn, hooks, savepoints
            try:
                yield
            finally:
                self._local.conn = self._local.hooks = None
                self._local.savepoints = True
        for hook in hooks:
            hook()

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """Inside a unit of work, undo only this block's writes if it raises; elsewhere, do nothing."""
        import psycopg

        conn = self._bound()
        if conn is None or not self._local.savepoints:
            yield
            return
        # Plain SQL: one round trip each way.
        try:
            conn.exec_driver_sql("SAVEPOINT ff_call")
            try:
                yield
            except BaseException:
                conn.exec_driver_sql("ROLLBACK TO SAVEPOINT ff_call")
                raise
            conn.exec_driver_sql("RELEASE SAVEPOINT ff_call")
        except psycopg.Error as exc:
            raise self._database_error(exc) from exc

    @contextmanager
    def atomic(self) -> Iterator[None]:
        """One call's writes as one transaction: its own when none is open, else a savepoint of the open unit
        of work (so a failing call inside a batch leaves nothing behind and the batch goes on)."""
        if self._bound() is not None:
            with self.savepoint():
                yield
        else:
            with self.unit_of_work(one_call=True):
                yield

    def retryable(self, exc: DatabaseError) -> bool:
        """Whether a failed write is a conflict with a concurrent writer (deadlock, serialisation, unique race)
        that a fresh transaction may redo; never inside an open unit of work (it is aborted by then)."""
        return sqlstate(exc) in RETRY_SQLSTATES and self._bound() is None

    def after_commit(self, hook: Callable[[], object]) -> None:
        """Call ``hook`` once this thread's unit of work has committed (at once outside one); the same hook
        registered twice in a unit runs once."""
        hooks = getattr(self._local, "hooks", None)
        if hooks is None:
            hook()
        elif hook not in hooks:
            hooks.append(hook)

    def _all(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._tx() as conn:
            return [dict(r) for r in conn.exec_driver_sql(sql, dict(params or {})).mappings()]

    def _read(self, sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The rows of one read, sent as :meth:`Tx.read` sends it (alone while the transaction has sent nothing:
        outside a unit of work, no BEGIN and COMMIT at all, as psycopg's commit of an idle connection sends none)."""
        with self._tx() as conn:
            return [dict(r) for r in conn.read(sql, dict(params or {})).mappings()]

    @property
    def claim_seconds(self) -> float:
        """How long a claim lasts before another worker may take the item."""
        return self.settings.claim_seconds


    # -- the operations: plain functions over a store (see each module) ------------------------------

    upsert_session = _sessions.upsert_session
    turn_seen = _sessions.turn_seen
    seen_keys = _sessions.seen_keys
    record_turn = _sessions.record_turn
    last_assistant_message = _sessions.last_assistant_message

    save = _facts.save
    facts = _facts.facts
    get = _facts.get
    sources = _facts.sources

    known_entities = _entities.known_entities
    forget = _forget.forget

    facts_without_embedding = _embeddings.facts_without_embedding
    episodes_without_embedding = _embeddings.episodes_without_embedding
    set_embeddings = _embeddings.set_embeddings
    reset_embedding_column = _embeddings.reset_embedding_column
    build_graphs = _embeddings.build_graphs

    enqueue = _queue.enqueue
    claim_due = _queue.claim_due
    release_claims = _queue.release_claims
    fail = _queue.fail
    release = _queue.release
    complete = _queue.complete
    retry_failed = _queue.retry_failed
    queue_counts = _queue.queue_counts
    queue_waiting = _queue.queue_waiting
    record_llm_call = _queue.record_llm_call

    record_miss = _stats.record_miss
    enqueue_unanswered = _stats.enqueue_unanswered
    top_misses = _stats.top_misses
    stats = _stats.stats
