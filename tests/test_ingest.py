"""Batch ingest through the CLI against the real database: summary, idempotent re-runs, bad lines, progress."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from factforge.ingest import Progress
from factforge.memory import Memory
from tests.clirun import Result, run_cli

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "team_chat.jsonl"


def _cli(*args: str, db_url: str, home: Path) -> Result:
    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(home), "FACTFORGE_LLM": "off",
           "FACTFORGE_EMBEDDER": "none"}
    return run_cli(*args, env=env)


def test_ingest_twice_adds_nothing_the_second_time(db_url: str, tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_text(EXAMPLE.read_text() + "{not json\n" + json.dumps({"user": 5, "agent_id": "x"}) + "\n")
    first = _cli("ingest", str(src), "--json", db_url=db_url, home=tmp_path)
    assert first.returncode == 0, first.stderr
    s1 = json.loads(first.stdout)
    assert s1["facts"] >= 10 and s1["dropped_by_reason"]["injection"] == 1 and s1["queued_for_llm"] >= 1
    bad = len(EXAMPLE.read_text().splitlines()) + 1  # the first line after the example's own
    assert len(s1["errors"]) == 2 and f"line {bad}" in s1["errors"][0]
    assert "\r" not in first.stderr  # piped: no progress bar
    second = _cli("ingest", str(src), "--json", "--batch-size", "1", db_url=db_url, home=tmp_path)
    s2 = json.loads(second.stdout)
    assert s2["facts"] == 0 and s2["duplicates"] == s1["turns"] + s1["activities"]
    stats = json.loads(_cli("stats", "--json", db_url=db_url, home=tmp_path).stdout)
    assert stats["turns"] == s1["turns"] + s1["activities"]
    strict = _cli("ingest", str(src), "--strict", db_url=db_url, home=tmp_path)
    assert strict.returncode == 1
    bad = _cli("ingest", str(src), "--batch-size", "0", db_url=db_url, home=tmp_path)
    assert bad.returncode != 0 and "--batch-size: 0 is not at least 1" in bad.stderr and "Traceback" not in bad.stderr


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
    assert "staging cluster" in misses.stdout and "last seen" in misses.stdout


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


def _memory(db_url: str, home: Path) -> Memory:
    from factforge.settings import Settings

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(home),
                                  "FACTFORGE_LLM": "off", "FACTFORGE_EMBEDDER": "none"})
    return Memory(settings=settings, llm=None, embedder=None, background=False)


def _snapshot(db_url: str) -> dict[str, list[tuple]]:
    import psycopg

    queries = {
        "facts": "SELECT content, agent_id, team_id, visibility, mention_count, superseded_at IS NULL, "
                 "(SELECT s.content FROM facts s WHERE s.id = f.superseded_by) FROM facts f ORDER BY 1, 2, 3, 4, 5",
        "sources": "SELECT f.content, s.source_key FROM fact_sources s JOIN facts f ON f.id = s.fact_id ORDER BY 1, 2",
        "turns": "SELECT key, session_id, fact_count, gate_reason FROM turns ORDER BY 1",
        "sessions": "SELECT id, turn_count FROM sessions ORDER BY 1",
        "entities": "SELECT normalized_name, type, mention_count FROM entities ORDER BY 1, 2",
        "queue": "SELECT source_key FROM extraction_queue ORDER BY 1",
        "misses": "SELECT text, count FROM pattern_misses ORDER BY 1",
    }
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://")) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in queries.items()}


def _truncate(db_url: str) -> None:
    import psycopg

    from tests.conftest import DATA_TABLES

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("TRUNCATE " + ", ".join(DATA_TABLES) + " RESTART IDENTITY CASCADE")


# A switch superseding a fact stated earlier in the same group, the same turn twice, a repeated fact, a miss,
# chit-chat and bad lines in the middle of a group.
MIXED = [
    {"user": "We use JWT for authentication", "agent_id": "dev", "team_id": "platform", "session_id": "a",
     "timestamp": "2026-10-01T10:00:00Z"},
    {"user": "We use Redis for caching", "agent_id": "dev", "team_id": "platform", "session_id": "a"},
    "{not json",
    {"user": "We switched from JWT to Clerk for authentication", "agent_id": "dev", "team_id": "platform",
     "session_id": "a", "timestamp": "2026-11-01T10:00:00Z"},
    {"user": "We use Redis for caching", "agent_id": "ops", "team_id": "platform", "session_id": "b"},
    {"user": "We use Redis for caching", "agent_id": "dev", "team_id": "platform", "session_id": "a"},
    {"user": "hi", "agent_id": "dev"},
    {"user": "thanks!", "agent_id": "dev", "visibility": "team"},
    {"user": "The staging cluster runs out of memory during the nightly batch job", "agent_id": "ops",
     "session_id": "b"},
    {"activity_session_id": "act", "agent_id": "ops", "events": ["We switched from Redis to Valkey for caching"]},
    {"user": "I prefer Vim over Emacs", "agent_id": "dev", "colour": "red"},
    {"user": "I prefer Vim over Emacs", "agent_id": "dev", "session_id": "a"},
]


def _lines() -> list[str]:
    return [x if isinstance(x, str) else json.dumps(x) for x in MIXED]


def test_batched_ingest_stores_exactly_what_one_line_at_a_time_stores(db_url: str, tmp_path: Path) -> None:
    from factforge.ingest import ingest_lines

    runs = {}
    for size in (1, 4, 200):
        _truncate(db_url)
        with _memory(db_url, tmp_path) as memory:
            summary = ingest_lines(memory, _lines(), batch_size=size)
            again = ingest_lines(memory, _lines(), batch_size=size)
        runs[size] = (summary.as_dict() | {"seconds": 0}, _snapshot(db_url))
        assert again.facts == 0 and again.duplicates == summary.turns + summary.activities
    assert runs[4] == runs[1] and runs[200] == runs[1]
    summary, state = runs[200]
    assert summary["errors"] == ["line 3: not JSON (Expecting property name enclosed in double quotes at column 2)",
                                 "line 8: visibility 'team' needs a team_id",
                                 "line 11: unknown field(s) colour in a turn"]
    assert summary["turns"] == 8 and summary["activities"] == 1 and summary["duplicates"] == 1
    superseded = {row[0]: row[6] for row in state["facts"] if not row[5]}
    assert superseded.get("Team uses JWT for authentication") == "Team switched from JWT to Clerk"


def test_a_database_error_in_a_group_replays_it_line_by_line(db_url: str, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from factforge.errors import DatabaseError
    from factforge.ingest import ingest_lines
    from factforge.storage.store import Store

    with _memory(db_url, tmp_path) as memory:
        expected = ingest_lines(memory, _lines(), batch_size=1).as_dict() | {"seconds": 0}
    clean = _snapshot(db_url)
    _truncate(db_url)

    real, failed = Store.record_turn, []

    def once_in_a_batch(self: Store, key: str, **kw: object) -> bool:
        if self._bound() is not None and not failed:  # a real error from the server, inside the group's transaction
            failed.append(key)
            with self._tx() as conn:
                conn.exec_driver_sql("SELECT 1 / 0")
        return real(self, key, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Store, "record_turn", once_in_a_batch)
    with _memory(db_url, tmp_path) as memory:
        summary = ingest_lines(memory, _lines(), batch_size=5)
    assert failed and summary.as_dict() | {"seconds": 0} == expected
    assert _snapshot(db_url) == clean

    def always(self: Store, key: str, **kw: object) -> bool:
        with self._tx() as conn:
            conn.exec_driver_sql("SELECT 1 / 0")

    monkeypatch.setattr(Store, "record_turn", always)  # refused line by line too: the run stops, as it always did
    _truncate(db_url)
    with _memory(db_url, tmp_path) as memory, pytest.raises(DatabaseError, match="division by zero"):
        ingest_lines(memory, _lines(), batch_size=5)


def test_batch_size_must_be_positive(db_url: str, tmp_path: Path) -> None:
    from factforge.errors import ValidationError
    from factforge.ingest import ingest_lines

    with _memory(db_url, tmp_path) as memory, pytest.raises(ValidationError, match="batch_size"):
        ingest_lines(memory, _lines(), batch_size=0)


def test_progress_shows_no_eta_before_it_knows_the_rate() -> None:
    import io

    from factforge.ingest import Progress

    out = io.StringIO()
    bar = Progress(1000, out, force=True, unit="items")
    bar.update(1)  # the first item, a millisecond in: an ETA would be a wild guess
    assert out.getvalue().endswith(" items/s ETA    ?")
    bar.start -= 2.0  # two seconds in
    bar._last = 0.0
    bar.update(500)
    assert re.search(r"500/1000 \d+ items/s ETA +\d+s$", out.getvalue())
