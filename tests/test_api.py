"""``factforge serve`` over real HTTP: keys decide the scope, every endpoint refuses a missing or wrong key."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clirun import Result, run_cli
from tests.servers import RunningAPI, running_api

ROOT = Path(__file__).resolve().parent.parent
TEAM_FACT = "We switched from JWT to Clerk for authentication because of compliance requirements"
PRIVATE_FACT = "I prefer tabs over spaces"


@pytest.fixture(scope="module")
def api(pg_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAPI]:
    with running_api(pg_server_url, tmp_path_factory.mktemp("api")) as running:
        yield running


@pytest.fixture
def client(api: RunningAPI, db_url: str) -> Iterator[httpx.Client]:
    """A client of the running API over an emptied database (db_url empties it)."""
    with httpx.Client(base_url=api.url, timeout=60) as c:
        yield c


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def remember(client: httpx.Client, key: str, user: str, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/remember", json={"user": user, **extra}, headers=bearer(key))
    assert r.status_code == 200, r.text
    return r.json()


# Every endpoint that needs a key, with a valid body.
ENDPOINTS = [
    ("POST", "/v1/remember", {"user": TEAM_FACT}),
    ("POST", "/v1/observe", {"activity_session_id": "act-1", "events": ["We use Postgres 16 for the API"]}),
    ("POST", "/v1/search", {"query": "authentication"}),
    ("GET", "/v1/facts", None),
    ("GET", "/v1/facts/00000000-0000-0000-0000-000000000000/sources", None),
    ("POST", "/v1/forget", {"category": "technology", "dry_run": True}),
    ("GET", "/v1/stats", None),
    ("GET", "/v1/prompt", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=[e[1] for e in ENDPOINTS])
@pytest.mark.parametrize("auth", [None, "Bearer", "Bearer ffk_not-a-key", "Basic dXNlcjpwdw==", "revoked"])
def test_no_valid_key_is_401_with_a_json_error(client: httpx.Client, api: RunningAPI, method: str, path: str,
                                               body: Any, auth: str | None) -> None:
    if auth == "revoked":
        info, key = api.keys.create(agent_id="a", team_id="t")
        api.keys.revoke(info.id)
        auth = f"Bearer {key}"
    r = client.request(method, path, json=body, headers={"Authorization": auth} if auth else {})
    assert r.status_code == 401, r.text
    assert r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


# (endpoint, what the key is, what it tries) -> 403 forbidden, or 404 where the fact must not even be told.
WRONG_SCOPE = [
    ("POST", "/v1/remember", "readonly", {"user": TEAM_FACT}, 403),
    ("POST", "/v1/remember", "analyst", {"user": TEAM_FACT}, 403),
    ("POST", "/v1/remember", "agent", {"user": TEAM_FACT, "agent_id": "someone-else"}, 403),
    ("POST", "/v1/remember", "agent", {"user": TEAM_FACT, "team_id": "other-team"}, 403),
    ("POST", "/v1/observe", "readonly", {"activity_session_id": "x", "events": ["We use Redis"]}, 403),
    ("POST", "/v1/observe", "agent", {"activity_session_id": "x", "events": ["We use Redis"], "agent_id": "b"}, 403),
    ("POST", "/v1/search", "agent", {"query": "tabs", "agent_id": "alice"}, 403),
    ("POST", "/v1/search", "agent", {"query": "tabs", "team_id": "platform"}, 403),
    ("GET", "/v1/facts/{private}/sources", "agent", None, 404),
    ("POST", "/v1/forget", "agent", {"fact_id": "{private}"}, 404),
    ("POST", "/v1/forget", "readonly", {"category": "preference"}, 403),
    ("POST", "/v1/forget", "analyst", {"category": "preference"}, 403),
    ("POST", "/v1/forget", "agent", {"category": "preference", "agent_id": "alice"}, 403),
    ("GET", "/v1/stats", "agent", None, 403),
    ("GET", "/v1/stats", "readonly", None, 403),
]


@pytest.mark.parametrize(("method", "path", "role", "body", "status"), WRONG_SCOPE,
                         ids=[f"{w[1]}-{w[2]}-{i}" for i, w in enumerate(WRONG_SCOPE)])
def test_a_key_cannot_act_outside_its_scope(client: httpx.Client, api: RunningAPI, method: str, path: str, role: str,
                                            body: Any, status: int) -> None:
    alice = api.key("alice", "platform")
    private = remember(client, alice, PRIVATE_FACT)["facts"][0]["id"]
    # bob is in another team; the readonly key is bob's too; the analyst key has no agent
    key = api.key(None, None, "analyst") if role == "analyst" else api.key("bob", "other", role)
    path = path.replace("{private}", private)
    if body:
        body = {k: (v.replace("{private}", private) if isinstance(v, str) else v) for k, v in body.items()}
    r = client.request(method, path, json=body, headers=bearer(key))
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == {403: "forbidden", 404: "not_found"}[status]
    # nothing of alice's changed, and bob learned nothing of it
    assert [f["content"] for f in client.get("/v1/facts", headers=bearer(alice)).json()["facts"]] == [
        "User prefers tabs over spaces"]
    assert PRIVATE_FACT not in r.text and "tabs" not in r.text.lower().replace('"tabs"', "")


def test_scope_comes_from_the_key(client: httpx.Client, api: RunningAPI) -> None:
    alice, carol, bob = api.key("alice", "platform"), api.key("carol", "platform"), api.key("bob", "other")
    remember(client, alice, TEAM_FACT, session_id="s1")
    # the same agent_id as the key's is accepted (clients reusing the library's arguments)
    remember(client, alice, PRIVATE_FACT, agent_id="alice", team_id="platform")

    def seen(key: str) -> set[str]:
        return {f["content"] for f in client.get("/v1/facts", headers=bearer(key)).json()["facts"]}

    assert seen(alice) == {"Team switched from JWT to Clerk", "Team uses Clerk", "User prefers tabs over spaces"}
    assert seen(carol) == {"Team switched from JWT to Clerk", "Team uses Clerk"}  # team facts, not alice's private
    assert seen(bob) == set()
    analyst = api.key(role="analyst")
    assert seen(analyst) == seen(alice)
    readonly = api.key("alice", "platform", "readonly")
    assert seen(readonly) == seen(alice)
    hits = client.post("/v1/search", json={"query": "tabs", "k": 5, "mode": "bm25"}, headers=bearer(carol)).json()
    assert hits == {"hits": []}


def test_remember_answers_the_stored_facts(client: httpx.Client, api: RunningAPI) -> None:
    key = api.key("alice", "platform")
    body = remember(client, key, TEAM_FACT, assistant="Noted.", session_id="s1", timestamp="2026-11-02T10:15:00Z")
    assert [(f["content"], f["category"], f["method"], f["agent_id"], f["team_id"], f["visibility"])
            for f in body["facts"]] == [
        ("Team switched from JWT to Clerk", "technology", "pattern", "alice", "platform", "team"),
        ("Team uses Clerk", "technology", "pattern", "alice", "platform", "team")]
    assert body["facts"][0]["explanation"]["rule_id"]
    assert (body["queued"], body["duplicate"], body["gate"]["passed"]) == (False, False, True)
    assert remember(client, key, TEAM_FACT, assistant="Noted.", session_id="s1",
                    timestamp="2026-11-02T10:15:00Z")["duplicate"] is True


def test_observe_stores_activity_facts(client: httpx.Client, api: RunningAPI) -> None:
    key = api.key("review-bot", "platform")
    r = client.post("/v1/observe", headers=bearer(key), json={
        "activity_session_id": "act-7", "intent": "review PR #88",
        "dialogue": [{"speaker": "review-bot", "text": "We switched from JWT to Clerk for authentication"}]})
    assert r.status_code == 200, r.text
    assert "Team switched from JWT to Clerk" in {f["content"] for f in r.json()["facts"]}


def test_search_hits_are_those_of_the_cli_json(client: httpx.Client, api: RunningAPI, db_url: str) -> None:
    key = api.key("alice", "platform")
    remember(client, key, TEAM_FACT)
    remember(client, key, PRIVATE_FACT)
    # The turns' episodes are embedded in the background; embedded now, both searches see the same rows (else
    # the CLI, later, can fold an episode into a hit that the API's search did not find yet).
    api.service.memory.embed_pending()
    r = client.post("/v1/search", json={"query": "Clerk", "k": 3, "mode": "hybrid"},
                    headers=bearer(key))
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    cli = run_cli("--database-url", db_url, "search", "Clerk", "--agent", "alice", "--team", "platform", "-k", "3",
                  "--mode", "hybrid", "--json", env={"FACTFORGE_HOME": str(ROOT / ".pytest-home"), "FACTFORGE_LLM": "off"})
    assert cli.returncode == 0, cli.stderr
    cli_hits = [json.loads(line) for line in cli.stdout.splitlines()]
    assert hits == cli_hits, [(k, a.get(k), b.get(k)) for a, b in zip(hits, cli_hits) for k in a if a.get(k) != b.get(k)]
    assert {h["content"] for h in hits} == {"Team switched from JWT to Clerk", "Team uses Clerk"}
    assert {"bm25_rank", "vector_rank", "fused_score"} <= set(hits[0])


def test_facts_sources_and_forget(client: httpx.Client, api: RunningAPI) -> None:
    alice, carol = api.key("alice", "platform"), api.key("carol", "platform")
    fact = remember(client, alice, TEAM_FACT, session_id="s-alice")["facts"][0]
    remember(client, carol, TEAM_FACT, session_id="s-carol")
    mine = client.get(f"/v1/facts/{fact['id']}/sources", headers=bearer(carol)).json()
    # carol sees her own mention of the shared fact; alice's message stays alice's
    assert [s["session_id"] for s in mine["sources"]] == ["s-carol"] and mine["other_mentions"] == 1
    analyst = client.get(f"/v1/facts/{fact['id']}/sources", headers=bearer(api.key(role="analyst"))).json()
    assert sorted(s["session_id"] for s in analyst["sources"]) == ["s-alice", "s-carol"]
    # carol forgets what she said: the fact stays, alice still said it
    r = client.post("/v1/forget", json={"session_id": "s-carol"}, headers=bearer(carol))
    assert r.status_code == 200 and r.json()["deleted"] == 0
    assert client.get(f"/v1/facts/{fact['id']}/sources", headers=bearer(carol)).json()["other_mentions"] == 1
    dry = client.post("/v1/forget", json={"fact_id": fact["id"], "dry_run": True}, headers=bearer(alice)).json()
    assert dry == {"deleted": 0, "would_delete": 1, "dry_run": True}
    assert client.post("/v1/forget", json={"fact_id": fact["id"]}, headers=bearer(alice)).json()["deleted"] == 1
    assert fact["id"] not in {f["id"] for f in client.get("/v1/facts", headers=bearer(alice)).json()["facts"]}
    r = client.get("/v1/facts", params={"category": "technology", "limit": 5}, headers=bearer(alice))
    assert [f["content"] for f in r.json()["facts"]] == ["Team uses Clerk"]
    r = client.post("/v1/forget", json={}, headers=bearer(alice))
    assert r.status_code == 400 and "fact_id" in r.json()["error"]["message"]


def test_stats_and_prompt(client: httpx.Client, api: RunningAPI) -> None:
    remember(client, api.key("alice", "platform"), TEAM_FACT)
    stats = client.get("/v1/stats", headers=bearer(api.key(role="analyst"))).json()
    assert stats["facts"] >= 2 if isinstance(stats.get("facts"), int) else "facts" in json.dumps(stats)
    prompt = client.get("/v1/prompt", headers=bearer(api.key("bob", "other", "readonly"))).json()["prompt"]
    assert "<ff:" in prompt


@pytest.mark.parametrize(
    ("body", "status", "code", "message"),
    [
        ({}, 422, "invalid_request", "user: Field required"),
        ({"user": "hi", "asistant": "typo"}, 422, "invalid_request", "asistant: Extra inputs are not permitted"),
        ({"user": 5}, 422, "invalid_request", "user: Input should be a valid string"),
        ({"user": "   "}, 400, "invalid_input", "user must not be empty"),
        ({"user": "hi", "timestamp": "yesterday-ish"}, 400, "invalid_input", "is not ISO 8601"),
        ({"user": "hi", "visibility": "team-ish"}, 422, "invalid_request", "visibility"),
    ],
)
def test_bad_bodies_get_the_library_messages(client: httpx.Client, api: RunningAPI, body: Any, status: int, code: str,
                                             message: str) -> None:
    r = client.post("/v1/remember", json=body, headers=bearer(api.key("solo", None)))
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == code and message in r.json()["error"]["message"]


def test_search_arguments_are_checked(client: httpx.Client, api: RunningAPI) -> None:
    key = api.key("solo", None)
    for body in ({"query": "x", "k": 0}, {"query": "x", "mode": "fuzzy"}, {"k": 3}, "not json"):
        r = client.post("/v1/search", content=body if isinstance(body, str) else json.dumps(body),
                        headers={**bearer(key), "Content-Type": "application/json"})
        assert (r.status_code, r.json()["error"]["code"]) == (422, "invalid_request"), r.text
    r = client.post("/v1/search", json={"query": "  "}, headers=bearer(key))
    assert (r.status_code, r.json()["error"]["code"]) == (400, "invalid_input")


def test_request_size_is_limited(client: httpx.Client, api: RunningAPI) -> None:
    key = api.key("solo", None)
    big = {"user": "x" * (70 * 1024)}
    r = client.post("/v1/remember", json=big, headers=bearer(key))
    assert (r.status_code, r.json()["error"]["code"]) == (413, "payload_too_large")

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while it streams in
        yield b'{"user": "'
        for _ in range(80):
            yield b"y" * 1024
        yield b'"}'

    r = client.post("/v1/remember", content=chunks(), headers={**bearer(key), "Content-Type": "application/json"})
    assert (r.status_code, r.json()["error"]["code"]) == (413, "payload_too_large")


def test_health_readiness_docs_and_unknown_routes(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz").json()
    assert ready["status"] == "ready" and ready["schema"]
    spec = client.get("/openapi.json").json()
    assert {"/v1/remember", "/v1/observe", "/v1/search", "/v1/facts", "/v1/facts/{fact_id}/sources", "/v1/forget",
            "/v1/stats", "/v1/prompt"} <= set(spec["paths"])
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert set(spec["components"]["schemas"]["RememberIn"]["properties"]) >= {"user", "assistant", "session_id"}
    assert client.get("/docs").status_code == 200
    r = client.get("/v1/nothing-here")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "not_found")


def test_readyz_fails_when_the_database_is_unreachable(api: RunningAPI, tmp_path: Path) -> None:
    from factforge.api import create_app  # a second app whose database cannot be reached
    import asyncio

    store_url = api.service.memory.store.url
    api.service.memory.store.url = "postgresql+psycopg://nobody@127.0.0.1:1/none"
    try:
        async def call() -> httpx.Response:
            transport = httpx.ASGITransport(app=create_app(api.service, mcp=False))
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                return await c.get("/readyz")

        r = asyncio.run(call())
    finally:
        api.service.memory.store.url = store_url
    assert (r.status_code, r.json()["error"]["code"]) == (503, "database_error")
    # /readyz needs no key: it does not tell who and where the database is
    assert "nobody" not in r.text and "127.0.0.1" not in r.text, r.text


def test_keys_cli_create_list_revoke(client: httpx.Client, api: RunningAPI, db_url: str, tmp_path: Path) -> None:
    def cli(*args: str) -> Result:
        return run_cli("--database-url", db_url, *args, env={"FACTFORGE_HOME": str(tmp_path)})

    made = cli("keys", "create", "--agent", "cli-agent", "--team", "cli-team")
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip().splitlines()[-1]
    assert key.startswith("ffk_")
    r = client.post("/v1/remember", json={"user": PRIVATE_FACT}, headers=bearer(key))
    assert r.status_code == 200 and r.json()["facts"][0]["agent_id"] == "cli-agent"
    listed = [json.loads(x) for x in cli("keys", "list", "--json").stdout.splitlines()]
    mine = next(k for k in listed if k["agent_id"] == "cli-agent")
    assert mine["team_id"] == "cli-team" and key not in json.dumps(listed)  # only a prefix is kept
    assert cli("keys", "revoke", str(mine["id"])).returncode == 0
    time.sleep(api.service.keys.cache_seconds)  # the server trusts a key it found valid that long (README)
    assert client.post("/v1/search", json={"query": "tabs"}, headers=bearer(key)).status_code == 401
    bad = cli("keys", "create", "--role", "analyst", "--agent", "x")
    assert bad.returncode == 1 and bad.stderr.startswith("factforge: error: an analyst key sees every scope")


def test_many_concurrent_hybrid_searches_do_not_starve_the_pool(client: httpx.Client, api: RunningAPI) -> None:
    # A hybrid search holds two pooled connections; 48 at once used to take one each and wait for a second
    # until the pool timed out (30 s, then 500s).
    from concurrent.futures import ThreadPoolExecutor

    key = api.key("alice", "platform")
    remember(client, key, TEAM_FACT)

    def one(_: int) -> int:
        with httpx.Client(base_url=api.url, timeout=25) as c:
            return c.post("/v1/search", json={"query": "authentication", "mode": "hybrid"}, headers=bearer(key)).status_code

    with ThreadPoolExecutor(48) as pool:
        assert list(pool.map(one, range(96))) == [200] * 96


def test_search_filters_pass_through(client: httpx.Client, api: RunningAPI) -> None:
    key = api.key("alice", "platform")
    remember(client, key, TEAM_FACT)
    remember(client, key, "We use Redis for caching")

    def contents(**filters: Any) -> list[str]:
        r = client.post("/v1/search", json={"query": "Clerk Redis", "mode": "bm25", **filters}, headers=bearer(key))
        assert r.status_code == 200, r.text
        return sorted(h["content"] for h in r.json()["hits"])

    assert contents(entity="Redis") == ["Team uses Redis for caching"]
    assert contents(method="llm") == []
    assert contents(since="2999-01-01T00:00:00Z") == []
    assert len(contents(method="pattern", until="2999-01-01T00:00:00Z")) == 3
