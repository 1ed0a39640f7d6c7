"""``factforge serve --workers N``: N uvicorn processes over one database, each answering with the key's scope."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from factforge.settings import Settings
from factforge.storage.keys import KeyStore
from factforge.storage.store import Store

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_two_worker_processes_serve_one_database(db_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off"}
    store = Store.open(Settings.from_env(env))
    try:
        keys = KeyStore(store.engine)
        key_a = keys.create(agent_id="a", team_id="t")[1]
        key_b = keys.create(agent_id="b", team_id="t")[1]
    finally:
        store.close()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "factforge", "serve", "--workers", "2", "--port", str(port),
                             "--no-llm", "--db-pool", "2", "--log-level", "warning"], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert proc.poll() is None and time.monotonic() < deadline, "factforge serve --workers 2 did not start"
            time.sleep(0.2)
        # the server processes (multiprocessing's resource tracker, a child too, outlives the parent a moment)
        workers = [p for p in psutil.Process(proc.pid).children()
                   if ("factforge" in " ".join(p.cmdline()) or "multiprocessing" in " ".join(p.cmdline()))
                   and "resource_tracker" not in " ".join(p.cmdline())]
        assert len(workers) == 2
        with httpx.Client(base_url=url, timeout=60) as http:
            for i in range(6):  # new connections: the kernel spreads them over both processes
                r = http.post("/v1/remember", json={"user": f"I prefer tabs over spaces in project {i}"},
                              headers={"Authorization": f"Bearer {key_a}", "Connection": "close"})
                assert r.status_code == 200, r.text
            mine = http.post("/v1/search", json={"query": "tabs spaces", "k": 10},
                             headers={"Authorization": f"Bearer {key_a}"}).json()["hits"]
            theirs = http.post("/v1/search", json={"query": "tabs spaces", "k": 10},
                               headers={"Authorization": f"Bearer {key_b}"}).json()["hits"]
            assert mine and all(h["agent_id"] == "a" for h in mine)
            assert theirs == []  # a's private preferences, whichever process answers
            assert http.post("/v1/search", json={"query": "x"}).status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    for worker in workers:  # SIGTERM to the parent stops every worker before the parent exits
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE


def test_the_workers_listening_socket_is_tcp_so_asyncio_turns_nagle_off() -> None:
    from factforge.cli_service import listen_socket

    sock = listen_socket("127.0.0.1", 0)
    try:
        # asyncio sets TCP_NODELAY only on connections whose socket says IPPROTO_TCP (uvicorn's own shared
        # socket says 0, and each of its responses then waited for the client's delayed ACK, ~40 ms)
        assert sock.proto == socket.IPPROTO_TCP and sock.get_inheritable()
        sock.listen()
        client = socket.create_connection(sock.getsockname())
        accepted, _ = sock.accept()
        with client, accepted:
            assert accepted.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


@pytest.mark.parametrize(("no_embed", "embed_in"), [(False, "api"), (True, "worker")])
def test_serve_no_embed_leaves_the_vectors_to_workers(monkeypatch: pytest.MonkeyPatch, no_embed: bool,
                                                      embed_in: str) -> None:
    """`factforge serve --no-embed` serves with FACTFORGE_EMBED_IN=worker: its Memory runs no model for what it
    stores (tests/test_episodes.py holds what that means)."""
    import argparse

    from factforge import cli_service
    from factforge.service import Service

    class Opened(Exception):
        pass

    seen: list[Settings] = []

    def opened(_cls: type, settings: Settings, *, llm: object = "auto") -> Service:
        seen.append(settings)
        raise Opened

    monkeypatch.setattr(Service, "open", classmethod(opened))
    monkeypatch.delenv("FACTFORGE_EMBED_IN", raising=False)
    args = argparse.Namespace(database_url=None, db_pool=None, no_embed=no_embed, workers=1, no_llm=True,
                              host="127.0.0.1", port=0, log_level="warning")
    with pytest.raises(Opened):
        cli_service.cmd_serve(args)
    assert seen[0].embed_in == embed_in
