"""Every error factforge raises. Callers catch :class:`FactforgeError`; the CLI turns it into one line."""

from __future__ import annotations


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


class LLMError(FactforgeError):
    """The LLM could not be reached or answered with an error."""


class LLMUnavailableError(LLMError):
    """Ollama is unreachable or timed out."""


class LLMParseError(LLMError):
    """The LLM's reply could not be parsed into the expected JSON, even after a retry."""


class EmbedderError(FactforgeError):
    """No embedding could be computed (model missing or server unreachable)."""


class NotFoundError(FactforgeError):
    """A requested fact, session or entity does not exist (or is not visible to the caller)."""
