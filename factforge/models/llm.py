"""The LLM fallback: what the rules could not answer goes to a local model through Ollama.

One interface, one method: ``extract(LLMRequest) -> LLMResult``. The reply is parsed (fenced JSON and prose
around one object are tolerated), a broken reply is sent back to the model with the parse error up to
:data:`MAX_RETRIES` times, and every item is validated against the source text (:mod:`factforge.validate`)
before it becomes a fact. Failures are errors, never an empty result: the caller keeps the work queued.

Prompts live in ``factforge/models/prompts/*.txt`` (``string.Template`` placeholders, ``$name``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from importlib import resources
from string import Template
from typing import Any

import httpx
import ollama
import pydantic
import regex

from ..errors import LLMCall, LLMError, LLMParseError, LLMUnavailableError
from ..rules.gatekeeper import Gatekeeper
from ..rules.load import RuleSet, default_rules
from ..settings import Settings
from ..types import CATEGORIES, Entity, Extraction, Fact, Relationship, normalize_content
from .validate import validate_items

__all__ = [
    "AsyncOllamaLLM",
    "EXTRACTION_SCHEMA",
    "LLMCall",
    "LLMRequest",
    "LLMResult",
    "LLMUsage",
    "MAX_RETRIES",
    "OllamaLLM",
    "build_messages",
    "is_transient",
    "merge",
    "parse_reply",
    "source_text",
]

logger = logging.getLogger("factforge.llm")

# Retries after the first attempt when the reply cannot be parsed (so at most 1 + MAX_RETRIES = 2 calls).
MAX_RETRIES = 1  # seed 002 / issue 4: one correction round quoting the parse error, then the queue

# Handed to Ollama as ``format=``: constrained decoding makes a broken reply rare, parse_reply still checks.
EXTRACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "facts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string"},
                    "category": {"type": "string", "enum": list(CATEGORIES)},
                    "confidence": {"type": "number"},
                    "entities": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["content", "category", "confidence", "entities"],
            },
        },
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
                "required": ["name", "type"],
            },
        },
        "relationships": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "source": {"type": "string"},
                    "target": {"type": "string"},
                    "label": {"type": "string"},
                },
                "required": ["source", "target", "label"],
            },
        },
    },
    "required": ["facts", "entities", "relationships"],
}

_FENCE = regex.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", regex.DOTALL)


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """What the LLM is asked to read: the judged text, the turn it came from, hints and known names."""

    text: str
    user: str | None = None
    assistant: str | None = None
    timestamp: datetime | None = None
    hints: tuple[Fact, ...] = ()
    known_entities: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LLMUsage:
    """Tokens and wall time of one :meth:`OllamaLLM.extract` call, summed over its attempts (see ``calls``)."""

    prompt_tokens: int
    output_tokens: int
    latency_ms: float


@dataclass(frozen=True, slots=True)
class LLMResult:
    """Validated output of one extraction; ``rejections`` counts dropped items by reason.

    ``calls`` has one entry per HTTP call (a correction retry is its own call), each with its own tokens.
    """

    facts: tuple[Fact, ...]
    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    usage: LLMUsage
    rejections: Mapping[str, int] = field(default_factory=dict)
    attempts: int = 1
    calls: tuple[LLMCall, ...] = ()


# ------------------------------------------------------------------------------------------------ prompts


@lru_cache(maxsize=8)
def _template(name: str) -> Template:
    return Template(resources.files("factforge.models").joinpath(f"prompts/{name}").read_text(encoding="utf-8"))


def source_text(request: LLMRequest) -> str:
    """The text the reply is validated against: the judged text, plus turn parts it does not already hold.

    The judged text comes first, so spans found in it keep their offsets.
    """
    parts = [request.text]
    for extra in (request.user, request.assistant):
        if extra and extra not in request.text:
            parts.append(extra)
    return "\n".join(p for p in parts if p)


def build_messages(request: LLMRequest, settings: Settings) -> list[dict[str, str]]:
    """The system + user messages of the first attempt.

    Everything that came from outside (the text, the turn, rule hints, stored entity names) goes into the
    prompt as one JSON object: ``json.dumps`` escapes quotes and line breaks, so no text can close the data
    block and pose as prompt (a raw ``--- END TEXT ---`` delimiter could be written by the user).
    """
    system = _template("extract.txt").substitute(
        user=settings.user_subject, team=settings.team_subject, categories=", ".join(CATEGORIES)
    )
    material: dict[str, Any] = {}
    if request.user is not None or request.assistant is not None:
        material["user"] = request.user if request.user is not None else request.text
        if request.assistant:
            material["assistant"] = request.assistant
    else:
        material["text"] = request.text
    if request.hints:
        # Possible facts found by rules: the model confirms, corrects or completes them.
        material["possible_facts_from_rules"] = [h.content for h in request.hints]
    if request.known_entities:
        # Reusing these exact names keeps one entity per thing across turns.
        material["known_entities"] = list(request.known_entities)
    user = _template("extract_input.txt").substitute(
        timestamp=request.timestamp.isoformat() if request.timestamp else "unknown",
        material=json.dumps(material, ensure_ascii=False, indent=1),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


# ------------------------------------------------------------------------------------------------ parsing


def parse_reply(content: str) -> dict[str, Any]:
    """The JSON object in a model reply; raises ValueError (with a message for the model) if there is none.

    Accepts a bare object, a fenced ```json block, or prose before/after one object.
    """
    text = content.strip()
    if not text:
        raise ValueError("the reply was empty")
    fenced = _FENCE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object found in the reply")
    try:
        obj, _end = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(obj, dict):
        raise ValueError("the reply is not a JSON object")
    if "facts" not in obj:
        raise ValueError('the object has no "facts" list')
    for key in ("facts", "entities", "relationships"):
        if key in obj and obj[key] is not None and not isinstance(obj[key], list):
            raise ValueError(f'"{key}" must be a list, got {type(obj[key]).__name__}')
    return obj


# ------------------------------------------------------------------------------------------------ errors


@contextmanager
def _ollama_errors(settings: Settings) -> Iterator[None]:
    """Turn the client's transport and HTTP errors into factforge errors with a clear message."""
    where = f"Ollama at {settings.ollama_shown}"
    try:
        yield
    except ollama.ResponseError as exc:
        hint = f" (run `ollama pull {settings.llm_model}`)" if exc.status_code == 404 else ""
        raise LLMError(f"{where} answered HTTP {exc.status_code}: {exc.error}{hint}") from exc
    except ConnectionError as exc:  # the client re-raises httpx.ConnectError as the builtin
        raise LLMUnavailableError(f"{where} is not reachable: connection refused or host down") from exc
    except httpx.ConnectTimeout as exc:
        raise LLMUnavailableError(f"{where} is not reachable: connecting timed out") from exc
    except httpx.TimeoutException as exc:
        raise LLMError(
            f"{where} did not answer within {settings.llm_timeout:g}s (model {settings.llm_model}); "
            "raise FACTFORGE_LLM_TIMEOUT if the model is slow to load"
        ) from exc
    except httpx.HTTPError as exc:
        raise LLMError(f"{where} failed: {type(exc).__name__}: {exc}") from exc
    except (pydantic.ValidationError, json.JSONDecodeError) as exc:
        raise LLMError(f"{where} sent a response that is not an Ollama chat response: {exc}") from exc


def is_transient(exc: BaseException) -> bool:
    """Whether an :class:`LLMError` is the server's fault for now (HTTP 5xx, a timeout), not the request's.

    Such a failure says nothing about the queued item, so it must not use up the item's attempts.
    """
    cause = exc.__cause__
    if isinstance(cause, ollama.ResponseError):
        return cause.status_code >= 500
    return isinstance(cause, httpx.TimeoutException)


# ------------------------------------------------------------------------------------------------ exchange


class _Exchange:
    """The state of one extraction across attempts, shared by the sync and async clients."""

    def __init__(self, request: LLMRequest, settings: Settings, gatekeeper: Gatekeeper | None) -> None:
        self.request = request
        self.settings = settings
        self.gatekeeper = gatekeeper
        self.messages: list[dict[str, str]] = build_messages(request, settings)
        self.attempts = 0
        self.calls: list[LLMCall] = []
        self.started = self.call_started = time.perf_counter()

    def chat_kwargs(self) -> dict[str, Any]:
        self.attempts += 1
        self.call_started = time.perf_counter()
        return {
            "model": self.settings.llm_model,
            "messages": list(self.messages),
            "format": EXTRACTION_SCHEMA,
            "options": {"temperature": 0},
        }

    def _call_ms(self) -> float:
        return (time.perf_counter() - self.call_started) * 1000

    @contextmanager
    def call(self) -> Iterator[None]:
        """Wrap one HTTP call: a failure becomes a factforge error carrying every call made so far."""
        try:
            with _ollama_errors(self.settings):
                yield
        except LLMUnavailableError as exc:  # the request never reached the model: no call of its own
            exc.calls = tuple(self.calls)
            raise
        except LLMError as exc:  # the server took the request (HTTP error, timeout): a failed call
            self.calls.append(LLMCall(latency_ms=self._call_ms(), ok=False, error=str(exc)))
            exc.calls = tuple(self.calls)
            raise

    def take(self, response: ollama.ChatResponse) -> LLMResult | None:
        """The result, or None when the reply is broken and another attempt is due (messages updated)."""
        latency_ms = self._call_ms()
        tokens = (response.prompt_eval_count or 0, response.eval_count or 0)
        content = response.message.content or ""
        try:
            raw = parse_reply(content)
        except ValueError as exc:
            # The model spent these tokens even though the reply is useless: the call is accounted for.
            self.calls.append(LLMCall(*tokens, latency_ms, ok=False, error=f"unparseable reply: {exc}"))
            if self.attempts > MAX_RETRIES:
                raise LLMParseError(
                    f"reply of {self.settings.llm_model} could not be parsed after {self.attempts} attempts: {exc}",
                    calls=tuple(self.calls),
                ) from None
            logger.debug("attempt %d: unparseable reply (%s); asking the model again", self.attempts, exc)
            self.messages += [
                {"role": "assistant", "content": content},
                {"role": "user", "content": _template("retry.txt").substitute(error=str(exc)).strip()},
            ]
            return None
        facts, entities, relationships, rejections = validate_items(
            raw,
            source_text(self.request),
            timestamp=self.request.timestamp,
            settings=self.settings,
            gatekeeper=self.gatekeeper,
        )
        self.calls.append(LLMCall(*tokens, latency_ms, rejections=dict(rejections)))
        usage = LLMUsage(
            sum(c.prompt_tokens for c in self.calls),
            sum(c.output_tokens for c in self.calls),
            (time.perf_counter() - self.started) * 1000,
        )
        return LLMResult(facts, entities, relationships, usage, dict(rejections), self.attempts, tuple(self.calls))


def _gate_of(gate: Gatekeeper | None, rules: RuleSet | None, settings: Settings) -> Gatekeeper:
    """The gatekeeper a client validates replies with: the one it was given, else that of its rule set, else of the
    settings' patterns."""
    if gate is not None:
        return gate
    return (rules if rules is not None else default_rules(settings.patterns_dir)).gate


class OllamaLLM:
    """Fact extraction with a local model through the official ``ollama`` client.

    Raises :class:`LLMUnavailableError` when Ollama cannot be reached, :class:`LLMError` on a timeout or
    an HTTP error, :class:`LLMParseError` when the reply stays unparseable after the retries.
    """

    def __init__(self, settings: Settings, client: ollama.Client | None = None, *,
                 gatekeeper: Gatekeeper | None = None, rules: RuleSet | None = None) -> None:
        """``gatekeeper``: the one replies are validated with; default: that of ``rules`` (a rule set), else of the
        settings' patterns, loaded at the first :meth:`extract`."""
        self.settings = settings
        self.client = client or ollama.Client(host=settings.ollama_host, timeout=settings.llm_timeout)
        self._gate = gatekeeper
        self._rules = rules

    @property
    def _gatekeeper(self) -> Gatekeeper:
        return _gate_of(self._gate, self._rules, self.settings)

    def extract(self, request: LLMRequest) -> LLMResult:
        """Ask the model for the facts, entities and relationships in ``request`` and validate them."""
        exchange = _Exchange(request, self.settings, self._gatekeeper)
        while True:
            kwargs = exchange.chat_kwargs()
            with exchange.call():
                response = self.client.chat(**kwargs)
            result = exchange.take(response)
            if result is not None:
                return result


class AsyncOllamaLLM:
    """The asyncio twin of :class:`OllamaLLM` (same prompt, parsing, retries and validation)."""

    def __init__(self, settings: Settings, client: ollama.AsyncClient | None = None, *,
                 gatekeeper: Gatekeeper | None = None, rules: RuleSet | None = None) -> None:
        """See :class:`OllamaLLM`."""
        self.settings = settings
        self.client = client or ollama.AsyncClient(host=settings.ollama_host, timeout=settings.llm_timeout)
        self._gate = gatekeeper
        self._rules = rules

    @property
    def _gatekeeper(self) -> Gatekeeper:
        return _gate_of(self._gate, self._rules, self.settings)

    async def extract(self, request: LLMRequest) -> LLMResult:
        """See :meth:`OllamaLLM.extract`."""
        exchange = _Exchange(request, self.settings, self._gatekeeper)
        while True:
            kwargs = exchange.chat_kwargs()
            with exchange.call():
                response = await self.client.chat(**kwargs)
            result = exchange.take(response)
            if result is not None:
                return result


# ------------------------------------------------------------------------------------------------ merging


def merge(extraction: Extraction, result: LLMResult) -> tuple[Fact, ...]:
    """Pattern facts first, then the LLM facts that do not restate one of them (normalised content)."""
    seen = {normalize_content(f.content) for f in extraction.facts}
    merged = list(extraction.facts)
    for fact in result.facts:
        key = normalize_content(fact.content)
        if key not in seen:
            seen.add(key)
            merged.append(fact)
    return tuple(merged)
