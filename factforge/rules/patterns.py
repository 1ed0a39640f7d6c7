"""The YAML pattern library: regex rules that turn a sentence into facts without an LLM.

Every ``patterns/*.yaml`` file with ``kind: facts`` at top level holds rules (other files in the folder
belong to other modules and are ignored here). A rule is a regex with named groups, a template over those
groups, a category, a confidence and its own examples and counter-examples; see ``patterns/README`` in the
comments of ``preference.yaml`` for the full format. Loading validates every file and runs every example;
all problems are raised together as one :class:`~factforge.errors.PatternError`. Files verified before (the
bundled ones, by digest: ``rulefile.VERIFIED_RULES``) are trusted instead, and each regex is compiled on first
use.

Matching is two-stage for speed: one Aho-Corasick pass over the lower-cased text finds the rules whose
literal ``keywords`` occur; of those, in ASCII text, only the rules whose text holds the words their regex cannot
match without (:func:`literals.required`, read from the regex itself) go on, and each runs its regex (with a timeout)
only if the regex's superset (:class:`literals.Starts`: its look-behinds dropped, its classes widened) matches, and
only where it does (:meth:`literals.Starts.finditer`). A match is then dropped when its sentence is a question or when a
file's ``blockers`` regex ("if", "whether", "should we" ...) occurs in the sentence before it - hypotheticals are
not facts.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from itertools import takewhile
from pathlib import Path
from typing import Any, cast

import regex

from .literals import Branches, Starts, clause_checks, meets, required
from .rulefile import (Problems, compile_regex, compiled_once, default_patterns_dir, grammar_words, keyword_automaton,
                       own_time, read_yaml, remember, safe_finditer, straight_quotes, verified_folder, yaml_files)
from .ner import FILE_NAME as ENTITIES_FILE, EntityRecognizer
from .schema import FactExampleSpec, FactRuleSpec, FactsFileSpec, check, unique
from ..settings import Settings
from .temporal import Anchor, find_anchor, resolve
from ..types import Explanation, Fact, Span

__all__ = ["Example", "PatternLibrary", "Rule", "EXAMPLE_REFERENCE"]

logger = logging.getLogger("factforge.patterns")

# Examples are checked against this fixed "now" so temporal examples are reproducible.
EXAMPLE_REFERENCE = datetime(2024, 6, 15, 12, 0, tzinfo=timezone.utc)
CONFIDENCE_CAP = 0.99
# A rule's fact longer than this is a run-on, not a fact (and the content checks below stay linear-time):
# the same bound the LLM's facts meet (validate.MAX_CONTENT_CHARS).
MAX_CONTENT_CHARS = 300
SPECIAL_PLACEHOLDERS = frozenset({"subject"})

# {group} or {group|filter}, a filter acting on the value's first word: "lc" lower-cases its first letter
# (a captured sentence start like "Keep ..."), "s" puts a verb in the third person ("play" -> "plays"),
# "base" turns a gerund into the bare verb ("apologizing" -> "apologize"); "past" puts a gerund or a bare verb in the
# past tense ("losing" -> "lost", "opening" -> "opened"); "drop" renders nothing (its group only decides whether an
# optional [...] section is kept).
_PLACEHOLDER = regex.compile(r"\{(\w+)(?:\|(lc|s|base|past|drop))?\}")
_OPTIONAL = regex.compile(r"\[([^\[\]]*)\]")
_DEFINE_REF = regex.compile(r"\{\{(\w+)\}\}")
# Sentence ends: Latin terminators before whitespace/end (so "Node.js" and "v4.2" stay whole), CJK ones, newlines.
_SENTENCE_END = regex.compile(r"[.!?…](?=\s|$)|[。！？；\n]")
_QUESTION_MARKS = frozenset("?？")
_TRIM_CHARS = " \t\n.,;:!?。，！？；：、…\"'“”‘’()（）"
_TITLE_QUOTES = "\"'"
_TRIM_NO_QUOTES = _TRIM_CHARS.replace('"', "").replace("'", "")
_GRAMMAR = grammar_words()
_ARTICLE = regex.compile(rf"^(?:{_GRAMMAR['articles']})\s+", regex.IGNORECASE)
_SPACES = regex.compile(r"\s+")
# The ASCII characters other than the space that _SPACES counts as whitespace, found by asking it: in ASCII text
# without them and without two spaces in a row, _SPACES has nothing to change.
_OTHER_ASCII_SPACE = re.compile("[" + re.escape("".join(
    ch for ch in map(chr, range(128)) if ch != " " and _SPACES.fullmatch(ch))) + "]")
_CJK_GAP = regex.compile(r"(?<=[\p{Han}])\s+(?=[\p{Han}])")
_FIRST_WORD = regex.compile(r"^([\p{L}]+)(.*)$", regex.DOTALL)
# A list item that takes no carried-over "to" ("I like to read, the guitar, and ..."): it starts a noun phrase.
# A gerund item takes none either ("I like to go hiking, camping, and fishing": "User likes fishing").
_NO_CARRY = regex.compile(rf"^(?:(?:{_GRAMMAR['no_carry']})\s|\p{{L}}{{2,}}ing(?:\s|$))", regex.IGNORECASE)
_TO = regex.compile(r"^to\s", regex.IGNORECASE)
# After a first item with an object of its own ("to read historical fiction"), an item that opens on no verb
# (data/grammar_words.yaml item_verbs) and is no gerund is one more object of that verb, and takes the verb.
_OWN_OBJECT = regex.compile(r"^to\s+\S+\s+\S", regex.IGNORECASE)
_ITEM_VERB = regex.compile(rf"^(?:{_GRAMMAR['item_verbs']})(?![\p{{L}}'-])", regex.IGNORECASE)
# That first item's verb with the words tying it to its object (item_links: "to travel to", "to spend time with").
_ITEM_PREFIX = regex.compile(rf"^to\s+[^\s,]+(?:\s+(?:{_GRAMMAR['item_links']})(?=\s)){{0,2}}", regex.IGNORECASE)
_GERUND = regex.compile(r"^\p{L}{2,}ing(?:\s|$)", regex.IGNORECASE)
_NAME_FIRST = regex.compile(r"^\p{Lu}")
# A preposition left dangling where a time expression was cut out of a slot ("moved to Berlin back in").
_DANGLING = regex.compile(rf"(?:\s+(?:{_GRAMMAR['dangling']}))+\s*$", regex.IGNORECASE)
# A time phrase that takes no preposition of its own (data/grammar_words.yaml bare_times, or one ending in "ago"):
# only an approximator before it dangles; a preposition belongs to what precedes it.
_BARE_TIME = regex.compile(rf"(?:{_GRAMMAR['bare_times']}|[^.!?\n]*\sago)(?![\p{{L}}])", regex.IGNORECASE)
_APPROXIMATE = regex.compile(rf"(?:\s+(?:{_GRAMMAR['approximators']}))+\s*$", regex.IGNORECASE)
# The name of the define that holds the regex for one more list item (see ``list_group`` in preference.yaml).
LIST_DEFINE = "list_next"
# Defines with a library-wide meaning (see preference.yaml): where a new clause starts, so a blocker word
# in another clause does not block; a slot value that only points back at the conversation ("try that
# too"); rendered content that is not grammatical English ("User dont know").
CLAUSE_DEFINE = "clause_break"
# A future or hypothetical main clause and a when/once/until ... after it: what its subordinate clause says is no
# present fact ("I'll try surfing when I'm in Hawaii"); a match after it in the same clause is dropped, as after a
# blocker.
FUTURE_SUBORDINATE_DEFINE = "future_subordinate"
DANGLING_DEFINE = "dangling_ref"
DANGLING_INSIDE_DEFINE = "dangling_inside"
BROKEN_DEFINE = "broken_content"
BROKEN_END_DEFINE = "broken_ending"
# These two only match at the end of a value: compiled reversed and tried once, from the end (``.match``).
END_DEFINES = frozenset({DANGLING_DEFINE, BROKEN_END_DEFINE})
# And these two only at its start: tried once (``.match``). A start-anchored branch inside a searched regex costs a
# try at every position and keeps the regex module from scanning ahead for the other branches.
DANGLING_START_DEFINE = "dangling_start"
BROKEN_START_DEFINE = "broken_start"
# "We" is the team only in a work context: in these categories a fact whose subject is "we"/"our" needs the
# ``team_context`` define to match in its sentence ("We love climbing" is a family, not the team).
TEAM_DEFINE = "team_context"
# A capitalised name in the sentence is team context too when the entity gazetteer knows it as a technology.
TEAM_NAME_DEFINE = "team_name"
TEAM_CONTEXT_CATEGORIES = frozenset({"preference", "identity", "temporal", "decision"})


@dataclass(frozen=True, slots=True)
class Example:
    """A text a rule must turn into the fact ``fact`` (content), optionally checking more fields."""

    text: str
    fact: str
    entities: tuple[str, ...] | None = None
    slots: Mapping[str, str] | None = None
    confidence: float | None = None
    valid_from: str | None = None
    valid_to: str | None = None


@dataclass(frozen=True, slots=True)
class _Piece:
    literal: str = ""
    name: str | None = None
    optional: tuple[_Piece, ...] | None = None
    transform: str | None = None


@dataclass(frozen=True, slots=True)
class Rule:
    """One validated pattern rule; frozen - nothing changes it after loading."""

    id: str
    category: str
    language: str
    confidence: float
    template: str
    entity_groups: tuple[str, ...]
    keywords: tuple[str, ...]
    examples: tuple[Example, ...]
    counter_examples: tuple[str, ...]
    subject: str
    relation: str
    # The regex with its defines expanded, and its flags: compiled on first use (``regex``) when the library was
    # loaded from files verified before (see ``rulefile.VERIFIED_RULES``), at load otherwise.
    pattern: str = field(repr=False, compare=False)
    flags: int = field(default=0, repr=False, compare=False)
    boost_words: tuple[str, ...] = ()
    boost: float = 0.0
    time_group: str | None = None
    time_mode: str = "since"
    blockers: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    allow_questions: bool = False
    list_group: str | None = None
    verbatim_groups: tuple[str, ...] = ()
    future: bool = False
    source: str = ""
    pieces: tuple[_Piece, ...] = field(default=(), repr=False, compare=False)
    _compiled: list[regex.Pattern[str]] = field(default_factory=list, repr=False, compare=False)
    _requires: list[tuple[Any, ...]] = field(default_factory=list, repr=False, compare=False)
    _starts: list[Starts] = field(default_factory=list, repr=False, compare=False)

    @property
    def regex(self) -> regex.Pattern[str]:
        """The compiled regex (compiled once, on first use)."""
        if self._compiled:  # asked per match: no name for an error message formatted once it compiled
            return self._compiled[0]
        return compiled_once(self._compiled, self.pattern, self.flags, f"{self.source}: rule {self.id}")

    @property
    def requires(self) -> tuple[Any, ...]:
        """The words the regex cannot match without (:func:`literals.required`), as checks of a lower-cased ASCII
        text (:func:`literals.clause_checks`); worked out once, on first use."""
        if not self._requires:
            keywords = [k.lower() for k in self.keywords]
            # A clause every keyword holds a word of is met wherever the rule runs at all.
            self._requires.append(clause_checks(
                c for c in required(self.pattern, bool(self.flags & regex.VERBOSE))
                if not all(any(w in k for w in c) for k in keywords)))
        return self._requires[0]

    @property
    def starts(self) -> Starts:
        """Where the regex can first start a match in an ASCII text (:class:`literals.Starts`); worked out once, on
        first use."""
        if not self._starts:
            self._starts.append(Starts(self.pattern, self.flags))
        return self._starts[0]

    def may_match(self, low: str) -> bool:
        """Whether the lower-cased ASCII text ``low`` holds a word of each clause of :attr:`requires`."""
        return meets(self.requires, low)


@dataclass(frozen=True, slots=True)
class _Hit:
    fact: Fact
    order: tuple[int, int]
    own_time: bool = False  # dated by the rule's own time slot, not by a word elsewhere in the sentence


class _Sentences:
    """Sentence boundaries of one text, computed on first use."""

    __slots__ = ("_anchors", "_ends", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._ends: list[int] | None = None
        self._anchors: dict[int, Anchor | None] = {}

    def anchor(self, start: int, end: int, reference: datetime, future: bool = False) -> Anchor | None:
        """The time expression that dates facts stated in the sentence ``start:end`` (once per sentence)."""
        key = -start - 1 if future else start
        if key not in self._anchors:
            self._anchors[key] = find_anchor(self._text, reference, start, end, future=future)
        return self._anchors[key]

    def bounds(self, pos: int) -> tuple[int, int]:
        """(start, end) of the sentence holding ``pos``; ``end`` includes its terminator."""
        if self._ends is None:
            self._ends = [m.end() for m in _SENTENCE_END.finditer(self._text)]
        i = bisect.bisect_right(self._ends, pos)
        start = self._ends[i - 1] if i > 0 else 0
        end = self._ends[i] if i < len(self._ends) else len(self._text)
        return start, end

    def is_question(self, start: int, end: int) -> bool:
        tail = self._text[start:end].rstrip()
        return bool(tail) and tail[-1] in _QUESTION_MARKS


@dataclass(frozen=True, slots=True)
class PatternLibrary:
    """All fact rules of a patterns folder; build with :meth:`from_dir`, then call :meth:`match`."""

    rules: tuple[Rule, ...]
    subjects: Mapping[str, str] = field(repr=False)
    automaton: Any = field(repr=False, compare=False)
    # First-person words in slot values and their third-person forms ("my job" -> "their job").
    pronouns: Mapping[str, str] = field(default_factory=dict, repr=False)
    pronoun_regex: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    list_next: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    clause_break: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    future_subordinate: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    dangling_ref: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    dangling_inside: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    broken_content: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    broken_ending: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    dangling_start: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    broken_start: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    team_context: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    team_name: regex.Pattern[str] | None = field(default=None, repr=False, compare=False)
    # A name's canonical spelling when the entity gazetteer (entities.yaml in the same folder) knows it, else None.
    technology: Callable[[str], str | None] | None = field(default=None, repr=False, compare=False)
    # Slot value -> whether it dangles, and -> its pronouns swapped: both pure, and slot values recur ("love",
    # "like", "to read"), so each is worked out once instead of by one or two regex scans per match.
    dangling_cache: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    swapped_cache: dict[str, str] = field(default_factory=dict, init=False, repr=False, compare=False)
    # Rendered content -> whether it is broken (``broken_ending``, ``broken_start``, ``broken_content``): long
    # regexes, ~45 us a fact, and a third of the facts say what another message said before ("User likes hiking").
    broken_cache: dict[str, bool] = field(default_factory=dict, init=False, repr=False, compare=False)
    # ``broken_content`` and ``dangling_inside`` as the yes/no checks they are, run part by part (derived).
    broken_parts: Branches | None = field(default=None, init=False, repr=False, compare=False)
    dangling_parts: Branches | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, rx in (("broken_parts", self.broken_content), ("dangling_parts", self.dangling_inside)):
            if rx is not None:
                object.__setattr__(self, name, Branches(rx))

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> PatternLibrary:
        """Load and validate every ``kind: facts`` file; cached per folder. Problems raise ONE PatternError."""
        return _cached_library(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    # ------------------------------------------------------------------------------------------- matching

    def match(
        self, text: str, *, timestamp: datetime | None = None, settings: Settings | None = None
    ) -> list[Fact]:
        """Every fact any rule finds in ``text`` (no confidence-tier filtering), in text order."""
        if not text:
            return []
        norm = straight_quotes(text)  # shared by the prefilter and the regexes
        low = norm.lower()  # ... and lower-cased, by the keywords, the required words and the supersets
        return self._match(text, self._norm_candidates(norm, low), timestamp, settings, norm, low)

    def test(self, text: str, timestamp: datetime | None = None) -> list[Fact]:
        """Alias of :meth:`match`, for ``factforge patterns test``."""
        return self.match(text, timestamp=timestamp)

    def match_rule(
        self, rule_id: str, text: str, *, timestamp: datetime | None = None, settings: Settings | None = None
    ) -> list[Fact]:
        """The facts one rule alone finds in ``text`` (no prefilter); for examples and debugging."""
        index = next((i for i, r in enumerate(self.rules) if r.id == rule_id), None)
        if index is None:
            raise KeyError(rule_id)
        return self._match(text, [index], timestamp, settings)

    def match_all_rules(
        self, text: str, *, timestamp: datetime | None = None, settings: Settings | None = None
    ) -> list[Fact]:
        """Like :meth:`match` but running every regex, bypassing the prefilter (to test the prefilter)."""
        return self._match(text, range(len(self.rules)), timestamp, settings)

    def compile_all(self) -> int:
        """Compile every rule's regex (and read its required words) now rather than on first use (a long-running
        server does this in the background at start, so no request pays for it); how many were not compiled yet."""
        fresh = sum(not rule._compiled for rule in self.rules)
        for rule in self.rules:
            _ = rule.regex, rule.requires, rule.starts  # each worked out once and kept in the rule
        return fresh

    def check(self) -> list[str]:
        """Run every example and counter-example; human-readable failures (empty when all pass)."""
        return [f"{rule.source}: rule {rule.id}: {p}" for rule in self.rules for p in _check_rule(self, rule)]

    def _candidates(self, text: str) -> list[int]:
        if not text:
            return []
        return self._norm_candidates(straight_quotes(text))

    def _norm_candidates(self, norm: str, low: str | None = None) -> list[int]:
        found: set[int] = set()
        if low is None:
            low = norm.lower()
        for _end, indices in self.automaton.iter(low):
            found.update(indices)
        if not norm.isascii():
            return sorted(found)
        # In ASCII text, also the words each regex cannot match without (lower-casing agrees with the regex
        # engine's case-insensitive matching there): a rule whose keyword occurs but not one of them is not run.
        # (Rule.may_match, inlined: its words are read once, and a message asks it of five rules on average.)
        rules = self.rules
        out = []
        for i in sorted(found):
            rule = rules[i]
            if meets(rule._requires[0] if rule._requires else rule.requires, low):
                out.append(i)
        return out

    def _match(
        self, text: str, indices: Iterable[int], timestamp: datetime | None, settings: Settings | None,
        norm: str | None = None, low: str | None = None,
    ) -> list[Fact]:
        if not text or not indices:
            return []
        if norm is None:
            norm = straight_quotes(text)
        if low is None:
            low = norm.lower()
        sentences = _Sentences(norm)
        settings = settings or _DEFAULT_SETTINGS
        hits: list[_Hit] = []
        # The moment the facts' relative times are read against: the caller's timestamp, else now, read once for
        # the whole text (when a rule first matches) rather than once per match.
        reference = timestamp
        for index in indices:
            rule = self.rules[index]
            # In ASCII text the regex's superset says whether it can match at all, and from where.
            starts = rule.starts
            pos = starts.first(norm, low)
            if pos < 0:
                continue
            for m in safe_finditer(rule.regex, norm, rule.id, pos, starts, low):
                if reference is None:
                    reference = datetime.now(timezone.utc)
                for start, fact in self._facts(rule, m, text, sentences, reference, settings):
                    hits.append(_Hit(fact, (start, index), rule.time_group is not None))
        if not hits:
            return []
        best: dict[str, _Hit] = {}
        for hit in hits:
            key = hit.fact.content.casefold()
            kept = best.get(key)
            # Same content twice: keep the more confident one; on a tie the one that knows when it held,
            # preferring a rule that captured the time itself.
            if kept is None or (hit.fact.confidence, hit.fact.valid_from is not None, hit.own_time) > (
                kept.fact.confidence, kept.fact.valid_from is not None, kept.own_time
            ):
                best[key] = hit
        return [h.fact for h in sorted(best.values(), key=lambda h: h.order)]

    def _facts(
        self, rule: Rule, m: regex.Match[str], original: str, sentences: _Sentences,
        reference: datetime, settings: Settings,
    ) -> list[tuple[int, Fact]]:
        """The fact of one match, plus one per further item when its ``list_group`` opens a list; ``reference``: the
        moment its relative times are read against."""
        start, end = sentences.bounds(m.start())
        if not rule.allow_questions and sentences.is_question(start, end) and not self._statement_before_break(
                m.string, m.end(), end):
            return []
        if rule.blockers is not None and self._blocked(rule.blockers, m.string, start, m.start(), end):
            return []
        future = self.future_subordinate
        if future is not None and self._blocked(future, m.string, start, m.start(), end):
            return []
        # A rule without its own time slot is dated by a time expression anywhere in its sentence. In an
        # event (category temporal) a relative one is cut out of the slots so the stored text does not go
        # stale ("moved to Berlin 3 weeks ago"); elsewhere it can be the substance of the fact ("plans to
        # go to business school next year") and the rule files' examples keep it.
        anchor = None
        if rule.time_group is None or m.group(rule.time_group) is None:
            anchor = sentences.anchor(start, end, reference, rule.future)
        groups = m.groupdict()
        cut = False
        if anchor is not None and anchor.relative and rule.category == "temporal":
            groups, cut = _cut_span(m, groups, anchor.span.start, anchor.span.end)
        values = {name: _clean(v) for name, v in groups.items() if v is not None}
        values = {k: v for k, v in values.items() if v}
        subject = self._subject(rule, values, settings)
        if subject is None:
            return []
        if (subject == settings.team_subject and rule.subject != "team" and rule.category in TEAM_CONTEXT_CATEGORIES
                and self.team_context is not None and not self._team_context(m.string, start, end)):
            return []
        subject_group = rule.subject if rule.subject in rule.regex.groupindex else None
        raw = dict(values)
        if self._dangling(v for k, v in raw.items() if k != subject_group):
            return []  # "User wants to try that too": the fact means nothing without the conversation
        keep = (subject_group, *rule.verbatim_groups)
        values = {k: v if k in keep else self._swap_pronouns(v) for k, v in values.items()}
        values["subject"] = subject
        out = []
        dated = (anchor, cut) if anchor is not None else None
        fact = self._fact(rule, m, original, start, end, values, subject_group, m.start(), m.end(), reference,
                          dated)
        if fact is not None:
            out.append((m.start(), fact))
        group = rule.list_group
        if group and raw.get(group) and self.list_next is not None:
            first = raw[group]
            to_first = _TO.match(first) is not None
            # The first item's verb with its object's tie words, when it has an object of its own ("to grow")
            verb = _ITEM_PREFIX.match(first) if to_first and _OWN_OBJECT.match(first) else None
            for item_start, item_end, item in _list_items(self.list_next, m.string, m.end(group), end):
                if self._dangling((item,)):
                    continue
                if verb is not None and not _ITEM_VERB.match(item) and not _GERUND.match(item):
                    # one more object of the first item's verb: "to grow tomatoes, peppers" -> "to grow peppers"
                    item = f"{verb.group()} {item}"
                elif to_first and not _NO_CARRY.match(item) and not _NAME_FIRST.match(item):
                    item = "to " + item
                more = {**values, group: self._swap_pronouns(item)}
                # A group inside the first item belongs to that item ("a dog named Rex, a cat named Leo").
                g_start, g_end = m.span(group)
                for inner in rule.entity_groups:
                    if inner != group and inner in more and g_start <= m.start(inner) and m.end(inner) <= g_end:
                        del more[inner]
                fact = self._fact(rule, m, original, start, end, more, subject_group, item_start, item_end, reference,
                                  dated)
                if fact is not None:
                    out.append((item_start, fact))
        return out

    def _dangling(self, values: Iterable[str]) -> bool:
        """Whether a slot value (before the pronoun swap) only points back at the conversation."""
        cache = self.dangling_cache
        for v in values:
            found = cache.get(v)
            if found is None:
                end, inside, begin = self.dangling_ref, self.dangling_parts, self.dangling_start
                found = bool((end is not None and end.match(v)) or (begin is not None and begin.match(v))
                             or (inside is not None and inside.search(v)))
                remember(cache, v, found)
            if found:
                return True
        return False

    def _broken(self, content: str) -> bool:
        """Whether a rendered fact is not grammatical English (``broken_ending``, ``broken_start``,
        ``broken_content``)."""
        found = self.broken_cache.get(content)
        if found is None:
            found = bool((self.broken_ending is not None and self.broken_ending.match(content)) or (
                self.broken_start is not None and self.broken_start.match(content)) or (
                self.broken_parts is not None and self.broken_parts.search(content)))
            remember(self.broken_cache, content, found)
        return found

    def _team_context(self, text: str, start: int, end: int) -> bool:
        """Whether the sentence ``text[start:end]`` speaks of work: a work word (``team_context``) or a name the
        gazetteer knows as a technology (``team_name``); unsure (out of time): no, so no team fact is made of it
        (the turn still goes to the LLM)."""
        assert self.team_context is not None
        context, names, technology = self.team_context, self.team_name, self.technology
        try:
            if own_time(lambda timeout: context.search(text, start, end, timeout=timeout)) is not None:
                return True
            if names is None or technology is None:
                return False
            found = own_time(lambda timeout: list(names.finditer(text, start, end, timeout=timeout)))
            return any(technology(m.group()) is not None for m in found)
        except TimeoutError:
            logger.warning("team-context rule timed out on %d chars; no team fact", end - start)
            return False

    def _statement_before_break(self, text: str, pos: int, end: int) -> bool:
        """Whether a clause break (``clause_break``: a dash, a semicolon ...) lies between a match ending at
        ``pos`` and the question mark ending its sentence at ``end``: "I moved to Denver - have you been?"
        asks in its second clause only, so the first still states a fact."""
        if self.clause_break is None or pos >= end:
            return False
        try:
            breaks = self.clause_break
            return own_time(lambda timeout: breaks.search(text, pos, end, timeout=timeout)) is not None
        except TimeoutError:
            return False  # unsure: the whole sentence counts as a question, as before

    def _blocked(self, blockers: regex.Pattern[str], text: str, start: int, pos: int, end: int) -> bool:
        """Whether a blocker occurs in the clause before a match at ``pos`` (its sentence is ``text[start:end]``).

        The sentence before the match is searched first: a search from a later position tries a subset of the same
        positions (a look-behind reads the text before ``pos`` either way), so when the sentence holds no blocker
        neither does the clause, and where the clause starts (a scan for clause breaks) is not worked out."""
        stop = max(start, pos)
        found = blockers.search(text, start, stop)
        if found is None:
            return False
        clause = self._clause_start(text, start, pos, end)
        return found.start() >= clause or blockers.search(text, clause, stop) is not None

    def _clause_start(self, text: str, start: int, pos: int, end: int) -> int:
        """Where the clause holding ``pos`` starts (a blocker before it belongs to another clause), in the sentence
        ``text[start:end]``."""
        if self.clause_break is None or pos <= start:
            return start
        last = start
        try:
            breaks = self.clause_break
            # Read to the sentence's end, not to ``pos``: a break may look ahead at the subject that starts there
            # ("and I ...").
            for b in own_time(lambda timeout: list(takewhile(lambda b: b.start() < pos,
                                                             breaks.finditer(text, start, end, timeout=timeout)))):
                last = b.end()
        except TimeoutError:
            return start  # unsure where the clause starts: the whole sentence can block, as before
        return last

    def _swap_pronouns(self, value: str) -> str:
        if self.pronoun_regex is None:
            return value
        swapped = self.swapped_cache.get(value)
        if swapped is None:
            swapped = self.pronoun_regex.sub(lambda p: _swap_pronoun(p.group(), self.pronouns, p.start() == 0), value)
            remember(self.swapped_cache, value, swapped)
        return swapped

    def _fact(
        self, rule: Rule, m: regex.Match[str], original: str, start: int, end: int, values: Mapping[str, str],
        subject_group: str | None, span_start: int, span_end: int, reference: datetime,
        dated: tuple[Anchor, bool] | None = None,
    ) -> Fact | None:
        subject = values["subject"]
        content = _render(rule.pieces, values)
        if not content or len(content) > MAX_CONTENT_CHARS or self._broken(content):
            return None
        boost = 0.0
        if rule.boost_words:
            sentence = m.string[start:end].lower()
            if any(word in sentence for word in rule.boost_words):
                boost = rule.boost
        final = round(min(CONFIDENCE_CAP, rule.confidence + boost), 4)
        valid_from = valid_to = None
        if rule.time_group and rule.time_group in values:
            valid_from, valid_to = resolve(values[rule.time_group], reference, future=rule.future)
            if rule.time_mode == "since":
                valid_to = None
        note = None
        if dated is not None:
            anchor, cut = dated
            valid_from, valid_to = anchor.valid_from, anchor.valid_to
            note = (f"dated by {anchor.span.text!r} in its sentence, resolved against {reference.isoformat()}"
                    + ("; the relative phrase is left out of the content" if cut else ""))
        entities = tuple(dict.fromkeys(
            values[g] if g in rule.verbatim_groups else _ARTICLE.sub("", values[g])
            for g in rule.entity_groups if values.get(g)
        ))
        slots = {k: v for k, v in values.items() if k not in ("subject", subject_group)}
        span = Span(span_start, span_end, original[span_start:span_end])
        explanation = Explanation(
            stage="pattern", rule_id=rule.id, original_confidence=rule.confidence, final_confidence=final,
            span=span, context_boost=round(final - rule.confidence, 4), note=note,
        )
        return Fact(
            content=content, category=rule.category, confidence=final, method="pattern",  # type: ignore[arg-type]
            explanation=explanation, entities=entities, rule_id=rule.id, subject=subject, relation=rule.relation,
            slots=slots, valid_from=valid_from, valid_to=valid_to,
        )

    def _subject(self, rule: Rule, values: Mapping[str, str], settings: Settings) -> str | None:
        if rule.subject == "user":
            return settings.user_subject
        if rule.subject == "team":
            return settings.team_subject
        raw = values.get(rule.subject)
        if raw is None:
            return settings.user_subject
        kind = self.subjects.get(raw.lower())
        if kind == "user":
            return settings.user_subject
        if kind == "team":
            return settings.team_subject
        return None


_DEFAULT_SETTINGS = Settings(home=Path("."))


# --------------------------------------------------------------------------------------------- helpers


def _swap_pronoun(word: str, pronouns: Mapping[str, str], first: bool = True) -> str:
    """Third-person form of a first-person word, keeping a leading capital; all-caps words ("US") stay, and so do
    capitalised ones inside a value (``first``: the word opens it): they belong to a title or a name ("The Last of
    Us", "Stand By Me"), not to the speaker."""
    if len(word) > 1 and word.isupper():
        return word
    if not first and word[:1].isupper() and word[:1] != "I":
        return word
    new = pronouns.get(word.lower(), word)
    # "I", "I'm" are always capitalised, so their capital says nothing about a sentence start.
    return new[:1].upper() + new[1:] if word[:1].isupper() and word[:1] != "I" else new


def _cut_span(
    m: regex.Match[str], groups: Mapping[str, str | None], start: int, end: int
) -> tuple[dict[str, str | None], bool]:
    """The match's group values with ``start:end`` (and a preposition it leaves dangling) cut out."""
    out = dict(groups)
    cut = False
    for name, value in groups.items():
        if value is None:
            continue
        g_start, g_end = m.span(name)
        if g_end <= start or end <= g_start:
            continue
        left = m.string[g_start:max(g_start, start)]
        right = m.string[min(g_end, end):g_end]
        if right.startswith("'s "):
            # a time that owns a thing ("in last night's game") leaves the thing: "in the game", not "in 's game"
            out[name] = left.rstrip() + " the" + right[2:]
            cut = True
            continue
        # "in March": the "in" goes too; "the shelter I volunteer at yesterday" keeps its "at"
        left = (_APPROXIMATE if _BARE_TIME.match(m.string, start, end) else _DANGLING).sub("", left)
        out[name] = left + " " + right
        cut = True
    return out, cut


def _list_items(rx: regex.Pattern[str], text: str, pos: int, end: int) -> list[tuple[int, int, str]]:
    """Further items of a comma list starting at ``pos`` ("..., play chess, and read"); none unless it is one.

    A list must close with "and"/"or" (", and read") or end in an item holding one ("..., walk and read"),
    so a comma before an unrelated phrase does not make a list. Items after the closing "and" are not taken.
    """
    items: list[tuple[int, int, str]] = []
    closed = False
    while not closed:
        m = rx.match(text, pos, end)
        if m is None or m.end("item") <= pos:
            break
        item = _clean(m.group("item"))
        if not item:
            break
        items.append((m.start("item"), m.end("item"), item))
        closed = m.group("conj") is not None
        pos = m.end()
    if not items or not (closed or _AND_OR.search(items[-1][2])):
        return []
    return items


def third_person_verb(word: str) -> str:
    """``play`` -> ``plays``, ``watch`` -> ``watches``, ``try`` -> ``tries`` (English spelling rules)."""
    low = word.lower()
    if low in _IRREGULAR_THIRD:
        return _IRREGULAR_THIRD[low]
    if _ES_ENDING.search(low):
        return word + "es"
    if _IES_ENDING.search(low):
        return word[:-1] + "ies"
    return word + "s"


# Compiled once: ``regex.search(pattern_text, ...)`` looks the pattern up in the module's cache on every call,
# which costs more than the search.
_AND_OR = regex.compile(r"\s(?:and|or)\s")
_ES_ENDING = regex.compile(r"(?:s|sh|ch|x|z|o)$")
_IES_ENDING = regex.compile(r"[^aeiou]y$")
# The only verbs whose third person the spelling rules get wrong (data/grammar_words.yaml).
_IRREGULAR_THIRD: dict[str, str] = _GRAMMAR["irregular_third"]
# Past tenses the spelling rules get wrong (data/grammar_words.yaml).
_IRREGULAR_PAST: dict[str, str] = _GRAMMAR["irregular_past"]
_E_ENDINGS = regex.compile(r"(?:iz|is|ys|yz|v|c|dg|ud|u|ir|ur|[^aeiou]om|[^aeiou]at|[^aeiou][aiou]d)$")
_ONE_SYLLABLE_CVC = regex.compile(r"^[^aeiou]*[aeiou][^aeiouwxy]$")


def _base_verb(word: str) -> str:
    """``apologizing`` -> ``apologize``, ``using`` -> ``use``, ``putting`` -> ``put``, ``asking`` -> ``ask``."""
    low = word.lower()
    if not low.endswith("ing") or len(low) < 5:
        return word
    stem = word[:-3]
    low = stem.lower()
    if len(low) >= 3 and low[-1] == low[-2] and low[-1] in "bgmnprt":
        return stem[:-1]
    if _E_ENDINGS.search(low) or _ONE_SYLLABLE_CVC.match(low):
        return stem + "e"
    return stem


def _past_verb(word: str) -> str:
    """``losing`` or ``lose`` -> ``lost``, ``opening`` -> ``opened``, ``stopping`` -> ``stopped``, ``try`` -> ``tried``."""
    if len(word) > 1 and word.isupper():
        return word  # an acronym, no verb
    base = _base_verb(word)
    low = base.lower()
    if low in _IRREGULAR_PAST:
        return _IRREGULAR_PAST[low]
    if low.endswith("e"):
        return base + "d"
    if _IES_ENDING.search(low):
        return base[:-1] + "ied"
    if word.lower().endswith("ing") and len(word) - len(base) == 4:
        return base + base[-1] + "ed"  # the gerund doubled its last consonant ("stopping"), so does the past
    if not word.lower().endswith("ing") and _ONE_SYLLABLE_CVC.match(low) and low[-1] in "bgmnprt":
        return base + base[-1] + "ed"
    return base + "ed"


def _transform(value: str, how: str | None) -> str:
    if how is None:
        return value
    if how == "drop":
        return ""
    if how == "lc":
        return value[:1].lower() + value[1:]
    m = _FIRST_WORD.match(value)
    if m is None:
        return value
    word = m.group(1)
    if how == "s":
        word = third_person_verb(word)
    elif how == "past":
        word = _past_verb(word)
        word = word[:1].lower() + word[1:] if m.group(1)[:1].isupper() and m.group(1)[1:2].islower() else word
    else:
        word = _base_verb(word)
    return word + m.group(2)


def _squeeze(value: str) -> str:
    """``value`` with each run of whitespace made one space (``_SPACES``); most values have nothing to squeeze,
    and saying so costs less than a substitution."""
    if value.isascii() and "  " not in value and not _OTHER_ASCII_SPACE.search(value):
        return value
    return _SPACES.sub(" ", value)


def _clean(value: str) -> str:
    spaced = _squeeze(value)
    out = spaced.strip(_TRIM_CHARS)
    # A quoted title at the start ("'Hallelujah' by Leonard Cohen") keeps its opening quote: the value
    # holds the closing one, followed by no letter (so "'cause I don't" stays "cause I don't").
    lead = spaced.lstrip(_TRIM_NO_QUOTES)
    if lead[:1] in _TITLE_QUOTES and out and not out.startswith(lead[0]):
        close = out.find(lead[0])
        if close > 0 and not out[close + 1:close + 2].isalpha():
            out = lead[0] + out
    # A quoted title at the end ("Queen's 'Bohemian Rhapsody'") keeps its closing quote when the value opens
    # one after a space and never closes it, else the fact reads "Queen's 'Bohemian Rhapsody".
    tail = spaced.rstrip(_TRIM_NO_QUOTES)
    if tail[-1:] in _TITLE_QUOTES and out and not out.endswith(tail[-1]):
        q = tail[-1]
        opened = max(out.rfind(" " + q), 0 if out.startswith(q) else -1)
        if opened >= 0 and out.find(q, opened + 2) < 0 and out[opened + 2:opened + 3].isalnum():
            out += q
    # A dash left at the end ("to feel closer to my faith- it was ...") closes nothing.
    out = out.rstrip("-–— ")
    return out if out.isascii() else _CJK_GAP.sub("", out)


def _parse_template(template: str) -> tuple[_Piece, ...]:
    """Template text -> pieces; ``[...]`` is an optional section, kept only if all its groups matched."""
    pieces: list[_Piece] = []
    pos = 0
    for m in _OPTIONAL.finditer(template):
        pieces.extend(_parse_plain(template[pos:m.start()]))
        pieces.append(_Piece(optional=tuple(_parse_plain(m.group(1)))))
        pos = m.end()
    pieces.extend(_parse_plain(template[pos:]))
    return tuple(pieces)


def _parse_plain(text: str) -> list[_Piece]:
    out: list[_Piece] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(text):
        if m.start() > pos:
            out.append(_Piece(literal=text[pos:m.start()]))
        out.append(_Piece(name=m.group(1), transform=m.group(2)))
        pos = m.end()
    if pos < len(text):
        out.append(_Piece(literal=text[pos:]))
    return out


def _render(pieces: Sequence[_Piece], values: Mapping[str, str]) -> str:
    return _squeeze(_render_parts(pieces, values)).strip()


def _render_parts(pieces: Sequence[_Piece], values: Mapping[str, str]) -> str:
    parts: list[str] = []
    for piece in pieces:
        if piece.optional is not None:
            if all(p.name is None or values.get(p.name) for p in piece.optional):
                parts.append(_render_parts(piece.optional, values))
        elif piece.name is not None:
            value = values.get(piece.name)
            if not value:
                return ""
            parts.append(_transform(value, piece.transform))
        else:
            parts.append(piece.literal)
    return "".join(parts)


def _check_rule(library: PatternLibrary, rule: Rule) -> list[str]:
    """What is wrong with a rule's examples, run against the rule alone."""
    out: list[str] = []
    for ex in rule.examples:
        if not any(k in straight_quotes(ex.text).lower() for k in rule.keywords):
            out.append(f"example {ex.text!r} contains none of the keywords, so the rule never runs on it")
            continue
        norm = straight_quotes(ex.text)
        if norm.isascii() and not rule.may_match(norm.lower()):  # a misreading of the regex by literals.required
            out.append(f"example {ex.text!r} lacks a word the prefilter reads as required by the regex")
            continue
        facts = library.match_rule(rule.id, ex.text, timestamp=EXAMPLE_REFERENCE)
        got = next((f for f in facts if f.content == ex.fact), None)
        if got is None:
            out.append(f"example {ex.text!r}: expected {ex.fact!r}, got {[f.content for f in facts]!r}")
            continue
        if ex.entities is not None and tuple(got.entities) != ex.entities:
            out.append(f"example {ex.text!r}: expected entities {list(ex.entities)!r}, got {list(got.entities)!r}")
        if ex.slots is not None and dict(got.slots) != dict(ex.slots):
            out.append(f"example {ex.text!r}: expected slots {dict(ex.slots)!r}, got {dict(got.slots)!r}")
        if ex.confidence is not None and abs(got.confidence - ex.confidence) > 1e-9:
            out.append(f"example {ex.text!r}: expected confidence {ex.confidence}, got {got.confidence}")
        for name, want, have in (("valid_from", ex.valid_from, got.valid_from),
                                 ("valid_to", ex.valid_to, got.valid_to)):
            if want is not None and (have is None or have.date().isoformat() != want):
                out.append(f"example {ex.text!r}: expected {name} {want}, got {have}")
    for text in rule.counter_examples:
        facts = library.match_rule(rule.id, text, timestamp=EXAMPLE_REFERENCE)
        if facts:
            out.append(f"counter-example {text!r} produces {[f.content for f in facts]!r}")
    return out


# --------------------------------------------------------------------------------------------- loading


def _expand(pattern: str, defines: Mapping[str, str], where: str, problems: Problems) -> str:
    """Replace ``{{name}}`` by the file's ``defines`` (which may refer to each other)."""
    for _ in range(8):
        if "{{" not in pattern:
            return pattern
        missing = [n for n in _DEFINE_REF.findall(pattern) if n not in defines]
        if missing:
            problems.add(where, f"regex uses undefined {{{{{missing[0]}}}}}")
            return pattern
        pattern = _DEFINE_REF.sub(lambda m: defines[m.group(1)], pattern)
    problems.add(where, "defines nest too deeply (a cycle?)")
    return pattern


def _example(spec: FactExampleSpec) -> Example:
    return Example(
        text=spec.text, fact=spec.fact, entities=tuple(spec.entities) if spec.entities is not None else None,
        slots=dict(spec.slots) if spec.slots is not None else None, confidence=spec.confidence,
        valid_from=spec.valid_from, valid_to=spec.valid_to,
    )


def _check_groups(spec: FactRuleSpec, groups: set[str], defines: Mapping[str, str], at: str,
                  problems: Problems) -> None:
    """What the rule names must be groups of its regex: template placeholders, entity, subject, time, list."""
    for name in (m.group(1) for m in _PLACEHOLDER.finditer(spec.template)):
        if name not in groups and name not in SPECIAL_PLACEHOLDERS:
            problems.add(at, f"template names {{{name}}}, which is not a group of the regex")
    for group in spec.entity_groups:
        if group not in groups:
            problems.add(at, f"entity group {group!r} is not a group of the regex")
    if spec.subject not in ("user", "team") and spec.subject not in groups:
        problems.add(at, f"subject {spec.subject!r} must be 'user', 'team' or a group of the regex")
    if spec.time_group is not None and spec.time_group not in groups:
        problems.add(at, f"time_group {spec.time_group!r} is not a group of the regex")
    for group in spec.verbatim_groups:
        if group not in groups:
            problems.add(at, f"verbatim group {group!r} is not a group of the regex")
    if spec.list_group is not None and spec.list_group not in groups:
        problems.add(at, f"list_group {spec.list_group!r} is not a group of the regex")
    if spec.list_group is not None and LIST_DEFINE not in defines:
        problems.add(at, f"list_group needs a {LIST_DEFINE!r} define (a regex for one more list item)")


def _load_rule(spec: FactRuleSpec, file: FactsFileSpec, defines: Mapping[str, str], where: str,
               problems: Problems, verified: bool = False) -> Rule | None:
    """A rule of a checked file, with what its shape cannot say checked: the regex, and the names it uses.
    ``verified``: the files were verified before (see ``rulefile.VERIFIED_RULES``), so the regex is compiled on
    first use."""
    at = f"{where}: rule {spec.id}"
    before = len(problems.items)
    language = spec.language or file.language
    if not language:
        problems.add(at, "missing language")
    blockers = None
    blockers_src = spec.blockers if "blockers" in spec.model_fields_set else file.guards.blockers
    if blockers_src is not None:
        blockers = compile_regex(blockers_src, f"{at}: blockers", problems, regex.IGNORECASE)
    # Verbose mode so long rules fold over lines in YAML; a literal space must be written as \s.
    pattern, flags = _expand(spec.regex, defines, at, problems), regex.IGNORECASE | regex.VERBOSE
    rx = None if verified else compile_regex(pattern, at, problems, flags, hostile=tuple(k + " " for k in spec.keywords))
    if rx is not None:
        _check_groups(spec, set(rx.groupindex), defines, at, problems)
    if len(problems.items) > before or (rx is None and not verified):
        return None
    return Rule(
        id=spec.id, category=spec.category, language=cast(str, language), confidence=spec.confidence,
        template=spec.template, entity_groups=tuple(spec.entity_groups), keywords=tuple(spec.keywords),
        examples=tuple(_example(e) for e in spec.examples), counter_examples=tuple(spec.counter_examples),
        subject=spec.subject, relation=spec.relation, pattern=pattern, flags=flags, _compiled=[rx] if rx else [],
        boost_words=tuple(w.lower() for w in spec.boost_words),
        boost=spec.boost if spec.boost is not None else 0.05 if spec.boost_words else 0.0,
        time_group=spec.time_group, time_mode=spec.time_mode, blockers=blockers,
        allow_questions=spec.allow_questions, list_group=spec.list_group,
        verbatim_groups=tuple(spec.verbatim_groups), future=spec.tense == "future",
        source=where, pieces=_parse_template(spec.template),
    )


def _read_files(patterns_dir: Path, problems: Problems) -> list[tuple[str, FactsFileSpec]]:
    """The ``kind: facts`` files of a folder, checked (other rule files there belong to other modules)."""
    out = []
    for path in yaml_files(patterns_dir):
        data = read_yaml(path, problems)
        if isinstance(data, dict) and data.get("kind") == "facts":
            spec = check(FactsFileSpec, data, str(path), problems)
            if spec is not None:
                out.append((str(path), spec))
    return out


def _merge_headers(files: Sequence[tuple[str, FactsFileSpec]], defines: dict[str, str], subjects: dict[str, str],
                   pronouns: dict[str, str], problems: Problems) -> None:
    """Merge the files' ``defines``, ``subjects`` and ``pronouns`` into the library-wide ones."""
    for where, file in files:
        for name, fragment in file.defines.items():
            if name in defines:
                problems.add(where, f"defines: {name!r} is defined in two files")
            defines[name] = fragment
        for kind, words in file.subjects.items():
            for word in words:
                subjects[word.lower()] = kind
        pronouns.update({k.lower(): v for k, v in file.pronouns.items()})


def _build_automaton(rules: Sequence[Rule]) -> Any:
    return keyword_automaton(rule.keywords for rule in rules)


def _build(patterns_dir: Path) -> PatternLibrary:
    problems = Problems()
    seen: dict[str, str] = {}
    subjects: dict[str, str] = {}
    defines: dict[str, str] = {}
    pronouns: dict[str, str] = {}
    rules: list[Rule] = []
    # Defines and subject words are shared by all files, so a fragment like {{obj}} is written once.
    files = _read_files(patterns_dir, problems)
    verified = verified_folder(patterns_dir)
    _merge_headers(files, defines, subjects, pronouns, problems)
    for where, file in files:
        for spec in unique(file.rules, where, seen, problems):
            rule = _load_rule(spec, file, defines, where, problems, verified)
            if rule is not None:
                rules.append(rule)
    # Rules that loaded cleanly still run their examples, so one error lists every problem of every file.
    pronoun_regex = None
    if pronouns:
        words = "|".join(regex.escape(w) for w in sorted(pronouns, key=len, reverse=True))
        # A pronoun inside a hyphenated compound ("me-time", "stay-at-my-place") is part of a word, not the speaker.
        pronoun_regex = regex.compile(rf"(?<![\p{{L}}\p{{N}}_'])(?<!\p{{L}}-)(?:{words})(?![\p{{L}}\p{{N}}_'])(?!-\p{{L}})",
                                      regex.IGNORECASE)
    list_next = None
    if any(r.list_group for r in rules) and LIST_DEFINE in defines:
        list_next = compile_regex(_expand(defines[LIST_DEFINE], defines, LIST_DEFINE, problems), LIST_DEFINE,
                                  problems, regex.IGNORECASE | regex.VERBOSE)
        if list_next is not None and not {"item", "conj"} <= set(list_next.groupindex):
            problems.add(LIST_DEFINE, "must have the groups 'item' and 'conj'")
            list_next = None
    extra = {name: compile_regex(_expand(defines[name], defines, name, problems), name, problems,
                                 regex.IGNORECASE | regex.VERBOSE | (regex.REVERSE if name in END_DEFINES else 0))
             if name in defines else None
             for name in (CLAUSE_DEFINE, FUTURE_SUBORDINATE_DEFINE, DANGLING_DEFINE, DANGLING_INSIDE_DEFINE,
                          DANGLING_START_DEFINE, BROKEN_DEFINE, BROKEN_END_DEFINE, BROKEN_START_DEFINE, TEAM_DEFINE,
                          TEAM_NAME_DEFINE)}
    # Team context by name needs the folder's entity gazetteer (a folder of fact rules alone has none).
    technology = EntityRecognizer.from_dir(patterns_dir).canonical \
        if extra[TEAM_NAME_DEFINE] is not None and (patterns_dir / ENTITIES_FILE).exists() else None
    library = PatternLibrary(rules=tuple(rules), subjects=subjects, automaton=_build_automaton(rules),
                             pronouns=pronouns, pronoun_regex=pronoun_regex, list_next=list_next,
                             clause_break=extra[CLAUSE_DEFINE], future_subordinate=extra[FUTURE_SUBORDINATE_DEFINE],
                             dangling_ref=extra[DANGLING_DEFINE],
                             dangling_inside=extra[DANGLING_INSIDE_DEFINE], broken_content=extra[BROKEN_DEFINE],
                             broken_ending=extra[BROKEN_END_DEFINE], dangling_start=extra[DANGLING_START_DEFINE],
                             broken_start=extra[BROKEN_START_DEFINE], team_context=extra[TEAM_DEFINE],
                             team_name=extra[TEAM_NAME_DEFINE], technology=technology)
    if not verified:
        for failure in library.check():
            problems.items.append(failure)
    problems.raise_if_any()
    logger.debug("pattern library loaded from %s: %d rules%s", patterns_dir, len(rules),
                 " (verified files: regexes compiled on first use)" if verified else "")
    return library


@lru_cache(maxsize=8)
def _cached_library(patterns_dir: str) -> PatternLibrary:
    return _build(Path(patterns_dir))
