"""Checking an LLM reply against its source text before any of it becomes a fact.

A small local model hallucinates, restates questions and can be talked into writing instructions into
memory. Every item of a reply is therefore checked on its own; a bad item is rejected with a reason (the
counts travel back to the caller), the good ones become :class:`Fact` / :class:`Entity` /
:class:`Relationship` values with ``method="llm"`` and an explanation pointing at the source text.

Grounding is lexical and deliberately simple: entity names must occur in the source (case-insensitive),
every content word of a fact (3+ letters, not a framing or function word such as "prefers" or "the"; compared
after light stemming, or through a related everyday word: "mother" by "mom", or a narrower one: "pet" by "dog")
or CJK bigram must occur in the source, and its numbers and names must too. The source clause that supports
the fact must agree with it on negation ("User owns a car" is not "I don't own a car") and on whom it is about
("User is vegan" is not "my sister is vegan"), and a liking must not turn into a dislike or back. Each such
rejection names what was unsupported (``explain`` of :func:`validate_items`). The floor (words, a content word
and a clause, not characters), the word lists and the cue words each category needs live in
``data/fact_checks.yaml``.

A sentence embedding (MiniLM) was measured as a second judge of paraphrases and left out: it rates a swapped
object as close as a faithful paraphrase ("bank" / "bakery" 0.36, "baker" / "bakery" 0.73, "Japanese" /
"Korean" 0.66), and fact-to-sentence similarity told true from invented facts at an AUC of 0.64-0.71 on
bench/eval_validate.py's two case sets.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from functools import lru_cache
from importlib import resources
from dataclasses import dataclass, field
from typing import Any

import regex

from ..rules.gatekeeper import SOCIAL_KINDS, Gatekeeper
from ..rules.load import default_rules
from ..rules.rulefile import Problems, safe_search
from ..rules.schema import CuesSpec, FactChecksSpec, NegationSpec, read_data
from ..rules.temporal import find_expressions, resolve
from ..settings import Settings
from ..types import CATEGORIES, ENTITY_TYPES, Entity, Explanation, Fact, Relationship, Span, normalize_content

__all__ = [
    "DEFAULT_CONFIDENCE",
    "MAX_CONTENT_CHARS",
    "MAX_ITEMS",
    "REJECTION_REASONS",
    "normalise_label",
    "validate_items",
]

logger = logging.getLogger("factforge.validate")

MAX_CONTENT_CHARS = 300
MAX_ENTITY_CHARS = 100
MAX_LABEL_CHARS = 40
DEFAULT_CONFIDENCE = 0.7
# A reply with more items than this is a runaway generation; the rest is cut, not processed.
MAX_ITEMS = 50

REJECTION_REASONS: tuple[str, ...] = (
    "malformed",            # not an object, or a required field missing / of the wrong type
    "empty",                # blank content or name
    "too_long",             # content over MAX_CONTENT_CHARS, name over MAX_ENTITY_CHARS
    "too_short",            # under the floor of data/fact_checks.yaml (CJK characters; else words, content, clause)
    "instruction_injection",  # content reads like a prompt injection
    "question",             # content is a restated question, not a fact
    "ungrounded_entity",    # an entity the fact or the entity list names does not occur in the source
    "ungrounded",           # a content word, number, name or liking of the fact that the source does not say
    "negation",             # the source negates what the fact states, or the other way round
    "other_subject",        # the source says it of someone else ("my sister is vegan" -> "User is vegan")
    "trivial",              # about the conversation, not the world ("User asked about the weather")
    "category_mismatch",    # one word, or lacks its category's cue (a "temporal" fact with no time in it)
    "low_confidence",       # below settings.medium_confidence
    "duplicate",            # same content / name / edge twice in one reply
    "stoplisted",           # an entity that is only social talk ("thanks", "good morning")
    "unknown_entity",       # a relationship end that is not an accepted entity of this reply
    "bad_label",            # a relationship label with no usable characters
    "self_relationship",    # a relationship from an entity to itself
    "too_many",             # items beyond MAX_ITEMS
)

_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{N}'’_-]*")
_LATIN_WORD = regex.compile(r"\p{Latin}{3,}")
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+")
_CJK_CHAR = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
# Suffixes stripped by the light stemmer, longest first: "coding"/"codes"/"code" all become "cod".
_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "ied", "ies", "ed", "er", "es", "ly", "s", "e")
# A sentence or line of the source; the best-matching one becomes a fact's span.
_SENTENCE = regex.compile(r"[^\n.!?。！？]+[.!?。！？]*")
_LABEL_OK = regex.compile(r"[a-z][a-z0-9_]*")



@lru_cache(maxsize=1)
def _trivial_rx() -> Any:
    """Facts about the conversation rather than the world ("User asked about the weather"), from a data file."""
    import regex

    lines = resources.files("factforge.models").joinpath("prompts/trivial_facts.txt").read_text(encoding="utf-8")
    parts = [ln.strip() for ln in lines.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return regex.compile("|".join(f"(?:{p})" for p in parts) or "(?!)", regex.IGNORECASE)


@lru_cache(maxsize=1)
def _base_stopwords() -> frozenset[str]:
    text = resources.files("factforge.models").joinpath("prompts/grounding_stopwords.txt").read_text(encoding="utf-8")
    return frozenset(
        line.strip().lower() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    )


@dataclass(frozen=True, slots=True)
class _FactChecks:
    """data/fact_checks.yaml, validated: minimum lengths and each category's cue regexes."""

    cjk_chars: int
    min_words: int
    content_words: int
    clause_words: frozenset[str]
    fragment_openers: frozenset[str]
    cues: Mapping[str, tuple[frozenset[str], tuple[Any, ...]]]
    number_rx: Any = None  # digits or a number word of ``numbers``
    numbers: Mapping[str, int] = field(default_factory=dict)
    positive: Any = None  # compiled regex of one polarity side, or None
    negative: Any = None
    related: Mapping[str, frozenset[str]] = field(default_factory=dict)  # stem -> stems that ground it
    min_share: float = 1.0  # of a fact's content words the source must support
    cjk_min_share: float = 0.5  # of its CJK bigrams (a source writes other words between them)
    exempt: frozenset[str] = frozenset()  # light, liking and negation words: not content words
    praise: Any = None  # regex: what grounds a liking beside the positive words
    negation: Any = None  # regex: an explicit or implied negation
    clause: Any = None  # regex: where a clause of the source ends
    others: frozenset[str] = frozenset()  # someone other than the speaker ("sister", "she")
    contrast: Any = None  # regex: "over", "rather than" - what follows is liked less
    phrases: Mapping[str, Any] = field(default_factory=dict)  # stem -> regex of the phrases that ground it
    light_phrases: Any = None  # regex: light phrases ("years old"), left out of a fact's content words


def _cues(category: str, spec: CuesSpec, problems: Problems) -> tuple[frozenset[str], tuple[Any, ...]]:
    """(stems of the single cue words, regexes of the phrases, CJK words and patterns) of one category."""
    words = [w.strip() for w in spec.words]
    # Single Latin words are compared by stem (see _category_fits); phrases and CJK words by regex.
    stems = frozenset(_stem(w.casefold()) for w in words if regex.fullmatch(r"\p{Latin}+", w))
    phrases = [w for w in words if not regex.fullmatch(r"\p{Latin}+", w)]
    out = []
    latin = [r"\s+".join(regex.escape(p) for p in w.split()) for w in phrases if not _CJK_CHAR.search(w)]
    cjk = [regex.escape(w) for w in phrases if _CJK_CHAR.search(w)]
    if latin:
        out.append(r"(?<![\p{L}\p{N}])(?:" + "|".join(latin) + r")(?![\p{L}\p{N}])")
    if cjk:  # no word boundaries in CJK text
        out.append("(?:" + "|".join(cjk) + ")")
    out += spec.patterns
    compiled = []
    for rx in out:
        try:
            compiled.append(regex.compile(rx, regex.IGNORECASE))
        except regex.error as exc:
            problems.add(f"categories.{category}", f"bad pattern {rx!r}: {exc}")
    return stems, tuple(compiled)


@lru_cache(maxsize=1)
def _fact_checks() -> _FactChecks:
    spec = read_data(FactChecksSpec, "fact_checks.yaml")
    problems = Problems()
    cues = {c: _cues(c, cue, problems) for c, cue in spec.categories.items()}
    problems.raise_if_any("invalid data file fact_checks.yaml")
    grounding = spec.grounding
    related: dict[str, set[str]] = {}
    phrases: dict[str, list[str]] = {}
    for group in grounding.related:
        stems = {_stem(w.casefold()) for w in group if " " not in w.strip()}
        several = [w for w in group if " " in w.strip()]  # "every day" grounds "daily"
        for stem in stems:
            related.setdefault(stem, set()).update(stems)
            phrases.setdefault(stem, []).extend(several)
    synonyms = {k: frozenset(v) for k, v in related.items()}
    for word, narrower in grounding.broader.items():  # one way: "pet" is grounded by "dog", not back
        key = _stem(word.casefold())
        stems = {_stem(w.casefold()) for w in narrower}
        for same in synonyms.get(key, {key}):  # "children" as well as "child"
            related.setdefault(same, {same}).update(stems)
    numbers = {k.casefold(): v for k, v in spec.grounding.numbers.items()}
    words = "|".join(r"\s+".join(regex.escape(p) for p in w.split()) for w in sorted(numbers, key=len, reverse=True))
    number_rx = regex.compile(rf"(?<![\p{{L}}\p{{N}}.,])\d+(?:[.,]\d+)?(?![\p{{N}}])"
                              + (rf"|(?<![\p{{L}}])(?:{words})(?![\p{{L}}])" if words else ""), regex.IGNORECASE)
    polarity, negation = grounding.polarity, grounding.negation
    positive, negative = (_polarity(side) for side in (polarity.positive, polarity.negative))
    negated = negation.words + negation.implied if negation else []
    single = [w for w in [*polarity.positive, *polarity.negative, *negated] if regex.fullmatch(r"\p{Latin}+", w)]
    min_content = spec.min_content
    return _FactChecks(min_content.cjk_chars, min_content.min_words, min_content.content_words,
                       frozenset(w.casefold() for w in min_content.clause_words),
                       frozenset(w.casefold() for w in min_content.fragment_openers), cues, number_rx,
                       numbers, positive, negative, {k: frozenset(v) for k, v in related.items()},
                       grounding.min_share, grounding.cjk_min_share,
                       frozenset(w.casefold() for w in [*grounding.light, *single]),
                       _polarity([*polarity.positive, *polarity.praise]), _polarity(negated), _clause_rx(negation),
                       frozenset(w.casefold() for w in grounding.others),
                       _polarity(polarity.contrast) if polarity.contrast else None,
                       {k: _polarity(v) for k, v in phrases.items() if v},
                       _polarity([w for w in grounding.light if " " in w.strip()]))


def _clause_rx(negation: NegationSpec | None) -> Any:
    """Where a clause ends: punctuation, a break word, or a break word that needs a new subject after it
    ("so I'm careful" ends a clause, "not so sure" does not)."""
    parts = [r"[,;:.!?()\n\u2014]+|\s-\s"]
    if negation is not None and negation.clause_breaks:
        parts.append(_polarity(negation.clause_breaks).pattern)
    if negation is not None and negation.subject_breaks and negation.subjects:
        subjects = _polarity(negation.subjects).pattern
        parts.append(rf"(?:{_polarity(negation.subject_breaks).pattern})(?=\s+(?:{subjects}))")
    return regex.compile("|".join(parts), regex.IGNORECASE)


def _polarity(words: list[str]) -> Any:
    """Words as one regex of whole words; a word written "n't" matches the end of "doesn't" / "can’t"."""
    whole = sorted((w for w in words if not w.startswith("n't")), key=len, reverse=True)  # "no longer" before "no"
    alternation = "|".join(r"\s+".join(regex.escape(p).replace("'", "['’]") for p in w.split()) for w in whole)
    parts = [rf"(?<![\p{{L}}'’])(?:{alternation})(?![\p{{L}}'’])"] if whole else []
    if len(whole) < len(words):
        parts.append(r"(?<=\p{L})n['’]t(?![\p{L}])")
    return regex.compile("|".join(parts) or "(?!)", regex.IGNORECASE)


@lru_cache(maxsize=65536)  # the same few thousand words come back in every reply
def _stem(word: str) -> str:
    """A light English stem: one suffix off (keeping 3+ letters), "ies" -> "y", a doubled consonant halved."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not (suffix == "s" and word.endswith("ss")):
            stem = word[: -len(suffix)]
            if suffix in ("ied", "ies"):
                return stem + "y"
            if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                stem = stem[:-1]  # running -> run, stopped -> stop
            return stem
    return word


def _numbers(text: str, checks: _FactChecks) -> set[str]:
    """The numbers ``text`` names, as digit strings ("three" and "3" are both "3")."""
    if checks.number_rx is None:
        return set()
    out = set()
    for m in checks.number_rx.finditer(text):
        word = " ".join(m.group().casefold().split())
        out.add(str(checks.numbers[word]) if word in checks.numbers else word.replace(",", ""))
    return out


_NAME = regex.compile(r"(?<![\p{L}\p{N}'’])\p{Lu}[\p{L}\p{N}-]*")
_POSSESSIVE = regex.compile(r"['’]s$")


def _specifics_unsupported(content: str, source: _Source, checks: _FactChecks, subjects: set[str]) -> str | None:
    """What of the fact's numbers, names and liking the source does not say (None: all of it is said)."""
    missing = sorted(_numbers(content, checks) - source.numbers(checks))
    if missing:
        return "number " + ", ".join(missing)
    for m in _NAME.finditer(content):
        if m.start() == 0:
            continue  # the first word is capitalised anyway
        name = _POSSESSIVE.sub("", m.group()).casefold()
        if name in subjects or name == "i":
            continue
        if name not in source.words and _stem(name) not in source.stems:
            return f"name {m.group()}"
    if checks.negative is not None and checks.positive is not None:
        fact_negative = checks.negative.search(content) is not None
        source_negative = checks.negative.search(source.text) is not None
        if fact_negative and not source_negative:
            return "a dislike"
        if not fact_negative and checks.positive.search(content):
            # A liking needs a liking or praise in the source, outside its dislikes ("can't stand" is no liking).
            liked = checks.praise or checks.positive
            if liked.search(checks.negative.sub(" ", source.text)) is None:
                return "a liking"
    return None


def _negated(text: str, checks: _FactChecks) -> bool:
    """Whether ``text`` negates (a dislike does not count: "can't stand" is a liking, checked as one)."""
    if checks.negative is not None:
        text = checks.negative.sub(" ", text)
    return checks.negation.search(text) is not None


def _unframed(content: str, checks: _FactChecks) -> str:
    """``content`` without its liking and negation phrases ("no longer", "can't stand") and its numbers, which are
    checked as polarity, negation and numbers ("twenty" by "20"), not as words the source must contain."""
    for rx in (checks.negative, checks.positive, checks.negation, checks.light_phrases, checks.number_rx):
        if rx is not None:
            content = rx.sub(" ", content)
    return content


def _liked_less(content: str, terms: list[str], source: _Source, checks: _FactChecks) -> str | None:
    """A liking of what the source likes less ("User prefers coffee" from "I prefer tea over coffee"): the term,
    or None. The fact's own "over ..." part is left out, so "User prefers tea over coffee" is no such liking."""
    if checks.contrast is None or checks.positive is None or checks.positive.search(content) is None:
        return None
    own = checks.contrast.search(content)
    main = _Source(content[:own.start()] if own else content, frozenset())
    liked = [t for t in terms if main.has_term(t)]
    if not liked:
        return None
    less = None
    for clause in source.clauses(checks):
        at = checks.contrast.search(clause.text)
        if at is None or checks.positive.search(clause.text[:at.start()]) is None:
            continue
        head = _Source(clause.text[:at.start()], frozenset())
        if any(head.has_term(t, checks.related) for t in liked):
            return None
        tail = _Source(clause.text[at.end():], frozenset())
        less = less or next((t for t in liked if tail.has_term(t, checks.related)), None)
    return less


def _negation_or_other(content: str, terms: list[str], source: _Source, checks: _FactChecks,
                       subjects: set[str]) -> tuple[str, str] | None:
    """(reason, what) when the source clause that supports the fact says it of someone else or negates it
    where the fact does not (or the other way round); None when one such clause agrees with the fact."""
    clauses = source.clauses(checks)
    if not terms or len(clauses) == 0:
        return None
    scores = [sum(1 for t in terms if clause.has_term(t, checks.related, checks.phrases)) for clause in clauses]
    top = max(scores)
    if top == 0:
        return None
    best = [c for c, n in zip(clauses, scores) if n == top]
    about_speaker = any(content.casefold().startswith(s + " ") for s in subjects)
    fact_words = _Source(content, frozenset())
    problem: tuple[str, str] | None = None
    for clause in best:
        other = clause.other if about_speaker else None
        if other is not None and not fact_words.has_term(other, checks.related):
            problem = problem or ("other_subject", f"said of {other!r}: {clause.text!r}")
            continue
        if checks.negation is not None and _negated(content, checks) != _negated(clause.text, checks):
            problem = problem or ("negation", f"negation differs from {clause.text!r}")
            continue
        return None
    return problem


def _periods(text: str, said_at: datetime) -> list[tuple[datetime, datetime]]:
    out = []
    for span in find_expressions(text):
        start, end = resolve(span.text, said_at)
        if start is not None and end is not None:
            out.append((start, end))
    return out


def _other_subject(clause: str, checks: _FactChecks) -> str | None:
    """The word for someone other than the speaker that opens ``clause`` ("my sister is ...", "she ..."), unless
    the speaker joins it ("my partner and I") or appears after it ("my grandpa taught me"); else None."""
    words = [w.casefold() for w in _WORD.findall(clause)]
    for i, word in enumerate(words[:4]):
        if word in _FIRST_PERSON and word not in _DETERMINERS:
            return None  # the speaker opens the clause
        at = i + 1 if word in _DETERMINERS else i
        # "my sister", "my little sister", "our dog Max", "she"
        for j in range(at, min(at + 2, len(words))):
            other = _POSSESSIVE.sub("", words[j])
            if other in checks.others and (j > i or word not in _DETERMINERS):
                rest = words[j + 1:]
                if any(w in _FIRST_PERSON and w not in _DETERMINERS for w in rest):
                    return None
                return other
        if word in _DETERMINERS:
            return None
    return None


def _too_short(content: str, terms: list[str], checks: _FactChecks, subjects: set[str]) -> bool:
    """Under the floor of data/fact_checks.yaml: CJK by characters, anything else by words and clause.

    Words, not characters, because "User is a mom" is a whole fact and "a dog named Biscuit" is not: a fact
    needs a content word beyond its subject, and one that opens like a noun phrase ("a dog named ...") needs a
    clause (its subject named, or an auxiliary / copula). ``terms``: its content words in the source's terms
    (:meth:`_Source.content_terms`).
    """
    cjk = len(_CJK_CHAR.findall(content))
    if cjk:
        return cjk < checks.cjk_chars
    words = [_POSSESSIVE.sub("", w.casefold()) for w in _WORD.findall(content)]
    if len(words) < checks.min_words:
        return True
    names = {_POSSESSIVE.sub("", m.group()).casefold() for m in _NAME.finditer(content) if m.start() > 0}
    meaningful = {*terms, *(names - subjects - {"i"}),
                  *(w for w in words if any(ch.isdigit() for ch in w) or w in checks.numbers)}
    if len(meaningful) < checks.content_words:
        return True
    if words[0] not in checks.fragment_openers:
        return False
    return not any(w in subjects or w in checks.clause_words for w in words)


def _category_fits(content: str, category: str, checks: _FactChecks) -> bool:
    if not _CJK_CHAR.search(content) and len(_WORD.findall(content)) < checks.min_words:
        return False
    cues = checks.cues.get(category)
    if cues is None:
        return True
    stems, rxs = cues
    if any(_stem(w.casefold()) in stems for w in regex.findall(r"\p{Latin}+", content)):
        return True
    return any(safe_search(rx, content, f"fact_checks.{category}") is not None for rx in rxs)


def normalise_label(label: str) -> str | None:
    """A relationship label in snake_case (``[a-z][a-z0-9_]*``, at most 40 chars), or None if unusable."""
    snake = regex.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", label.strip())  # worksOn -> works_On
    snake = regex.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_")
    snake = regex.sub(r"^[0-9_]+", "", snake)
    snake = snake[:MAX_LABEL_CHARS].rstrip("_")
    return snake if snake and _LABEL_OK.fullmatch(snake) else None


def _confidence(value: Any) -> tuple[float, float]:
    """(as given, clamped to 0..1); a missing or non-numeric value counts as DEFAULT_CONFIDENCE."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raw = DEFAULT_CONFIDENCE
    else:
        try:
            raw = float(value)
        except ValueError:
            raw = DEFAULT_CONFIDENCE
    if raw != raw:  # NaN
        raw = DEFAULT_CONFIDENCE
    return raw, min(1.0, max(0.0, raw))


_FIRST_PERSON = frozenset({"i", "me", "my", "myself", "we", "us", "our", "i'm", "i've", "i'd", "i'll", "we're",
                           "we've", "i’m", "i’ve", "we’re"})
_DETERMINERS = frozenset({"my", "our", "his", "her", "their"})


class _Source:
    """The source text prepared once for all grounding checks of one reply."""

    def __init__(self, text: str, stopwords: frozenset[str], said_at: datetime | None = None) -> None:
        self.text = text
        self.said_at = said_at
        self._periods: list[tuple[datetime, datetime]] | None = None
        self.folded = text.casefold()
        # Latin runs too: "从MySQL迁移到PostgreSQL" is one word to _WORD.
        self.words = {w.casefold() for w in [*_WORD.findall(text), *_LATIN_WORD.findall(text)]}
        # Stems of every word and of every piece of a hyphenated/apostrophed one ("I've" -> "ve", "i").
        self.stems = {_stem(w.casefold()) for w in regex.findall(r"\p{L}+", text)}
        self.stopwords = stopwords
        self._numbers: set[str] | None = None
        self._clauses: list[_Source] | None = None
        self.other: str | None = None  # as a clause: the someone else it is about, if it opens with one

    def periods(self) -> list[tuple[datetime, datetime]]:
        """The periods the source's time expressions name, resolved against when it was said."""
        if self._periods is None:
            self._periods = [] if self.said_at is None else _periods(self.text, self.said_at)
        return self._periods

    def undated(self, content: str) -> str:
        """``content`` without the dates that write out a time the source names: the prompt has the model turn
        "yesterday" into "2025-01-08", whose numbers and month the source does not contain."""
        if self.said_at is None or not self.periods():
            return content
        for span in reversed(find_expressions(content)):
            period = resolve(span.text, self.said_at)
            if period[0] is None or period[1] is None:
                continue
            if any(start <= period[0] and period[1] <= end or period[0] <= start and end <= period[1]
                   for start, end in self.periods()):
                content = content[:span.start] + " " + content[span.end:]
        return content

    def clauses(self, checks: _FactChecks) -> list[_Source]:
        """The source cut at punctuation and clause breaks, each clause with whom it is about."""
        if self._clauses is None:
            self._clauses = []
            for part in checks.clause.split(self.text) if checks.clause is not None else [self.text]:
                if part and part.strip():
                    clause = _Source(part.strip(), self.stopwords)
                    clause.other = _other_subject(part, checks)
                    self._clauses.append(clause)
        return self._clauses

    def numbers(self, checks: _FactChecks) -> set[str]:
        if self._numbers is None:
            self._numbers = _numbers(self.text, checks)
        return self._numbers

    def find(self, name: str) -> Span | None:
        """Where ``name`` first occurs (case-insensitive, whitespace-tolerant), or None."""
        parts = name.split()
        if not parts:
            return None
        rx = regex.compile(r"\s+".join(regex.escape(p) for p in parts), regex.IGNORECASE)
        m = rx.search(self.text)
        return Span(m.start(), m.end(), m.group()) if m else None

    def content_terms(self, content: str) -> list[str]:
        """Latin content words (3+ letters, not stop words) and CJK bigrams of ``content``."""
        terms = [w for w in (x.casefold() for x in _LATIN_WORD.findall(content)) if w not in self.stopwords]
        for run in _CJK_RUN.findall(content):
            terms += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
        return terms

    def has_term(self, term: str, related: Mapping[str, frozenset[str]] | None = None,
                 phrases: Mapping[str, Any] | None = None) -> bool:
        if _CJK_RUN.fullmatch(term):
            return term in self.folded
        stem = _stem(term)
        if term in self.words or stem in self.stems:
            return True  # "codes" is grounded by "coding", "databases" by "database"
        if related and not related.get(stem, frozenset()).isdisjoint(self.stems):
            return True  # "mother" by "mom"
        if phrases and stem in phrases and phrases[stem].search(self.text):
            return True  # "daily" by "every day"
        # Long words also by a shared 5-letter beginning: "migration" by "migrating".
        prefix = term[:5] if len(term) >= 6 else None
        return prefix is not None and any(w.startswith(prefix) for w in self.words)

    def best_span(self, terms: Iterable[str]) -> Span | None:
        """The source sentence containing the most of ``terms``, or None if none contains any."""
        wanted = set(terms)
        best: tuple[int, Span] | None = None
        for m in _SENTENCE.finditer(self.text):
            sentence = m.group()
            stripped = sentence.strip()
            if not stripped:
                continue
            folded = sentence.casefold()
            score = sum(1 for t in wanted if t in folded)
            if score and (best is None or score > best[0]):
                start = m.start() + (len(sentence) - len(sentence.lstrip()))
                best = (score, Span(start, start + len(stripped), stripped))
        return best[1] if best else None


def _items(raw: Mapping[str, Any], key: str, rejections: Counter[str]) -> list[Any]:
    value = raw.get(key) or []
    if not isinstance(value, list):
        rejections["malformed"] += 1
        return []
    if len(value) > MAX_ITEMS:
        rejections["too_many"] += len(value) - MAX_ITEMS
        value = value[:MAX_ITEMS]
    return value


def _subject(content: str, settings: Settings) -> str | None:
    for subject in (settings.user_subject, settings.team_subject):
        if content == subject or content.startswith(subject + " ") or content.startswith(subject + "'"):
            return subject
    return None


def validate_items(
    raw: Mapping[str, Any],
    source_text: str,
    *,
    timestamp: datetime | None = None,
    settings: Settings,
    gatekeeper: Gatekeeper | None = None,
    explain: list[tuple[str, str, str]] | None = None,
) -> tuple[tuple[Fact, ...], tuple[Entity, ...], tuple[Relationship, ...], Counter[str]]:
    """Validate a parsed LLM reply against ``source_text``; returns (facts, entities, relationships, rejections).

    ``raw`` is the reply object (``facts`` / ``entities`` / ``relationships`` lists). Each rejected item adds
    one to its reason in ``rejections`` (see :data:`REJECTION_REASONS`). ``timestamp`` (when the source was
    said) becomes each fact's ``valid_from``. Spans are offsets into ``source_text``. ``explain``, if given,
    receives (content, reason, what) for each rejected fact: the unsupported words, number or name, the clause it
    contradicts.
    """
    keeper = gatekeeper or default_rules(settings.patterns_dir).gate
    subjects = {settings.user_subject.casefold(), settings.team_subject.casefold()}
    source = _Source(source_text, _base_stopwords() | subjects | _fact_checks().exempt, timestamp)
    rejections: Counter[str] = Counter()
    facts = _valid_facts(raw, source, keeper, settings, subjects, timestamp, rejections, explain)
    entities, by_name = _valid_entities(raw, source, keeper, subjects, rejections)
    relationships = _valid_relationships(raw, by_name, rejections)
    if rejections:
        logger.debug("LLM reply: %d item(s) rejected: %s", sum(rejections.values()), dict(rejections))
    return tuple(facts), tuple(entities), tuple(relationships), rejections


def _valid_facts(raw: Mapping[str, Any], source: _Source, keeper: Gatekeeper, settings: Settings, subjects: set[str],
                 timestamp: datetime | None, rejections: Counter[str],
                 explain: list[tuple[str, str, str]] | None) -> list[Fact]:
    """The reply's facts that pass :func:`_validate_fact`, each content once."""
    facts: list[Fact] = []
    seen_content: set[str] = set()
    for item in _items(raw, "facts", rejections):
        fact = _validate_fact(item, source, keeper, settings, subjects, timestamp, rejections, explain)
        if fact is None:
            continue
        key = normalize_content(fact.content)
        if key in seen_content:
            rejections["duplicate"] += 1
            continue
        seen_content.add(key)
        facts.append(fact)
    return facts


def _valid_entities(raw: Mapping[str, Any], source: _Source, keeper: Gatekeeper, subjects: set[str],
                    rejections: Counter[str]) -> tuple[list[Entity], dict[str, str]]:
    """The reply's entities found in the source (in its spelling), and casefolded name -> that spelling."""
    entities: list[Entity] = []
    by_name: dict[str, str] = {}  # casefolded name -> accepted spelling
    for item in _items(raw, "entities", rejections):
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            rejections["malformed"] += 1
            continue
        name = " ".join(item["name"].split())
        if name.casefold() in subjects:
            continue  # the prompt's own subject words are not entities; not worth counting
        reason = None
        span = None
        if not name:
            reason = "empty"
        elif len(name) > MAX_ENTITY_CHARS:
            reason = "too_long"
        elif (span := source.find(name)) is None:
            reason = "ungrounded_entity"
        elif keeper.judge(name).reason in SOCIAL_KINDS:
            reason = "stoplisted"
        elif name.casefold() in by_name:
            reason = "duplicate"
        if reason is not None:
            rejections[reason] += 1
            continue
        assert span is not None
        kind = str(item.get("type") or "").strip().lower()
        entities.append(Entity(span.text, kind if kind in ENTITY_TYPES else "concept", span, "llm"))
        by_name[name.casefold()] = span.text
    return entities, by_name


def _valid_relationships(raw: Mapping[str, Any], by_name: Mapping[str, str],
                         rejections: Counter[str]) -> list[Relationship]:
    """The reply's relationships between accepted entities, with a usable label, each once."""
    relationships: list[Relationship] = []
    seen_edges: set[tuple[str, str, str]] = set()
    for item in _items(raw, "relationships", rejections):
        if not isinstance(item, Mapping) or not all(
            isinstance(item.get(k), str) for k in ("source", "target", "label")
        ):
            rejections["malformed"] += 1
            continue
        src = by_name.get(" ".join(item["source"].split()).casefold())
        dst = by_name.get(" ".join(item["target"].split()).casefold())
        label = normalise_label(item["label"])
        reason = None
        if src is None or dst is None:
            reason = "unknown_entity"
        elif label is None:
            reason = "bad_label"
        elif src == dst:
            reason = "self_relationship"
        elif (src, dst, label) in seen_edges:
            reason = "duplicate"
        if reason is not None:
            rejections[reason] += 1
            continue
        assert src is not None and dst is not None and label is not None
        seen_edges.add((src, dst, label))
        relationships.append(Relationship(src, dst, label))
    return relationships


def _fact_rejection(
    content: str, category: str, confidence: float, names: list[str], source: _Source, keeper: Gatekeeper,
    settings: Settings, subjects: set[str],
) -> tuple[str | None, str, list[Span | None], list[str]]:
    """Why a fact is rejected (None: it is kept) and what exactly (the unsupported words, the clause it
    contradicts), checked cheapest first, with the spans of its entity names and its words found in the source
    (what the kept fact's explanation points at)."""
    if not content:
        return "empty", "no content", [], []
    if len(content) > MAX_CONTENT_CHARS:
        return "too_long", f"{len(content)} characters", [], []
    checks = _fact_checks()
    said = source.undated(content)
    terms = source.content_terms(_unframed(said, checks))
    if _too_short(content, terms, checks, subjects):
        return "too_short", "under the floor of data/fact_checks.yaml", [], []
    if keeper.is_injection(content) is not None:
        return "instruction_injection", "reads like an instruction to the model", [], []
    if content.endswith("?") or keeper.judge(content).reason == "question":
        return "question", "a question", [], []
    spans = [source.find(n) for n in names]
    if any(s is None for s in spans):
        return "ungrounded_entity", ", ".join(n for n, s in zip(names, spans) if s is None), spans, []
    grounded = [t for t in terms if source.has_term(t, checks.related, checks.phrases)]
    # Every significant word (CJK bigram) must come from the source: a model that invents swaps one word of
    # a true fact ("works at a bank" for "at a bakery"), which half of the words (seed 002 said 30%) let through;
    # and what the words cannot tell apart - a number, a name, a liking turned around, a negation, someone
    # else - must agree with it.
    cjk = [t for t in terms if _CJK_CHAR.match(t)]
    cjk_grounded = [t for t in grounded if _CJK_CHAR.match(t)]
    # (No content words left - only numbers, names and light words: those are checked below.)
    if terms and not grounded or len(grounded) - len(cjk_grounded) < checks.min_share * (len(terms) - len(cjk)) or \
            len(cjk_grounded) < checks.cjk_min_share * len(cjk):
        unsupported = [t for t in terms if t not in grounded]
        return "ungrounded", "unsupported: " + ", ".join(unsupported or terms), spans, grounded
    specific = _specifics_unsupported(said, source, checks, subjects)
    if specific is not None:
        return "ungrounded", "unsupported: " + specific, spans, grounded
    less = _liked_less(content, grounded, source, checks)
    if less is not None:
        return "ungrounded", f"unsupported: a liking of {less!r}, which the source likes less", spans, grounded
    contradiction = _negation_or_other(content, grounded, source, checks, subjects)
    if contradiction is not None:
        return contradiction[0], contradiction[1], spans, grounded
    if _trivial_rx().search(content):
        return "trivial", "about the conversation", spans, grounded
    if not _category_fits(content, category, checks):
        return "category_mismatch", f"no cue of {category}", spans, grounded
    if confidence < settings.medium_confidence:
        return "low_confidence", f"{confidence} < {settings.medium_confidence}", spans, grounded
    return None, "", spans, grounded


def _validate_fact(
    item: Any,
    source: _Source,
    keeper: Gatekeeper,
    settings: Settings,
    subjects: set[str],
    timestamp: datetime | None,
    rejections: Counter[str],
    explain: list[tuple[str, str, str]] | None = None,
) -> Fact | None:
    """One fact item, or None after counting why it was rejected (and noting what, in ``explain``)."""
    if not isinstance(item, Mapping) or not isinstance(item.get("content"), str):
        rejections["malformed"] += 1
        return None
    content = " ".join(item["content"].split())
    names_raw = item.get("entities") or []
    if not isinstance(names_raw, list):
        names_raw = []
    names = [" ".join(n.split()) for n in names_raw if isinstance(n, str)]
    names = [n for n in names if n and n.casefold() not in subjects]
    original, confidence = _confidence(item.get("confidence"))
    category = str(item.get("category") or "").strip().lower()
    if category not in CATEGORIES:
        category = "other"
    reason, detail, spans, grounded = _fact_rejection(content, category, confidence, names, source, keeper,
                                                      settings, subjects)
    if reason is not None:
        rejections[reason] += 1
        logger.debug("LLM fact rejected, %s (%s): %r", reason, detail, content)
        if explain is not None:
            explain.append((content, reason, detail))
        return None
    entity_names: list[str] = []
    for span in spans:
        assert span is not None
        if span.text not in entity_names:
            entity_names.append(span.text)
    return Fact(
        content=content,
        category=category,  # type: ignore[arg-type]  # checked against CATEGORIES above
        confidence=confidence,
        method="llm",
        explanation=Explanation(
            stage="llm",
            rule_id=None,
            original_confidence=original,
            final_confidence=confidence,
            span=source.best_span(grounded + [n.casefold() for n in entity_names]),
            note="validated against source",
        ),
        entities=tuple(entity_names),
        subject=_subject(content, settings),
        # Only events carry the message time as their start; a preference is not "valid from" when it was said.
        valid_from=timestamp if category == "temporal" else None,
    )
