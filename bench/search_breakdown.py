"""Where a hybrid search's time goes, on a kept bench database: per bench question, search() through a Store
(wall, the client's CPU, the server's CPU summed over every backend of the server) and, on one long-lived
connection, each part alone: the query's embedding (LocalEmbedder, as Memory.search would), the vector statements
of facts and episodes (search()'s pipeline), the BM25 statements of facts and episodes (terms + top n), each with
its backend's CPU.

Reads a database that ``bench/bench_search.py --keep-db PATH`` loaded (starts its embedded server; ``--stop``
stops it). Server CPU comes from ``/proc/<pid>/schedstat`` (ns), so it is what the work cost, however loaded the
machine; wall times include the waits of a loaded machine.

Usage::

    PYTHONPATH=$PWD .venv/bin/python bench/search_breakdown.py --db /tmp/bm37db [--queries 200] [--stop]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LC_ALL", "C.UTF-8")
os.environ.setdefault("LANG", "C.UTF-8")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def _cpu_ns(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            return int(fh.read().split()[0])
    except OSError:
        return 0


def _server_ns(postmaster: int) -> int:
    """CPU of every process of the server (backends, and its background processes: a little noise)."""
    import psutil

    return sum(_cpu_ns(p.pid) for p in psutil.Process(postmaster).children())


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))] if s else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--modes", default="hybrid", help="search() modes to time (comma-separated)")
    ap.add_argument("--stop", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from bench_search import FixedEmbedder, _stop_server, generate_queries
    from factforge.models.embed import LocalEmbedder
    from factforge.settings import Settings
    from factforge.storage import bm25
    from factforge.storage.bm25 import bm25_query_from, terms_sql
    from factforge.storage.embedded import ensure_server
    from factforge.storage.scope import episode_filters, fact_filters
    from factforge.storage.search import _Kind, _QueryVector, _send_kinds_vectors, search
    from factforge.storage.store import Store

    home = Path(args.db)
    url = ensure_server(home)
    conninfo = "postgresql://" + url.split("://", 1)[1]
    postmaster = int((home / "pg" / "postmaster.pid").read_text().split()[0])
    queries = generate_queries(args.queries, random.Random(args.seed + 1))
    embedder = LocalEmbedder()
    embedder.embed(["warm up"])
    emb_ms, emb_cpu, vecs = [], [], []
    for text, _, _ in queries:
        t0, p0 = time.perf_counter(), time.process_time()
        vecs.append(np.asarray(embedder.embed([text])[0], dtype=np.float32))
        emb_ms.append((time.perf_counter() - t0) * 1000)
        emb_cpu.append((time.process_time() - p0) * 1000)
    res: dict[str, Any] = {"embed_wall": emb_ms, "embed_client_cpu": emb_cpu}
    with psycopg.connect(conninfo) as conn:
        res["episodes"] = conn.execute("SELECT count(*) FROM turns WHERE visibility IS NOT NULL").fetchone()[0]
    kinds = [("fact", "facts", "fact_terms", fact_filters)]
    if res["episodes"]:
        kinds.append(("episode", "turns", "turns", episode_filters))

    # each part alone, on one connection, with its backend's CPU
    parts: dict[str, list[tuple[float, float]]] = {}
    with psycopg.connect(conninfo, autocommit=True) as conn:
        register_vector(conn)
        pid = conn.info.backend_pid
        for rnd in range(2):
            for (text, agent, team), vec in zip(queries, vecs):
                for name, table, terms_table, filters in kinds:
                    where, params = filters(agent, team)
                    params.update(q=text, n=40)
                    c0, t0 = _cpu_ns(pid), time.perf_counter()
                    with conn.pipeline():
                        kind = _Kind(name, table, terms_table, where, params)
                        ranks = _send_kinds_vectors(conn, [kind], {name: where}, _QueryVector.of(vec), 40, None,
                                                    True)[name]
                    ranks()
                    c1, t1 = _cpu_ns(pid), time.perf_counter()
                    rows = conn.execute(terms_sql(terms_table), {"q": text}).fetchall()
                    built, _ = bm25_query_from(rows, where, params, text, terms_table)
                    if built is not None:
                        if hasattr(bm25, "send_ranks"):  # (older checkouts: a plain execute)
                            with conn.pipeline():
                                cur = bm25.send_ranks(conn, [built])[0]
                        else:
                            cur = conn.execute(*built)
                        cur.fetchall()
                    c2, t2 = _cpu_ns(pid), time.perf_counter()
                    if rnd:
                        parts.setdefault(f"vector {name}", []).append(((t1 - t0) * 1000, (c1 - c0) / 1e6))
                        parts.setdefault(f"bm25 {name}", []).append(((t2 - t1) * 1000, (c2 - c1) / 1e6))

    source = Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": tempfile.gettempdir()}))
    whole: dict[str, list[tuple[float, float, float]]] = {}
    try:
        for mode in args.modes.split(","):
            for rnd in range(2):
                for (text, agent, team), vec in zip(queries, vecs):
                    s0, t0, p0 = _server_ns(postmaster), time.perf_counter(), time.process_time()
                    search(source, text, agent_id=agent, team_id=team, k=10, embedder=FixedEmbedder(vec), mode=mode)
                    wall = (time.perf_counter() - t0) * 1000
                    if rnd:
                        whole.setdefault(mode, []).append(
                            (wall, (time.process_time() - p0) * 1000, (_server_ns(postmaster) - s0) / 1e6))
    finally:
        source.close()
        if args.stop:
            _stop_server(home / "pg")

    def line(label: str, walls: list[float], cpus: dict[str, list[float]]) -> dict[str, float]:
        out = {"wall_p50": round(pct(walls, 50), 2), "wall_p95": round(pct(walls, 95), 2)}
        for k, v in cpus.items():
            out[f"{k}_p50"] = round(pct(v, 50), 2)
            out[f"{k}_p95"] = round(pct(v, 95), 2)
            out[f"{k}_mean"] = round(statistics.fmean(v), 2)
        print(f"{label:16} " + "  ".join(f"{k} {v}" for k, v in out.items()))
        return out

    summary = {"embed": line("embedding", emb_ms, {"client_cpu": emb_cpu})}
    for name, rows in parts.items():
        summary[name] = line(name, [r[0] for r in rows], {"server_cpu": [r[1] for r in rows]})
    for mode, rows in whole.items():
        summary[f"search {mode}"] = line(f"search {mode}", [r[0] for r in rows],
                                         {"client_cpu": [r[1] for r in rows], "server_cpu": [r[2] for r in rows]})
    if args.json:
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
