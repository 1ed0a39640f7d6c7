"""The SQL the README shows runs against the real schema, on data ingested from the bundled example chat."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

from factforge.ingest import ingest_file
from factforge.memory import Memory
from factforge.settings import Settings

ROOT = Path(__file__).resolve().parent.parent


def _readme_queries() -> list[str]:
    blocks = re.findall(r"```sql\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    # role set-up needs a superuser and a password: shown for people, not run here
    return [b for b in blocks if "CREATE ROLE" not in b]


def test_readme_sql_runs_on_ingested_chat(db_url: str, tmp_path: Path) -> None:
    queries = _readme_queries()
    assert len(queries) >= 4
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)})
    with Memory(settings=settings, llm=None, embedder=None, background=False) as memory:
        ingest_file(memory, ROOT / "examples" / "team_chat.jsonl")
    results = {}
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        for sql in queries:
            results[sql] = conn.execute(sql).fetchall()
    # The same queries as the SQL reader role, as one agent of the team: they run (no column they name is hidden
    # from it), and the team questions count every agent, as the owner does.
    as_reader = {}
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        conn.execute("SET ROLE factforge_reader")
        conn.execute("SET factforge.agent_id = 'review-bot'")
        conn.execute("SET factforge.team_id = 'platform'")
        for sql in queries:
            as_reader[sql] = conn.execute(sql).fetchall()
    for sql in queries:
        if "FROM team_patterns" in sql or "count(DISTINCT s.agent_id)" in sql:
            assert as_reader[sql] == results[sql], sql
    team_patterns = next(rows for sql, rows in results.items() if "FROM team_patterns" in sql)
    assert team_patterns, "the example chat's team policies should show up in team_patterns"
    changes = next(rows for sql, rows in results.items() if "FROM recent_changes" in sql)
    assert [(r[1], r[2]) for r in changes] == [("Team uses Redis for caching", "Team switched from Redis to Memcached")]
