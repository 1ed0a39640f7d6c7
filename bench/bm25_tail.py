"""BM25's tail on a kept bench database: each bench question's BM25 statement alone, per table, with the server's
CPU per statement, optionally two versions of ``factforge/storage/bm25.py`` alternating per question.

Reads a database that ``bench/bench_search.py --keep-db PATH`` loaded (starts its embedded server if it is not
running; stop it with ``--stop``). Per question and table (``fact_terms`` for facts, ``turns`` for episodes): the
two statements search() sends (the term statistics, then the top-n statement), timed together on one long-lived
connection (after a warm-up round), and the backend's CPU (``/proc/<pid>/schedstat``, ns). With ``--old REV`` the
bm25.py of git revision REV runs too, alternating per question, and the two top-n score lists are compared (they
must be equal: both are exact). ``--explain N`` prints EXPLAIN (ANALYZE, BUFFERS) of the N slowest statements.

Usage::

    PYTHONPATH=$PWD .venv/bin/python bench/bm25_tail.py --db /tmp/bm37db [--old 64ea7b7] [--rounds 2] [--explain 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
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

from search_breakdown import _cpu_ns  # noqa: E402 (a backend's CPU, from /proc)


def _load_old(rev: str) -> Any:
    """factforge.storage.bm25 as it was at git revision ``rev`` (a module of the same package)."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:factforge/storage/bm25.py"], check=True,
                          capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp(prefix="bm25old")) / "bm25_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("factforge.storage._bm25_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


CLIENT: list[float] = []  # the client's CPU per statement pair (ms)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))] if s else float("nan")


def run_one(conn: Any, impl: Any, table: str, where: str, params: dict[str, Any], text: str, n: int,
            generic: bool = False) -> tuple[float, float, list[float], Any]:
    pid = conn.info.backend_pid
    c0, t0, p0 = _cpu_ns(pid), time.perf_counter(), time.process_time()
    rows = conn.execute(impl.terms_sql(table), {"q": text}).fetchall()
    built, _ = impl.bm25_query_from(rows, where, {**params, "q": text, "n": n}, text, table)
    if built is None:
        out = []
    elif generic:
        with conn.pipeline():
            conn.execute("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")
            cur = conn.execute(*built, prepare=True)
        out = cur.fetchall()
    elif hasattr(impl, "send_ranks"):  # as search() sends it (prepared, its generic plan)
        with conn.pipeline():
            cur = impl.send_ranks(conn, [built])[0]
        out = cur.fetchall()
    else:
        out = conn.execute(*built).fetchall()
    wall = (time.perf_counter() - t0) * 1000
    cpu = (_cpu_ns(pid) - c0) / 1e6
    CLIENT.append((time.process_time() - p0) * 1000)
    return wall, cpu, [round(float(s), 9) for _, s in out], built


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", required=True, help="the --keep-db folder of bench_search.py")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--n", type=int, default=40, help="BM25 candidates (search() asks max(40, 4k))")
    ap.add_argument("--tables", default="fact_terms,turns")
    ap.add_argument("--old", metavar="REV", help="also run bm25.py of this git revision, alternating per question")
    ap.add_argument("--rounds", type=int, default=1, help="timed rounds after one warm-up round")
    ap.add_argument("--explain", type=int, default=0, metavar="N", help="EXPLAIN the N slowest (new) statements")
    ap.add_argument("--generic", action="store_true", help="also run the new statement prepared at once with "
                                                           "plan_cache_mode force_generic_plan (as newg; what "
                                                           "send_ranks does, where the checkout has it)")
    ap.add_argument("--stop", action="store_true", help="stop the server at the end")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import psycopg

    from bench_search import _stop_server, generate_queries
    import random

    from factforge.storage import bm25 as new
    from factforge.storage.embedded import ensure_server
    from factforge.storage.scope import episode_filters, fact_filters

    impls: dict[str, Any] = {"new": new}
    if args.old:
        impls = {"old": _load_old(args.old), "new": new}
    if args.generic:
        impls["newg"] = new
    home = Path(args.db)
    url = ensure_server(home)
    conninfo = "postgresql://" + url.split("://", 1)[1]
    queries = generate_queries(args.queries, random.Random(args.seed + 1))
    filters = {"fact_terms": fact_filters, "turns": episode_filters}
    tables = args.tables.split(",")
    res: dict[str, Any] = {}
    per: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    mismatch = 0
    try:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            for rnd in range(args.rounds + 1):
                for qi, (text, agent, team) in enumerate(queries):
                    for table in tables:
                        where, params = filters[table](agent, team)
                        order = list(impls.items())
                        shift = (qi + rnd) % len(order)
                        order = order[shift:] + order[:shift]
                        scores = {}
                        for name, impl in order:
                            wall, cpu, sc, _ = run_one(conn, impl, table, where, params, text, args.n,
                                                       name == "newg")
                            scores[name] = sc
                            if rnd:
                                per.setdefault((name, table), []).append((wall, cpu, qi))
                        for name in scores:
                            if name != "new" and scores[name] != scores["new"]:
                                mismatch += 1
                                print(f"scores differ: {table} {text!r} {agent}\n {name} {scores[name][:12]}\n"
                                      f" new {scores['new'][:12]}", file=sys.stderr)
            for (name, table), rows in sorted(per.items()):
                walls = [r[0] for r in rows]
                cpus = [r[1] for r in rows]
                res[f"{name} {table}"] = {
                    "wall_p50": round(pct(walls, 50), 2), "wall_p95": round(pct(walls, 95), 2),
                    "wall_p99": round(pct(walls, 99), 2), "cpu_p50": round(pct(cpus, 50), 2),
                    "cpu_p95": round(pct(cpus, 95), 2), "cpu_p99": round(pct(cpus, 99), 2),
                    "cpu_mean": round(statistics.fmean(cpus), 2)}
                print(f"{name:4} {table:10} wall p50/p95/p99 {res[f'{name} {table}']['wall_p50']:7.2f} "
                      f"{res[f'{name} {table}']['wall_p95']:7.2f} {res[f'{name} {table}']['wall_p99']:7.2f}  "
                      f"server cpu p50/p95/p99 {res[f'{name} {table}']['cpu_p50']:7.2f} "
                      f"{res[f'{name} {table}']['cpu_p95']:7.2f} {res[f'{name} {table}']['cpu_p99']:7.2f} "
                      f"mean {res[f'{name} {table}']['cpu_mean']:.2f} ms")
            res["client_cpu_p50"] = round(pct(CLIENT, 50), 2)
            print(f"client cpu per question and table p50 {res['client_cpu_p50']} ms (all variants)")
            res["score_mismatches"] = mismatch
            print(f"score mismatches old/new: {mismatch}")
            # the slowest questions by server CPU (median over rounds), per table
            for table in tables:
                by_q: dict[int, list[float]] = {}
                for wall, cpu, qi in per.get(("new", table), []):
                    by_q.setdefault(qi, []).append(cpu)
                worst = sorted(by_q, key=lambda q: -statistics.median(by_q[q]))[:10]
                print(f"-- slowest {table} (new, server cpu ms median):")
                for qi in worst:
                    old = [c for _, c, q in per.get(("old", table), []) if q == qi]
                    print(f"  {statistics.median(by_q[qi]):7.2f}"
                          + (f" (old {statistics.median(old):7.2f})" if old else "")
                          + f"  {queries[qi][1]} {queries[qi][0]!r}")
                for qi in worst[:args.explain]:
                    text, agent, team = queries[qi]
                    where, params = filters[table](agent, team)
                    _, _, _, built = run_one(conn, new, table, where, params, text, args.n)
                    if built is None:
                        continue
                    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + built[0], built[1]).fetchall()
                    print(f"\n-- EXPLAIN {table} {agent} {text!r}\n" + "\n".join(r[0] for r in plan))
    finally:
        if args.stop:
            _stop_server(home / "pg")
    if args.json:
        print(json.dumps(res))
    return 1 if mismatch else 0


if __name__ == "__main__":
    raise SystemExit(main())
