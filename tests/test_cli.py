"""The command line: every command documented, help complete, errors one clean line."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from factforge.cli import build_parser
from tests.clirun import run_cli

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


def run_process(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m factforge ARGS`` in a process of its own: for what only a process shows."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "factforge", *args], capture_output=True, text=True, env=full_env, timeout=120,
        cwd=ROOT,
    )


def test_the_module_runs_as_a_process_with_its_exit_codes() -> None:
    """The rest of this file runs commands in-process through ``cli.main`` (tests/clirun.py); here the real
    ``python -m factforge``: its output, a clean error as exit code 1 with no traceback, a usage error as 2."""
    import factforge

    proc = run_process("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"factforge {factforge.__version__}"
    proc = run_process("stats", env={"FACTFORGE_EMBEDDER": "gpu"})
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()] and proc.stderr.startswith("factforge: error:")
    proc = run_process("facts", "--all-scopes", "--bogus")
    assert proc.returncode == 2 and proc.stderr.startswith("usage: factforge facts ")


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


# --- the first hour of a new user (issue 15) -------------------------------------------------------------


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture
def scratch_db(pg_server_url: str) -> Iterator[str]:
    """A database of its own on the test server, for commands that drop the schema."""
    import psycopg

    name = f"ff_scratch_{os.getpid()}"
    with psycopg.connect(_libpq(pg_server_url), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    base, _, query = _libpq(pg_server_url).partition("?")
    yield base.rsplit("/", 1)[0] + f"/{name}" + (f"?{query}" if query else "")
    with psycopg.connect(_libpq(pg_server_url), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def _tables(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public' "
                            "AND tablename <> 'alembic_version'").fetchone()[0]


def test_db_upgrade_says_what_it_did_and_downgrade_asks_first(scratch_db: str) -> None:
    env = {"FACTFORGE_EMBEDDER": "none"}
    first = run_cli("--database-url", scratch_db, "db", "upgrade", env=env)
    assert first.returncode == 0 and "created the schema (revision " in first.stdout, first.stderr
    again = run_cli("--database-url", scratch_db, "db", "upgrade", env=env)
    assert "schema already up to date (revision " in again.stdout
    tables = _tables(scratch_db)
    refused = run_cli("--database-url", scratch_db, "db", "downgrade", env=env, stdin="")
    assert refused.returncode == 1 and "re-run with --yes" in refused.stderr and "every fact" in refused.stderr
    assert _tables(scratch_db) == tables  # nothing was dropped
    done = run_cli("--database-url", scratch_db, "db", "downgrade", "--yes", env=env)
    assert done.returncode == 0 and "downgraded to base" in done.stdout, done.stderr
    assert _tables(scratch_db) == 0


def test_db_url_is_a_libpq_url_that_psycopg_and_psql_connect_with(db_url: str) -> None:
    import shutil

    import psycopg

    from factforge.storage.embedded import psql_path

    out = run_cli("--database-url", db_url, "db", "url")
    url = out.stdout.strip()
    assert out.returncode == 0 and url.startswith("postgresql://") and "+psycopg" not in url
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM alembic_version").fetchone() == (1,)
    for psql in {psql_path(), shutil.which("psql")} - {None}:  # the wheel's psql, and the system's if any
        proc = subprocess.run([psql, url, "-tAc", "SELECT version_num FROM alembic_version"], capture_output=True,
                              text=True, timeout=30)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
    via = run_process("--database-url", db_url, "db", "psql", "-c", "SELECT 'psql-ok'")  # it execs psql
    assert via.returncode == 0 and "psql-ok" in via.stdout, via.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("facts", "--all-scopes", "--limit", "0"), "argument --limit: 0 is not at least 1"),
        (("search", "x", "--all-scopes", "-k", "0"), "argument -k: 0 is not at least 1"),
        (("facts", "--all-scopes", "--category", "nonsense"), "argument --category: invalid choice: 'nonsense'"),
        (("facts", "--all-scopes", "--bogus"), "unrecognized arguments: --bogus"),
    ],
)
def test_bad_arguments_get_the_commands_own_usage(args: tuple[str, ...], message: str) -> None:
    proc = run_cli(*args, env={"FACTFORGE_DATABASE_URL": "postgresql://u@127.0.0.1:1/x"})
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"usage: factforge {args[0]} ") and message in proc.stderr, proc.stderr


def test_version() -> None:
    import factforge

    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"factforge {factforge.__version__}"


def test_unknown_llm_switch_is_refused() -> None:
    proc = run_cli("extract", "I use Vim.", env={"FACTFORGE_LLM": "banana"})
    assert proc.returncode == 1 and "FACTFORGE_LLM='banana'" in proc.stderr


def test_stats_is_a_readable_table_and_json_on_request(db_url: str, tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_text("\n".join(json.dumps({"user": t, "agent_id": "a", "team_id": "t", "session_id": f"s{i}"})
                             for i, t in enumerate(["I prefer dark mode over light mode", "We use Redis for caching",
                                                    "We use Redis for caching"])) + "\n")
    env = {"FACTFORGE_LLM": "off", "FACTFORGE_EMBEDDER": "none"}
    ingest = run_cli("--database-url", db_url, "ingest", str(src), env=env)
    # three mentions of two distinct facts: each number says which it is
    assert "fact mentions extracted: 3 (preference 1, technology 2); new distinct facts: 2" in ingest.stdout
    proc = run_cli("--database-url", db_url, "stats", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in proc.stdout.splitlines())
    assert lines["facts (distinct, current)"] == "2"
    assert lines["by category"] == "preference 1, technology 1"
    assert not any(v.startswith(("{", "[")) for v in lines.values())
    assert json.loads(run_cli("--database-url", db_url, "stats", "--json", env=env).stdout)["facts"] == 2


def test_forget_dry_run_names_everything_it_would_remove(db_url: str) -> None:
    proc = run_cli("--database-url", db_url, "forget", "--agent", "a", env={"FACTFORGE_EMBEDDER": "none"})
    assert proc.returncode == 0
    assert "would be deleted with their stored turns and queued LLM work; re-run with --yes" in proc.stdout


def test_interrupted_says_a_rerun_resumes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from factforge import cli

    def interrupted(args: argparse.Namespace) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_prompt", interrupted)
    assert cli.main(["prompt"]) == 130
    assert "running the same command again resumes" in capsys.readouterr().err


def _queue_one(db_url: str, tmp_path: Path) -> None:
    src = tmp_path / "one.jsonl"
    src.write_text(json.dumps({"user": "The staging cluster keeps running out of memory at midnight",
                               "agent_id": "a", "team_id": "t"}) + "\n")
    out = run_cli("--database-url", db_url, "ingest", str(src), "--json",
                  env={"FACTFORGE_LLM": "off", "FACTFORGE_EMBEDDER": "none"})
    assert json.loads(out.stdout)["queued_for_llm"] == 1


def test_drain_names_an_unreachable_ollama_and_fails(db_url: str, tmp_path: Path) -> None:
    _queue_one(db_url, tmp_path)
    proc = run_cli("--database-url", db_url, "llm", "drain",
                   env={"OLLAMA_HOST": "http://127.0.0.1:9", "FACTFORGE_EMBEDDER": "none"})
    assert proc.returncode == 1
    assert "1 x Ollama at http://127.0.0.1:9 is not reachable" in proc.stdout
    assert "start Ollama (http://127.0.0.1:9)" in proc.stdout
    # run again at once: nothing is due, and what waits says until when and why
    again = run_cli("--database-url", db_url, "llm", "drain",
                    env={"OLLAMA_HOST": "http://127.0.0.1:9", "FACTFORGE_EMBEDDER": "none"})
    assert "0 queued message(s) processed" in again.stdout
    assert re.search(r"1 item\(s\) wait until \d\d:\d\d:\d\d \(back-off\) after: Ollama at http://127.0.0.1:9 is "
                     "not reachable", again.stdout), again.stdout


def test_drain_names_a_missing_model(db_url: str, tmp_path: Path) -> None:
    from fake_ollama import FakeOllama, HTTPError

    _queue_one(db_url, tmp_path)
    with FakeOllama() as fake:
        fake.script(HTTPError(404, 'model "llama3.2" not found, try pulling it first'))
        proc = run_cli("--database-url", db_url, "llm", "drain",
                       env={"OLLAMA_HOST": fake.url, "FACTFORGE_EMBEDDER": "none"})
    assert proc.returncode == 1
    assert "ollama pull llama3.2" in proc.stdout, proc.stdout


def test_ingest_wait_llm_reports_the_llm_outcome(db_url: str, tmp_path: Path) -> None:
    from fake_ollama import FakeOllama

    src = tmp_path / "one.jsonl"
    src.write_text(json.dumps({"text": "The staging cluster keeps running out of memory at midnight",
                               "agent_id": "a", "team_id": "t"}) + "\n")
    with FakeOllama() as fake:
        fake.script({"facts": [{"content": "Staging cluster runs out of memory at midnight", "category": "other",
                                "confidence": 0.8, "entities": []},
                               {"content": "The moon is made of cheese", "category": "other", "confidence": 0.9,
                                "entities": []}]})
        proc = run_cli("--database-url", db_url, "ingest", str(src), "--wait-llm",
                       env={"OLLAMA_HOST": fake.url, "FACTFORGE_EMBEDDER": "none"})
    assert proc.returncode == 0, proc.stderr
    assert "LLM: 1 queued message(s) processed, 1 fact mention(s) stored" in proc.stdout, proc.stdout
    assert "reply items rejected by validation: " in proc.stdout


@pytest.mark.slow
def test_demo_prints_how_to_reach_its_memory_and_that_works(tmp_path: Path) -> None:
    home = tmp_path / "demo-home"
    env = {**os.environ, "FACTFORGE_HOME": str(home), "FACTFORGE_LLM": "off", "FACTFORGE_EMBEDDER": "none",
           "FACTFORGE_IDLE_STOP": "0"}
    env.pop("FACTFORGE_DATABASE_URL", None)
    try:
        demo = subprocess.run(["bash", "scripts/demo.sh"], capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=300)
        assert demo.returncode == 0, demo.stderr
        steps = demo.stdout.split("To explore this memory with the factforge command:\n", 1)[1].splitlines()
        assert steps[0].strip() == f"source {ROOT}/.venv/bin/activate"
        assert steps[1].strip() == f"export FACTFORGE_HOME={home}"
        # the printed lines, run as a user would paste them into a new shell (without FACTFORGE_HOME set)
        shell = {k: v for k, v in env.items() if k != "FACTFORGE_HOME"} | {"PATH": "/usr/bin:/bin"}
        proc = subprocess.run(["bash", "-c", "\n".join(s.strip() for s in steps[:3])], capture_output=True,
                              text=True, env=shell, cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "Team uses Clerk" in proc.stdout and "creating a new database" not in proc.stderr
    finally:
        from factforge.storage.embedded import stop_server

        stop_server(home)


@pytest.mark.slow
def test_a_new_home_is_announced_on_a_terminal(tmp_path: Path) -> None:
    import pty

    home = tmp_path / "new-home"
    env = {**os.environ, "FACTFORGE_HOME": str(home), "FACTFORGE_EMBEDDER": "none", "FACTFORGE_IDLE_STOP": "0"}
    env.pop("FACTFORGE_DATABASE_URL", None)
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "factforge", "stats"], stdout=subprocess.PIPE, stderr=slave,
                              text=True, env=env, cwd=tmp_path, timeout=120)
        os.close(slave)
        told = ""
        while True:  # one read may return only a part of what the terminal holds (a line at a time)
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the writer has gone and all is read
                break
            if not chunk:
                break
            told += chunk.decode()
        assert proc.returncode == 0
        assert f"creating a new database in FACTFORGE_HOME={home}" in told
    finally:
        os.close(master)
        from factforge.storage.embedded import stop_server

        stop_server(home)
