"""Every error factforge raises. Callers catch :class:`FactforgeError`; the CLI turns it into one line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


class FactforgeError(Exception):
    """Base class of every factforge error."""


class ConfigError(FactforgeError):
    """A setting (environment variable or argument) has an invalid value."""


class PatternError(FactforgeError):
    """A pattern file is invalid; the message lists every problem found."""


class InputError(FactforgeError):
    """Input text, a JSON line or a field value is malformed."""


class DatabaseError(FactforgeError):
    """The database could not be reached, started or written."""


class EmbeddedServerError(DatabaseError):
    """The embedded PostgreSQL server could not be initialised or started."""


class SchemaError(DatabaseError):
    """The database schema is missing, outdated or does not match the configuration."""


class EmbeddingMismatchError(SchemaError):
    """The configured embedder's dimension differs from the stored vectors' dimension."""


class ValidationError(FactforgeError):
    """A value is out of range or of the wrong kind before it reaches the database."""


@dataclass(frozen=True, slots=True)
class LLMCall:
    """One HTTP call to the model, one ``llm_calls`` row: its tokens, wall time, outcome, rejected items.

    ``ok`` is False when the call failed (HTTP error, timeout) or its reply could not be parsed; tokens count
    either way, since the model spent them. ``rejections`` counts the reply's items dropped by validation.
    """

    prompt_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    ok: bool = True
    error: str | None = None
    rejections: Mapping[str, int] = field(default_factory=dict)


class LLMError(FactforgeError):
    """The LLM could not be reached or answered with an error.

    ``calls`` holds every HTTP call the failed extraction made (a parse retry is a call of its own), so what
    a failure cost is accounted for; an unreachable server made none.
    """

    def __init__(self, message: str = "", *, calls: tuple[LLMCall, ...] = ()) -> None:
        super().__init__(message)
        self.calls = calls


class LLMUnavailableError(LLMError):
    """Ollama is unreachable or timed out."""


class LLMParseError(LLMError):
    """The LLM's reply could not be parsed into the expected JSON, even after a retry."""


class EmbedderError(FactforgeError):
    """No embedding could be computed (model missing or server unreachable)."""


class NotFoundError(FactforgeError):
    """A requested fact, session or entity does not exist (or is not visible to the caller)."""


class AuthError(FactforgeError):
    """A request carried no API key, or one that is unknown or revoked."""


class ForbiddenError(FactforgeError):
    """The API key is valid but may not do this (another agent's scope, a read-only key writing)."""
