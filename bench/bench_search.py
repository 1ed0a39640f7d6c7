"""Search at scale: bulk load N synthetic facts, then time factforge.storage.search.search() per mode and HNSW recall.

What it does, in order:

1. starts a throwaway factforge embedded PostgreSQL in /tmp, with the settings factforge gives it (or uses
   ``FACTFORGE_BENCH_DATABASE_URL``, which must be
   disposable: the schema is dropped and re-created) and migrates it with alembic (embed_dim 384);
2. generates N templated facts ("User prefers X over Y", "Team switched from A to B", "Team policy: always
   ...", "User lives in CITY", ...) over a few hundred technology/place/food/hobby words, 50 agents in
   10 teams, visibility mix private/team/global, ~5% superseded;
3. embeds a pool of distinct sentences with LocalEmbedder (real MiniLM vectors). The other facts reuse the
   vector of a pool sentence from the same template and main slot word plus small gaussian noise,
   renormalised -- so those vectors are *near-duplicates of real ones*, not embeddings of their own text
   (embedding 100k+ sentences on 2 cores would take many minutes). The output says how many are real;
4. loads the facts with batched binary COPY (vectors precomputed) and reports facts/s, with the migration's
   HNSW index in place and/or with drop-index / COPY / CREATE INDEX (``--index-mode``);
5. runs Q queries (paraphrases from the same vocabulary, embedded with LocalEmbedder up front; that time is
   reported separately) through ``factforge.storage.search.search`` in modes vector, bm25 and hybrid, k=10, and
   reports p50/p95/p99 latency. ``search`` opens one connection per call, so the latency includes a
   connect; the median connect time is reported too;
6. recall@10 of ``search(mode="vector")`` (HNSW, iterative scan) against exact search (sequential scan,
   ``enable_indexscan = off``) under the same scope filter.

Usage::

    .venv/bin/python bench/bench_search.py --facts 100000 --queries 200 [--json] [--keep-db /tmp/ffbench]
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
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

os.environ.setdefault("LC_ALL", "C.UTF-8")
os.environ.setdefault("LANG", "C.UTF-8")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DIM = 384
N_AGENTS = 50
N_TEAMS = 10
MODES = ("vector", "bm25", "hybrid")


# The schema's vector indexes (migrations 0013, 0023): one HNSW graph over the global rows, and the agent's
# private rows with their vectors (vector_index_ddl makes both again). Agents' and teams' own graphs are made
# after the load (build_graphs), as `factforge embed graphs` / the worker would.
def drop_hnsw(conn: Any, table: str) -> None:
    from factforge.storage.search import vector_index_ddl

    conn.execute(f"DROP INDEX {table}_embedding_global_hnsw")
    if any(f"INDEX {table}_private_agent_idx " in ddl for ddl in vector_index_ddl(table, DIM)):
        conn.execute(f"DROP INDEX {table}_private_agent_idx")


def create_hnsw(conn: Any, table: str) -> None:
    from factforge.storage.search import vector_index_ddl

    for ddl in vector_index_ddl(table, DIM):
        conn.execute(ddl)


def build_graphs(conninfo: str, maintenance_work_mem: str, workers: int) -> dict[str, Any]:
    """The graphs of every agent and team over the settings' default thresholds (``factforge embed graphs``
    makes the same with CREATE INDEX CONCURRENTLY; here plainly, with the load's memory, which is faster)."""
    import psycopg

    from factforge.settings import DEFAULT_AGENT_GRAPH_MIN_ROWS, DEFAULT_TEAM_GRAPH_MIN_ROWS
    from factforge.storage.graphs import graph_candidates, graph_ddl

    least = {"agent": DEFAULT_AGENT_GRAPH_MIN_ROWS, "team": DEFAULT_TEAM_GRAPH_MIN_ROWS}
    built: dict[str, int] = {}
    t0 = time.perf_counter()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        conn.execute(f"SET max_parallel_maintenance_workers = {int(workers)}")
        for table in ("facts", "turns"):
            for kind in ("team", "agent"):
                for owner, _rows in graph_candidates(conn, table, least[kind], kind=kind):
                    conn.execute(graph_ddl(table, kind, owner, DIM, concurrently=False))
                    built[f"{table}_{kind}"] = built.get(f"{table}_{kind}", 0) + 1
                print(f"graphs: {built}", file=sys.stderr)
            conn.execute(f"ANALYZE {table}")
    return {"built": built, "seconds": round(time.perf_counter() - t0, 1)}


# ---------------------------------------------------------------------------------------------- vocabulary

LANGS = """Python Java Go Rust TypeScript JavaScript Kotlin Swift Scala Elixir Haskell Ruby PHP Perl Clojure
Erlang OCaml Zig Nim Crystal Julia Dart Lua Fortran COBOL C++ C# F# R MATLAB""".split()
DATABASES = """PostgreSQL MySQL MariaDB SQLite MongoDB Cassandra Redis DynamoDB CockroachDB ClickHouse Snowflake
BigQuery Elasticsearch OpenSearch Neo4j InfluxDB TimescaleDB Couchbase Firestore Oracle DuckDB Memcached
ScyllaDB Pinecone Qdrant Milvus Weaviate""".split()
TOOLS = """Docker Kubernetes Terraform Ansible Jenkins GitHub GitLab Bitbucket CircleCI Travis Argo Helm Nomad
Consul Vault Prometheus Grafana Datadog Sentry Kafka RabbitMQ NATS Pulsar Airflow Dagster Prefect Spark Flink
Ray Jupyter VSCode Vim Emacs IntelliJ PyCharm Neovim Bazel Gradle Maven Webpack Vite esbuild Babel Poetry
Conda pip npm yarn pnpm Nginx Envoy Istio Linkerd Traefik HAProxy Celery Sidekiq""".split()
FRAMEWORKS = """React Vue Angular Svelte Django Flask FastAPI Rails Laravel Spring Express NestJS Next.js Nuxt
Remix Phoenix Gin Echo Actix Axum Tokio Pandas Polars NumPy PyTorch TensorFlow JAX Keras scikit-learn
LangChain Pydantic SQLAlchemy Hibernate Prisma GraphQL gRPC Tailwind Bootstrap jQuery""".split()
CLOUDS = "AWS Azure GCP Heroku Vercel Netlify Cloudflare DigitalOcean Linode Hetzner OVH Fly.io Render".split()
TECH = LANGS + DATABASES + TOOLS + FRAMEWORKS + CLOUDS
CITIES = """Berlin Munich Hamburg Paris Lyon Marseille London Manchester Edinburgh Dublin Amsterdam Rotterdam
Brussels Antwerp Zurich Geneva Vienna Prague Warsaw Krakow Budapest Lisbon Porto Madrid Barcelona Valencia
Seville Rome Milan Naples Turin Athens Istanbul Copenhagen Stockholm Oslo Helsinki Reykjavik Tallinn Riga
Vilnius Toronto Montreal Vancouver Seattle Portland Boston Chicago Denver Austin Dallas Houston Miami Atlanta
Tokyo Osaka Kyoto Seoul Busan Beijing Shanghai Shenzhen Singapore Bangkok Hanoi Jakarta Manila Sydney
Melbourne Auckland Mumbai Bangalore Delhi Dubai Cairo Nairobi Lagos Johannesburg Capetown Lima Bogota
Santiago Montevideo""".split()
FOODS = """sushi ramen pizza pasta tacos burritos curry pho dumplings paella risotto falafel hummus shawarma
kebab croissants bagels pancakes waffles oatmeal granola salad steak burgers noodles bibimbap kimchi tofu
tempeh lasagna gnocchi ceviche empanadas arepas pierogi goulash schnitzel bratwurst sauerkraut couscous
tagine biryani samosas dosa naan gelato tiramisu cheesecake brownies espresso cappuccino matcha chai kombucha
smoothies avocado quinoa lentils chickpeas mushrooms olives""".split()
HOBBIES = """hiking climbing cycling running swimming surfing skiing snowboarding kayaking sailing fishing
camping gardening painting drawing photography pottery knitting woodworking chess poker sudoku crosswords
birdwatching astronomy yoga pilates boxing fencing archery tennis badminton squash football basketball
volleyball baseball golf bowling skating dancing singing guitar piano violin drums cooking baking brewing
reading writing podcasting blogging gaming juggling origami calligraphy""".split()
AREAS = """billing search checkout payments auth onboarding analytics reporting notifications ingestion
scheduling inventory logging monitoring deployment frontend backend mobile api gateway recommendations
pricing shipping invoicing messaging storage caching""".split()
ACTIONS = [("run the tests", "merging"), ("write a design doc", "starting a project"),
           ("get a code review", "deploying"), ("update the changelog", "a release"),
           ("run the linter", "committing"), ("tag the release", "deploying to production"),
           ("back up the database", "a migration"), ("notify the on-call engineer", "a rollout"),
           ("pin dependency versions", "shipping"), ("write a postmortem", "closing an incident"),
           ("add a feature flag", "launching a feature"), ("rotate the secrets", "offboarding someone"),
           ("squash commits", "merging a pull request"), ("benchmark the change", "optimising code"),
           ("check the error budget", "a deploy freeze ends"), ("document the API", "publishing an endpoint")]
NEVER = ["deploy on Fridays", "push directly to main", "store secrets in the repository",
         "skip the staging environment", "disable the alerts", "merge without a review",
         "run migrations during peak hours", "commit generated files", "log personal data",
         "hardcode credentials", "use force push on shared branches", "ignore flaky tests"]
ROLES = """engineer designer manager analyst researcher architect consultant developer scientist writer
teacher nurse doctor lawyer accountant""".split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
EVENTS = "dentist appointment, standup, retro, offsite, interview, demo, launch, review, trip, workshop".split(", ")
LANGUAGES = "English German French Spanish Italian Portuguese Dutch Polish Japanese Korean".split()
PETS = "dog cat parrot hamster rabbit turtle".split()

# (category, template id, template). The first slot word (see _main_word) picks which pool vector a
# non-pool fact borrows: one from the same template with the same main word.
TEMPLATES: list[tuple[str, str, str]] = [
    ("preference", "pref_tech", "User prefers {a} over {b}"),
    ("preference", "pref_tech2", "User likes {a} more than {b} for {area} work"),
    ("preference", "pref_food", "User prefers {f} to {g} for lunch"),
    ("preference", "pref_food2", "User loves {f}"),
    ("preference", "pref_hobby", "User enjoys {h} on weekends"),
    ("preference", "pref_editor", "User writes code in {a} and dislikes {b}"),
    ("decision", "switch", "Team switched from {a} to {b}"),
    ("decision", "switch2", "Team migrated the {area} service from {a} to {b}"),
    ("technology", "uses", "Team uses {a} for {area}"),
    ("technology", "runs_on", "The {area} service runs on {a} in {cloud}"),
    ("decision", "chose", "Team decided to adopt {a} instead of {b}"),
    ("policy", "always", "Team policy: always {act} before {ev}"),
    ("policy", "never", "Team policy: never {never}"),
    ("identity", "lives", "User lives in {c}"),
    ("identity", "moved", "User moved from {c} to {d}"),
    ("identity", "works", "User works as a {role} in {c}"),
    ("identity", "pet", "User has a {pet} named after {city2}"),
    ("temporal", "event", "User has a {event} on {day}"),
    ("temporal", "travel", "User is travelling to {c} next {day}"),
    ("instruction", "answer_in", "Always answer the user in {lang}"),
    ("instruction", "examples", "Use {a} for code examples"),
    ("other", "learning", "User is learning {h} and {a}"),
]
TEMPLATE_WEIGHTS = [8, 4, 5, 3, 5, 3, 8, 4, 7, 4, 4, 5, 3, 6, 4, 4, 1, 3, 2, 1, 2, 2]


def _slots(rng: random.Random) -> dict[str, str]:
    a, b = rng.sample(TECH, 2)
    f, g = rng.sample(FOODS, 2)
    c, d = rng.sample(CITIES, 2)
    act, ev = rng.choice(ACTIONS)
    return {"a": a, "b": b, "f": f, "g": g, "h": rng.choice(HOBBIES), "c": c, "d": d, "city2": rng.choice(CITIES),
            "area": rng.choice(AREAS), "cloud": rng.choice(CLOUDS), "act": act, "ev": ev,
            "never": rng.choice(NEVER), "role": rng.choice(ROLES), "pet": rng.choice(PETS),
            "event": rng.choice(EVENTS), "day": rng.choice(DAYS), "lang": rng.choice(LANGUAGES)}


_TEMPLATE_TEXT = {t[1]: t[2] for t in TEMPLATES}


def _main_word(tid: str, s: dict[str, str]) -> str:
    for key in ("a", "f", "h", "c", "act", "never", "event", "lang"):
        if "{" + key + "}" in _TEMPLATE_TEXT[tid]:
            return s[key]
    return ""


def _entities(template: str, s: dict[str, str]) -> list[str]:
    keys = ("a", "b", "f", "g", "h", "c", "d", "city2", "cloud", "lang")
    return [s[k] for k in keys if "{" + k + "}" in template]


def generate_facts(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """N facts with a unique (content, scope) among current rows (the schema's partial unique index)."""
    from factforge.storage.store import content_hash

    agent_team = {f"agent-{i:02d}": f"team-{i % N_TEAMS}" for i in range(N_AGENTS)}
    agents = list(agent_team)
    now = datetime.now(timezone.utc)
    seen: set[tuple[str, str, str, str]] = set()
    # A shared stock of sentences: the same fact is often said by many agents (realistic, and it keeps the
    # number of distinct sentences well below N).
    facts: list[dict[str, Any]] = []
    while len(facts) < n:
        cat, tid, tpl = rng.choices(TEMPLATES, weights=TEMPLATE_WEIGHTS)[0]
        s = _slots(rng)
        content = tpl.format(**s)
        agent = rng.choice(agents)
        team = agent_team[agent]
        r = rng.random()
        if cat in ("policy", "decision", "technology"):
            vis = "team" if r < 0.7 else ("global" if r < 0.85 else "private")
        else:
            vis = "private" if r < 0.85 else ("team" if r < 0.95 else "global")
        superseded = rng.random() < 0.05
        h = content_hash(content)
        # the schema's keys (migration 0003): private per agent and team, team per team, global once
        key = (h, vis, agent if vis == "private" else "", team if vis != "global" else "")
        if not superseded:
            if key in seen:
                continue
            seen.add(key)
        first = now - timedelta(seconds=rng.randint(0, 365 * 86400))
        facts.append({
            "content": content, "category": cat, "tid": tid, "main": _main_word(tid, s),
            "entities": _entities(tpl, s), "agent_id": agent, "team_id": team, "visibility": vis,
            "hash": h, "first_seen_at": first, "last_seen_at": first + timedelta(seconds=rng.randint(0, 86400 * 30)),
            "superseded_at": (first + timedelta(days=1)) if superseded else None,
            "confidence": round(rng.uniform(0.6, 1.0), 3),
        })
    return facts


def generate_queries(q: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(query text, agent_id, team_id): paraphrases of the fact templates, asked by random agents."""
    forms = [
        lambda s: f"does the user like {s['a']} better than {s['b']}?",
        lambda s: f"which does the user prefer, {s['a']} or {s['b']}",
        lambda s: f"what did the team move to after {s['a']}?",
        lambda s: f"did we replace {s['a']} with {s['b']}",
        lambda s: f"what do we use for {s['area']}",
        lambda s: f"which cloud hosts the {s['area']} service",
        lambda s: f"what is the rule about {s['ev']}?",
        lambda s: f"are we allowed to {s['never']}",
        lambda s: "where is the user based",
        lambda s: f"does the user live in {s['c']}?",
        lambda s: f"what does the user eat for lunch, {s['f']}?",
        lambda s: f"favourite food of the user {s['f']}",
        lambda s: f"what does the user do at the weekend, {s['h']}?",
        lambda s: f"what is the user's job in {s['c']}",
        lambda s: f"when is the user's {s['event']}",
        lambda s: "which language should replies be in",
        lambda s: f"{s['a']} code examples",
        lambda s: f"{s['a']} vs {s['b']}",
    ]
    out = []
    for _ in range(q):
        text = rng.choice(forms)(_slots(rng))
        i = rng.randrange(N_AGENTS)
        out.append((text, f"agent-{i:02d}", f"team-{i % N_TEAMS}"))
    return out


def _embed_pool(pool: list[str], embedder: Any, cache: str | None) -> tuple[Any, float, bool]:
    """The pool's embeddings, from ``cache`` (an .npz written by an earlier run with the same pool) if given."""
    import hashlib

    import numpy as np

    digest = hashlib.sha256("\n".join(pool).encode()).hexdigest()
    if cache and Path(cache).exists():
        with np.load(cache) as z:
            if str(z["digest"]) == digest:
                return z["vecs"], 0.0, True
        print(f"{cache} holds another pool; embedding afresh", file=sys.stderr)
    t0 = time.perf_counter()
    vecs = np.asarray(embedder.embed(pool), dtype=np.float32)
    secs = time.perf_counter() - t0
    if cache:
        np.savez(cache, digest=np.array(digest), vecs=vecs)
    return vecs, secs, False


def build_vectors(facts: list[dict[str, Any]], pool_size: int, noise: float, rng: random.Random,
                  embedder: Any, cache: str | None = None) -> tuple[Any, dict[str, Any]]:
    """An (N, 384) float32 matrix: real embeddings for a pool of distinct sentences, pool vector + noise for the rest."""
    import numpy as np

    distinct = list(dict.fromkeys(f["content"] for f in facts))
    first_of: dict[str, dict[str, Any]] = {}
    for f in facts:
        first_of.setdefault(f["content"], f)
    pool = distinct if len(distinct) <= pool_size else rng.sample(distinct, pool_size)
    vecs, embed_s, cached = _embed_pool(pool, embedder, cache)
    by_content = {c: vecs[i] for i, c in enumerate(pool)}
    by_main: dict[tuple[str, str], list[int]] = {}
    by_tid: dict[str, list[int]] = {}
    for i, c in enumerate(pool):
        f = first_of[c]
        by_main.setdefault((f["tid"], f["main"]), []).append(i)
        by_tid.setdefault(f["tid"], []).append(i)
    nprng = np.random.default_rng(rng.randrange(2**32))
    synth: dict[str, Any] = {}
    out = np.empty((len(facts), DIM), dtype=np.float32)
    same_main = 0
    for j, f in enumerate(facts):
        c = f["content"]
        v = by_content.get(c)
        if v is None:
            v = synth.get(c)
            if v is None:
                cands = by_main.get((f["tid"], f["main"]))
                if cands:
                    same_main += 1
                else:
                    cands = by_tid.get(f["tid"]) or list(range(len(pool)))
                base = vecs[cands[rng.randrange(len(cands))]]
                v = base + nprng.normal(0.0, noise, DIM).astype(np.float32)
                v /= np.linalg.norm(v)
                synth[c] = v
        out[j] = v
    real_rows = sum(1 for f in facts if f["content"] in by_content)
    info = {"distinct_sentences": len(distinct), "embedded_pool": len(pool), "pool_from_cache": cached,
            "pool_embed_s": round(embed_s, 2),
            "pool_embed_per_s": round(len(pool) / embed_s, 1) if embed_s else None,
            "facts_with_real_embedding": real_rows, "facts_with_synthetic_embedding": len(facts) - real_rows,
            "synthetic_sentences": len(synth), "synthetic_from_same_template_and_word": same_main,
            "noise_sigma_per_dim": noise}
    if synth:
        # how far a synthetic vector is from its base: the mean cosine of base+noise vs base
        sample = nprng.normal(0.0, noise, (200, DIM)).astype(np.float32)
        base = vecs[:1].repeat(200, 0)
        noisy = base + sample
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        info["mean_cosine_synthetic_vs_base"] = round(float((noisy * base).sum(1).mean()), 4)
    return out, info


# ---------------------------------------------------------------------------------------------- database

COPY_COLS = ("content, category, confidence, extraction_method, entities, subject, relation, agent_id, team_id, "
             "visibility, embedding, embedding_model, content_hash, first_seen_at, last_seen_at, superseded_at")
COPY_TYPES = ["text", "text", "real", "text", "text[]", "text", "text", "text", "text", "text", "vector", "text",
              "text", "timestamptz", "timestamptz", "timestamptz"]


def load(conninfo: str, facts: list[dict[str, Any]], vectors: Any, batch: int, streams: int = 1,
         backend_cpu: list[float] | None = None) -> float:
    """Batched binary COPY, one transaction (and one statement-level BM25 trigger run) per batch, over
    ``streams`` connections at once (batch i goes to stream i mod streams), as that many writers of a live
    system would. Returns seconds. ``backend_cpu``: gets each stream's server backend CPU seconds (from
    ``/proc``, when the server runs on this machine), which autovacuum and the other sessions do not move."""
    from concurrent.futures import ThreadPoolExecutor

    import psycopg
    from pgvector.psycopg import register_vector

    from factforge.settings import LOCAL_EMBED_MODEL

    def stream(first: int) -> None:
        with psycopg.connect(conninfo) as conn:
            register_vector(conn)
            for start in range(first * batch, len(facts), batch * streams):
                with conn.cursor() as cur:
                    with cur.copy(f"COPY facts ({COPY_COLS}) FROM STDIN (FORMAT BINARY)") as cp:
                        cp.set_types(COPY_TYPES)
                        for j in range(start, min(start + batch, len(facts))):
                            f = facts[j]
                            cp.write_row((f["content"], f["category"], f["confidence"], "pattern", f["entities"],
                                          "user" if f["content"].startswith("User") else "team", f["tid"],
                                          f["agent_id"], f["team_id"], f["visibility"], vectors[j],
                                          LOCAL_EMBED_MODEL, f["hash"], f["first_seen_at"], f["last_seen_at"],
                                          f["superseded_at"]))
                conn.commit()
            if backend_cpu is not None:
                backend_cpu.append(_process_cpu_seconds(conn.info.backend_pid))

    t0 = time.perf_counter()
    with ThreadPoolExecutor(streams) as pool:
        for done in [pool.submit(stream, i) for i in range(streams)]:
            done.result()  # a stream's error ends the load with its message
    return time.perf_counter() - t0


def _process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc``; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, ...
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_OPENERS = ("", "Honestly, ", "By the way, ", "So, ", "Just so you know, ", "Quick update: ")
_CLOSERS = (".", " since last week.", " and it has worked well so far.", ", at least for now.",
            " - we talked about it in the standup.", ", which surprised me.")


def load_episodes(conninfo: str, facts: list[dict[str, Any]], vectors: Any, n: int, rng: random.Random,
                  batch: int) -> float:
    """N episodes (stored turns) in ``turns``: chat-like first-person versions of the generated facts
    ("By the way, I prefer Go over Rust since last week."), in their fact's agent and team, mostly private,
    each with its fact's vector plus noise. Returns seconds."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    from factforge.settings import LOCAL_EMBED_MODEL

    nprng = np.random.default_rng(rng.randrange(2**32))
    t0 = time.perf_counter()
    with psycopg.connect(conninfo) as conn:
        register_vector(conn)
        for start in range(0, n, batch):
            with conn.cursor() as cur:
                with cur.copy("COPY turns (key, agent_id, team_id, user_message, message_ts, visibility, entities, "
                              "embedding, embedding_model) FROM STDIN (FORMAT BINARY)") as cp:
                    cp.set_types(["text", "text", "text", "text", "timestamptz", "text", "text[]", "vector", "text"])
                    for j in range(start, min(start + batch, n)):
                        i = rng.randrange(len(facts))
                        f = facts[i]
                        words = f["content"].replace("User's", "my").replace("User ", "I ").replace("Team ", "we ")
                        text = rng.choice(_OPENERS) + words + rng.choice(_CLOSERS)
                        v = vectors[i] + nprng.normal(0.0, 0.02, DIM).astype(np.float32)
                        v /= np.linalg.norm(v)
                        r = rng.random()
                        vis = "private" if r < 0.9 else ("team" if r < 0.97 else "global")
                        cp.write_row((f"ep-{j}", f["agent_id"], f["team_id"], text, f["first_seen_at"], vis,
                                      f["entities"], v, LOCAL_EMBED_MODEL))
            conn.commit()
    return time.perf_counter() - t0


def keyword_overlap(conninfo: str, source: Any, queries: list[tuple[str, str, str]], k: int = 10
                    ) -> dict[str, Any]:
    """Top-k overlap of ``search(mode="bm25", kinds=["fact"])`` with an exact BM25 computed here in Python
    over the same tokens (the stored tsvectors, the stored document frequencies), for the same caller: by id,
    and tie-aware (a hit scoring at least the exact k-th score counts)."""
    import math

    import psycopg

    from factforge.storage.search import BM25_B, BM25_K1, search

    postings: dict[str, list[tuple[int, int]]] = {}
    docs: list[tuple[Any, str, str | None, str | None, int]] = []
    with psycopg.connect(conninfo) as conn:
        n_docs, total = conn.execute("SELECT n_docs, total_len FROM bm25_corpus WHERE id = 1").fetchone()
        df = dict(conn.execute("SELECT lexeme, df FROM bm25_terms").fetchall())
        cur = conn.execute("SELECT f.id, f.visibility, f.agent_id, f.team_id, length(f.tsv), "
                           "array(SELECT u.lexeme FROM unnest(f.tsv) u), "
                           "array(SELECT coalesce(array_length(u.positions, 1), 1) FROM unnest(f.tsv) u) "
                           "FROM facts f WHERE f.superseded_at IS NULL")
        for fid, vis, agent, team, dl, lexemes, tfs in cur:
            for lexeme, tf in zip(lexemes, tfs):
                postings.setdefault(lexeme, []).append((len(docs), tf))
            docs.append((fid, vis, agent, team, dl))
        qterms = [[r[0] for r in conn.execute("SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', %s))",
                                                 (text,))] for text, _, _ in queries]
    n = max(n_docs, 1)
    avgdl = max(total / n, 1)
    by_id, tie_aware, matching, secs = [], [], [], []
    for (text, agent, team), terms in zip(queries, qterms):
        scores: dict[int, float] = {}
        for lexeme in terms:
            d = df.get(lexeme, 0)
            idf = math.log(1 + (n - d + 0.5) / (d + 0.5))
            for i, tf in postings.get(lexeme, ()):
                _, vis, a, t, dl = docs[i]
                if vis == "global" or (vis == "team" and t == team) or (vis == "private" and a == agent):
                    scores[i] = scores.get(i, 0.0) + idf * tf * (BM25_K1 + 1) / (
                        tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))
        exact = sorted(scores.items(), key=lambda kv: (-kv[1], str(docs[kv[0]][0])))[:k]  # ties by id, as SQL
        if not exact:
            continue
        matching.append(len(scores))
        t0 = time.perf_counter()
        hits = search(source, text, agent_id=agent, team_id=team, k=k, mode="bm25", kinds=["fact"])
        secs.append((time.perf_counter() - t0) * 1000)
        want = {docs[i][0] for i, _ in exact}
        by_id.append(len(want & {h.id for h in hits}) / len(want))
        kth = exact[-1][1]
        tie_aware.append(min(len(exact), sum(1 for h in hits if (h.bm25_score or 0) >= kth - 1e-6)) / len(exact))
    return {"by_id": round(statistics.fmean(by_id), 4), "tie_aware": round(statistics.fmean(tie_aware), 4),
            "queries": len(by_id), "median_visible_matching_facts": statistics.median(matching),
            "facts_only_bm25_p50_ms": round(pct(secs, 50), 2)}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


class FixedEmbedder:
    """Hands search() a precomputed query vector, so the timing excludes embedding."""

    model = "precomputed"
    dim = DIM

    def __init__(self, vec: Any) -> None:
        self.vec = vec

    def embed(self, texts: Any) -> list[Any]:
        return [self.vec]


def _stop_server(pgdata: Path) -> None:
    """Fast shutdown of the embedded server of ``pgdata`` (it outlives its process otherwise)."""
    import signal

    import psutil

    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    except (OSError, ValueError, IndexError, psutil.Error):
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--episodes", type=int, default=0,
                    help="also load this many episodes (stored turns), searched beside the facts (default 0)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pool", type=int, default=8000, help="distinct sentences embedded for real (default 8000)")
    ap.add_argument("--noise", type=float, default=0.01, help="per-dimension sigma of the noise on reused vectors")
    ap.add_argument("--batch", type=int, default=10_000, help="rows per COPY statement / transaction")
    ap.add_argument("--load-streams", type=int, default=1, help="parallel COPY connections of the load")
    ap.add_argument("--index-mode", choices=("both", "build-after", "maintain"), default="both",
                    help="maintain: COPY with the migration's HNSW index in place; build-after: drop it, COPY, "
                         "CREATE INDEX; both: build-after, then TRUNCATE and COPY again with the index in place")
    ap.add_argument("--maintenance-work-mem", default="4GB",
                    help="for CREATE INDEX (server default 64MB; the graph of 1M 384-d vectors needs ~3GB, and "
                         "a build that outgrows it goes on on disk, 3.6 times slower at 1M)")
    ap.add_argument("--vectors-cache", metavar="NPZ", help="reuse the pool embeddings of an earlier run with the same "
                                                            "--facts/--pool/--seed (written there if missing)")
    ap.add_argument("--hnsw-workers", type=int, default=2,
                    help="max_parallel_maintenance_workers for CREATE INDEX (default 2; factforge's embedded "
                         "server has 0, as parallel builds need a /dev/shm larger than maintenance_work_mem)")
    ap.add_argument("--keep-db", metavar="PATH", help="keep the embedded server's data (PATH/pg) here (stopped at "
                                                      "the end); an existing loaded one is reused without loading")
    ap.add_argument("--query-only", action="store_true", help="only query the database kept in --keep-db (fails "
                                                               "if it holds no facts: nothing is generated or loaded)")
    ap.add_argument("--no-graphs", action="store_true",
                    help="do not build the agents' and teams' own graphs after the load (or missing ones in a kept "
                         "database): their rows are then read exactly")
    ap.add_argument("--no-keyword-overlap", action="store_true",
                    help="skip the exact BM25 check in Python (minutes at 1M facts)")
    ap.add_argument("--recall-queries", type=int, metavar="N",
                    help="recall@10 over the first N queries only (an exact scan is ~1 s each at 1M)")
    ap.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE of the vector and BM25 SQL "
                                                           "(facts, and episodes if there are any)")
    ap.add_argument("--kinds", default=None, help="what the timed searches rank: fact, episode or fact,episode "
                    "(default: search()'s own, both when episodes are loaded)")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    if args.query_only and not args.keep_db:
        ap.error("--query-only needs --keep-db")

    import numpy as np
    import psycopg
    from alembic import command
    from alembic.config import Config
    from pgvector.psycopg import register_vector

    from factforge.models.embed import LocalEmbedder
    from factforge.storage.scope import fact_filters
    from factforge.storage.bm25 import bm25_ranks
    from factforge.storage.search import (_Kind, _QueryVector, _send_kinds_vectors, bm25_query, ef_search_sql,
                                          search, vector_sql)
    from factforge.settings import LOCAL_EMBED_MODEL

    t_total = time.perf_counter()
    rng = random.Random(args.seed)
    res: dict[str, Any] = {"facts": args.facts, "episodes": args.episodes, "queries": args.queries,
                           "seed": args.seed}
    pgdata: Path | None = None
    tmp: Path | None = None
    external = os.environ.get("FACTFORGE_BENCH_DATABASE_URL")
    reuse = False
    if external:
        url = "postgresql+psycopg://" + external.split("://", 1)[1]
    else:
        # factforge's own embedded server, with the settings it gives itself (shared_buffers by memory).
        from factforge.storage.embedded import ensure_server

        home = Path(args.keep_db) if args.keep_db else Path(tempfile.mkdtemp(prefix="ffbench", dir="/tmp"))
        tmp = None if args.keep_db else home
        pgdata = home / "pg"
        reuse = (pgdata / "PG_VERSION").exists()
        url = ensure_server(home)
    conninfo = "postgresql://" + url.split("://", 1)[1]
    try:
        cfg = Config(str(ROOT / "alembic.ini"))
        cfg.set_main_option("script_location", str(ROOT / "migrations"))
        cfg.attributes.update(url=url, embed_dim=DIM, embed_model=LOCAL_EMBED_MODEL)
        if reuse:
            with psycopg.connect(conninfo) as conn:
                have = conn.execute("SELECT to_regclass('public.facts') IS NOT NULL").fetchone()[0]
                n_have = conn.execute("SELECT count(*) FROM facts").fetchone()[0] if have else 0
            reuse = n_have > 0
            if reuse:
                print(f"reusing {n_have} facts in {args.keep_db} (no generation/load)", file=sys.stderr)
                res["facts"] = n_have
        if args.query_only and not reuse:
            raise SystemExit(f"--query-only: no loaded database in {args.keep_db}")
        if not reuse:
            if external:
                command.downgrade(cfg, "base")
        command.upgrade(cfg, "head")  # a kept database gets this checkout's migrations too

        embedder = LocalEmbedder()
        embedder.embed(["warm up"])
        with psycopg.connect(conninfo) as conn:
            res["server"] = {k: conn.execute(f"SHOW {k}").fetchone()[0] for k in
                             ("server_version", "shared_buffers", "work_mem", "maintenance_work_mem",
                              "max_parallel_maintenance_workers")}
            res["server"]["pgvector"] = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]

        if not reuse:
            t0 = time.perf_counter()
            facts = generate_facts(args.facts, rng)
            res["generate_s"] = round(time.perf_counter() - t0, 2)
            print(f"generated {len(facts)} facts in {res['generate_s']} s; embedding the pool...", file=sys.stderr)
            vectors, info = build_vectors(facts, args.pool, args.noise, rng, embedder, args.vectors_cache)
            res["embeddings"] = info
            print(f"embeddings: {info}", file=sys.stderr)
            load_res: dict[str, Any] = {"batch_rows": args.batch}
            if args.index_mode in ("build-after", "both"):
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    drop_hnsw(conn, "facts")
                secs = load(conninfo, facts, vectors, args.batch, args.load_streams)
                load_res["copy_without_hnsw_s"] = round(secs, 2)
                load_res["copy_without_hnsw_facts_per_s"] = round(len(facts) / secs, 1)
                print(f"COPY without HNSW: {len(facts) / secs:.0f} facts/s", file=sys.stderr)
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    notices: list[str] = []
                    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
                    conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
                    conn.execute(f"SET max_parallel_maintenance_workers = {int(args.hnsw_workers)}")
                    workers = conn.execute("SHOW max_parallel_maintenance_workers").fetchone()[0]
                    t0 = time.perf_counter()
                    create_hnsw(conn, "facts")
                    load_res["create_hnsw_s"] = round(time.perf_counter() - t0, 2)
                    load_res["create_hnsw_maintenance_work_mem"] = args.maintenance_work_mem
                    load_res["create_hnsw_max_parallel_workers"] = int(workers)
                    load_res["create_hnsw_notices"] = notices
                print(f"CREATE INDEX hnsw: {load_res['create_hnsw_s']} s", file=sys.stderr)
                load_res["build_after_total_facts_per_s"] = round(
                    len(facts) / (load_res["copy_without_hnsw_s"] + load_res["create_hnsw_s"]), 1)
            if args.index_mode in ("maintain", "both"):
                if args.index_mode == "both":
                    with psycopg.connect(conninfo, autocommit=True) as conn:
                        conn.execute("TRUNCATE facts CASCADE")
                        conn.execute("VACUUM facts")
                secs = load(conninfo, facts, vectors, args.batch, args.load_streams)
                load_res["copy_with_hnsw_s"] = round(secs, 2)
                load_res["copy_with_hnsw_facts_per_s"] = round(len(facts) / secs, 1)
                print(f"COPY with HNSW in place: {len(facts) / secs:.0f} facts/s", file=sys.stderr)
            if args.episodes:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    drop_hnsw(conn, "turns")
                secs = load_episodes(conninfo, facts, vectors, args.episodes, rng, args.batch)
                load_res["episodes_copy_s"] = round(secs, 2)
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
                    conn.execute(f"SET max_parallel_maintenance_workers = {int(args.hnsw_workers)}")
                    t0 = time.perf_counter()
                    create_hnsw(conn, "turns")
                    load_res["episodes_create_hnsw_s"] = round(time.perf_counter() - t0, 2)
                    conn.execute("VACUUM ANALYZE turns")
                print(f"episodes: COPY {load_res['episodes_copy_s']} s, HNSW {load_res['episodes_create_hnsw_s']} s",
                      file=sys.stderr)
            with psycopg.connect(conninfo, autocommit=True) as conn:
                t0 = time.perf_counter()
                conn.execute("VACUUM ANALYZE facts")
                load_res["vacuum_analyze_s"] = round(time.perf_counter() - t0, 2)
            res["load"] = load_res
            del vectors

        if not args.no_graphs:
            res["graphs"] = build_graphs(conninfo, args.maintenance_work_mem, args.hnsw_workers)
            print(f"graphs: {res['graphs']}", file=sys.stderr)
        with psycopg.connect(conninfo) as conn:
            res["db"] = {
                "facts": conn.execute("SELECT count(*) FROM facts").fetchone()[0],
                "current_facts": conn.execute("SELECT count(*) FROM facts WHERE superseded_at IS NULL").fetchone()[0],
                "bm25_corpus_n_docs": conn.execute("SELECT n_docs FROM bm25_corpus WHERE id = 1").fetchone()[0],
                "bm25_terms": conn.execute("SELECT count(*) FROM bm25_terms").fetchone()[0],
                "episodes": conn.execute("SELECT count(*) FROM turns WHERE visibility IS NOT NULL").fetchone()[0],
                "hnsw_index_mb": round(conn.execute(  # the global graph and every agent's and team's
                    "SELECT sum(pg_relation_size(indexrelid)) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                    "WHERE i.indrelid = 'facts'::regclass AND c.relam = (SELECT oid FROM pg_am WHERE amname = 'hnsw')"
                    ).fetchone()[0] / 2**20, 1),
                "table_mb": round(conn.execute("SELECT pg_table_size('facts')").fetchone()[0] / 2**20, 1),
            }

        # ------------------------------------------------------------------------------ queries
        queries = generate_queries(args.queries, random.Random(args.seed + 1))
        texts = [q[0] for q in queries]
        emb_ms = []
        qvecs = []
        for t in texts:
            t0 = time.perf_counter()
            qvecs.append(np.asarray(embedder.embed([t])[0], dtype=np.float32))
            emb_ms.append((time.perf_counter() - t0) * 1000)
        res["query_embed_ms"] = {"p50": round(pct(emb_ms, 50), 2), "p95": round(pct(emb_ms, 95), 2),
                                 "p99": round(pct(emb_ms, 99), 2)}
        connect_ms = []
        for _ in range(30):
            t0 = time.perf_counter()
            psycopg.connect(conninfo).close()
            connect_ms.append((time.perf_counter() - t0) * 1000)
        res["connect_ms_p50"] = round(pct(connect_ms, 50), 2)

        # As the library searches: through a Store's connection pool (no connection set-up per query).
        from factforge.settings import Settings
        from factforge.storage.store import Store

        source = Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": tempfile.gettempdir()}))
        lat: dict[str, dict[str, float]] = {}
        results: dict[str, list[list[Any]]] = {}
        kinds = args.kinds.split(",") if args.kinds else None
        res["kinds"] = kinds or "default"
        for mode in MODES:
            # Two passes over the same queries: the first reads pages from disk the cache has not seen yet
            # (at 1M facts the table and index are larger than shared_buffers), the second is the steady
            # state of an agent that searches its memory all day. Both are reported.
            for label in ("first_pass", "warm"):
                times = []
                results[mode] = []
                for (text, agent, team), vec in zip(queries, qvecs):
                    t0 = time.perf_counter()
                    hits = search(source, text, agent_id=agent, team_id=team, k=10, embedder=FixedEmbedder(vec),
                                  mode=mode, kinds=kinds)
                    times.append((time.perf_counter() - t0) * 1000)
                    results[mode].append(hits)
                key = mode if label == "warm" else f"{mode}_first_pass"
                lat[key] = {"p50": round(pct(times, 50), 2), "p95": round(pct(times, 95), 2),
                            "p99": round(pct(times, 99), 2), "mean": round(statistics.fmean(times), 2),
                            "mean_hits": round(statistics.fmean(len(h) for h in results[mode]), 2)}
                print(f"{key}: {lat[key]}", file=sys.stderr)
        res["latency_ms"] = lat

        # The same SQL that search() runs, on one long-lived connection: how much of the latency above is the
        # per-call connect + fresh-backend cost (catalog caches, loading vector.so and the english dictionary).
        sql_ms: dict[str, list[float]] = {"vector_sql": [], "bm25_sql": []}
        with psycopg.connect(conninfo, autocommit=True) as conn:
            register_vector(conn)
            for i, ((text, agent, team), vec) in enumerate(zip(queries, qvecs)):
                where, params = fact_filters(agent, team)
                params.update(q=text, n=40)
                t0 = time.perf_counter()  # search()'s pipeline: settings, the agent's rows, the team's and global ones
                with conn.pipeline():
                    kind = _Kind("fact", "facts", "fact_terms", where, params)
                    ranks = _send_kinds_vectors(conn, [kind], {"fact": where}, _QueryVector.of(vec), 40, None,
                                                True)["fact"]
                ranks()
                t1 = time.perf_counter()
                bm25_ranks(conn, where, params, text, 40, "fact_terms")
                t2 = time.perf_counter()
                if i >= 5:  # the first few warm the backend
                    sql_ms["vector_sql"].append((t1 - t0) * 1000)
                    sql_ms["bm25_sql"].append((t2 - t1) * 1000)
        res["sql_only_ms"] = {k: {"p50": round(pct(v, 50), 2), "p95": round(pct(v, 95), 2), "p99": round(pct(v, 99), 2),
                                  "mean": round(statistics.fmean(v), 2)} for k, v in sql_ms.items() if v}

        # ------------------------------------------------------------------------------ keyword exactness
        if not args.no_keyword_overlap:
            res["keyword_overlap"] = keyword_overlap(conninfo, source, queries)
            print(f"keyword overlap: {res['keyword_overlap']}", file=sys.stderr)

        # ------------------------------------------------------------------------------ recall@10
        rec_id, rec_dist, exact_ms, visible = [], [], [], []
        n_rec = len(queries) if args.recall_queries is None else args.recall_queries
        fact_hits = results["vector"][:n_rec]
        if res["db"]["episodes"]:  # the exact scan below is over facts: compare with a facts-only search
            fact_hits = [search(source, text, agent_id=agent, team_id=team, k=10, embedder=FixedEmbedder(vec),
                                mode="vector", kinds=["fact"])
                         for (text, agent, team), vec in zip(queries[:n_rec], qvecs[:n_rec])]
        with psycopg.connect(conninfo) as conn:
            register_vector(conn)
            for (text, agent, team), vec, hits in zip(queries, qvecs, fact_hits):
                where, params = fact_filters(agent, team)
                with conn.transaction():
                    conn.execute("SET LOCAL enable_indexscan = off")
                    conn.execute("SET LOCAL enable_bitmapscan = off")
                    t0 = time.perf_counter()
                    rows = conn.execute(
                        f"SELECT f.id, f.embedding <=> %(v)s AS d FROM facts f WHERE f.embedding IS NOT NULL "
                        f"AND {where} ORDER BY f.embedding <=> %(v)s LIMIT 10", {**params, "v": vec}).fetchall()
                    exact_ms.append((time.perf_counter() - t0) * 1000)
                exact = {r[0] for r in rows}
                if not exact:
                    continue
                got = [h for h in hits]
                rec_id.append(len(exact & {h.id for h in got}) / len(exact))
                # ties (the same sentence stored in several visible scopes) make id recall undercount:
                # a hit as close as the 10th exact neighbour counts as correct.
                kth = rows[-1][1]
                rec_dist.append(min(len(exact), sum(1 for h in got if h.vector_distance is not None
                                                    and h.vector_distance <= kth + 1e-6)) / len(exact))
            for agent_i in range(0, N_AGENTS, 10):
                where, params = fact_filters(f"agent-{agent_i:02d}", f"team-{agent_i % N_TEAMS}")
                visible.append(conn.execute(f"SELECT count(*) FROM facts f WHERE {where}", params).fetchone()[0])
        if rec_id:
            res["recall_at_10"] = {"by_id": round(statistics.fmean(rec_id), 4),
                                   "by_distance": round(statistics.fmean(rec_dist), 4),
                                   "queries": len(rec_id), "exact_scan_ms_p50": round(pct(exact_ms, 50), 2),
                                   "visible_facts_per_agent_mean": round(statistics.fmean(visible))}

        if args.explain:
            from factforge.storage.scope import episode_filters

            text, agent, team = queries[0]
            kinds = [("facts", "fact_terms", fact_filters)]
            if res["db"]["episodes"]:
                kinds.append(("turns", "turns", episode_filters))
            with psycopg.connect(conninfo) as conn:
                register_vector(conn)
                conn.execute(ef_search_sql("facts", None, 40).replace(", true)", ", false)"))  # search()'s default
                conn.execute("SET hnsw.iterative_scan = relaxed_order")
                for table, terms, filters in kinds:
                    where, params = filters(agent, team)
                    params.update(q=text, n=40)
                    plan = conn.execute(
                        "EXPLAIN (ANALYZE, BUFFERS) " + vector_sql(table, where, params, DIM),
                        {**params, "v": qvecs[0]}).fetchall()
                    print(f"\n-- vector {table}, query {text!r}\n" + "\n".join(r[0] for r in plan))
                    built = bm25_query(conn, where, params, text, terms)  # all candidate steps, one statement
                    if built is not None:
                        plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS) " + built[0], built[1])
                        print(f"\n-- bm25 {terms}, query {text!r}\n" + "\n".join(r[0] for r in plan.fetchall()))

        res["total_s"] = round(time.perf_counter() - t_total, 1)
    finally:
        if pgdata is not None:
            _stop_server(pgdata)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    report(res)
    if args.json:
        print(json.dumps(res, separators=(",", ":"), default=str))
    return 0


def report(res: dict[str, Any]) -> None:
    print(f"\nfactforge search benchmark: {res['facts']} facts + {res.get('episodes', 0)} episodes, {res['queries']} queries, "
          f"seed {res['seed']}")
    if "server" in res:
        s = res["server"]
        print(f"server: PostgreSQL {s['server_version']}, pgvector {s['pgvector']}, shared_buffers "
              f"{s['shared_buffers']}, work_mem {s['work_mem']}")
    if "embeddings" in res:
        e = res["embeddings"]
        print(f"embeddings: {e['embedded_pool']} of {e['distinct_sentences']} distinct sentences embedded with "
              f"LocalEmbedder ({e['pool_embed_per_s']}/s); {e['facts_with_real_embedding']} facts carry a real "
              f"embedding, {e['facts_with_synthetic_embedding']} a pool vector + gaussian noise "
              f"(sigma {e['noise_sigma_per_dim']}/dim, cosine ~{e.get('mean_cosine_synthetic_vs_base', '-')} "
              f"to its base) -- synthetic, not an embedding of their own text")
    if "load" in res:
        ld = res["load"]
        print("\nload (binary COPY, vectors precomputed, BM25 triggers + GIN/btree indexes maintained):")
        if "copy_without_hnsw_facts_per_s" in ld:
            print(f"  COPY without HNSW index      {ld['copy_without_hnsw_facts_per_s']:>10,.0f} facts/s "
                  f"({ld['copy_without_hnsw_s']} s)")
            print(f"  CREATE INDEX hnsw afterwards {ld['create_hnsw_s']:>10.1f} s   (maintenance_work_mem "
                  f"{ld['create_hnsw_maintenance_work_mem']}) -> {ld['build_after_total_facts_per_s']:,.0f} "
                  f"facts/s overall; {ld.get('create_hnsw_max_parallel_workers', '?')} parallel workers allowed")
            for note in ld.get("create_hnsw_notices", []):
                print(f"    server notice: {note}")
        if "copy_with_hnsw_facts_per_s" in ld:
            print(f"  COPY with HNSW maintained    {ld['copy_with_hnsw_facts_per_s']:>10,.0f} facts/s "
                  f"({ld['copy_with_hnsw_s']} s)")
    d = res["db"]
    print(f"database: {d['facts']} facts ({d['current_facts']} current), table {d['table_mb']} MB, HNSW "
          f"{d['hnsw_index_mb']} MB, {d['bm25_terms']} BM25 terms")
    print(f"\nsearch latency, ms (k=10; pooled connections through a Store; a new connection would add {res['connect_ms_p50']} ms; "
          f"query embedding excluded):")
    print(f"  {'mode':8s} {'p50':>8s} {'p95':>8s} {'p99':>8s} {'mean':>8s}")
    for mode, v in res["latency_ms"].items():
        print(f"  {mode:8s} {v['p50']:8.2f} {v['p95']:8.2f} {v['p99']:8.2f} {v['mean']:8.2f}")
    for name, v in res.get("sql_only_ms", {}).items():
        print(f"  {name:8s} {v['p50']:8.2f} {v['p95']:8.2f} {v['p99']:8.2f} {v['mean']:8.2f}   (search()'s SQL alone, "
              f"one long-lived connection)")
    qe = res["query_embed_ms"]
    print(f"  {'embed':8s} {qe['p50']:8.2f} {qe['p95']:8.2f} {qe['p99']:8.2f}   (LocalEmbedder, one query)")
    if "keyword_overlap" in res:
        o = res["keyword_overlap"]
        print(f"\nkeyword top-10 overlap with exact BM25 (Python, same tokens and statistics): {o['by_id']:.4f} by id, "
              f"{o['tie_aware']:.4f} tie-aware ({o['queries']} queries; median {o['median_visible_matching_facts']} "
              f"visible facts hold a query word)")
    r = res.get("recall_at_10")
    if r:
        print(f"\nrecall@10, search(mode='vector') vs exact scan under the same scope: {r['by_id']:.4f} by id, "
              f"{r['by_distance']:.4f} by distance ({r['queries']} queries; an agent sees ~"
              f"{r['visible_facts_per_agent_mean']} facts; exact scan p50 {r['exact_scan_ms_p50']} ms)")
    print(f"total {res['total_s']} s")


if __name__ == "__main__":
    sys.exit(main())
