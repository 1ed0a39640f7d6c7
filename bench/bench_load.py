"""Where the time of a load with the indexes in place goes: one index dropped or one trigger disabled at a time.

bench_search's generated facts and vectors (as bench_peers makes them: seed 7, a pool of 8,000 real MiniLM
embeddings, the rest pool vector + noise) are loaded by ``bench_search.load`` (batched binary COPY over
``--streams`` connections) into a fresh copy of the migrated schema per variant. A variant is a list of
statements run on the empty copy first (drop an index, disable a trigger, rebuild the graph with other
parameters); ``all`` runs none: the schema as the migrations leave it. Per run it prints

* facts/s (wall time of the load; on a machine shared with other work, this moves with its load),
* CPU seconds per 1,000 facts: the load's server backends' (each read from ``/proc`` before it closes: Linux
  only) and the client's (this process); the machine's load moves these far less than facts/s,
* the server's CPU seconds in all (every process of the embedded server, once the load's backends are reaped:
  autovacuum workers and the WAL writer too, so it varies more),
* its buffer accesses (``blks_hit + blks_read`` of the copy's database): a count of the work done that the
  machine's load does not move, ~90% of it the HNSW graph's when the graph is in place,
* the WAL it wrote.

Usage::

    .venv/bin/python bench/bench_load.py [--facts 50000] [--streams 2] [--batch 10000] [--repeat 2]
        [--variants all,-graph,...] [--vectors-cache /tmp/pool100k.npz]

The variants run in the order given, ``--repeat`` times over (alternating, so that a change of the machine's
load falls on all of them). Figures: bench/README.md ("Where a load with the indexes in place spends its time").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_search as bs  # noqa: E402

_BTREES = ("facts_category_idx", "facts_created_idx", "facts_scope_idx", "facts_subject_relation_idx",
           "facts_source_session_idx", "facts_superseded_by_idx")
_UNIQUES = ("facts_current_global_uq", "facts_current_private_uq", "facts_current_team_uq")
_GINS = ("facts_tsv_gin", "fact_terms_scoped_gin", "facts_entities_gin")


def _migration(name: str) -> Any:
    """migrations/versions/<name>.py as a module (its name is no importable identifier)."""
    import importlib.util

    path = bs.ROOT / "migrations" / "versions" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"migration_{name[:4]}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# factforge_scoped_tsv as migrations 0006 and 0017 left it: the SQL body, which 0021's downgrade restores
_m0021 = _migration("0021_scoped_tsv_plpgsql")
_SCOPED_TSV_0006 = _m0021.function_sql(_m0021.SQL_BODY, "sql")
# factforge_scoped_tsv as migration 0021 left it, without 0025's impact classes (the function before the load: the
# empty copy's index holds nothing to rebuild)
_m0025 = _migration("0025_bm39_bm25_impact_classes")
_SCOPED_TSV_0021 = _m0025.function_sql(_m0025.PLAIN_BODY)


def _drop(*indexes: str) -> list[str]:
    return [f"DROP INDEX {i}" for i in indexes]


def _disable(*triggers: str) -> list[str]:
    return [f"ALTER TABLE facts DISABLE TRIGGER {t}" for t in triggers]


# name -> statements run on the empty copy before the load (index and trigger names as migrations 0001-0023 made them;
# since 0023 the graph is the global rows' only: a team's rows go into a graph of the team's once it has many)
def _team_graph(team: str) -> str:
    from factforge.storage.graphs import graph_ddl

    return graph_ddl("facts", "team", team, bs.DIM, concurrently=False).as_string(None)


VARIANTS: dict[str, list[str]] = {
    "all": [],
    "-graph": _drop("facts_embedding_global_hnsw"),
    "-private_cover": _drop("facts_private_agent_idx"),
    "-tsv_gin": _drop("facts_tsv_gin"),
    "-scoped_gin": _drop("fact_terms_scoped_gin"),
    "-entities_gin": _drop("facts_entities_gin"),
    "-btrees": _drop(*_BTREES),
    "-uniques": _drop(*_UNIQUES),
    "-bm25_trigger": _disable("facts_bm25_ins"),
    "-terms_trigger": _disable("facts_terms_ins"),  # fact_terms stays empty: its index and key are not fed
    "-terms_fk": ["ALTER TABLE fact_terms DROP CONSTRAINT fact_terms_id_fkey"],
    "graph_only": [*_drop("facts_private_agent_idx", *_GINS, *_BTREES, *_UNIQUES),
                   *_disable("facts_bm25_ins", "facts_terms_ins")],
    "bare": [*_drop("facts_embedding_global_hnsw", "facts_private_agent_idx", *_GINS, *_BTREES, *_UNIQUES),
             *_disable("facts_bm25_ins", "facts_terms_ins")],
    # factforge_scoped_tsv as migration 0006 wrote it (0021 made it PL/pgSQL; the same tsvector)
    "sql_scoped_tsv": [_SCOPED_TSV_0006],
    # factforge_scoped_tsv without impact classes (as before migration 0025)
    "no_classes": [_SCOPED_TSV_0021],
    # the scoped text index's pending list at PostgreSQL's default (4MB; 0006 made it 256kB for searches)
    "scoped_gin_4mb": ["ALTER INDEX fact_terms_scoped_gin SET (gin_pending_list_limit = 4096)"],
    # the graph's candidate list at an insert (migration 0015 made it 128 for recall at 1M, 0021 112)
    # a live system's: every team already has a graph of its own (migration 0023; built by the worker once a team
    # holds FACTFORGE_TEAM_GRAPH_MIN_ROWS vectors), so each team row goes into its team's graph as it arrives
    "team_graphs": [_team_graph(f"team-{i}") for i in range(bs.N_TEAMS)],
    # the same with the global graph built as before migration 0024 (ef_construction 400, not 800)
    "team_graphs_global400": [_team_graph(f"team-{i}") for i in range(bs.N_TEAMS)]
    + ["ALTER INDEX facts_embedding_global_hnsw SET (ef_construction = 400)"],
    "graph_ef128": ["ALTER INDEX facts_embedding_global_hnsw SET (ef_construction = 128)"],
    "graph_ef112": ["ALTER INDEX facts_embedding_global_hnsw SET (ef_construction = 112)"],
    "graph_ef96": ["ALTER INDEX facts_embedding_global_hnsw SET (ef_construction = 96)"],
    "graph_ef64": ["ALTER INDEX facts_embedding_global_hnsw SET (ef_construction = 64)"],
}


def server_cpu_seconds(pgdata: Path) -> float:
    """CPU seconds of the server of ``pgdata`` so far: the postmaster's own and its reaped children's (a
    backend's time is added to its parent's when it exits) and those of its live children."""
    pm = int((pgdata / "postmaster.pid").read_text().split()[0])

    def fields(pid: int | str) -> list[str]:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...

    ticks = sum(int(x) for x in fields(pm)[11:15])  # utime, stime, cutime, cstime
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            f = fields(pid)
        except OSError:  # gone meanwhile
            continue
        if int(f[1]) == pm:
            ticks += int(f[11]) + int(f[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=50_000)
    ap.add_argument("--streams", type=int, default=2)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated; '+' joins variants into one")
    ap.add_argument("--vectors-cache", metavar="NPZ", help="as bench_search.py (the 100k pool serves any --facts "
                                                            "up to 100k: the first rows of the same generator)")
    ap.add_argument("--json", action="store_true", help="one JSON line per run instead of the table")
    args = ap.parse_args()
    names = args.variants.split(",")
    unknown = [p for n in names for p in n.split("+") if p not in VARIANTS]
    if unknown:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")

    import psycopg

    import bench_peers as bp
    from factforge.models.embed import LocalEmbedder

    rng = random.Random(7)
    n_gen = max(args.facts, 100_000)  # bench_peers' 100k rows: their first --facts rows, vectors as there
    facts = bs.generate_facts(n_gen, rng)
    vectors, _ = bs.build_vectors(facts, 8000, 0.01, rng, LocalEmbedder(), args.vectors_cache)
    facts, vectors = facts[:args.facts], vectors[:args.facts]

    tmp = Path(tempfile.mkdtemp(prefix="ffload", dir="/tmp"))
    runs: list[dict[str, Any]] = []
    try:
        ff = bp.Factforge(tmp / "ff")
        pgdata = tmp / "ff" / "pg"
        admin = ff.conninfo.replace("/postgres?", "/template1?")
        copy = ff.conninfo.replace("/postgres?", "/ffload?")
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("CREATE DATABASE ffload_template TEMPLATE postgres")
        for _ in range(args.repeat):
            for name in names:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute("DROP DATABASE IF EXISTS ffload")
                    conn.execute("CREATE DATABASE ffload TEMPLATE ffload_template")
                with psycopg.connect(copy, autocommit=True) as conn:
                    for part in name.split("+"):
                        for sql in VARIANTS[part]:
                            conn.execute(sql)
                    conn.execute("CHECKPOINT")
                    lsn0 = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
                    blks0 = conn.execute("SELECT blks_hit + blks_read FROM pg_stat_database "
                                         "WHERE datname = current_database()").fetchone()[0]
                load0 = os.getloadavg()[0]
                cpu0 = server_cpu_seconds(pgdata)
                client0 = time.process_time()
                backends: list[float] = []
                secs = bs.load(copy, facts, vectors, args.batch, args.streams, backends)
                client = time.process_time() - client0
                time.sleep(1.5)  # the load's backends report their counters as they exit, and are reaped
                cpu = server_cpu_seconds(pgdata) - cpu0
                with psycopg.connect(copy, autocommit=True) as conn:
                    wal = conn.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)",
                                       (lsn0,)).fetchone()[0]
                    blks = conn.execute("SELECT blks_hit + blks_read FROM pg_stat_database "
                                        "WHERE datname = current_database()").fetchone()[0] - blks0
                run = {"variant": name, "facts": args.facts, "streams": args.streams, "batch": args.batch,
                       "facts_per_s": round(args.facts / secs), "server_cpu_s": round(cpu, 1),
                       "backend_cpu_s": round(sum(backends), 1), "client_cpu_s": round(client, 1),
                       "cpu_s_per_1000": round((sum(backends) + client) * 1000 / args.facts, 3),
                       "buffer_accesses_m": round(blks / 1e6, 2), "wal_mb": round(float(wal) / 2**20),
                       "load_average": [round(load0, 2), round(os.getloadavg()[0], 2)]}
                runs.append(run)
                print(json.dumps(run) if args.json else
                      f"{name}: {run['facts_per_s']:,} facts/s, COPY backends' CPU {run['backend_cpu_s']} s + "
                      f"client {run['client_cpu_s']} s = {run['cpu_s_per_1000']} s per 1,000 facts (server in all "
                      f"{run['server_cpu_s']} s), {run['buffer_accesses_m']}M buffer accesses, WAL {run['wal_mb']} MB "
                      f"(load average {load0:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        bs._stop_server(tmp / "ff" / "pg")
        shutil.rmtree(tmp, ignore_errors=True)
    if not args.json and args.repeat > 1:
        print("\n| variant | facts/s | CPU s per 1,000 facts (COPY backends + client) | server CPU s in all "
              "| buffer accesses (M) | WAL MB |")
        print("|---|---|---|---|---|---|")
        for name in names:
            mine = [r for r in runs if r["variant"] == name]
            print(f"| {name} | {statistics.median(r['facts_per_s'] for r in mine):,.0f} | "
                  f"{statistics.median(r['cpu_s_per_1000'] for r in mine):.3f} | "
                  f"{statistics.median(r['server_cpu_s'] for r in mine):.1f} | "
                  f"{statistics.median(r['buffer_accesses_m'] for r in mine):.2f} | "
                  f"{statistics.median(r['wal_mb'] for r in mine):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
