"""Fact lifecycle against the real database: supersession table, dedup under concurrency, as-of, forgetting."""

from __future__ import annotations

import json
import multiprocessing as mp
from contextlib import closing
from datetime import datetime, timezone
from pathlib import Path

import pytest

from factforge.models.embed import make_embedder
from factforge.errors import ValidationError
from factforge.memory import Memory
from factforge.settings import Settings
from factforge.memory import open_store
from factforge.storage.store import Provenance, Scope, Store
from factforge.types import Explanation, Fact
from tests.clirun import run_cli


# (earlier messages, later message, what is current afterwards, what was superseded)
CASES = [
    pytest.param(["We use JWT for authentication"], "We switched from JWT to Clerk for authentication",
                 {"Team switched from JWT to Clerk", "Team uses Clerk"}, {"Team uses JWT for authentication"},
                 id="switch"),
    pytest.param(["I prefer dark mode"], "I now prefer light mode",
                 {"User prefers light mode"}, {"User prefers dark mode"}, id="preference-change"),
    pytest.param(["We decided to use Redis for caching", "We decided to use Terraform for all infrastructure changes"],
                 "We decided to use Memcached for caching",
                 {"Team decided to use Memcached for caching",
                  "Team decided to use Terraform for all infrastructure changes"},
                 {"Team decided to use Redis for caching"}, id="decision-reversal-unrelated-untouched"),
    pytest.param(["I live in Berlin", "I love hiking"], "I live in Paris",
                 {"User lives in Paris", "User loves hiking"}, {"User lives in Berlin"}, id="moved"),
    pytest.param(["My favorite editor is Vim", "My favorite color is blue"], "My favorite editor is Emacs",
                 {"User's favorite editor is Emacs", "User's favorite color is blue"},
                 {"User's favorite editor is Vim"}, id="new-favorite"),
    pytest.param(["We use PostgreSQL for the database"], "We switched from MySQL to MariaDB",
                 {"Team uses PostgreSQL for the database", "Team switched from MySQL to MariaDB", "Team uses MariaDB"},
                 set(), id="unrelated-switch"),
    # paraphrases merge (real embeddings, cosine 0.949), near-misses with another value or polarity do not
    pytest.param(["I prefer dark mode"], "I like dark mode", {"User prefers dark mode"}, set(), id="paraphrase-merged"),
    pytest.param(["I have two dogs"], "I have three dogs", {"User has two dogs", "User has three dogs"}, set(),
                 id="other-value-kept"),
    pytest.param(["I like dark mode"], "I no longer like dark mode", {"User dislikes dark mode"},
                 {"User likes dark mode"}, id="preference-turned"),
    pytest.param(["I hate meetings before noon"], "I love meetings before noon", {"User loves meetings before noon"},
                 {"User dislikes meetings before noon"}, id="preference-turned-back"),
]


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)})


@pytest.mark.parametrize(("before", "after", "current", "superseded"), CASES)
def test_supersession(settings: Settings, before: list[str], after: str, current: set[str],
                      superseded: set[str]) -> None:
    with Memory(settings=settings, llm=None, embedder=make_embedder(settings), background=False) as m:
        for i, text in enumerate(before):
            m.remember(user=text, agent_id="a1", team_id="t1", timestamp=f"2026-10-0{i + 1}T10:00:00Z")
        m.remember(user=after, agent_id="a1", team_id="t1", timestamp="2026-11-01T10:00:00Z")
        assert {f.content for f in m.facts(agent_id="a1", team_id="t1")} == current
        old = {f.content: f for f in m.facts(agent_id="a1", team_id="t1", include_history=True) if f.superseded_at}
        assert set(old) == superseded
        for f in old.values():
            assert f.superseded_by is not None and f.valid_to is not None
        # search never returns what was superseded, unless asked
        if superseded:
            word = next(iter(superseded)).split()[-1]
            assert all(h.content not in superseded for h in m.search(word, agent_id="a1", team_id="t1"))
            assert any(h.content in superseded for h in m.search(word, agent_id="a1", team_id="t1",
                                                                  include_history=True))


def test_as_of_in_library_and_cli(settings: Settings, db_url: str, tmp_path: Path) -> None:
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        m.remember(user="We use JWT for authentication", agent_id="a1", team_id="t1", timestamp="2026-10-01T10:00:00Z")
        m.remember(user="We switched from JWT to Clerk", agent_id="a1", team_id="t1", timestamp="2026-11-01T10:00:00Z")
        then = m.facts(agent_id="a1", team_id="t1", as_of=datetime(2026, 10, 15, tzinfo=timezone.utc))
        assert [f.content for f in then] == ["Team uses JWT for authentication"]
    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off"}
    out = run_cli("facts", "--agent", "a1", "--team", "t1", "--as-of", "2026-10-15", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert [json.loads(line)["content"] for line in out.stdout.splitlines()] == ["Team uses JWT for authentication"]


def _writer(url: str, home: str, worker: int, barrier: mp.Barrier) -> None:  # type: ignore[valid-type]
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": home})
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        barrier.wait()
        for text in ("We use Redis for caching", "We switched from JWT to Clerk", "I prefer tabs over spaces",
                     "We use Kafka for events and Redis for caching"):
            m.remember(user=text, agent_id="shared-agent", team_id="t1", session_id=f"w{worker}")


@pytest.mark.slow
def test_eight_concurrent_writers_give_exact_mention_counts(db_url: str, tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(8)
    procs = [ctx.Process(target=_writer, args=(db_url, str(tmp_path), i, barrier)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 8
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)})
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        counts = {f.content: f.mention_count for f in m.facts(agent_id="shared-agent", team_id="t1")}
        rows = m.store._all("SELECT content_hash, count(*) AS n FROM facts WHERE superseded_at IS NULL "
                            "GROUP BY 1 HAVING count(*) > 1")
    assert rows == []
    assert counts == {"Team uses Redis for caching": 16, "Team switched from JWT to Clerk": 8, "Team uses Clerk": 8,
                      "User prefers tabs over spaces": 8, "Team uses Kafka for events": 8}


def test_forget_keeps_other_scopes_and_never_comes_back(settings: Settings) -> None:
    with Memory(settings=settings, llm=None, embedder=make_embedder(settings), background=False) as m:
        m.remember(user="I love hiking in the Alps", agent_id="a1", session_id="s1")
        m.remember(user="I love hiking in the Alps", agent_id="a2", session_id="s2")
        m.remember(user="We use Redis for caching", agent_id="a1", team_id="t1", session_id="s1")
        assert m.forget(dry_run=True, agent_id="a1") == 2
        assert m.forget(agent_id="a1") == 2
        assert m.facts(agent_id="a1", team_id="t1") == []
        assert m.search("hiking", agent_id="a1") == []
        assert [h.agent_id for h in m.search("hiking", agent_id="a2")] == ["a2"]
        # the forgotten turn is gone too, so re-sending it stores the fact afresh instead of skipping it
        again = m.remember(user="I love hiking in the Alps", agent_id="a1", session_id="s1")
        assert not again.duplicate and len(again.facts) == 1


def test_bad_values_are_clear_errors_before_sql(settings: Settings) -> None:
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        exp = Explanation("pattern", "r", 0.5, 0.5)
        scope, prov = Scope("a", None, "private"), Provenance("k")
        for bad, match in ((Fact("x", "technology", 1.5, "pattern", exp), "confidence"),
                           (Fact("x", "gossip", 0.5, "pattern", exp), "category"),  # type: ignore[arg-type]
                           (Fact("nul\x00", "technology", 0.5, "pattern", exp), "NUL"),
                           (Fact("  ", "technology", 0.5, "pattern", exp), "content")):
            with pytest.raises(ValidationError, match=match):
                m.store.save([bad], scope, prov)
        with pytest.raises(ValidationError, match="visibility"):
            Scope("a", None, "public")
        assert m.stats()["facts"] == 0


def _fact(content: str, category: str = "technology", subject: str = "Team") -> Fact:
    return Fact(content, category, 0.9, "pattern", Explanation("pattern", "r", 0.9, 0.9),  # type: ignore[arg-type]
                subject=subject)


def test_team_fact_from_two_agents_is_one_row_even_concurrently(settings: Settings) -> None:
    import threading

    # Store only: these tests need no extraction rules.
    with closing(open_store(settings)) as store:
        texts = [f"Team uses tool number {i}" for i in range(12)]
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []

        def write(agent: str) -> None:
            try:
                for i, text in enumerate(texts):
                    barrier.wait()
                    store.save([_fact(text)], Scope(agent, "t1", "team"), Provenance(f"{agent}-{i}"))
                    store.save([_fact("Python 3.14 is out", "other", "Python")], Scope(agent, "t1", "global"),
                               Provenance(f"{agent}-g{i}"))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(a,)) for a in ("a1", "a2")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        team = {f.content: f for f in store.facts(team_id="t1", agent_id="nobody") if f.visibility == "team"}
        assert set(team) == set(texts)
        for f in team.values():
            assert f.mention_count == 2
            assert sorted(s["agent_id"] for s in store.sources(f.id)) == ["a1", "a2"]
        (glob,) = [f for f in store.facts() if f.visibility == "global"]
        assert glob.mention_count == 24 and len(store.sources(glob.id)) == 24
        # a private fact stays one row per agent
        for agent in ("a1", "a2"):
            store.save([_fact("User likes tea", "preference", "User")], Scope(agent, "t1", "private"),
                       Provenance(f"p-{agent}"))
        private = [f for f in store.facts() if f.visibility == "private"]
        assert sorted(f.agent_id for f in private) == ["a1", "a2"]
        assert all(f.mention_count == 1 for f in private)
        # the cross-agent view counts both agents' mentions of the one row
        row = store._all("SELECT agents, mentions FROM team_patterns WHERE content = %(c)s", {"c": texts[0]})
        assert row == [{"agents": 2, "mentions": 2}]
