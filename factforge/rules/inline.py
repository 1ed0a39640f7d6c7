"""Inline memory tags: the agent's own LLM writes ``<ff:...>`` tags into its reply (no extra LLM call).

:func:`parse_inline` validates and collects them and returns the reply with every tag stripped, so the
user never sees them. A malformed or invalid tag is removed from the reply too and reported in
``skipped`` with the reason, never stored. Seed 004's ``<vm:entity>``/``<vm:relationship>`` tags are
accepted as aliases.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

from ..types import CATEGORIES, ENTITY_TYPES, Entity, Explanation, Fact, Relationship
from .names import mentions

if TYPE_CHECKING:
    from .gatekeeper import Gatekeeper

__all__ = ["InlineResult", "inline_prompt", "parse_inline"]

_ATTR = re.compile(r'([a-zA-Z_][\w-]*)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
_PAIRED = re.compile(r"<(ff|vm):(fact|episode)\b([^>]*)>(.*?)</\1:\2\s*>", re.DOTALL | re.IGNORECASE)
_SINGLE = re.compile(r"<(ff|vm):(entity|relationship)\b([^>]*?)/?>(?:</\1:\2\s*>)?", re.DOTALL | re.IGNORECASE)
_LEFTOVER = re.compile(r"</?(?:ff|vm):[^>]*>?", re.IGNORECASE)
_LABEL = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_FACT_CHARS = 300
INLINE_CONFIDENCE = 0.8


@dataclass(frozen=True, slots=True)
class InlineResult:
    clean_reply: str
    facts: tuple[Fact, ...]
    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    skipped: tuple[tuple[str, str], ...]


def inline_prompt() -> str:
    """The system-prompt snippet that teaches an agent's LLM to emit the tags."""
    return (resources.files("factforge.models") / "prompts" / "inline_snippet.txt").read_text(encoding="utf-8")


def _attrs(raw: str) -> dict[str, str]:
    return {m.group(1).lower(): html.unescape(m.group(2) if m.group(2) is not None else m.group(3) or "")
            for m in _ATTR.finditer(raw)}


def _snake(label: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", label.strip().lower()).strip("_")


def parse_inline(reply: str, gate: Gatekeeper | None = None) -> InlineResult:
    """Facts, entities and relationships from the tags in ``reply``, and the reply without them. ``gate``: the
    rule set's gatekeeper (every tagged string is checked for injection); default: the shipped rules'."""
    if gate is None:
        from .load import default_rules

        gate = default_rules().gate
    facts: list[Fact] = []
    entities: list[Entity] = []
    rels: list[Relationship] = []
    skipped: list[tuple[str, str]] = []

    def fact_tag(m: re.Match[str]) -> str:
        got = _fact(m, gate)
        if isinstance(got, str):
            skipped.append((m.group(0)[:80], got))
        else:
            facts.append(got)
        return ""

    def single_tag(m: re.Match[str]) -> str:
        attrs = _attrs(m.group(3))
        got = _entity(attrs, gate) if m.group(2).lower() == "entity" else _relationship(attrs, gate)
        if isinstance(got, str):
            skipped.append((m.group(0)[:80], got))
        elif isinstance(got, Entity):
            entities.append(got)
        else:
            rels.append(got)
        return ""

    text = _PAIRED.sub(fact_tag, reply)
    text = _SINGLE.sub(single_tag, text)
    # Removing one broken tag can join the pieces of another ("<<ff:x>ff:fact>"): repeat until none is left.
    while True:
        found = list(_LEFTOVER.finditer(text))
        if not found:
            break
        for m in found:
            skipped.append((m.group(0)[:80], "malformed tag"))
        text = _LEFTOVER.sub("", text)
    clean = re.sub(r"[ \t]+\n", "\n", re.sub(r"[ \t]{2,}", " ", text)).strip()
    return InlineResult(clean, tuple(facts), tuple(entities), tuple(rels), tuple(skipped))


def _injected(gate: Gatekeeper, *texts: str) -> bool:
    # Every string a tag carries into memory is checked, not only fact bodies: an entity name or a
    # relationship end is stored and later shown to agents just like a fact.
    return any(gate.is_injection(t) is not None for t in texts)


def _fact(m: re.Match[str], gate: Gatekeeper) -> Fact | str:
    """The fact of an ``<ff:fact>`` (or ``<ff:episode>``) tag, or why it is skipped."""
    attrs, body = _attrs(m.group(3)), html.unescape(re.sub(r"\s+", " ", m.group(4))).strip()
    category = (attrs.get("category") or ("temporal" if m.group(2).lower() == "episode" else "other")).lower()
    if not body:
        return "empty fact"
    if len(body) > MAX_FACT_CHARS:
        return f"fact longer than {MAX_FACT_CHARS} characters"
    if category not in CATEGORIES:
        return f"unknown category {category!r}"
    if _injected(gate, body, attrs.get("entities", "")):
        return "looks like a prompt injection"
    try:
        conf = float(attrs.get("confidence", INLINE_CONFIDENCE))
    except ValueError:
        return f"confidence {attrs.get('confidence')!r} is not a number"
    if conf != conf:  # NaN
        return "confidence is not a number"
    conf = min(1.0, max(0.0, conf))  # clamped, like LLM confidences
    # Only names the fact says: a fact's entities are shown and searched with it, and a name from elsewhere in the
    # conversation (a private matter, on a team fact) must not ride along.
    names = tuple(n.strip() for n in attrs.get("entities", "").split(",") if n.strip() and mentions(body, n.strip()))
    return Fact(
        content=body, category=category, confidence=conf, method="inline",  # type: ignore[arg-type]
        explanation=Explanation("inline", None, conf, conf, None, 0.0, "tag in the agent's reply"),
        entities=names, speaker="assistant",
    )


def _entity(attrs: dict[str, str], gate: Gatekeeper) -> Entity | str:
    """The entity of an ``<ff:entity/>`` tag, or why it is skipped."""
    name, etype = attrs.get("name", "").strip(), (attrs.get("type") or "concept").lower()
    if not name:
        return "entity without a name"
    if _injected(gate, name):
        return "entity name looks like a prompt injection"
    return Entity(name, etype if etype in ENTITY_TYPES else "concept", None, "inline")


def _relationship(attrs: dict[str, str], gate: Gatekeeper) -> Relationship | str:
    """The relationship of an ``<ff:relationship/>`` tag, or why it is skipped."""
    src = (attrs.get("from") or attrs.get("source") or "").strip()
    dst = (attrs.get("to") or attrs.get("target") or "").strip()
    raw_label = attrs.get("label") or attrs.get("type") or ""
    label = _snake(raw_label)
    if not src or not dst:
        return "relationship needs 'from' and 'to'"
    if _injected(gate, src, dst, raw_label):  # the raw label: snake_case would hide the wording
        return "relationship looks like a prompt injection"
    if not _LABEL.match(label):
        return "relationship needs a label"
    if src.casefold() == dst.casefold():
        return "relationship from an entity to itself"
    return Relationship(src, dst, label)
