"""The ``factforge`` commands that run factforge as a service: serve, keys, mcp, worker.

Thin like the rest of the CLI: each parses its arguments and calls one library function.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from .jsonout import to_jsonable

Add = Callable[[str, Callable[[argparse.Namespace], int], str], argparse.ArgumentParser]


def _settings(args: argparse.Namespace) -> Any:
    from .settings import get_settings

    settings = get_settings()
    return settings.with_(database_url=args.database_url) if getattr(args, "database_url", None) else settings


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from .api import create_app, max_body_from_env
    from .service import Service

    settings = _settings(args)
    if args.db_pool is not None:
        settings = settings.with_(db_pool_size=args.db_pool)
    elif "FACTFORGE_DB_POOL_SIZE" not in os.environ:
        # the library's 4 are for one program; a server's requests run in up to 40 threads at once
        settings = settings.with_(db_pool_size=16)
    if args.no_embed:
        settings = settings.with_(background_embed=False, embed_in="worker")
    workers = args.workers if args.workers is not None else default_workers()
    if workers < 1:
        from .errors import ConfigError

        raise ConfigError(f"--workers {workers}: at least 1")
    if workers == 1:
        service = Service.open(settings, llm=None if args.no_llm else "auto")
        app = create_app(service, max_body=max_body_from_env(), host=args.host)
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, server_header=False)
        return 0
    from .api import SERVE_HOST_ENV
    from .storage import db

    # Once, here, before any worker starts: the embedded server (if no URL is set) and the schema migration;
    # a database that is down or outdated is then one clean error, not N crashing workers.
    url = db.database_url(settings)
    db.ensure_schema(url, settings)
    max_body_from_env()  # a bad FACTFORGE_API_MAX_BODY, likewise
    # The workers read their settings from the environment (see api.app_from_env).
    os.environ.update({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_DB_POOL_SIZE": str(settings.db_pool_size),
                       SERVE_HOST_ENV: args.host, **({"FACTFORGE_LLM": "off"} if args.no_llm else {}),
                       **({"FACTFORGE_BACKGROUND_EMBED": "off", "FACTFORGE_EMBED_IN": "worker"} if args.no_embed else {})})
    # The workers share one listening socket, and libuv (uvloop) accepts every connection waiting when it wakes:
    # 8 keep-alive clients connecting at once all went to one of two workers in 2 of 7 search runs (195 against
    # 240-280 req/s) and 7 to one in another (one client made 1,343 requests, the others ~260). One connection per
    # wake-up, then a yield, lets the other worker take the next (libuv's own switch): 374-399 requests a client.
    os.environ.setdefault("UV_TCP_SINGLE_ACCEPT", "1")
    config = uvicorn.Config("factforge.api:app_from_env", factory=True, workers=workers, host=args.host,
                            port=args.port, log_level=args.log_level, server_header=False)
    from uvicorn.supervisors import Multiprocess

    # What uvicorn.run(workers=N) does, but with a listening socket made as a single uvicorn makes its own: its
    # protocol IPPROTO_TCP (uvicorn's shared socket has 0), so asyncio turns Nagle's algorithm off on every
    # accepted connection. Without that a response sent in two writes waits for the client's delayed ACK:
    # 44 ms for each /healthz on loopback.
    sock = listen_socket(args.host, args.port)
    import logging

    logging.getLogger("uvicorn.error").info("factforge serve on http://%s:%d with %d worker processes",
                                            args.host, sock.getsockname()[1], workers)
    Multiprocess(config, sockets=[sock]).run()
    return 0


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for ``host``:``port`` that worker processes inherit."""
    from .errors import ConfigError

    try:
        family, kind, proto, _name, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                 proto=socket.IPPROTO_TCP)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc}") from None
    sock.set_inheritable(True)
    return sock


def default_workers() -> int:
    """One API process per core this process may run on. A request spends most of its CPU in Python
    (SQLAlchemy and psycopg per statement, the extraction rules, pydantic, the embedding model's glue), and one
    Python process runs Python on one core at a time (the GIL), so one process per core is what lets a
    request use the cores the others leave. PostgreSQL's backends are separate processes already."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def cmd_keys(args: argparse.Namespace) -> int:
    from .memory import Memory

    # Keys are managed whichever embedder the database was made with, so without the embedder check.
    with Memory(settings=_settings(args), llm=None, embedder=None, background=False, check_embedder=False) as memory:
        keys = memory.keys
        if args.action == "create":
            role = args.role
            info, key = keys.create(role=role, agent_id=args.agent, team_id=args.team, name=args.name,
                                    max_visibility=args.max_visibility)
            whom = "every scope" if role == "analyst" else f"agent {info.agent_id!r}" + (
                f" in team {info.team_id!r}" if info.team_id else "")
            reach = f", writing at most {info.max_visibility} facts" if role == "agent" else ""
            print(f"created {role} key {info.id} for {whom}{reach}; it is shown only now:")
            print(key)  # the last line, on its own: `factforge keys create ... | tail -1`
        elif args.action == "list":
            rows = keys.list(include_revoked=args.all)
            if args.json:
                for row in rows:
                    print(json.dumps(to_jsonable(row), ensure_ascii=False))
            else:
                for r in rows:
                    print(f"{r.id:>4}  {r.prefix}…  {r.role:<8}  agent={r.agent_id or '-'}  team={r.team_id or '-'}  "
                          + (f"max={r.max_visibility}  " if r.role == "agent" else "")
                          + f"created {r.created_at:%Y-%m-%d %H:%M}"
                          + (f"  last used {r.last_used_at:%Y-%m-%d %H:%M}" if r.last_used_at else "")
                          + (f"  REVOKED {r.revoked_at:%Y-%m-%d %H:%M}" if r.revoked_at else "")
                          + (f"  ({r.name})" if r.name else ""))
                if not rows:
                    print("no keys")
        else:
            info = keys.revoke(args.id)
            print(f"key {info.id} ({info.prefix}…) revoked")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from .errors import ConfigError
    from .settings import VISIBILITIES
    from .storage.keys import Principal
    from .mcp_server import run_stdio
    from .service import Service

    agent = args.agent or os.environ.get("FACTFORGE_AGENT_ID")
    team = args.team or os.environ.get("FACTFORGE_TEAM_ID")
    if not agent:
        raise ConfigError("factforge mcp needs the agent it acts as: --agent A (or FACTFORGE_AGENT_ID)")
    role = "readonly" if args.read_only else "agent"
    widest = args.max_visibility or os.environ.get("FACTFORGE_MAX_VISIBILITY") or "global"
    if widest not in VISIBILITIES:
        raise ConfigError(f"--max-visibility {widest!r} must be one of {', '.join(VISIBILITIES)}")
    run_stdio(Service.open(_settings(args)), Principal(role, agent, team or None, max_visibility=widest))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    import logging
    import threading

    from .memory import Memory
    from .worker import run_worker, stop_on_signals

    if not logging.getLogger().handlers:  # a long-running process: say what happens on stderr
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    stop_on_signals(stop)
    settings = _settings(args)
    with Memory(settings=settings, background=False, embedder="auto" if not args.no_embed else None) as memory:
        if memory._llm is None:
            print("factforge worker: the LLM is off (FACTFORGE_LLM=off): only embedding", file=sys.stderr)
        report = run_worker(memory, stop, idle_poll_s=args.poll, embed=not args.no_embed, max_items=args.max_items)
    print(f"worker stopped: {report.items} queue item(s), {report.facts} fact(s) stored, {report.failed} failed, "
          f"{report.retried} to retry, {report.embedded} fact(s) embedded")
    return 0


def add_commands(add: Add) -> None:
    """Register serve, keys, mcp and worker on the main parser."""
    sp = add("serve", cmd_serve, "Serve the HTTP API (and MCP at /mcp); every request needs an API key.")
    sp.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    sp.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    sp.add_argument("--no-llm", action="store_true", help="leave queued LLM work to `factforge worker` processes")
    sp.add_argument("--no-embed", action="store_true",
                    help="leave the vectors of new facts and episodes to `factforge worker` processes "
                         "(FACTFORGE_EMBED_IN=worker: keyword search finds them until a worker embeds them; queries "
                         "are still embedded here)")
    sp.add_argument("--db-pool", type=int,
                    help="pooled database connections per worker (default 16, or FACTFORGE_DB_POOL_SIZE)")
    sp.add_argument("--workers", type=int, metavar="N",
                    help="API processes (default: one per CPU core; 1 serves from this process)")
    sp.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                    help="uvicorn's log level (default info)")

    sp = add("keys", cmd_keys, "API keys: create (the key is the last line printed), list, revoke.")
    sp.add_argument("action", choices=("create", "list", "revoke"), help="what to do")
    sp.add_argument("id", nargs="?", type=int, help="revoke: the key's id (from `keys list`)")
    sp.add_argument("--agent", help="create: the agent the key acts as")
    sp.add_argument("--team", help="create: the agent's team")
    sp.add_argument("--role", choices=("agent", "readonly", "analyst"), default="agent",
                    help="create: agent (read+write its scope, default), readonly, analyst (reads every scope)")
    sp.add_argument("--name", help="create: a note on what the key is for")
    sp.add_argument("--max-visibility", choices=("private", "team", "global"), default="global",
                    help="create: the widest scope the key's facts may be shared to (default global); wider requests "
                         "are refused, and facts the server's settings would share wider are stored at this scope")
    sp.add_argument("--all", action="store_true", help="list: revoked keys too")
    sp.add_argument("--json", action="store_true", help="list: one JSON object per key")

    sp = add("mcp", cmd_mcp, "Serve MCP over stdio (for desktop clients), acting as one agent.")
    sp.add_argument("--agent", help="the agent (default FACTFORGE_AGENT_ID)")
    sp.add_argument("--team", help="the agent's team (default FACTFORGE_TEAM_ID)")
    sp.add_argument("--read-only", action="store_true", help="refuse remember and forget")
    sp.add_argument("--max-visibility", choices=("private", "team", "global"),
                    help="the widest scope remembered facts may be shared to (default FACTFORGE_MAX_VISIBILITY, "
                         "else global)")

    sp = add("worker", cmd_worker, "Process the LLM queue and embed facts without vectors until SIGTERM.")
    sp.add_argument("--poll", type=float, default=1.0, help="seconds to wait when there is nothing to do (default 1)")
    sp.add_argument("--no-embed", action="store_true", help="do not backfill embeddings")
    sp.add_argument("--max-items", type=int, help="stop after this many queue items")
