"""The MCP server (official ``mcp`` SDK): tools ``remember``, ``search``, ``facts`` and ``forget``.

``factforge mcp --agent A --team T`` serves it over stdio for desktop clients, acting as that agent; under
``factforge serve`` it is streamable HTTP at ``/mcp``, where each request's API key decides the agent (the
API checks the key before the request reaches the SDK). A tool answers JSON text of the same shape as the
HTTP API: ``search`` gives ``{"hits": [...]}``, each hit as ``factforge search --json`` prints it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field
from mcp.server.mcpserver.exceptions import ToolError

from .errors import FactforgeError
from .storage.keys import Principal
from .service import Service, error_code

__all__ = ["build_server", "run_stdio"]

INSTRUCTIONS = (
    "factforge is this agent's long-term memory of facts (preferences, decisions, technologies, policies). "
    "Call `remember` with each user message (and your reply) worth keeping, `search` before answering "
    "something the user may have told you before, `facts` to list what is known, `forget` to delete."
)


def build_server(service: Service, *, principal: Principal | None) -> MCPServer:
    """The MCP server over ``service``: acting as ``principal`` (stdio), or as each HTTP request's key."""
    import anyio

    server = MCPServer("factforge", instructions=INSTRUCTIONS, log_level="WARNING")

    def who(ctx: Context) -> Principal:
        if principal is not None:
            return principal
        request = ctx.request_context.request
        found = getattr(getattr(request, "state", None), "factforge_principal", None)
        if not isinstance(found, Principal):  # the API verifies the key before the SDK sees the request
            raise ToolError("unauthorized: no API key")
        return found

    async def call(fn: Callable[[], dict[str, Any]]) -> str:
        try:
            result = await anyio.to_thread.run_sync(fn)
        except FactforgeError as exc:
            raise ToolError(f"{error_code(exc)[1]}: {exc}") from None
        return json.dumps(result, ensure_ascii=False)

    @server.tool(structured_output=False)
    async def remember(ctx: Context, user: str, assistant: str | None = None, session_id: str | None = None,
                       timestamp: str | None = None,
                       visibility: Literal["private", "team", "global"] | None = None) -> str:
        """Store the facts of one conversation turn: the user's message and, optionally, the assistant's reply.
        Answers the stored facts as JSON."""
        args = {"user": user, "assistant": assistant, "session_id": session_id, "timestamp": timestamp,
                "visibility": visibility}
        caller = who(ctx)
        return await call(lambda: service.remember(caller, args))

    @server.tool(structured_output=False)
    async def search(ctx: Context, query: str, k: Annotated[int, Field(ge=1, le=1000)] = 10,
                     mode: Literal["hybrid", "vector", "bm25"] = "hybrid") -> str:
        """Search the facts this agent may see (its own, its team's, global ones). Answers {"hits": [...]}."""
        caller = who(ctx)
        return await call(lambda: service.search(caller, query, k=k, mode=mode))

    @server.tool(structured_output=False)
    async def facts(ctx: Context, category: str | None = None,
                    limit: Annotated[int, Field(ge=1, le=1000)] = 50) -> str:
        """List the facts this agent may see, newest first, optionally of one category. Answers {"facts": [...]}."""
        caller = who(ctx)
        return await call(lambda: service.facts(caller, categories=[category] if category else None, limit=limit))

    @server.tool(structured_output=False)
    async def forget(ctx: Context, fact_id: str | None = None, session_id: str | None = None,
                     category: str | None = None, text: str | None = None, dry_run: bool = False) -> str:
        """Forget what this agent said: one fact by id, a session, a category or facts containing a text.
        Answers {"deleted": n}."""
        caller = who(ctx)
        return await call(lambda: service.forget(caller, fact_id=fact_id, session_id=session_id,
                                                 category=category, text=text, dry_run=dry_run))

    return server


def run_stdio(service: Service, principal: Principal) -> None:
    """Serve MCP over stdin/stdout until the client closes the connection."""
    import anyio

    server = build_server(service, principal=principal)
    try:
        anyio.run(server.run_stdio_async)
    finally:
        service.close()
