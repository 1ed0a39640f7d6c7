"""Batch ingest through the CLI against the real database: summary, idempotent re-runs, bad lines, progress."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from factforge.ingest import Progress

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "team_chat.jsonl"


def _cli(*args: str, db_url: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(home), "FACTFORGE_LLM": "off",
           "FACTFORGE_EMBEDDER": "none"}
    return subprocess.run([sys.executable, "-m", "factforge", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)


def test_ingest_twice_adds_nothing_the_second_time(db_url: str, tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_text(EXAMPLE.read_text() + "{not json\n" + json.dumps({"user": 5, "agent_id": "x"}) + "\n")
    first = _cli("ingest", str(src), "--json", db_url=db_url, home=tmp_path)
    assert first.returncode == 0, first.stderr
    s1 = json.loads(first.stdout)
    assert s1["facts"] >= 10 and s1["dropped_by_reason"]["injection"] == 1 and s1["queued_for_llm"] >= 1
    assert len(s1["errors"]) == 2 and "line 15" in s1["errors"][0]
    assert "\r" not in first.stderr  # piped: no progress bar
    second = _cli("ingest", str(src), "--json", db_url=db_url, home=tmp_path)
    s2 = json.loads(second.stdout)
    assert s2["facts"] == 0 and s2["duplicates"] == s1["turns"] + s1["activities"]
    stats = json.loads(_cli("stats", "--json", db_url=db_url, home=tmp_path).stdout)
    assert stats["turns"] == s1["turns"] + s1["activities"]
    strict = _cli("ingest", str(src), "--strict", db_url=db_url, home=tmp_path)
    assert strict.returncode == 1


def test_facts_and_search_commands_read_what_ingest_stored(db_url: str, tmp_path: Path) -> None:
    assert _cli("ingest", str(EXAMPLE), "--quiet", db_url=db_url, home=tmp_path).returncode == 0
    out = _cli("facts", "--agent", "review-bot", "--team", "platform", "--json", db_url=db_url, home=tmp_path)
    contents = [json.loads(line)["content"] for line in out.stdout.splitlines()]
    assert "Team switched from JWT to Clerk" in contents and "User prefers dark mode over light mode" not in contents
    hits = _cli("search", "null checks", "--agent", "review-bot", "--team", "platform", "--json", db_url=db_url,
                home=tmp_path)
    assert hits.returncode == 0, hits.stderr
    first = json.loads(hits.stdout.splitlines()[0])
    assert "null checks" in first["content"] and first["bm25_rank"] == 1
    misses = _cli("patterns", "misses", db_url=db_url, home=tmp_path)
    assert "staging cluster" in misses.stdout


def test_progress_bar_only_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    piped, tty = io.StringIO(), Tty()
    for stream in (piped, tty):
        bar = Progress(10, stream)
        for i in range(1, 11):
            bar.update(i)
        bar.close()
    assert piped.getvalue() == ""
    assert "10/10" in tty.getvalue() and "/s" in tty.getvalue()


def test_hostile_activity_lines_are_reported_and_skipped(db_url: str, tmp_path: Path) -> None:
    from factforge.ingest import ingest_lines
    from factforge.memory import Memory
    from factforge.settings import Settings

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                  "FACTFORGE_LLM": "off", "FACTFORGE_EMBEDDER": "none"})
    base = {"activity_session_id": "s", "agent_id": "a"}
    lines = [json.dumps({**base, "events": bad}) for bad in (5, True, "We switched from JWT to Clerk", {"text": "x"})]
    lines += [json.dumps({**base, "dialogue": 7}), json.dumps({"activity_session_id": "s"}),
              json.dumps({**base, "events": ["We switched from JWT to Clerk"], "dialogue": ["I use Vim"]})]
    with Memory(settings=settings, llm=None, embedder=None, background=False) as memory:
        summary = ingest_lines(memory, lines)
    assert summary.errors == [
        "line 1: events must be a list of strings or objects, got int",
        "line 2: events must be a list of strings or objects, got bool",
        "line 3: events must be a list of strings or objects, got str",
        "line 4: events must be a list of strings or objects, got dict",
        "line 5: dialogue must be a string or a list of {speaker, text}, got int",
        "line 6: an activity session needs 'activity_session_id' and 'agent_id'",
    ]
    assert summary.activities == 1 and summary.facts >= 1
