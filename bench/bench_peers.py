"""factforge beside LanceDB on the same facts, vectors, scopes and questions (issue 19's table).

Both systems get the rows of ``bench_search.generate_facts`` (templated facts of 50 agents in 10 teams, ~60%
private, ~5% superseded) with the vectors of ``bench_search.build_vectors`` (a pool of real MiniLM embeddings,
the other facts a pool vector + noise), and the same questions (``generate_queries``), each asked by a random
agent of its team. Then, per system:

* **load**: factforge: batched binary COPY into the migrated schema with its HNSW indexes in place (triggers,
  BM25 statistics, every index maintained), as ``bench_search --index-mode maintain``; LanceDB: ``add`` in
  batches of the same size, then the IVF_HNSW_SQ vector index (cosine), the FTS index and a BITMAP index on
  the scope column (LanceDB indexes after the data: rows added later are searched unindexed until
  ``optimize``). facts/s over the whole.
* **search**: k=10 in the vector, keyword and hybrid modes, under the caller's scope: factforge through
  ``factforge.storage.search.search`` on a ``Store`` (pooled connections, facts only); LanceDB with a
  ``scope IN ('g', 't:<team>', 'p:<agent>') AND current`` prefilter, hybrid fused by its ``RRFReranker``
  (k=60). Each round runs every query once per system and mode; the system that goes first alternates
  between rounds; one unrecorded warm-up pass first. p50/p95 over all rounds.
* **vector recall@10**: against an exact brute force (numpy, float32) over the rows the caller may see. A hit
  counts if it is as close as the 10th exact neighbour (the same sentence in several visible scopes ties).
* **keyword overlap**: top 10 against an exact BM25 computed here in Python over the system's own tokens:
  factforge's stored tsvectors and term statistics; LanceDB's simple tokenizer (lower case, no stemming, no
  stop words -- its FTS index is built so, that the tokens can be reproduced here) over every row in its
  table. Tie-aware: a hit counts if its exact score is at least the exact 10th score.

Usage::

    .venv/bin/python bench/bench_peers.py [--facts 20000] [--queries 200] [--rounds 2] [--pool 8000]
        [--vectors-cache /tmp/pool.npz] [--json]

``PEERS_DEBUG=1`` prints each question whose keyword top 10 is not the exact one, with both lists of scores.
Figures and how they were taken: bench/README.md. Needs the "bench" extra (``pip install -e '.[bench]'``: lancedb).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("LC_ALL", "C.UTF-8")
os.environ.setdefault("LANG", "C.UTF-8")
os.environ.setdefault("LANCEDB_LOG", "error")  # else a hybrid search logs a deprecation warning per query

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_search as bs  # noqa: E402

ROOT = bs.ROOT
MODES = ("vector", "keyword", "hybrid")
K = 10
K1, B = 1.2, 0.75  # both systems' BM25 constants


# ---------------------------------------------------------------------------------------------- references

def scope_key(f: dict[str, Any]) -> str:
    return {"global": "g", "team": f"t:{f['team_id']}", "private": f"p:{f['agent_id']}"}[f["visibility"]]


def caller_keys(agent: str, team: str) -> list[str]:
    return ["g", f"t:{team}", f"p:{agent}"]


def exact_vector(matrix: Any, keys: Any, current: Any, q: Any, agent: str, team: str) -> tuple[Any, Any]:
    """Row numbers and cosine distances of the exact 10 nearest rows the caller may see."""
    import numpy as np

    mask = current & np.isin(keys, caller_keys(agent, team))
    rows = np.flatnonzero(mask)
    d = 1.0 - matrix[rows] @ q
    top = np.argsort(d, kind="stable")[:K]
    return rows[top], d[top]


class BM25:
    """Exact BM25 over token lists: ``docs`` (id, scope key, current, {term: tf}, length); statistics from
    ``n_docs``/``avgdl``/``df`` (the system's own)."""

    def __init__(self, docs: list[tuple[Any, str, bool, dict[str, int], int]], n_docs: int, avgdl: float,
                 df: dict[str, int]) -> None:
        self.docs, self.n, self.avgdl, self.df = docs, max(n_docs, 1), max(avgdl, 1e-9), df
        self.postings: dict[str, list[int]] = {}
        for i, (_id, _key, cur, tfs, _dl) in enumerate(docs):
            if cur:
                for t in tfs:
                    self.postings.setdefault(t, []).append(i)

    def scores(self, terms: list[str], keys: list[str], only: set[Any] | None = None) -> dict[Any, float]:
        allowed = set(keys)
        out: dict[Any, float] = {}
        for t in dict.fromkeys(terms):
            d = self.df.get(t, 0)
            idf = math.log(1 + (self.n - d + 0.5) / (d + 0.5))
            for i in self.postings.get(t, ()):
                fid, key, _cur, tfs, dl = self.docs[i]
                if key in allowed and (only is None or fid in only):
                    tf = tfs[t]
                    out[fid] = out.get(fid, 0.0) + idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / self.avgdl))
        return out


def overlap(scores: dict[Any, float], got: list[Any]) -> tuple[float, float] | None:
    """(by id, tie-aware) overlap of ``got`` with the exact top 10 of ``scores``; None if nothing matches."""
    exact = sorted(scores.items(), key=lambda kv: (-kv[1], str(kv[0])))[:K]
    if not exact:
        return None
    want = {i for i, _ in exact}
    kth = exact[-1][1]
    by_id = len(want & set(got)) / len(want)
    tie = min(len(exact), sum(1 for i in got if scores.get(i, -1.0) >= kth - 1e-6)) / len(exact)
    return by_id, tie


_LANCE_TOKEN = re.compile(r"[^\W_]+")


def lance_tokens(text: str) -> list[str]:
    """LanceDB's "simple" tokenizer as configured below: alphanumeric runs, lower case, at most 40 chars."""
    return [t for t in _LANCE_TOKEN.findall(text.lower()) if len(t) <= 40]


# ---------------------------------------------------------------------------------------------- factforge

class Factforge:
    name = "factforge"

    def __init__(self, home: Path, streams: int = 1, graph_efc: int | None = None) -> None:
        from factforge.storage.embedded import ensure_server

        self.home, self.streams = home, streams
        self.url = ensure_server(home)
        self.conninfo = "postgresql://" + self.url.split("://", 1)[1]
        from alembic import command
        from alembic.config import Config

        from factforge.settings import LOCAL_EMBED_MODEL

        cfg = Config(str(ROOT / "alembic.ini"))
        cfg.set_main_option("script_location", str(ROOT / "migrations"))
        cfg.attributes.update(url=self.url, embed_dim=bs.DIM, embed_model=LOCAL_EMBED_MODEL)
        command.upgrade(cfg, "head")
        if graph_efc is not None:  # the global graph with another ef_construction than the schema's, before the load
            import psycopg

            from factforge.storage.search import vector_index_ddl

            with psycopg.connect(self.conninfo, autocommit=True) as conn:
                conn.execute("DROP INDEX facts_embedding_global_hnsw")
                conn.execute(vector_index_ddl("facts", bs.DIM, ef_construction=graph_efc)[0])
        self.store: Any = None

    def load(self, facts: list[dict[str, Any]], vectors: Any, batch: int) -> float:
        import psycopg

        secs = bs.load(self.conninfo, facts, vectors, batch, self.streams)
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE facts")
        bs.build_graphs(self.conninfo, "1GB", 0)  # the teams' (and large agents') graphs, as the worker makes them
        from factforge.settings import Settings
        from factforge.storage.store import Store

        self.store = Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": self.url,
                                                   "FACTFORGE_HOME": tempfile.gettempdir()}))
        return secs

    def query(self, mode: str, text: str, vec: Any, agent: str, team: str) -> list[tuple[Any, float | None]]:
        from factforge.storage.search import search

        hits = search(self.store, text, agent_id=agent, team_id=team, k=K, embedder=bs.FixedEmbedder(vec),
                      mode={"keyword": "bm25"}.get(mode, mode), kinds=["fact"])
        return [(h.id, h.vector_distance) for h in hits]

    def bm25(self) -> tuple[BM25, Any, Any]:
        """The exact reference over factforge's tokens (stored tsvectors) and statistics, a function that
        turns a query into its lexemes, and one that gives the documents a query may match (None: all)."""
        import psycopg

        from factforge.storage.bm25 import _OPERATORS

        with psycopg.connect(self.conninfo) as conn:
            n_docs, total = conn.execute("SELECT n_docs, total_len FROM bm25_corpus WHERE id = 1").fetchone()
            df = dict(conn.execute("SELECT lexeme, df FROM bm25_terms").fetchall())
            docs = []
            for fid, vis, agent, team, cur, dl, lexemes, tfs in conn.execute(
                    "SELECT f.id, f.visibility, f.agent_id, f.team_id, f.superseded_at IS NULL, length(f.tsv), "
                    "array(SELECT u.lexeme FROM unnest(f.tsv) u), "
                    "array(SELECT coalesce(array_length(u.positions, 1), 1) FROM unnest(f.tsv) u) FROM facts f"):
                key = scope_key({"visibility": vis, "agent_id": agent, "team_id": team})
                docs.append((fid, key, cur, dict(zip(lexemes, tfs)), dl))
        ref = BM25(docs, n_docs, total / max(n_docs, 1), df)

        def terms(text: str) -> list[str]:
            with psycopg.connect(self.conninfo) as conn:
                return [r[0] for r in conn.execute(
                    "SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', %s))", (text,))]

        def allowed(text: str) -> set[Any] | None:
            """A query with operators ("a or b", -word, "quoted") keeps its web-search meaning in factforge:
            only documents matching it are ranked (factforge.storage.bm25), in the reference too."""
            if not _OPERATORS.search(text):
                return None
            with psycopg.connect(self.conninfo) as conn:
                return {r[0] for r in conn.execute(
                    "SELECT id FROM facts WHERE tsv @@ websearch_to_tsquery('english', %s)", (text,))}
        return ref, terms, allowed

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
        bs._stop_server(self.home / "pg")


# ---------------------------------------------------------------------------------------------- LanceDB

class Lance:
    name = "LanceDB"

    def __init__(self, home: Path, nprobes: int | None, ef: int | None, refine: int | None) -> None:
        import lancedb

        self.db = lancedb.connect(str(home / "lance"))
        self.knobs = {"nprobes": nprobes, "ef": ef, "refine_factor": refine}
        self.table: Any = None
        self.facts: list[dict[str, Any]] = []

    def load(self, facts: list[dict[str, Any]], vectors: Any, batch: int) -> float:
        import pyarrow as pa
        from lancedb.index import IvfHnswSq

        self.facts = facts
        schema = pa.schema([("rid", pa.int64()), ("content", pa.string()), ("scope", pa.string()),
                            ("current", pa.bool_()), ("vector", pa.list_(pa.float32(), bs.DIM))])

        def chunk(start: int) -> Any:
            rows = range(start, min(start + batch, len(facts)))
            return pa.table({
                "rid": pa.array(list(rows), pa.int64()),
                "content": [facts[j]["content"] for j in rows],
                "scope": [scope_key(facts[j]) for j in rows],
                "current": [facts[j]["superseded_at"] is None for j in rows],
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors[rows.start:rows.stop].ravel()), bs.DIM),
            }, schema=schema)

        t0 = time.perf_counter()
        self.table = self.db.create_table("facts", chunk(0), mode="overwrite")
        for start in range(batch, len(facts), batch):
            self.table.add(chunk(start))
        # with a config, the first argument names the column
        self.table.create_index("vector", config=IvfHnswSq(distance_type="cosine"))
        # No stemming or stop words: tokens the exact reference can reproduce (see lance_tokens).
        self.table.create_fts_index("content", use_tantivy=False, stem=False, remove_stop_words=False)
        with warnings.catch_warnings():  # its replacement's signature is not settled across versions
            warnings.simplefilter("ignore")
            self.table.create_scalar_index("scope", index_type="BITMAP")
        return time.perf_counter() - t0

    def _where(self, agent: str, team: str) -> str:
        return "scope IN (" + ", ".join(f"'{k}'" for k in caller_keys(agent, team)) + ") AND current"

    def query(self, mode: str, text: str, vec: Any, agent: str, team: str) -> list[tuple[Any, float | None]]:
        from lancedb.rerankers import RRFReranker

        where = self._where(agent, team)
        if mode == "vector":
            q = self.table.search(vec, vector_column_name="vector")
            for knob, value in self.knobs.items():
                if value is not None:
                    q = getattr(q, knob)(value)
        elif mode == "keyword":
            q = self.table.search(text, query_type="fts")
        else:
            q = self.table.search(query_type="hybrid", vector_column_name="vector").vector(vec).text(text)
            for knob, value in self.knobs.items():
                if value is not None:
                    q = getattr(q, knob)(value)
            q = q.rerank(RRFReranker())
        score = {"vector": ["_distance"], "keyword": ["_score"]}.get(mode, [])  # else a warning per query
        rows = q.where(where, prefilter=True).select(["rid", "content", *score]).limit(K).to_arrow()
        return [(int(r), None) for r in rows.column("rid").to_pylist()]

    def bm25(self) -> tuple[BM25, Any, Any]:
        docs = []
        total = 0
        df: dict[str, int] = {}
        for j, f in enumerate(self.facts):
            toks = lance_tokens(f["content"])
            tfs: dict[str, int] = {}
            for t in toks:
                tfs[t] = tfs.get(t, 0) + 1
            for t in tfs:  # the FTS index holds every row of the table, superseded ones too
                df[t] = df.get(t, 0) + 1
            total += len(toks)
            docs.append((j, scope_key(f), f["superseded_at"] is None, tfs, len(toks)))
        return BM25(docs, len(docs), total / max(len(docs), 1), df), lance_tokens, lambda text: None

    def close(self) -> None:
        pass


# ---------------------------------------------------------------------------------------------- run

def load_average() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip().split("load average:")[-1].strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=20_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pool", type=int, default=8000, help="distinct sentences embedded for real (default 8000)")
    ap.add_argument("--noise", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=10_000, help="rows per COPY / add")
    ap.add_argument("--vectors-cache", metavar="NPZ", help="as bench_search.py")
    ap.add_argument("--load-streams", type=int, default=1,
                    help="factforge: parallel COPY connections of the load (as bench_search.py)")
    ap.add_argument("--graph-efc", type=int, default=None,
                    help="factforge: build the shared facts graph with this ef_construction (default the schema's)")
    ap.add_argument("--systems", default="factforge,lancedb", help="which to run (default both)")
    ap.add_argument("--lance-nprobes", type=int, default=None, help="IVF partitions probed (default LanceDB's)")
    ap.add_argument("--lance-ef", type=int, default=None, help="HNSW ef in a partition (default LanceDB's)")
    ap.add_argument("--lance-refine", type=int, default=None,
                    help="refine_factor: re-rank this many times k by the full vectors (default none)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import numpy as np

    from factforge.models.embed import LocalEmbedder

    res: dict[str, Any] = {"facts": args.facts, "queries": args.queries, "rounds": args.rounds, "seed": args.seed,
                           "load_average_start": load_average()}
    t_total = time.perf_counter()
    rng = random.Random(args.seed)
    embedder = LocalEmbedder()
    facts = bs.generate_facts(args.facts, rng)
    vectors, info = bs.build_vectors(facts, args.pool, args.noise, rng, embedder, args.vectors_cache)
    res["embeddings"] = {k: info[k] for k in ("distinct_sentences", "embedded_pool", "facts_with_real_embedding")}
    queries = bs.generate_queries(args.queries, random.Random(args.seed + 1))
    qvecs = [np.asarray(v, dtype=np.float32) for v in embedder.embed([q[0] for q in queries])]
    keys = np.array([scope_key(f) for f in facts])
    current = np.array([f["superseded_at"] is None for f in facts])
    print(f"{len(facts)} facts ({info['distinct_sentences']} distinct sentences), {len(queries)} queries",
          file=sys.stderr)

    tmp = Path(tempfile.mkdtemp(prefix="ffpeers", dir="/tmp"))
    systems: list[Any] = []
    try:
        wanted = args.systems.lower().split(",")
        if "factforge" in wanted:
            systems.append(Factforge(tmp / "ff", args.load_streams, args.graph_efc))
        if "lancedb" in wanted:
            systems.append(Lance(tmp, args.lance_nprobes, args.lance_ef, args.lance_refine))
            res["lancedb_knobs"] = systems[-1].knobs
        for s in systems:
            secs = s.load(facts, vectors, args.batch)
            res.setdefault("load_facts_per_s", {})[s.name] = round(len(facts) / secs, 1)
            print(f"{s.name}: loaded {len(facts) / secs:.0f} facts/s ({secs:.1f} s)", file=sys.stderr)

        lat: dict[str, dict[str, list[float]]] = {s.name: {m: [] for m in MODES} for s in systems}
        hits: dict[str, dict[str, list[Any]]] = {s.name: {} for s in systems}
        for r in range(-1, args.rounds):  # round -1: warm-up, not recorded
            order = systems if r % 2 == 0 else systems[::-1]
            for s in order:
                for mode in MODES:
                    got = []
                    for (text, agent, team), vec in zip(queries, qvecs):
                        t0 = time.perf_counter()
                        got.append(s.query(mode, text, vec, agent, team))
                        if r >= 0:
                            lat[s.name][mode].append((time.perf_counter() - t0) * 1000)
                    hits[s.name][mode] = got
            print(f"round {r} done, load average {load_average()}", file=sys.stderr)

        exact = [exact_vector(vectors, keys, current, q, a, t) for (_x, a, t), q in zip(queries, qvecs)]
        res["systems"] = {}
        for s in systems:
            rec = []
            for (_x, _a, _t), q, (rows, dists), got in zip(queries, qvecs, exact, hits[s.name]["vector"]):
                if not len(rows):
                    continue
                # a hit's exact distance: factforge returns it (pgvector's, over the stored float32 vector)
                ds = [d if d is not None else float(1.0 - vectors[i] @ q) for i, d in got]
                rec.append(min(len(rows), sum(1 for d in ds if d <= dists[-1] + 1e-5)) / len(rows))
            ref, terms, allowed = s.bm25()
            kw = [overlap(ref.scores(terms(text), caller_keys(a, t), allowed(text)), [i for i, _ in got])
                  for (text, a, t), got in zip(queries, hits[s.name]["keyword"])]
            kw_ok = [x for x in kw if x is not None]
            if os.environ.get("PEERS_DEBUG"):
                for (text, a, t), got, x in zip(queries, hits[s.name]["keyword"], kw):
                    if x is not None and x[1] < 1:
                        sc = ref.scores(terms(text), caller_keys(a, t), allowed(text))
                        ex = sorted(sc.items(), key=lambda kv: (-kv[1], str(kv[0])))[:K]
                        print(s.name, text, terms(text), x, [round(v, 3) for _, v in ex],
                              [round(sc.get(i, -1), 3) for i, _ in got], file=sys.stderr)
            res["systems"][s.name] = {
                "load_facts_per_s": res["load_facts_per_s"][s.name],
                **{f"{m}_ms": {"p50": round(bs.pct(lat[s.name][m], 50), 2),
                               "p95": round(bs.pct(lat[s.name][m], 95), 2)} for m in MODES},
                "vector_recall_at_10": round(statistics.fmean(rec), 4),
                "keyword_overlap_by_id": round(statistics.fmean(x[0] for x in kw_ok), 4),
                "keyword_overlap_tie_aware": round(statistics.fmean(x[1] for x in kw_ok), 4),
                "keyword_queries": len(kw_ok),
            }
    finally:
        for s in systems:
            s.close()
        shutil.rmtree(tmp, ignore_errors=True)
    res["total_s"] = round(time.perf_counter() - t_total, 1)
    res["load_average_end"] = load_average()
    report(res)
    if args.json:
        print(json.dumps(res, separators=(",", ":"), default=str))
    return 0


def report(res: dict[str, Any]) -> None:
    e = res["embeddings"]
    print(f"\n{res['facts']:,} facts ({e['distinct_sentences']:,} distinct sentences, {e['facts_with_real_embedding']:,} "
          f"with a real MiniLM embedding, the others a pool vector + noise), 50 agents in 10 teams, "
          f"{res['queries']} queries x {res['rounds']} rounds, k={K}, seed {res['seed']}; load average "
          f"{res['load_average_start']} at the start, {res['load_average_end']} at the end (2 cores); "
          f"{res['total_s']} s; LanceDB query knobs {res.get('lancedb_knobs')}\n")
    print("| system | load facts/s | vector p50/p95 ms | keyword p50/p95 ms | hybrid p50/p95 ms | vector recall@10 "
          "| keyword top-10 overlap with exact BM25 (tie-aware / by id) |")
    print("|---|---|---|---|---|---|---|")
    for name, s in res["systems"].items():
        ms = " | ".join(f"{s[f'{m}_ms']['p50']:.1f} / {s[f'{m}_ms']['p95']:.1f}" for m in MODES)
        print(f"| {name} | {s['load_facts_per_s']:,.0f} | {ms} | {s['vector_recall_at_10']:.3f} | "
              f"{s['keyword_overlap_tie_aware']:.3f} / {s['keyword_overlap_by_id']:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
