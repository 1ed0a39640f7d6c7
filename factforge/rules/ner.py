"""Rule-based entity recognition for technical entities: regex kinds plus a technology gazetteer.

Everything it knows lives in ``patterns/entities.yaml``: the regex kinds (URLs, e-mails, paths, versions,
CVE ids, IPv4 addresses, hashes) and the gazetteer of technology and organisation names with their aliases.
People and places are left to the LLM stage.

The gazetteer costs one Aho-Corasick pass over the lower-cased text plus a word-boundary check per raw hit;
regex kinds run only when one of their ``needs`` substrings occurs. Overlaps are resolved longest first, so
"React Native" beats "React" and a URL swallows the host name inside it.
"""

from __future__ import annotations

import bisect

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import ahocorasick
import regex

from .rulefile import Problems, compile_regex, default_patterns_dir, safe_finditer
from .schema import CodeContextSpec, EntitiesFileSpec, GazetteerGroupSpec, RegexKindSpec, read, unique
from ..types import Entity, Span

__all__ = ["CodeContext", "EntityRecognizer", "GazetteerEntry", "RegexExample", "RegexKind", "TextExample"]

logger = logging.getLogger("factforge.ner")

FILE_NAME = "entities.yaml"

# Ties between equally long, equally placed candidates: a versioned technology beats a bare version, a
# gazetteer name beats a regex kind (it is the more specific reading).
_PRIO_TECH_VERSION, _PRIO_GAZETTEER, _PRIO_REGEX = 0, 1, 2


@dataclass(frozen=True, slots=True)
class RegexExample:
    """A text in which a regex kind must find something; ``match``/``name`` pin what it finds."""

    text: str
    match: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class RegexKind:
    """One regex rule for a kind of technical token (url, email, path, version, ...)."""

    id: str
    type: str
    regex: regex.Pattern[str]
    normalize: str = "none"
    needs: tuple[str, ...] = ()
    after_technology: bool = False
    examples: tuple[RegexExample, ...] = ()
    counter_examples: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True, slots=True)
class GazetteerEntry:
    """A well-known name: canonical spelling, type, and the surface forms that refer to it."""

    name: str
    type: str
    group: str
    aliases: tuple[str, ...] = ()
    case_sensitive: bool = False
    any_case_aliases: tuple[str, ...] = ()
    exact_aliases: tuple[str, ...] = ()

    def surfaces(self) -> list[tuple[str, bool]]:
        """Every surface form with whether it must match exactly as written."""
        return ([(self.name, self.case_sensitive)] + [(a, self.case_sensitive) for a in self.aliases]
                + [(a, False) for a in self.any_case_aliases] + [(a, True) for a in self.exact_aliases])


@dataclass(frozen=True, slots=True)
class CodeContext:
    """Where entities of ``types`` are code, not mentions: inside a match (scope "match") or on its line."""

    id: str
    regex: regex.Pattern[str]
    scope: str = "line"
    needs: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    counter_examples: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True, slots=True)
class TextExample:
    """A whole text and the entity names the recognizer must return for it, in text order."""

    text: str
    entities: tuple[str, ...]


class _Hit(NamedTuple):
    start: int
    end: int
    name: str
    type: str
    source: str
    rule: str
    priority: int


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _lower(text: str) -> str:
    """Lower-case without changing the length, so automaton offsets are offsets into ``text``."""
    low = text.lower()
    if len(low) == len(text):
        return low
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


@dataclass(frozen=True, slots=True)
class EntityRecognizer:
    """Frozen recognizer; build with :meth:`from_dir`, then call :meth:`find` per message."""

    kinds: tuple[RegexKind, ...]
    entries: tuple[GazetteerEntry, ...]
    examples: tuple[TextExample, ...] = ()
    # lower-cased surface -> (length, entry index, exact surface or None when any case matches)
    automaton: Any = field(default=None, compare=False, repr=False)
    by_exact: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    by_lower: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    contexts: tuple[CodeContext, ...] = ()
    context_types: frozenset[str] = frozenset()
    # The kinds read on their own (not after a technology), each with the search that says whether one of its
    # ``needs`` occurs in the lower-cased text (None: it needs nothing); derived from ``kinds``.
    plain_kinds: tuple[tuple[RegexKind, re.Pattern[str] | None], ...] = field(
        default=(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "plain_kinds", tuple(
            (kind, _needs_search(kind.needs) if kind.needs else None) for kind in self.kinds
            if not kind.after_technology))

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> EntityRecognizer:
        """Load ``entities.yaml``; cached per folder. A bad file (or a failing example) raises ONE PatternError."""
        return _cached_recognizer(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    # ------------------------------------------------------------------------------------------ public

    def find(self, text: str) -> list[Entity]:
        """Technical entities in ``text``: no overlaps (longest wins), each name once, in text order."""
        return [Entity(h.name, h.type, Span(h.start, h.end, text[h.start:h.end]), h.source)  # type: ignore[arg-type]
                for h in self._resolve(text)]

    def canonical(self, name: str) -> str | None:
        """The canonical spelling of a gazetteer name or alias ("postgres" -> "PostgreSQL"), else None.

        Case-sensitive entries answer in any case here: a slot value is already known to name a technology.
        """
        key = " ".join(name.split())
        return self.by_exact.get(key) or self.by_lower.get(key.lower())

    def check(self) -> list[str]:
        """Run every example and counter-example in the rule file; the failures, described."""
        failures: list[str] = []
        for kind in self.kinds:
            for ex in kind.examples:
                hits = [h for h in self._resolve(ex.text) if h.rule == kind.id]
                if not hits:
                    failures.append(f"rule {kind.id}: example {ex.text!r} does not match")
                    continue
                if ex.match is not None and all(ex.text[h.start:h.end] != ex.match for h in hits):
                    got = [ex.text[h.start:h.end] for h in hits]
                    failures.append(f"rule {kind.id}: example {ex.text!r} should match {ex.match!r}, got {got}")
                if ex.name is not None and all(h.name != ex.name for h in hits):
                    failures.append(f"rule {kind.id}: example {ex.text!r} should name {ex.name!r}, "
                                    f"got {[h.name for h in hits]}")
            for text in kind.counter_examples:
                hits = [h for h in self._resolve(text) if h.rule == kind.id]
                if hits:
                    failures.append(f"rule {kind.id}: counter-example {text!r} matches "
                                    f"{[text[h.start:h.end] for h in hits]}")
        for context in self.contexts:
            for text in context.examples:
                left = [h.name for h in self._resolve(text) if h.type in self.context_types]
                if left:
                    failures.append(f"code_context {context.id}: example {text!r} still yields {left}")
            for text in context.counter_examples:
                if not any(h.type in self.context_types for h in self._resolve(text)):
                    failures.append(f"code_context {context.id}: counter-example {text!r} yields no "
                                    f"{'/'.join(sorted(self.context_types))}")
        for example in self.examples:
            found = tuple(e.name for e in self.find(example.text))
            if found != example.entities:
                failures.append(f"example {example.text!r}: expected {list(example.entities)}, got {list(found)}")
        return failures

    # ---------------------------------------------------------------------------------------- matching

    def _resolve(self, text: str) -> list[_Hit]:
        if not text:
            return []
        low = _lower(text)
        candidates = self._gazetteer_hits(text, low)
        candidates.extend(self._regex_hits(text, low))
        if self.contexts and any(h.type in self.context_types for h in candidates):
            candidates = self._drop_code(text, low, candidates)
        candidates.sort(key=lambda h: (h.start - h.end, h.start, h.priority))
        # Longest first; a hit is kept when it overlaps no kept hit. The kept hits never overlap, so sorted by
        # start only the neighbours either side of the new one can: a bisect, not a scan of every kept hit
        # (a scan made a 1 MB message quadratic).
        starts: list[int] = []
        kept: list[_Hit] = []
        for hit in candidates:
            i = bisect.bisect_right(starts, hit.start)
            if i > 0 and kept[i - 1].end > hit.start:
                continue
            if i < len(kept) and kept[i].start < hit.end:
                continue
            starts.insert(i, hit.start)
            kept.insert(i, hit)
        seen: set[str] = set()
        out: list[_Hit] = []
        for hit in kept:
            if hit.name not in seen:
                seen.add(hit.name)
                out.append(hit)
        return out

    def _drop_code(self, text: str, low: str, candidates: list[_Hit]) -> list[_Hit]:
        """Candidates of the filtered types that sit in code (a fence, an assignment, a git header) dropped."""
        ranges: list[tuple[int, int]] = []
        for context in self.contexts:
            if context.needs and not any(s in low for s in context.needs):
                continue
            for m in safe_finditer(context.regex, text, f"code_context.{context.id}"):
                start, end = m.start(), m.end()
                if context.scope == "line":
                    start = text.rfind("\n", 0, start) + 1
                    stop = text.find("\n", end)
                    end = len(text) if stop < 0 else stop
                ranges.append((start, end))
        if not ranges:
            return candidates
        # Merged and sorted, so whether a hit lies inside one is a bisect (not a scan of every range).
        ranges.sort()
        merged: list[list[int]] = []
        for start, end in ranges:
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        begins = [r[0] for r in merged]

        def in_code(h: _Hit) -> bool:
            i = bisect.bisect_right(begins, h.start) - 1
            return i >= 0 and h.end <= merged[i][1]

        return [h for h in candidates if h.type not in self.context_types or not in_code(h)]

    def _gazetteer_hits(self, text: str, low: str) -> list[_Hit]:
        hits: list[_Hit] = []
        if not self.entries:
            return hits
        n = len(low)
        entries = self.entries
        # Versions after a technology: one pass per rule on the first technology hit, looked up by position.
        versions_at: dict[int, list[_Hit]] | None = None
        for last, (length, index, exact) in self.automaton.iter(low):
            start = last - length + 1
            end = last + 1
            if start > 0:
                before = low[start - 1]
                # "eslint-plugin-react", "api.github": glued to a longer token, not a mention.
                if _is_word(before) or before == "." or before == "-":
                    continue
            if end < n:
                after = low[end]
                if _is_word(after) or (after == "." and end + 1 < n and _is_word(low[end + 1])):
                    continue
            entry = entries[index]
            versions: list[_Hit] = []
            if entry.type == "technology":
                if versions_at is None:
                    versions_at = self._version_positions(text)
                versions = [h._replace(name=f"{entry.name} {h.name}") for h in versions_at.get(end, ())]
            if exact is not None and text[start:end] != exact:
                # A common word in another case counts only with a dotted version after it ("swift 5.9").
                if not any("." in text[v.start:v.end] for v in versions):
                    continue
            hits.append(_Hit(start, end, entry.name, entry.type, "gazetteer", entry.group, _PRIO_GAZETTEER))
            hits.extend(versions)
        return hits

    def _version_positions(self, text: str) -> dict[int, list[_Hit]]:
        """Matches of the after_technology rules keyed by where they start (the end of a technology)."""
        out: dict[int, list[_Hit]] = {}
        for kind in self.kinds:
            if kind.after_technology and (not kind.needs or any(s in text for s in kind.needs)):
                for m in safe_finditer(kind.regex, text, kind.id):
                    s, e = _value_span(m)
                    out.setdefault(m.start(), []).append(
                        _Hit(s, e, _normalize(text[s:e], kind.normalize), kind.type, "regex", kind.id,
                             _PRIO_TECH_VERSION))
        return out

    def _regex_hits(self, text: str, low: str) -> list[_Hit]:
        hits: list[_Hit] = []
        occurs: dict[re.Pattern[str], bool] = {}  # kinds with the same needs (a digit) ask once
        for kind, needs in self.plain_kinds:
            if needs is not None:
                found = occurs.get(needs)
                if found is None:
                    found = occurs[needs] = needs.search(low) is not None
                if not found:
                    continue
            for m in safe_finditer(kind.regex, text, kind.id):
                s, e = _value_span(m)
                if e > s:
                    hits.append(_Hit(s, e, _normalize(text[s:e], kind.normalize), kind.type, "regex", kind.id,
                                     _PRIO_REGEX))
        return hits


@lru_cache(maxsize=256)
def _needs_search(needs: tuple[str, ...]) -> re.Pattern[str]:
    """A search for any of ``needs`` in a text (``any(s in text for s in needs)``): one scan in C instead of a
    generator over them (~5 us a message over the kinds), compiled once per list, so kinds that need the same (a
    digit) share it."""
    return re.compile("|".join(re.escape(s) for s in needs))


def _value_span(m: regex.Match[str]) -> tuple[int, int]:
    if "value" in m.re.groupindex and m.start("value") >= 0:
        return m.start("value"), m.end("value")
    return m.start(), m.end()


def _normalize(value: str, how: str) -> str:
    if how == "upper":
        return value.upper()
    if how == "lower":
        return value.lower()
    return value


# ------------------------------------------------------------------------------------------- loading


def _needed(needs: Iterable[str], examples: Iterable[str], at: str, problems: Problems) -> tuple[str, ...]:
    """The lower-cased ``needs`` of a rule; an example holding none of them would never run it."""
    lowered = tuple(s.lower() for s in needs)
    for text in examples:
        if lowered and not any(s in text.lower() for s in lowered):
            problems.add(at, f"example {text!r} contains none of {list(lowered)}, so the rule never runs on it")
    return lowered


def _load_kinds(specs: Iterable[RegexKindSpec], where: str, problems: Problems) -> list[RegexKind]:
    kinds: list[RegexKind] = []
    for spec in unique(specs, where, set(), problems):
        at = f"{where}: rule {spec.id}"
        before = len(problems.items)
        rx = compile_regex(spec.regex, at, problems, regex.IGNORECASE if spec.ignore_case else 0)
        needs = _needed(spec.needs, (ex.text for ex in spec.examples), at, problems)
        if len(problems.items) > before or rx is None:
            continue
        kinds.append(RegexKind(spec.id, spec.type, rx, spec.normalize, needs, spec.after_technology,
                               tuple(RegexExample(ex.text, ex.match, ex.name) for ex in spec.examples),
                               tuple(spec.counter_examples), spec.description))
    return kinds


def _load_gazetteer(groups: Iterable[GazetteerGroupSpec], where: str, problems: Problems) -> list[GazetteerEntry]:
    entries: list[GazetteerEntry] = []
    owner: dict[str, str] = {}
    for group in groups:
        for spec in group.entries:
            at = f"{where}: gazetteer entry {spec.name}"
            entry = GazetteerEntry(
                name=spec.name, type=spec.type or group.type, group=group.group, aliases=tuple(spec.aliases),
                case_sensitive=spec.case_sensitive, any_case_aliases=tuple(spec.any_case_aliases),
                exact_aliases=tuple(spec.exact_aliases),
            )
            if entry.any_case_aliases and not entry.case_sensitive:
                problems.add(at, "any_case_aliases is only meaningful with case_sensitive: true")
            for surface, _exact in entry.surfaces():
                key = " ".join(surface.lower().split())
                if key in owner:
                    problems.add(at, f"{surface!r} is already a name or alias of {owner[key]}")
                else:
                    owner[key] = entry.name
            entries.append(entry)
    return entries


def _load_contexts(spec: CodeContextSpec | None, where: str, problems: Problems) -> list[CodeContext]:
    out: list[CodeContext] = []
    for rule in unique(spec.rules if spec else [], f"{where}: code_context", set(), problems):
        at = f"{where}: code_context rule {rule.id}"
        before = len(problems.items)
        rx = compile_regex(rule.regex, at, problems)
        needs = _needed(rule.needs, rule.examples, at, problems)
        if len(problems.items) > before or rx is None:
            continue
        out.append(CodeContext(rule.id, rx, rule.scope, needs, tuple(rule.examples), tuple(rule.counter_examples),
                               rule.description))
    return out


def _build(patterns_dir: Path) -> EntityRecognizer:
    problems = Problems()
    path = patterns_dir / FILE_NAME
    where = str(path)
    file = read(EntitiesFileSpec, path, problems)
    if file is None:
        problems.raise_all()
    kinds = _load_kinds(file.regex, where, problems)
    entries = _load_gazetteer(file.gazetteer, where, problems)
    examples = [TextExample(ex.text, tuple(ex.entities)) for ex in file.examples]
    contexts = _load_contexts(file.code_context, where, problems)
    context_types = frozenset(file.code_context.types) if file.code_context else frozenset()
    problems.raise_if_any()

    automaton = ahocorasick.Automaton()
    by_exact: dict[str, str] = {}
    by_lower: dict[str, str] = {}
    for index, entry in enumerate(entries):
        for surface, exact in entry.surfaces():
            low = _lower(surface)
            automaton.add_word(low, (len(low), index, surface if exact else None))
            by_exact[surface] = entry.name
            by_lower.setdefault(" ".join(low.split()), entry.name)
    if entries:
        automaton.make_automaton()
    recognizer = EntityRecognizer(tuple(kinds), tuple(entries), tuple(examples), automaton, by_exact, by_lower,
                                  tuple(contexts), context_types)
    # The file's examples are part of its validation: an edit that breaks one fails loading.
    for failure in recognizer.check():
        problems.add(where, failure)
    problems.raise_if_any()
    logger.debug("entity recognizer loaded from %s: %d regex kinds, %d gazetteer entries",
                 patterns_dir, len(kinds), len(entries))
    return recognizer


@lru_cache(maxsize=8)
def _cached_recognizer(patterns_dir: str) -> EntityRecognizer:
    return _build(Path(patterns_dir))
