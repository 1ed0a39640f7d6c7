"""A fake Ollama *server* speaking Ollama's HTTP API, so tests run the real ``ollama`` client code.

It replays a script: each ``POST /api/chat`` takes the next answer from the queue. An answer is
a string (sent as the assistant message content: good JSON, fenced JSON or broken text), a dict/list
(serialised to JSON first), :class:`HTTPError` (status + ``{"error": msg}``) or :class:`Delay` (sleep, then
answer - longer than the client timeout to provoke one). ``/api/embed`` answers deterministic vectors;
``/api/tags`` and ``/api/version`` answer fixed values. Every request is recorded.

    with FakeOllama() as fake:
        fake.script('{"facts": []}', HTTPError(500, "boom"))
        ... Settings(...).with_(ollama_host=fake.url) ...
        fake.requests[0].body["messages"]
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import threading
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from collections.abc import Callable
from typing import Any, Union

__all__ = ["Delay", "FakeOllama", "HTTPError", "Recorded", "Reply", "fake_vector"]

VERSION = "0.12.0"


@dataclass(frozen=True)
class Reply:
    """A chat answer: ``content`` becomes ``message.content``; token counts are reported as given."""

    content: str
    prompt_eval_count: int = 100
    eval_count: int = 20


@dataclass(frozen=True)
class HTTPError:
    """An HTTP error answer with Ollama's error body ``{"error": message}``."""

    status: int
    message: str = "internal error"


@dataclass(frozen=True)
class Delay:
    """Sleep ``seconds`` before sending ``then`` (an unanswered client has usually given up by then)."""

    seconds: float
    then: Reply | HTTPError = field(default_factory=lambda: Reply('{"facts": []}'))


Answer = Union[str, dict, list, Reply, HTTPError, Delay]


@dataclass(frozen=True)
class Recorded:
    """One request the server received."""

    method: str
    path: str
    body: Any
    client: tuple[str, int] | None = None  # the client's (host, port): which process asked


def fake_vector(text: str, dim: int) -> list[float]:
    """A deterministic unit vector for ``text`` (same text, same vector; different texts differ)."""
    values: list[float] = []
    counter = 0
    while len(values) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values += [(v / 2**31) - 1.0 for v in struct.unpack(">8I", digest)]
        counter += 1
    values = values[:dim]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, fake: FakeOllama) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out has closed its socket; writing the late answer fails. That is expected.
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        pass  # keep test output clean

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return raw.decode("utf-8", "replace")

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        fake = self.server.fake
        fake._record("GET", self.path, None)
        if self.path == "/api/version":
            self._send(200, {"version": VERSION})
        elif self.path == "/api/tags":
            self._send(200, {"models": [
                {"name": f"{m}:latest", "model": f"{m}:latest", "modified_at": _now(), "size": 1,
                 "digest": hashlib.sha256(m.encode()).hexdigest(), "details": {}}
                for m in fake.models
            ]})
        else:
            self._send(404, {"error": f"404 page not found: {self.path}"})

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        fake = self.server.fake
        body = self._body()
        fake._record("POST", self.path, body, self.client_address)
        if self.path == "/api/chat":
            self._chat(body)
        elif self.path == "/api/embed":
            inputs = body.get("input", "") if isinstance(body, dict) else ""
            texts = [inputs] if isinstance(inputs, str) else list(inputs)
            self._send(200, {
                "model": body.get("model", "") if isinstance(body, dict) else "",
                "embeddings": [fake_vector(t, fake.embed_dim) for t in texts],
                "total_duration": 1_000_000, "load_duration": 0, "prompt_eval_count": len(texts),
            })
        else:
            self._send(404, {"error": f"404 page not found: {self.path}"})

    def _stream(self, model: str, answer: Reply) -> None:
        """Ollama's streaming form: NDJSON chunks of the message, then a final chunk with the counts."""
        text = answer.content
        step = max(1, len(text) // 3)
        chunks = [text[i:i + step] for i in range(0, len(text), step)] or [""]
        lines = [{"model": model, "created_at": _now(), "message": {"role": "assistant", "content": c},
                  "done": False} for c in chunks]
        lines.append({"model": model, "created_at": _now(), "message": {"role": "assistant", "content": ""},
                      "done": True, "done_reason": "stop", "prompt_eval_count": answer.prompt_eval_count,
                      "eval_count": answer.eval_count})
        data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _chat(self, body: Any) -> None:
        fake = self.server.fake
        answer = fake._next(body)
        if isinstance(answer, Delay):
            fake._stop.wait(answer.seconds)
            answer = answer.then
        if isinstance(answer, HTTPError):
            self._send(answer.status, {"error": answer.message})
            return
        assert isinstance(answer, Reply)
        model = body.get("model", "") if isinstance(body, dict) else ""
        if isinstance(body, dict) and body.get("stream", True) is not False:
            self._stream(model, answer)
            return
        self._send(200, {
            "model": model,
            "created_at": _now(),
            "message": {"role": "assistant", "content": answer.content},
            "done": True,
            "done_reason": "stop",
            "total_duration": 250_000_000,
            "load_duration": 1_000_000,
            "prompt_eval_count": answer.prompt_eval_count,
            "prompt_eval_duration": 50_000_000,
            "eval_count": answer.eval_count,
            "eval_duration": 150_000_000,
        })


class FakeOllama:
    """The fake server, started on construction on 127.0.0.1 with a free port; ``url`` is its address."""

    def __init__(self, *, embed_dim: int = 768, models: tuple[str, ...] = ("llama3.2", "nomic-embed-text")) -> None:
        self.embed_dim = embed_dim
        self.models = models
        self.requests: list[Recorded] = []
        self._answers: deque[Reply | HTTPError | Delay] = deque()
        self._responder: Callable[[Any], Answer] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server = _Server(self)
        host, port = self._server.server_address[:2]
        self.url = f"http://{host}:{port}"
        # A short poll interval keeps close() fast (shutdown waits for the serve loop's next poll).
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-ollama", daemon=True
        )
        self._thread.start()

    def script(self, *answers: Answer) -> FakeOllama:
        """Queue chat answers, in order; a chat request with nothing queued gets HTTP 500."""
        with self._lock:
            for answer in answers:
                if isinstance(answer, (dict, list)):
                    answer = Reply(json.dumps(answer))
                elif isinstance(answer, str):
                    answer = Reply(answer)
                self._answers.append(answer)
        return self

    def respond_with(self, responder: Callable[[Any], Answer] | None) -> FakeOllama:
        """Answer chat requests the script does not cover with ``responder(request_body)`` (None: HTTP 500).

        Lets a test answer by content when the order of requests is not fixed (a drained queue).
        """
        with self._lock:
            self._responder = responder
        return self

    @property
    def chat_requests(self) -> list[Any]:
        """Bodies of the ``/api/chat`` requests received so far."""
        return [r.body for r in self.requests if r.path == "/api/chat"]

    @property
    def pending(self) -> int:
        """How many scripted answers are still unused."""
        with self._lock:
            return len(self._answers)

    def _record(self, method: str, path: str, body: Any, client: Any = None) -> None:
        with self._lock:
            self.requests.append(Recorded(method, path, body, tuple(client) if client else None))

    def _next(self, body: Any = None) -> Reply | HTTPError | Delay:
        with self._lock:
            if self._answers:
                return self._answers.popleft()
            responder = self._responder
        if responder is None:
            return HTTPError(500, "fake ollama: no scripted answer left")
        answer = responder(body)
        if isinstance(answer, (dict, list)):
            return Reply(json.dumps(answer))
        return Reply(answer) if isinstance(answer, str) else answer

    def close(self) -> None:
        """Stop serving and release the port; sleeping answers wake up and finish."""
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOllama:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
