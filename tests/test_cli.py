"""The command line: every command documented, help complete, errors one clean line."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from factforge.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_every_command_is_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in _subcommands() if f"factforge {name}" not in readme]
    assert missing == []


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_option_is_documented_in_the_readme_row_of_its_command(name: str) -> None:
    rows = " ".join(line for line in (ROOT / "README.md").read_text().splitlines()
                    if line.startswith(f"| `factforge {name}"))
    flags = [o for a in _subcommands()[name]._actions for o in a.option_strings if o.startswith("--") and o != "--help"]
    assert [f for f in flags if f not in rows] == []


@pytest.mark.parametrize("name", sorted(_subcommands()))
def test_every_command_has_complete_help(name: str) -> None:
    sub = _subcommands()[name]
    assert sub.description and len(sub.description) > 20
    for action in sub._actions:
        if action.dest != "help":
            assert action.help, f"{name}: option {action.dest} has no help"


def run_cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "factforge", *args], capture_output=True, text=True, env=full_env, input=stdin,
        timeout=120, cwd=ROOT,
    )


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("stats",), {"FACTFORGE_EMBEDDER": "gpu"}, "FACTFORGE_EMBEDDER"),
        (("facts", "--agent", "a"), {"FACTFORGE_DATABASE_URL": "mysql://nope"}, "postgresql"),
        (("ingest", "/nonexistent/file.jsonl"), {"FACTFORGE_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"}, "error"),
    ],
)
def test_errors_are_one_clean_line(args: tuple[str, ...], env: dict[str, str], message: str) -> None:
    proc = run_cli(*args, env=env)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("factforge: error:"), proc.stderr
    assert message in lines[0]
    assert "Traceback" not in proc.stderr


def test_extract_json_lines_in_order_with_errors_inline() -> None:
    stdin = "\n".join([
        json.dumps({"text": "We switched from JWT to Clerk for authentication because of compliance requirements"}),
        "{not json",
        json.dumps({"text": "thanks!"}),
        json.dumps({"user": "I prefer dark mode over light mode", "assistant": "Noted."}),
        json.dumps({"text": "x", "timestamp": "yesterday-ish"}),
    ]) + "\n"
    proc = run_cli("extract", "--json", "--no-llm", stdin=stdin, env={"OLLAMA_HOST": "http://127.0.0.1:9"})
    assert proc.returncode == 0, proc.stderr
    out = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(out) == 5
    assert out[0]["facts"][0]["content"] == "Team switched from JWT to Clerk"
    assert out[0]["facts"][0]["method"] == "pattern" and out[0]["needs_llm"] is False
    assert "error" in out[1] and out[1]["line"] == 2
    assert out[2]["gate"] == {"passed": False, "reason": "thanks"} and out[2]["facts"] == []
    assert out[3]["facts"][0]["content"] == "User prefers dark mode over light mode"
    assert "ISO 8601" in out[4]["error"]


def test_extract_text_prints_a_table() -> None:
    proc = run_cli("extract", "--no-llm", "I prefer dark mode over light mode")
    assert proc.returncode == 0, proc.stderr
    assert "preference" in proc.stdout and "User prefers dark mode over light mode" in proc.stdout


def test_global_database_url_reaches_the_db_command() -> None:
    url = "postgresql://someone@db.example:5433/memory"
    proc = run_cli("--database-url", url, "db", "url", env={"FACTFORGE_DATABASE_URL": "postgresql://other@h/x"})
    assert proc.returncode == 0, proc.stderr
    assert "db.example:5433/memory" in proc.stdout and "other@h" not in proc.stdout


@pytest.mark.parametrize("args", [("forget", "--text", "Redis"), ("facts",), ("search", "redis")])
def test_reaching_every_scope_needs_all_scopes(args: tuple[str, ...]) -> None:
    proc = run_cli(*args, env={"FACTFORGE_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"})
    assert proc.returncode != 0
    assert "--all-scopes" in proc.stderr and "Traceback" not in proc.stderr
