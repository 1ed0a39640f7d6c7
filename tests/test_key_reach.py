"""How far a key's writes may be shared (``api_keys.max_visibility``): a key made for team-only or private work
never publishes a fact or an episode to other teams, on every write path (the API's remember and observe, the
MCP server's principal, the LLM's later facts from the queue), whatever the server's visibility settings say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from factforge.errors import ForbiddenError, ValidationError
from factforge.memory import Memory
from factforge.models.llm import OllamaLLM
from factforge.service import Service
from factforge.settings import Settings, within
from factforge.storage.keys import KeyStore, Principal
from tests.clirun import run_cli
from tests.fake_ollama import FakeOllama, Reply

DECISION = "We decided to use Redis for caching."
UNANSWERED = "The staging cluster keeps running out of memory whenever the nightly batch job kicks in"
LLM_REPLY = {"facts": [{"content": "Staging cluster runs out of memory during the nightly batch job",
                        "category": "decision", "confidence": 0.8, "entities": []}],
             "entities": [], "relationships": []}


@pytest.fixture
def fake() -> Iterator[FakeOllama]:
    with FakeOllama() as f:
        yield f


@pytest.fixture
def service(db_url: str, tmp_path: Path, fake: FakeOllama) -> Iterator[Service]:
    """A service whose settings share decisions with everyone (README's own example) and episodes with the team."""
    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "OLLAMA_HOST": fake.url,
           "FACTFORGE_LLM_TIMEOUT": "2", "FACTFORGE_VISIBILITY": "decision=global",
           "FACTFORGE_EPISODE_VISIBILITY": "team", "FACTFORGE_BACKGROUND_EMBED": "off"}
    settings = Settings.from_env(env)
    svc = Service(Memory(settings=settings, llm=OllamaLLM(settings), embedder=None, background=False))
    try:
        yield svc
    finally:
        svc.close()


def key(service: Service, widest: str, agent: str = "reach-alice", team: str = "t1") -> Principal:
    _, plain = KeyStore(service.memory.store.engine).create(agent_id=agent, team_id=team, max_visibility=widest)
    return KeyStore(service.memory.store.engine).verify(plain)


def scopes(service: Service, table: str) -> set[str]:
    return {r["visibility"] for r in service.memory.store._all(f"SELECT visibility FROM {table}")}


@pytest.mark.parametrize(("visibility", "widest", "expected"), [
    ("private", None, "private"), ("global", None, "global"), ("global", "team", "team"),
    ("team", "private", "private"), ("private", "global", "private"), ("team", "team", "team")])
def test_within_keeps_the_narrower_scope(visibility: str, widest: str | None, expected: str) -> None:
    assert within(visibility, widest) == expected


def test_a_key_stores_its_widest_scope_and_old_keys_keep_global(service: Service) -> None:
    keys = KeyStore(service.memory.store.engine)
    info, plain = keys.create(agent_id="reach-alice", team_id="t1", max_visibility="team")
    assert info.max_visibility == "team" and keys.verify(plain).max_visibility == "team"
    assert keys.create(agent_id="reach-bob", team_id="t1")[0].max_visibility == "global"
    with pytest.raises(ValidationError, match="max_visibility 'public' must be one of"):
        keys.create(agent_id="reach-carol", team_id="t1", max_visibility="public")
    with pytest.raises(ValidationError, match="needs a team"):
        keys.create(agent_id="reach-dave", max_visibility="team")


def test_settings_that_share_further_are_held_to_the_keys_scope(service: Service) -> None:
    team_key, open_key = key(service, "team"), key(service, "global", agent="reach-bob")
    service.remember(team_key, {"user": DECISION})
    assert scopes(service, "facts") == {"team"} and scopes(service, "turns") == {"team"}
    # the same settings, a key allowed to publish: global, as before
    service.remember(open_key, {"user": "We decided to use Postgres for the queue."})
    assert scopes(service, "facts") == {"team", "global"}
    # another team sees nothing the narrowed key wrote
    outsider = key(service, "global", agent="reach-eve", team="t2")
    hits = service.search(outsider, "Redis caching")["hits"]
    assert hits == [] or all("Redis" not in h["content"] for h in hits)


def test_a_private_key_keeps_even_team_facts_and_episodes_private(service: Service) -> None:
    service.remember(key(service, "private"),
                     {"user": "We switched from JWT to Clerk for authentication because of compliance requirements"})
    assert scopes(service, "facts") == {"private"} and scopes(service, "turns") == {"private"}


@pytest.mark.parametrize("write", ["remember", "observe"])
def test_asking_for_more_than_the_key_allows_is_forbidden_and_stores_nothing(service: Service, write: str) -> None:
    who = key(service, "team")
    args: dict[str, Any] = ({"user": DECISION} if write == "remember"
                            else {"activity_session_id": "a1", "events": [DECISION]})
    with pytest.raises(ForbiddenError, match="wider than this key may share"):
        getattr(service, write)(who, {**args, "visibility": "global"})
    assert service.memory.store._all("SELECT id FROM turns") == []
    # a key cannot lift its own limit through the request either
    getattr(service, write)(who, {**args, "max_visibility": "global"})
    assert scopes(service, "facts") == {"team"}


def test_the_llms_later_facts_keep_the_keys_limit(service: Service, fake: FakeOllama) -> None:
    result = service.remember(key(service, "team"), {"user": UNANSWERED})
    assert result["queued"]
    fake.script(Reply(json.dumps(LLM_REPLY)))
    assert service.memory.drain().stored_facts == 1
    rows = service.memory.store._all("SELECT extraction_method AS method, visibility FROM facts")
    assert {(r["method"], r["visibility"]) for r in rows} == {("llm", "team")}


def test_the_library_refuses_a_visibility_wider_than_its_limit(service: Service) -> None:
    with pytest.raises(ValidationError, match="wider than max_visibility"):
        service.memory.remember(user=DECISION, agent_id="a", team_id="t1", visibility="global",
                                max_visibility="team")
    with pytest.raises(ValidationError, match="max_visibility 'wide' must be one of"):
        service.memory.remember(user=DECISION, agent_id="a", team_id="t1", max_visibility="wide")


def test_over_http_a_narrowed_key_gets_403_as_json(service: Service) -> None:
    import asyncio

    from factforge.api import create_app

    _, plain = KeyStore(service.memory.store.engine).create(agent_id="reach-alice", team_id="t1", max_visibility="team")
    app = create_app(service, mcp=False)

    async def post(body: dict[str, Any]) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post("/v1/remember", json=body, headers={"Authorization": f"Bearer {plain}"})

    refused = asyncio.run(post({"user": DECISION, "visibility": "global"}))
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
    stored = asyncio.run(post({"user": DECISION}))
    assert stored.status_code == 200 and {f["visibility"] for f in stored.json()["facts"]} == {"team"}


def test_keys_create_takes_the_limit_and_list_shows_it(db_url: str, tmp_path: Path) -> None:
    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}
    made = run_cli("keys", "create", "--agent", "reach-cli-agent", "--team", "t1", "--max-visibility", "private",
                   env=env)
    assert made.returncode == 0, made.stderr
    assert "writing at most private facts" in made.stdout
    listed = run_cli("keys", "list", "--json", env=env)
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [r["max_visibility"] for r in rows if r["agent_id"] == "reach-cli-agent"] == ["private"]
    bad = run_cli("keys", "create", "--agent", "bob", "--team", "t1", "--max-visibility", "public", env=env)
    assert bad.returncode != 0 and "invalid choice" in bad.stderr
