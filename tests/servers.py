"""A real ``factforge serve`` (uvicorn on a loopback port, in a thread) for the API and MCP tests."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from factforge.api import create_app
from factforge.keys import KeyStore
from factforge.service import Service
from factforge.settings import Settings


class RunningAPI:
    """The server's address, its service, and a helper to make keys."""

    def __init__(self, url: str, service: Service) -> None:
        self.url = url
        self.service = service
        self.keys = KeyStore(service.memory.store.engine)

    def key(self, agent: str | None = None, team: str | None = None, role: str = "agent") -> str:
        return self.keys.create(role=role, agent_id=agent, team_id=team)[1]


@contextmanager
def running_api(database_url: str, home: Path, *, max_body: int = 64 * 1024,
                read_database_url: str | None = None) -> Iterator[RunningAPI]:
    env = {"FACTFORGE_DATABASE_URL": database_url, "FACTFORGE_HOME": str(home), "FACTFORGE_LLM": "off"}
    if read_database_url:
        env["FACTFORGE_READ_DATABASE_URL"] = read_database_url
    service = Service.open(Settings.from_env(env), llm=None)
    app = create_app(service, max_body=max_body)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("factforge serve did not start")
        time.sleep(0.02)
    try:
        yield RunningAPI(f"http://127.0.0.1:{port}", service)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
