"""``POST /v1/remember`` and ``/v1/search`` skip FastAPI's stack when FastAPI would accept the request
(api._FastRoutes): every request here gets the same answer from the app as from FastAPI alone."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from factforge.api import create_app
from factforge.service import Service
from factforge.settings import Settings
from factforge.storage.keys import KeyStore

TEXT = "We switched from JWT to Clerk for authentication because of compliance requirements"
MAX_BODY = 4096


@pytest.fixture
def apps(db_url: str, tmp_path: Path) -> Iterator[tuple[Any, Any, Service, dict[str, str], list[str]]]:
    """The app, the FastAPI app under it wrapped in the same body limit (no fast routes), the service, keys by
    role, and the paths of the requests FastAPI answered."""
    from factforge.api import _BodyLimit

    # no background embedding: an episode embedded between the two searches of a case would change the second
    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off",
           "FACTFORGE_BACKGROUND_EMBED": "off"}
    service = Service.open(Settings.from_env(env), llm=None)
    app = create_app(service, max_body=MAX_BODY, mcp=False)
    fast = app.app  # _BodyLimit -> _FastRoutes
    fastapi_seen: list[str] = []
    fastapi_app = fast.inner

    async def spy(scope: Any, receive: Any, send: Any) -> None:
        fastapi_seen.append(scope.get("path", ""))
        await fastapi_app(scope, receive, send)

    fast.inner = spy
    keys = KeyStore(service.memory.store.engine)
    made = {"agent": keys.create(agent_id="alice", team_id="platform")[1],
            "readonly": keys.create(role="readonly", agent_id="alice", team_id="platform")[1],
            "analyst": keys.create(role="analyst")[1]}
    revoked, key = keys.create(agent_id="gone", team_id="platform")
    keys.revoke(revoked.id)
    made["revoked"] = key
    try:
        yield app, _BodyLimit(fastapi_app, MAX_BODY), service, made, fastapi_seen
    finally:
        service.close()


def call(app: Any, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post(path, content=body, headers=headers)

    r = asyncio.run(go())
    kept = {k: v for k, v in r.headers.items() if k not in ("date",)}
    try:
        return r.status_code, kept, r.json()
    except ValueError:
        return r.status_code, kept, r.text


JSON = {"content-type": "application/json"}


def auth(role: str, scheme: str = "Bearer", sep: str = " ") -> dict[str, str]:
    return {"authorization": f"{scheme}{sep}{{{role}}}"}


# (path, body, headers, the status FastAPI answers): errors must match byte for byte
CASES: list[tuple[str, Any, dict[str, str], int]] = [
    ("/v1/search", {"query": "authentication"}, {**JSON, **auth("agent")}, 200),
    ("/v1/search", {"query": "authentication", "k": "3", "mode": "bm25"}, {**JSON, **auth("agent")}, 200),
    ("/v1/search", {"query": "authentication", "since": "2020-01-01", "categories": ["technology"]},
     {**JSON, **auth("agent")}, 200),
    ("/v1/search", {"query": "authentication"}, {**JSON, **auth("agent", "bearer", "   ")}, 200),
    ("/v1/search", {"query": "authentication"}, {**JSON, **auth("analyst")}, 200),
    ("/v1/search", {"query": "authentication"}, {"content-type": "application/json; charset=utf-8",
                                                 **auth("agent")}, 200),
    ("/v1/search", {"query": "authentication"}, {"content-type": "text/plain", **auth("agent")}, 422),
    ("/v1/search", {"query": "authentication"}, JSON, 401),
    ("/v1/search", {"query": "authentication"}, {**JSON, "authorization": "Bearer"}, 401),
    ("/v1/search", {"query": "authentication"}, {**JSON, "authorization": "Basic dXNlcjpwdw=="}, 401),
    ("/v1/search", {"query": "authentication"}, {**JSON, "authorization": "Bearer ffk_not-a-key"}, 401),
    ("/v1/search", {"query": "authentication"}, {**JSON, **auth("revoked")}, 401),
    ("/v1/search", {"query": "authentication", "agent_id": "bob"}, {**JSON, **auth("agent")}, 403),
    ("/v1/search", {"query": "authentication", "team_id": "other"}, {**JSON, **auth("agent")}, 403),
    ("/v1/search", {"query": "x", "k": 0}, {**JSON, **auth("agent")}, 422),
    ("/v1/search", {"query": "x", "mode": "fuzzy"}, {**JSON, **auth("agent")}, 422),
    ("/v1/search", {"query": "x", "kk": 3}, {**JSON, **auth("agent")}, 422),
    ("/v1/search", {"k": 3}, {**JSON, **auth("agent")}, 422),
    ("/v1/search", ["query"], {**JSON, **auth("agent")}, 422),
    ("/v1/search", b'{"query": "x"', {**JSON, **auth("agent")}, 422),
    ("/v1/search", b"", {**JSON, **auth("agent")}, 422),
    ("/v1/search", {"query": "x" * MAX_BODY}, {**JSON, **auth("agent")}, 413),
    ("/v1/remember", {"user": TEXT, "session_id": "s1"}, {**JSON, **auth("agent")}, 200),
    ("/v1/remember", {"user": TEXT, "timestamp": "2024-05-01T10:00:00+02:00"}, {**JSON, **auth("agent")}, 200),
    ("/v1/remember", {"user": TEXT, "timestamp": "yesterday"}, {**JSON, **auth("agent")}, 400),
    ("/v1/remember", {"user": TEXT}, {**JSON, **auth("readonly")}, 403),
    ("/v1/remember", {"user": TEXT}, {**JSON, **auth("analyst")}, 403),
    ("/v1/remember", {"user": TEXT, "agent_id": "bob"}, {**JSON, **auth("agent")}, 403),
    ("/v1/remember", {"user": ""}, {**JSON, **auth("agent")}, 400),
    ("/v1/remember", {"user": TEXT, "asistant": "ok"}, {**JSON, **auth("agent")}, 422),
    ("/v1/remember", {"user": TEXT, "visibility": "public"}, {**JSON, **auth("agent")}, 422),
    ("/v1/remember", {"user": TEXT}, {**auth("agent")}, 422),
    ("/v1/remember", {"user": TEXT}, {**JSON, **auth("revoked")}, 401),
]


@pytest.mark.parametrize(("path", "body", "headers", "status"), CASES,
                         ids=[f"{c[0]}-{i}-{c[3]}" for i, c in enumerate(CASES)])
def test_the_app_answers_as_fastapi_alone(apps: Any, path: str, body: Any, headers: dict[str, str],
                                          status: int) -> None:
    app, fastapi_app, _service, keys, fastapi_seen = apps
    headers = {k: v.format(**keys) for k, v in headers.items()}
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    if path == "/v1/search":  # something to find
        headers_ok = {**JSON, "authorization": f"Bearer {keys['agent']}"}
        assert call(app, "/v1/remember", json.dumps({"user": TEXT}).encode(), headers_ok)[0] == 200
    fast = call(app, path, raw, headers)
    if path == "/v1/remember" and status == 200:  # the same turn again is a duplicate: FastAPI gets another
        raw = raw.replace(b"JWT", b"SAML")
    alone = call(fastapi_app, path, raw, headers)
    assert fast[0] == alone[0] == status, (fast, alone)
    if status == 200 and path == "/v1/remember":
        assert fast[1] == {**alone[1], "content-length": fast[1]["content-length"]}
        assert fast[2].keys() == alone[2].keys() and fast[2]["facts"][0]["agent_id"] == "alice"
    else:
        assert fast == alone
    if status == 200 and headers.get("content-type") == "application/json":
        assert path not in fastapi_seen, "the fast route was not taken"


def test_an_unexpected_error_is_a_500_body_as_fastapi_answers_it(apps: Any, monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    app, fastapi_app, service, keys, fastapi_seen = apps

    def broken(*_a: Any, **_k: Any) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(service, "search", broken)
    headers = {**JSON, "authorization": f"Bearer {keys['agent']}"}
    fast = call(app, "/v1/search", b'{"query": "x"}', headers)
    alone = call(fastapi_app, "/v1/search", b'{"query": "x"}', headers)
    assert fast == alone and fast[0] == 500 and fast[2]["error"]["code"] == "internal_error"
    assert "/v1/search" not in fastapi_seen
    assert [r.getMessage() for r in caplog.records if r.name == "factforge.api"] == ["unexpected error"] * 2
