"""The MCP server through the official SDK's own client: `factforge mcp` over stdio, and /mcp of the API."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.servers import RunningAPI, running_api

ROOT = Path(__file__).resolve().parent.parent
TEAM_FACT = "We switched from JWT to Clerk for authentication because of compliance requirements"
PRIVATE_FACT = "I prefer tabs over spaces"


def text_of(result: Any) -> Any:
    assert not result.is_error, result.content
    (block,) = result.content
    return json.loads(block.text)


def test_stdio_server_remembers_and_searches_as_its_agent(db_url: str, tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "factforge", "mcp", "--agent", "desktop", "--team", "platform"],
        env={**os.environ, "FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off"},
        cwd=str(ROOT))

    async def session() -> dict[str, Any]:
        out: dict[str, Any] = {}
        with open(tmp_path / "stderr.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
                out["remember"] = text_of(await s.call_tool("remember", {"user": TEAM_FACT, "assistant": "Noted."}))
                out["private"] = text_of(await s.call_tool("remember", {"user": PRIVATE_FACT}))
                out["search"] = text_of(await s.call_tool("search", {"query": "Clerk", "k": 2}))
                out["bm25"] = text_of(await s.call_tool("search", {"query": "tabs", "mode": "bm25"}))
                out["facts"] = text_of(await s.call_tool("facts", {"category": "preference"}))
                out["bad"] = await s.call_tool("search", {"query": "  "})
                out["forget"] = text_of(await s.call_tool("forget", {"text": "tabs"}))
        return out

    out = anyio.run(session)
    tools = out["tools"]
    assert {"remember", "search", "facts", "forget"} <= set(tools)
    assert set(tools["remember"].input_schema["required"]) == {"user"}
    assert "assistant" in tools["remember"].input_schema["properties"]
    assert tools["search"].input_schema["required"] == ["query"]
    assert {"k", "mode"} <= set(tools["search"].input_schema["properties"])
    assert [f["content"] for f in out["remember"]["facts"]] == ["Team switched from JWT to Clerk", "Team uses Clerk"]
    assert {f["agent_id"] for f in out["remember"]["facts"]} == {"desktop"}
    assert {h["content"] for h in out["search"]["hits"]} == {"Team switched from JWT to Clerk", "Team uses Clerk"}
    assert {"fused_score", "vector_rank", "bm25_rank", "category"} <= set(out["search"]["hits"][0])
    assert [h["content"] for h in out["bm25"]["hits"]] == ["User prefers tabs over spaces"]
    assert [f["content"] for f in out["facts"]["facts"]] == ["User prefers tabs over spaces"]
    assert out["bad"].is_error and "invalid_input: query must not be empty" in out["bad"].content[0].text
    assert out["forget"]["deleted"] == 1


@pytest.fixture(scope="module")
def api(pg_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAPI]:
    with running_api(pg_server_url, tmp_path_factory.mktemp("mcp")) as running:
        yield running


async def _http_session(url: str, key: str | None, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    results = []
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as s:
            await s.initialize()
            for name, args in calls:
                results.append(await s.call_tool(name, args))
    return results


def test_http_mcp_acts_as_the_key(api: RunningAPI, db_url: str) -> None:
    alice, bob = api.key("alice", "platform"), api.key("bert", "platform")
    remembered, private = anyio.run(_http_session, api.url, alice, [("remember", {"user": TEAM_FACT}),
                                                                    ("remember", {"user": PRIVATE_FACT})])
    assert {f["agent_id"] for f in text_of(remembered)["facts"]} == {"alice"}
    search_b, facts_b, forget_b = anyio.run(_http_session, api.url, bob, [
        ("search", {"query": "tabs", "mode": "bm25"}), ("facts", {}),
        ("forget", {"fact_id": text_of(private)["facts"][0]["id"]})])
    # bert shares alice's team: he sees the team facts, never her private preference, and cannot forget it
    assert text_of(search_b) == {"hits": []}
    assert {f["content"] for f in text_of(facts_b)["facts"]} == {"Team switched from JWT to Clerk", "Team uses Clerk"}
    assert forget_b.is_error and "not_found: no fact with id" in forget_b.content[0].text
    (search_a,) = anyio.run(_http_session, api.url, alice, [("search", {"query": "tabs", "mode": "bm25"})])
    assert [h["content"] for h in text_of(search_a)["hits"]] == ["User prefers tabs over spaces"]
    readonly = api.key("alice", "platform", "readonly")
    (refused,) = anyio.run(_http_session, api.url, readonly, [("remember", {"user": TEAM_FACT})])
    assert refused.is_error and "forbidden: a readonly key cannot write" in refused.content[0].text


@pytest.mark.parametrize("key", [None, "ffk_unknown"])
def test_http_mcp_without_a_valid_key_is_refused(api: RunningAPI, key: str | None) -> None:
    r = httpx2.post(f"{api.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                    headers={"Authorization": f"Bearer {key}"} if key else {})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    # the SDK's client cannot even initialize a session (it reports the 401 as an error response)
    with pytest.raises(BaseException) as caught:
        anyio.run(_http_session, api.url, key, [("search", {"query": "x"})])
    assert "Server returned an error response" in repr(caught.value)


def test_stdio_server_needs_an_agent(tmp_path: Path) -> None:
    from tests.clirun import run_cli

    env = {k: v for k, v in os.environ.items() if k not in ("FACTFORGE_AGENT_ID", "FACTFORGE_TEAM_ID")}
    done = run_cli("mcp", environ={**env, "FACTFORGE_HOME": str(tmp_path)})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == ("factforge: error: factforge mcp needs the agent it acts as: --agent A "
                                   "(or FACTFORGE_AGENT_ID)")
