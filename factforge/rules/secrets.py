"""Secret detection and redaction: API keys, tokens, passwords, private keys, connection-string passwords.

Rules live in ``patterns/secrets.yaml``. Each match (or its named ``group``) becomes ``[REDACTED:<kind>]``;
a connection string keeps its scheme, user and host. A rule's regex runs only when one of its keywords
occurs in the text (one Aho-Corasick pass), so ordinary chat costs one automaton scan.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from .rulefile import (Problems, check_examples, compile_regex, default_patterns_dir, guard_budget, keyword_automaton,
                       own_time)
from .schema import SecretsFileSpec, read, unique

__all__ = ["UNSCANNED", "Redaction", "has_placeholder", "SecretRule", "SecretScanner", "placeholder"]

logger = logging.getLogger("factforge.secrets")



# The kind of a redaction that covers text a rule could not finish scanning (fails closed).
UNSCANNED = "unscanned"


def placeholder(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def has_placeholder(text: str) -> bool:
    """Whether ``text`` holds a redaction placeholder (it was cut from a message that had a secret)."""
    return "[REDACTED:" in text


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One secret shape: the regex (or its named ``group``) is what gets redacted."""

    id: str
    kind: str
    keywords: tuple[str, ...]
    regex: regex.Pattern[str]
    group: str | None = None
    examples: tuple[str, ...] = ()
    counter_examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Redaction:
    """Redacted text, how many secrets were replaced and their kinds (unique, in order of appearance)."""

    text: str
    count: int
    kinds: tuple[str, ...]
    rule_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SecretScanner:
    """Frozen set of secret rules; build with :meth:`from_dir`."""

    rules: tuple[SecretRule, ...]
    automaton: Any = field(compare=False, repr=False)

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> SecretScanner:
        """Load ``secrets.yaml`` (cached per folder); a bad file raises ONE PatternError naming every problem."""
        return _cached_scanner(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    def _candidates(self, text: str) -> list[SecretRule]:
        if not text or not self.rules:
            return []
        hits: set[int] = set()
        for _end, indices in self.automaton.iter(text.lower()):
            hits.update(indices)
        return [self.rules[i] for i in sorted(hits)]

    def _matches(self, rule: SecretRule, text: str) -> list[tuple[int, int, SecretRule]]:
        """The rule's secret spans; if it runs out of time, everything after its last match is one
        ``unscanned`` span: a guard that cannot finish fails closed, it never lets unscanned text through."""
        spans: list[tuple[int, int, SecretRule]] = []
        scanned_to = 0

        def scan(timeout: float) -> None:  # a run that runs out keeps what it found; a retry starts afresh
            nonlocal scanned_to
            spans.clear()
            scanned_to = 0
            for m in rule.regex.finditer(text, timeout=timeout):
                start, end = m.span(rule.group) if rule.group else m.span()
                if end > start:
                    spans.append((start, end, rule))
                scanned_to = max(scanned_to, m.end())

        try:
            own_time(scan, guard_budget(len(text)))
        except TimeoutError:
            logger.warning("secret rule %s ran out of time on %d chars; the %d unscanned chars are redacted",
                           rule.id, len(text), len(text) - scanned_to)
            spans.append((scanned_to, len(text), dataclasses.replace(rule, kind=UNSCANNED)))
        return spans

    def _spans(self, text: str) -> list[tuple[int, int, SecretRule]]:
        spans: list[tuple[int, int, SecretRule]] = []
        for rule in self._candidates(text):
            spans += self._matches(rule, text)
        # Overlaps (a key inside a "password=" assignment, say) keep the span that starts first, then the
        # longest, so every secret character is covered once.
        spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
        kept: list[tuple[int, int, SecretRule]] = []
        for span in spans:
            if kept and span[0] < kept[-1][1]:
                if span[1] > kept[-1][1]:
                    prev = kept[-1]
                    kept[-1] = (prev[0], span[1], prev[2])
                continue
            kept.append(span)
        return kept

    def redact(self, text: str) -> Redaction:
        """``text`` with every secret replaced by ``[REDACTED:<kind>]``."""
        spans = self._spans(text)
        if not spans:
            return Redaction(text, 0, ())
        parts: list[str] = []
        pos = 0
        kinds: dict[str, None] = {}
        ids: dict[str, None] = {}
        for start, end, rule in spans:
            parts.append(text[pos:start])
            parts.append(placeholder(rule.kind))
            kinds[rule.kind] = None
            ids[rule.id] = None
            pos = end
        parts.append(text[pos:])
        logger.debug("redacted %d secret(s): %s", len(spans), ", ".join(ids))
        return Redaction("".join(parts), len(spans), tuple(kinds), tuple(ids))

    def contains_secret(self, text: str) -> bool:
        """Whether any secret rule matches ``text``."""
        return any(self._matches(rule, text) for rule in self._candidates(text))


def _load(path: Path, problems: Problems) -> list[SecretRule]:
    where = str(path)
    file = read(SecretsFileSpec, path, problems)
    rules: list[SecretRule] = []
    for spec in unique(file.rules if file else [], where, set(), problems):
        at = f"{where}: rule {spec.id}"
        keywords = tuple(k.lower() for k in spec.keywords)
        # Verbose mode so long rules can be folded over lines; spaces must be written as \s.
        rx = compile_regex(spec.regex, at, problems, regex.VERBOSE, hostile=tuple(k + " " for k in keywords))
        if rx is None:
            continue
        if spec.group is not None and spec.group not in rx.groupindex:
            problems.add(at, f"group {spec.group!r} is not a named group of the regex")
            continue
        rule = SecretRule(spec.id, spec.kind, keywords, rx, spec.group, tuple(spec.examples),
                          tuple(spec.counter_examples))
        # the rule's group (or whole match) must cover some text: an empty match redacts nothing
        check_examples(rx, keywords, rule.examples, rule.counter_examples, at, problems,
                       lambda found: any(m.end(spec.group or 0) > m.start(spec.group or 0) for m in found))
        rules.append(rule)
    return rules


@lru_cache(maxsize=8)
def _cached_scanner(patterns_dir: str) -> SecretScanner:
    problems = Problems()
    rules = _load(Path(patterns_dir) / "secrets.yaml", problems)
    problems.raise_if_any()
    automaton = keyword_automaton(rule.keywords for rule in rules)
    scanner = SecretScanner(tuple(rules), automaton)
    # A redacted example must not be matched again: otherwise redaction would not be idempotent.
    for rule in rules:
        for text in rule.examples:
            once = scanner.redact(text)
            if once.count == 0 or scanner.redact(once.text).count:
                problems.add(f"{patterns_dir}/secrets.yaml: rule {rule.id}",
                             f"example {text!r} is not redacted exactly once")
    problems.raise_if_any()
    logger.debug("secret scanner loaded from %s: %d rules", patterns_dir, len(rules))
    return scanner
