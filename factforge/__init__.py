"""factforge: rules-first fact-extraction memory for AI agents, stored in PostgreSQL + pgvector.

``import factforge`` is cheap: the database and LLM layers load on first use of their names.
"""

from __future__ import annotations

import logging
import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .errors import (
    ConfigError,
    DatabaseError,
    EmbeddedServerError,
    EmbedderError,
    EmbeddingMismatchError,
    FactforgeError,
    InputError,
    LLMError,
    LLMParseError,
    LLMUnavailableError,
    NotFoundError,
    PatternError,
    SchemaError,
    ValidationError,
)
from .settings import Settings, get_settings
from .types import Entity, Explanation, Extraction, Fact, GateDecision, Relationship, Span

logging.getLogger("factforge").addHandler(logging.NullHandler())

__version__ = "0.1.0"


class _Package(ModuleType):
    """Keeps ``factforge.extract`` and ``factforge.search`` the README's functions.

    Importing a submodule binds it on its package under its own name, so once anything had imported the
    ``factforge.extract`` module (``Memory`` does), ``factforge.extract(...)`` would call a module. Those two
    names stay the functions; ``from factforge.extract import ...`` still reaches the modules.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("extract", "search") and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

# name -> module that defines it, imported on first access.
_LAZY = {
    "Memory": "memory",
    "AsyncMemory": "memory",
    "RememberResult": "memory",
    "DrainReport": "draining",
    "Extractor": "rules.extract",
    "extract": "rules.extract",
    "Store": "storage.store",
    "StoredFact": "storage.store",
    "Scope": "storage.store",
    "Provenance": "storage.store",
    "SearchHit": "storage.search",
    "search": "storage.search",
    "parse_inline": "rules.inline",
    "inline_prompt": "rules.inline",
    "InlineResult": "rules.inline",
    "OllamaLLM": "models.llm",
    "AsyncOllamaLLM": "models.llm",
    "LLMRequest": "models.llm",
    "LLMResult": "models.llm",
    "LLMCall": "models.llm",
    "PatternLibrary": "rules.patterns",
    "Gatekeeper": "rules.gatekeeper",
    "ingest_file": "ingest",
    "IngestSummary": "ingest",
    "embed_pending": "storage.embeddings",
    "EmbedReport": "storage.embeddings",
}

# Importable from here (``from factforge import Store`` keeps working) but not the public surface: the
# storage layer, the LLM's request/response plumbing and the rule engines sit behind Memory and extract().
_NOT_PUBLIC = frozenset({"Store", "Scope", "Provenance", "LLMRequest", "LLMResult", "LLMCall", "PatternLibrary",
                         "Gatekeeper", "embed_pending"})

__all__ = [
    "__version__",
    "ConfigError", "DatabaseError", "EmbeddedServerError", "EmbedderError", "EmbeddingMismatchError",
    "FactforgeError", "InputError", "LLMError", "LLMParseError", "LLMUnavailableError", "NotFoundError",
    "PatternError", "SchemaError", "ValidationError",
    "Settings", "get_settings",
    "Entity", "Explanation", "Extraction", "Fact", "GateDecision", "Relationship", "Span",
    *(name for name in _LAZY if name not in _NOT_PUBLIC),
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'factforge' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .storage.embeddings import EmbedReport, embed_pending
    from .rules.extract import Extractor, extract
    from .rules.gatekeeper import Gatekeeper
    from .ingest import IngestSummary, ingest_file
    from .rules.inline import InlineResult, inline_prompt, parse_inline
    from .models.llm import AsyncOllamaLLM, LLMCall, LLMRequest, LLMResult, OllamaLLM
    from .memory import AsyncMemory, DrainReport, Memory, RememberResult
    from .rules.patterns import PatternLibrary
    from .storage.search import SearchHit, search
    from .storage.store import Provenance, Scope, Store, StoredFact
