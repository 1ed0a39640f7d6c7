"""The values storage reads and writes: scopes, provenance, stored facts, queue items, misses; the checks that
reject what PostgreSQL would refuse, before any SQL runs."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from ..errors import ValidationError
from ..settings import VISIBILITIES
from ..types import Fact

__all__ = ["Scope", "Provenance", "StoredFact", "QueueItem", "Miss", "check_text", "check_fact", "FACT_COLS"]


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_text(name: str, value: str | None) -> None:
    """PostgreSQL text cannot hold a NUL byte, and UTF-8 cannot encode a lone surrogate: say so before SQL."""
    if value is None:
        return
    if not isinstance(value, str):
        raise ValidationError(f"{name} must be a string, not {type(value).__name__}")
    bad = _UNSTORABLE.search(value)
    if bad is not None:
        what = "a NUL byte" if bad.group() == "\x00" else f"a lone surrogate (U+{ord(bad.group()):04X})"
        raise ValidationError(f"{name} contains {what}")


def check_fact(fact: Fact) -> None:
    """Reject values the database would refuse, with a clear error, before any SQL runs."""
    from ..types import CATEGORIES, METHODS

    if not isinstance(fact.content, str) or not fact.content.strip():
        raise ValidationError("a fact needs non-empty content")
    for name, value in (("content", fact.content), ("subject", fact.subject), ("relation", fact.relation),
                        ("rule_id", fact.rule_id), *((f"entity {e!r}", e) for e in fact.entities)):
        check_text(f"fact {name}", value)
    if fact.category not in CATEGORIES:
        raise ValidationError(f"category {fact.category!r} must be one of {', '.join(CATEGORIES)}")
    if fact.method not in METHODS:
        raise ValidationError(f"extraction method {fact.method!r} must be one of {', '.join(METHODS)}")
    if not isinstance(fact.confidence, (int, float)) or not 0.0 <= float(fact.confidence) <= 1.0:
        raise ValidationError(f"confidence {fact.confidence!r} must be between 0 and 1")
    if fact.valid_from and fact.valid_to and fact.valid_to < fact.valid_from:
        raise ValidationError("valid_to is before valid_from")


@dataclass(frozen=True, slots=True)
class Scope:
    """Who may see a fact: ``private`` to one agent, ``team`` to one team, or ``global``."""

    agent_id: str | None
    team_id: str | None = None
    visibility: str = "private"

    def __post_init__(self) -> None:
        if self.visibility not in VISIBILITIES:
            raise ValidationError(f"visibility {self.visibility!r} must be one of {', '.join(VISIBILITIES)}")
        if self.visibility == "private" and not self.agent_id:
            raise ValidationError("a private fact needs an agent_id")
        if self.visibility == "team" and not self.team_id:
            raise ValidationError("a team fact needs a team_id")
        check_text("agent_id", self.agent_id)
        check_text("team_id", self.team_id)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a fact came from."""

    source_key: str
    session_id: str | None = None
    user_message: str | None = None
    assistant_message: str | None = None
    activity_session: str | None = None
    message_ts: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("source_key", "session_id", "user_message", "assistant_message", "activity_session"):
            check_text(name, getattr(self, name))


@dataclass(frozen=True, slots=True)
class StoredFact:
    """A fact as stored. ``action``: 'new', 'mention' (same fact again) or 'paraphrase' (near duplicate)."""

    id: UUID
    content: str
    category: str
    confidence: float
    method: str
    rule_id: str | None
    entities: tuple[str, ...]
    subject: str | None
    relation: str | None
    slots: Mapping[str, Any]
    explanation: Mapping[str, Any]
    visibility: str
    agent_id: str | None
    team_id: str | None
    source_session: str | None
    source_activity_session: str | None
    mention_count: int
    first_seen_at: datetime
    last_seen_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None
    superseded_by: UUID | None
    superseded_at: datetime | None
    created_at: datetime
    action: str = "stored"
    supersedes: tuple[UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class QueueItem:
    id: int
    source_key: str
    payload: Mapping[str, Any]
    attempts: int


@dataclass(frozen=True, slots=True)
class Miss:
    text: str
    count: int
    first_seen_at: datetime | None = None
    last_seen_at: datetime | None = None
    agents: int = 0  # how many agents' users said it


FACT_COLS = (
    "id, content, category, confidence, extraction_method, rule_id, entities, subject, relation, slots, "
    "explanation, visibility, agent_id, team_id, source_session, source_activity_session, mention_count, "
    "first_seen_at, last_seen_at, valid_from, valid_to, superseded_by, superseded_at, created_at"
)


def stored(row: Mapping[str, Any], action: str = "stored", supersedes: Sequence[UUID] = ()) -> StoredFact:
    return StoredFact(
        id=row["id"], content=row["content"], category=row["category"], confidence=float(row["confidence"]),
        method=row["extraction_method"], rule_id=row["rule_id"], entities=tuple(row["entities"] or ()),
        subject=row["subject"], relation=row["relation"], slots=row["slots"] or {},
        explanation=row["explanation"] or {}, visibility=row["visibility"], agent_id=row["agent_id"],
        team_id=row["team_id"], source_session=row["source_session"],
        source_activity_session=row["source_activity_session"], mention_count=row["mention_count"],
        first_seen_at=row["first_seen_at"], last_seen_at=row["last_seen_at"], valid_from=row["valid_from"],
        valid_to=row["valid_to"], superseded_by=row["superseded_by"], superseded_at=row["superseded_at"],
        created_at=row["created_at"], action=action, supersedes=tuple(supersedes),
    )
