"""The value types that flow through the pipeline: text -> gate -> patterns -> LLM -> validation -> store.

They are frozen: a stage returns new values, it never edits what an earlier stage produced.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Category = Literal["preference", "policy", "technology", "decision", "temporal", "identity", "instruction", "other"]
CATEGORIES: tuple[str, ...] = (
    "preference", "policy", "technology", "decision", "temporal", "identity", "instruction", "other",
)
Method = Literal["pattern", "llm", "inline"]
METHODS: tuple[str, ...] = ("pattern", "llm", "inline")
Visibility = Literal["private", "team", "global"]
EntityType = Literal[
    "person", "place", "organization", "project", "technology", "concept", "event", "activity", "temporal",
    # regex-found technical kinds
    "version", "url", "email", "path", "cve", "ip", "hash", "speaker",
]
ENTITY_TYPES: tuple[str, ...] = (
    "person", "place", "organization", "project", "technology", "concept", "event", "activity", "temporal",
    "version", "url", "email", "path", "cve", "ip", "hash", "speaker",
)
Speaker = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Span:
    """Where in the source text something was found (character offsets into the judged text)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a fact exists: the stage and rule that produced it and how its confidence was reached."""

    stage: Method
    rule_id: str | None
    original_confidence: float
    final_confidence: float
    span: Span | None = None
    context_boost: float = 0.0
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Fact:
    """One extracted fact, before storage.

    ``subject``/``relation``/``slots`` give the fact's structure (e.g. subject "Team", relation "switched",
    slots {"old": "JWT", "new": "Clerk"}) so lifecycle rules can decide what it supersedes without an LLM.
    """

    content: str
    category: Category
    confidence: float
    method: Method
    explanation: Explanation
    entities: tuple[str, ...] = ()
    rule_id: str | None = None
    subject: str | None = None
    relation: str | None = None
    slots: Mapping[str, str] = field(default_factory=dict, hash=False, compare=False)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    speaker: Speaker = "user"


@dataclass(frozen=True, slots=True)
class Entity:
    """A named thing mentioned in the text."""

    name: str
    type: str
    span: Span | None = None
    source: Literal["regex", "gazetteer", "llm", "inline"] = "regex"


@dataclass(frozen=True, slots=True)
class Relationship:
    """A directed, labelled edge between two entities (label in snake_case)."""

    source: str
    target: str
    label: str


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gatekeeper's verdict on one piece of text; ``reason`` says why it was dropped."""

    passed: bool
    reason: str | None = None
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class Extraction:
    """Everything the rule stages found in one message or turn.

    ``facts`` holds every kept fact (confidence at or above MEDIUM); ``hints`` is the subset below HIGH,
    handed to the LLM as hints when it runs. ``needs_llm`` is true when the text passed the gate and no
    HIGH-confidence fact answered it.
    """

    text: str
    gate: GateDecision
    facts: tuple[Fact, ...] = ()
    hints: tuple[Fact, ...] = ()
    entities: tuple[Entity, ...] = ()
    relationships: tuple[Relationship, ...] = ()
    needs_llm: bool = False
    timestamp: datetime | None = None
    redactions: int = 0


@dataclass(frozen=True, slots=True)
class Supersession:
    """What a supersession rule decided a new fact makes outdated: the current facts of its scope that match
    every condition. The rules decide (``factforge.rules.lifecycle``); storage only applies the decision.

    ``relations``: the old fact's relation is one of these. ``equal``: (field, value) in the rule's order, a
    field being ``subject``, ``relation``, ``category`` or ``slot:<name>`` (a slot compares case-insensitively).
    ``link``: (old slots, value): one of the old fact's slots equals the value, case-insensitively.
    ``suffix``: (slot, marker, text): the old slot's text after ``marker``, lower-cased and trimmed, is ``text``.
    ``similar_above``: the two facts' vectors are at least this similar (cosine)."""

    rule_id: str
    relations: tuple[str, ...] = ()
    equal: tuple[tuple[str, str], ...] = ()
    link: tuple[tuple[tuple[str, ...], str], ...] = ()
    suffix: tuple[tuple[str, str, str], ...] = ()
    similar_above: float | None = None


_PUNCT_END = re.compile(r"[\s.!?;:,。！？；：，]+$")
_SPACES = re.compile(r"\s+")
_ARTICLES = re.compile(r"\b(?:a|an|the)\s+")


def normalize_content(content: str) -> str:
    """The form two facts are compared in ("the same fact"): NFKC, case-folded, single spaces, no articles, no
    trailing punctuation ("The user prefers the dark mode." and "User prefers dark mode" are the same fact)."""
    text = unicodedata.normalize("NFKC", content).casefold().strip()
    text = _SPACES.sub(" ", text)
    text = _ARTICLES.sub("", text)
    return _PUNCT_END.sub("", text)


def content_hash(content: str) -> str:
    """The key of "the same fact" in storage: the hash of :func:`normalize_content`."""
    return hashlib.sha256(normalize_content(content).encode("utf-8")).hexdigest()
