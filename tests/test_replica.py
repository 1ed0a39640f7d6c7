"""FACTFORGE_READ_DATABASE_URL against a real streaming replica (pg_basebackup + a hot standby), built from
the embedded server's own binaries: reads go to the replica, writes to the primary."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from factforge.storage import db
from tests.servers import RunningAPI, running_api, streaming_replica


@pytest.fixture(scope="module")
def primary_and_replica() -> Iterator[tuple[str, str]]:
    with streaming_replica() as urls:
        yield urls


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
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready" and ready["read_replica"] is True
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
