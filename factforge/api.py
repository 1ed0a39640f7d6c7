"""``factforge serve``: the HTTP API (FastAPI) over :class:`factforge.service.Service`, and MCP under ``/mcp``.

FastAPI because its pydantic request models are at once the validation and the OpenAPI document at
``/openapi.json`` and ``/docs``; uvicorn serves it. Every request but ``/healthz``, ``/readyz`` and the docs
carries ``Authorization: Bearer KEY``; the key decides the agent and team. Errors are JSON,
``{"error": {"code": ..., "message": ...}}``, with codes that do not change:

=====================  ======  =====================================================================
code                   status  when
=====================  ======  =====================================================================
``unauthorized``       401     no key, or an unknown or revoked one
``forbidden``          403     the key may not do this (another agent's scope, a read-only key writing)
``invalid_request``    422     the body is not JSON of the documented shape
``invalid_input``      400     the library refused a value (same messages as :class:`Memory`)
``not_found``          404     no such fact visible to the key, or no such route
``payload_too_large``  413     the body is over the limit (``FACTFORGE_API_MAX_BODY``, default 1 MiB)
``database_error``     503     PostgreSQL unreachable or a statement failed
``internal_error``     500     anything else (logged with its traceback, never sent)
=====================  ======  =====================================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .errors import AuthError, DatabaseError, FactforgeError
from .service import Service, error_code

__all__ = ["create_app", "app_from_env", "DEFAULT_MAX_BODY"]

logger = logging.getLogger("factforge.api")

DEFAULT_MAX_BODY = 1024 * 1024
MCP_PATH = "/mcp"

def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _error_response(exc: FactforgeError) -> JSONResponse:
    status, code = error_code(exc)
    if status == 500:
        logger.error("request failed: %s", exc, exc_info=exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(error_body(code, str(exc)), status_code=status, headers=headers)


# -- request bodies (the library's keyword arguments; agent and team come from the key) ------------------------

class _Body(BaseModel):
    # An unknown field is a mistake worth telling (a misspelt "asistant" would silently drop the reply).
    model_config = ConfigDict(extra="forbid")
    agent_id: str | None = Field(None, description="optional; must equal the key's agent (the key decides)")
    team_id: str | None = Field(None, description="optional; must equal the key's team (the key decides)")


class RememberIn(_Body):
    user: str
    assistant: str | None = None
    session_id: str | None = None
    timestamp: datetime | str | None = None
    visibility: Literal["private", "team", "global"] | None = None
    wait_for_llm: bool = False


class ObserveIn(_Body):
    activity_session_id: str
    intent: str | None = None
    dialogue: list[dict[str, str] | str] | str | None = None
    events: list[dict[str, Any] | str] | None = None
    timestamp: datetime | str | None = None
    visibility: Literal["private", "team", "global"] | None = None
    wait_for_llm: bool = False


class SearchIn(_Body):
    query: str
    k: int = Field(10, ge=1, le=1000)
    mode: Literal["hybrid", "vector", "bm25"] = "hybrid"
    categories: list[str] | None = None
    include_history: bool = False
    since: datetime | None = Field(None, description="only facts last seen at or after this time")
    until: datetime | None = Field(None, description="only facts first seen at or before this time")
    entity: str | None = Field(None, description="only facts naming this entity")
    method: str | None = Field(None, description="only facts extracted this way (pattern, llm, inline)")


class ForgetIn(_Body):
    fact_id: str | None = None
    session_id: str | None = None
    category: str | None = None
    text: str | None = None
    everything: bool = Field(False, description="forget everything this key's agent said")
    dry_run: bool = False


_bearer = HTTPBearer(auto_error=False, description="an API key from `factforge keys create`")


async def _key(creds: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> str:
    """The presented key, or 401 at once when there is none. The key is verified (a database lookup) in the
    route's own worker thread, with the call it authorises: one thread hop per request instead of two."""
    if creds is None or not creds.credentials:
        raise AuthError("missing API key: send 'Authorization: Bearer <key>'")
    return creds.credentials


Key = Annotated[str, Depends(_key)]


# -- the app -----------------------------------------------------------------------------------------------------

def create_app(service: Service, *, max_body: int = DEFAULT_MAX_BODY, mcp: bool = True,
               host: str = "127.0.0.1") -> ASGIApp:
    """The ASGI app of ``factforge serve`` over ``service`` (closed when the app shuts down)."""
    mcp_server = None
    if mcp:
        from .mcp_server import build_server

        mcp_server = build_server(service, principal=None)
        mcp_app = mcp_server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True,
                                                 json_response=True, host=host, max_request_body_size=max_body)

    # The fast routes' threads (see _FastRoutes), as many as Starlette's pool has for the other routes (anyio's 40).
    threads = ThreadPoolExecutor(max_workers=40, thread_name_prefix="factforge-api")

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # The rule set loads each part on first use (~1 s) and the fact and injection rules' regexes compile on first
        # use (3-4 s for all): here in the background, from the start, so that requests do not wait for them.
        threading.Thread(target=service.memory.rules.warm, name="factforge-rules", daemon=True).start()
        async with contextlib.AsyncExitStack() as stack:
            if mcp_server is not None:
                await stack.enter_async_context(mcp_server.session_manager.run())
            try:
                yield
            finally:
                threads.shutdown()
                service.close()

    from . import __version__

    app = FastAPI(title="factforge", version=__version__, lifespan=lifespan,
                  description="Rules-first fact memory for AI agents. Every /v1 call takes `Authorization: "
                              "Bearer KEY`; the key decides the agent and team. MCP (streamable HTTP) is at /mcp.")
    app.state.service = service

    _add_error_handlers(app)
    _add_ops_routes(app, service)
    _add_memory_routes(app, service)
    inner: ASGIApp = app
    if mcp_server is not None:
        inner = _McpRouter(app, mcp_app, service)
    inner = _FastRoutes(inner, app, threads, {"/v1/remember": (RememberIn, partial(_remember, service)),
                                              "/v1/search": (SearchIn, partial(_search, service))})
    return _BodyLimit(inner, max_body)


def _add_error_handlers(app: FastAPI) -> None:
    """Library errors, invalid or too large bodies, HTTP errors and anything unexpected: each becomes a JSON
    error body (``error_body``) with its status code, never a traceback."""

    @app.exception_handler(FactforgeError)
    async def _factforge_error(_req: Request, exc: FactforgeError) -> JSONResponse:
        return _error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_req: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:]) or 'body'}: {e['msg']}" for e in exc.errors())
        return JSONResponse(error_body("invalid_request", problems), status_code=422)

    @app.exception_handler(_TooLarge)
    async def _too_large(_req: Request, exc: _TooLarge) -> JSONResponse:
        return JSONResponse(error_body("payload_too_large", str(exc)), status_code=413)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_req: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc.__cause__, _TooLarge):  # FastAPI wraps a failed body read in a 400
            return await _too_large(_req, exc.__cause__)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _unexpected(_req: Request, exc: Exception) -> JSONResponse:
        logger.error("unexpected error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "internal error (see the server log)"), status_code=500)


def _add_ops_routes(app: FastAPI, service: Service) -> None:
    """Liveness and readiness, for a load balancer or an orchestrator."""

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        """The process is up (no database call)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"])
    def readyz() -> JSONResponse:
        """The database (and the read replica, if any) answers, its schema at this version's migration head."""
        from .storage import db

        head = db._script_head()
        urls = {"database": service.memory.store.url}
        if service.reader is not service.memory:
            urls["read replica"] = service.reader.store.url
        for what, url in urls.items():
            try:
                current = db.current_revision(url)
            except DatabaseError as exc:
                # Unauthenticated: the server's log names the host, port and user; the answer does not.
                logger.warning("readyz: %s: %s", what, exc)
                return JSONResponse(error_body("database_error", f"{what}: not reachable (the server's log says "
                                                                 "why)"), status_code=503)
            if current != head:
                return JSONResponse(error_body("schema_outdated", f"{what}: schema is at {current}, this version "
                                               f"needs {head}: run `factforge db upgrade`"), status_code=503)
        return JSONResponse({"status": "ready", "schema": head, "read_replica": len(urls) > 1})


def _remember(service: Service, key: str, body: RememberIn) -> dict[str, Any]:
    return service.remember(service.keys.verify(key), body.model_dump(exclude_unset=True))


def _search(service: Service, key: str, body: SearchIn) -> dict[str, Any]:
    return service.search(
        service.keys.verify(key), body.query, k=body.k, mode=body.mode, categories=body.categories,
        include_history=body.include_history, since=body.since, until=body.until, entity=body.entity,
        method=body.method, args=body.model_dump(exclude_unset=True))


def _add_memory_routes(app: FastAPI, service: Service) -> None:
    """The /v1 routes: each calls the one :class:`Service` method of the same name for the key's principal.

    The service answers JSON-ready values, so each route answers a JSONResponse itself: FastAPI's own
    serialisation (jsonable_encoder over every hit) would walk the answer again, for nothing."""

    @app.post("/v1/remember", tags=["memory"], response_model=dict[str, Any])
    def remember(body: RememberIn, key: Key) -> JSONResponse:
        """Extract and store the facts of one conversation turn (`Memory.remember`)."""
        return JSONResponse(_remember(service, key, body))

    @app.post("/v1/observe", tags=["memory"], response_model=dict[str, Any])
    def observe(body: ObserveIn, key: Key) -> JSONResponse:
        """Extract and store the facts of an observed activity session (`Memory.observe`)."""
        return JSONResponse(service.observe(service.keys.verify(key), body.model_dump(exclude_unset=True)))

    @app.post("/v1/search", tags=["memory"], response_model=dict[str, Any])
    def search(body: SearchIn, key: Key) -> JSONResponse:
        """Hybrid search over the facts the key may see; each hit as `factforge search --json` prints it."""
        return JSONResponse(_search(service, key, body))

    @app.get("/v1/facts", tags=["memory"], response_model=dict[str, Any])
    def facts(key: Key, category: Annotated[list[str] | None, Query()] = None, include_history: bool = False,
              as_of: datetime | None = None, session_id: str | None = None, entity: str | None = None,
              limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> JSONResponse:
        """The facts the key may see, newest first."""
        return JSONResponse(service.facts(service.keys.verify(key), categories=category,
                                          include_history=include_history, as_of=as_of, session_id=session_id,
                                          entity=entity, limit=limit))

    @app.get("/v1/facts/{fact_id}/sources", tags=["memory"], response_model=dict[str, Any])
    def sources(fact_id: str, key: Key) -> JSONResponse:
        """Where a visible fact was said (the key's own agent's mentions; an analyst sees all)."""
        return JSONResponse(service.sources(service.keys.verify(key), fact_id))

    @app.post("/v1/forget", tags=["memory"], response_model=dict[str, Any])
    def forget(body: ForgetIn, key: Key) -> JSONResponse:
        """Forget what the key's agent said (selected by fact, session, category or text)."""
        return JSONResponse(service.forget(
            service.keys.verify(key), fact_id=body.fact_id, session_id=body.session_id, category=body.category,
            text=body.text, everything=body.everything, dry_run=body.dry_run,
            args=body.model_dump(exclude_unset=True)))

    @app.get("/v1/stats", tags=["memory"], response_model=dict[str, Any])
    def stats(key: Key) -> JSONResponse:
        """Counts over every scope: facts by category and method, queue, LLM calls (analyst keys only)."""
        return JSONResponse(service.stats(service.keys.verify(key)))

    @app.get("/v1/prompt", tags=["memory"], response_model=dict[str, Any])
    def prompt(key: Key) -> JSONResponse:
        """The system-prompt snippet that teaches an agent's LLM the inline `<ff:...>` tags."""
        service.keys.verify(key)
        return JSONResponse(service.prompt())


class _McpRouter:
    """Sends ``/mcp`` to the MCP app once its key is verified (the principal rides in the request's state,
    set by the server, never by the client); everything else, lifespan included, to the FastAPI app."""

    def __init__(self, app: ASGIApp, mcp_app: ASGIApp, service: Service) -> None:
        self.app, self.mcp_app, self.service = app, mcp_app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not (path == MCP_PATH or path.startswith(MCP_PATH + "/")):
            await self.app(scope, receive, send)
            return
        import anyio

        auth = dict(scope.get("headers") or ()).get(b"authorization", b"").decode("latin-1")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        try:
            who = await anyio.to_thread.run_sync(self.service.keys.verify, key)
        except FactforgeError as exc:
            await _error_response(exc)(scope, receive, send)
            return
        scope.setdefault("state", {})["factforge_principal"] = who
        await self.mcp_app(scope, receive, send)


class _FastRoutes:
    """The two calls agents make most, ``POST /v1/remember`` and ``/v1/search``, answered without FastAPI's
    per-request machinery (its middleware stack, routing, dependency solving), which cost more CPU than a search's
    own Python. Only a request FastAPI would accept takes this way: a JSON body of the route's model and a
    bearer key; it then does what the route does (the same function, in a worker thread, the same JSON response
    and error bodies). Anything else -- no or another scheme's key, another content type, a body that is not JSON
    or not valid -- is handed to FastAPI with its body replayed, so every refusal is FastAPI's own
    (tests/test_api_fast.py holds the two side by side)."""

    def __init__(self, inner: ASGIApp, app: FastAPI, threads: ThreadPoolExecutor,
                 routes: dict[str, tuple[type[BaseModel], Callable[[str, Any], dict[str, Any]]]]) -> None:
        self.inner, self.app, self.threads, self.routes = inner, app, threads, routes
        # FastAPI's OpenTelemetry spans are made in its own stack: with telemetry on, every request goes there.
        self._telemetry = getattr(app, "_native_telemetry", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.routes.get(scope.get("path", "")) if scope["type"] == "http" else None
        if (route is None or scope["method"] != "POST" or scope.get("root_path") or self.app.root_path
                or (self._telemetry is not None and self._telemetry.enabled())):
            await self.inner(scope, receive, send)
            return
        body, replay = await _read_body(receive)
        key, valid = self._accepted(scope, body, route[0])
        if key is None or valid is None:
            await self.inner(scope, replay, send)
            return
        try:
            # A plain executor: anyio's to_thread (Starlette's run_in_threadpool) took twice its CPU per call.
            loop = asyncio.get_running_loop()
            response = JSONResponse(await loop.run_in_executor(self.threads, route[1], key, valid))
        except FactforgeError as exc:
            response = _error_response(exc)
        except Exception as exc:  # as FastAPI's stack answers it: logged, a 500 body, then raised to the server
            logger.error("unexpected error", exc_info=exc)
            await JSONResponse(error_body("internal_error", "internal error (see the server log)"),
                               status_code=500)(scope, replay, send)
            raise
        await response(scope, replay, send)

    @staticmethod
    def _accepted(scope: Scope, body: bytes, model: type[BaseModel]) -> tuple[str | None, BaseModel | None]:
        """The bearer key and the validated body, as FastAPI's HTTPBearer and body parsing find them; (None, None)
        where FastAPI would refuse, or might read the request otherwise."""
        auth = content_type = None
        for name, value in scope["headers"]:
            if name == b"authorization" and auth is None:
                auth = value.decode("latin-1")
            elif name == b"content-type" and content_type is None:
                content_type = value.decode("latin-1")
        scheme, _, credentials = (auth or "").partition(" ")
        credentials = credentials.strip()
        if scheme.lower() != "bearer" or not credentials or content_type != "application/json" or not body:
            return None, None
        try:
            return credentials, model.model_validate(json.loads(body))
        except ValueError:  # not JSON, or not the model (pydantic's ValidationError is a ValueError)
            return None, None


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that hands it out again before passing on to ``receive``."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left: let the app see that
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        if message["type"] != "http.request":
            return message
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay


class _BodyLimit:
    """Refuses bodies over ``limit`` bytes with 413, by Content-Length or while a chunked body streams in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit
        # made once (a response only sends its body and headers), not for every request that will not need it
        self.too_big = JSONResponse(error_body("payload_too_large", f"request body over {limit} bytes"),
                                    status_code=413)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_big = self.too_big
        length = dict(scope.get("headers") or ()).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await too_big(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(f"request body over {self.limit} bytes")
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await too_big(scope, receive, send)


class _TooLarge(Exception):
    pass


def app_from_env() -> ASGIApp:
    """The app of one ``factforge serve --workers N`` process (uvicorn imports it by name in each worker): its
    settings from the environment, which the parent filled in from its arguments before starting them."""
    from .service import Service
    from .settings import get_settings

    service = Service.open(get_settings())
    return create_app(service, max_body=max_body_from_env(), host=os.environ.get(SERVE_HOST_ENV, "127.0.0.1"))


SERVE_HOST_ENV = "FACTFORGE_SERVE_HOST"


def max_body_from_env() -> int:
    raw = os.environ.get("FACTFORGE_API_MAX_BODY")
    if not raw:
        return DEFAULT_MAX_BODY
    if not raw.isdigit() or int(raw) < 1024:
        from .errors import ConfigError

        raise ConfigError(f"FACTFORGE_API_MAX_BODY={raw!r} must be a number of bytes, at least 1024")
    return int(raw)
