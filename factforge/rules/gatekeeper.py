"""The gatekeeper: decides per message whether it can carry a fact, and says why when it drops one.

Checks run in this order: empty, injection, social talk (greeting / thanks / goodbye / acknowledgement /
reaction / filler, judged per clause: the message is social only when every clause is), pure question, and
last too_short - the pipeline still runs the patterns on a too_short message, so "I use Vim." survives.
Social talk is fixed phrases plus sentence shapes (sequences of word classes, "pointer linking degree*
evaluation": "That sounds like a lot of fun"). Word lists, shapes and thresholds live in
``patterns/gate.yaml``, injection rules in ``patterns/injection.yaml``.

The common path costs one tokenising regex, a few set lookups per word and one Aho-Corasick pass for the
injection keywords; injection regexes run only for rules whose keyword occurs in the text.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, cast

import regex

from .normalise import Normaliser
from .rulefile import Problems, check_examples, compile_regex, default_patterns_dir, guard_budget, keyword_automaton
from .schema import (REASONS, SOCIAL_KINDS, WORD_KINDS, GateFileSpec, GateShapesSpec, InjectionFileSpec, read,
                     unique)
from ..types import GateDecision

__all__ = ["Gatekeeper", "InjectionRule", "PhraseSet", "REASONS", "SOCIAL_KINDS", "Shape"]

logger = logging.getLogger("factforge.gatekeeper")

# A shape slot is a class name, optionally followed by "?" (zero or one) or "*" (zero or more).
_SLOT = regex.compile(r"([a-z_]+)([?*]?)")

# Characters of scripts written without spaces: each one is a token of its own.
_CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)
_SOCIAL_CACHE_SIZE = 4096
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'"})


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return any(lo <= o <= hi for lo, hi in _CJK_RANGES)


@dataclass(frozen=True, slots=True)
class PhraseSet:
    """Phrases as token tuples, matched longest first at a token position."""

    phrases: Mapping[tuple[str, ...], str]
    starts: frozenset[str]
    lengths: tuple[int, ...]
    # First word -> lengths of the phrases starting with it, longest first (derived from ``phrases``).
    by_start: Mapping[str, tuple[int, ...]] = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.by_start is None:
            index: dict[str, set[int]] = {}
            for p in self.phrases:
                index.setdefault(p[0], set()).add(len(p))
            object.__setattr__(self, "by_start", {w: tuple(sorted(ls, reverse=True)) for w, ls in index.items()})

    @classmethod
    def build(cls, phrases: Mapping[tuple[str, ...], str]) -> PhraseSet:
        lengths = tuple(sorted({len(p) for p in phrases}, reverse=True))
        return cls(dict(phrases), frozenset(p[0] for p in phrases), lengths)

    def match_at(self, tokens: Sequence[str], i: int) -> tuple[int, str | None]:
        """(length, label) of the longest phrase starting at ``tokens[i]``, or (0, None)."""
        word = tokens[i]
        lengths = self.by_start.get(word)
        if lengths is None:
            return 0, None
        n = len(tokens)
        phrases = self.phrases
        for length in lengths:
            if length == 1:
                return 1, phrases[(word,)]
            if i + length <= n:
                label = phrases.get(tuple(tokens[i:i + length]))
                if label is not None:
                    return length, label
        return 0, None

    def lengths_at(self, tokens: Sequence[str], i: int) -> Iterable[int]:
        """Lengths of every phrase starting at ``tokens[i]``, longest first."""
        n = len(tokens)
        if i >= n:
            return ()
        lengths = self.by_start.get(tokens[i])
        if lengths is None:
            return ()
        if lengths == (1,):
            return lengths
        phrases = self.phrases
        return [length for length in lengths
                if length == 1 or (i + length <= n and tuple(tokens[i:i + length]) in phrases)]


@dataclass(frozen=True, slots=True)
class Shape:
    """A sentence shape: word classes in order, each required, optional (``?``) or repeated (``*``)."""

    kind: str
    text: str
    slots: tuple[tuple[PhraseSet, bool, bool], ...]  # (class, optional, repeated)
    starts: frozenset[str]  # the words a match can begin with

    def ends(self, tokens: Sequence[str], i: int) -> set[int]:
        """Every position at which a match of this shape that starts at ``tokens[i]`` can end."""
        out: set[int] = set()
        seen: set[tuple[int, int]] = set()
        self._walk(tokens, 0, i, out, seen)
        out.discard(i)
        return out

    def _walk(self, tokens: Sequence[str], k: int, i: int, out: set[int], seen: set[tuple[int, int]]) -> None:
        # Depth-first over (slot, position) states, each visited once; iterative to save call overhead.
        slots = self.slots
        last = len(slots)
        n = len(tokens)
        stack = [(k, i)]
        while stack:
            state = stack.pop()
            if state in seen:
                continue
            seen.add(state)
            k, i = state
            if k == last:
                out.add(i)
                continue
            words, optional, repeated = slots[k]
            if i < n:
                lengths = words.by_start.get(tokens[i])
                if lengths is not None:
                    # A repeated slot stays at k (now optional by construction: "*" is always optional).
                    nk = k if repeated else k + 1
                    for length in lengths:  # inlined PhraseSet.lengths_at
                        if length == 1 or (i + length <= n and tuple(tokens[i:i + length]) in words.phrases):
                            stack.append((nk, i + length))
            if optional:
                stack.append((k + 1, i))


@dataclass(frozen=True, slots=True)
class InjectionRule:
    """One prompt-injection rule: it fires when a keyword occurs (lowercased) and the regex matches."""

    id: str
    language: str
    keywords: tuple[str, ...]
    regex: regex.Pattern[str]
    examples: tuple[str, ...] = ()
    counter_examples: tuple[str, ...] = ()
    description: str = ""


@dataclass(frozen=True, slots=True)
class _Sentence:
    words: list[str]
    question_mark: bool


@dataclass(frozen=True, slots=True)
class Gatekeeper:
    """Frozen gate configuration; build with :meth:`from_dir`, then call :meth:`judge` per message."""

    tokenizer: regex.Pattern[str]
    enders: frozenset[str]
    question_marks: frozenset[str]
    clause_marks: frozenset[str]
    social: PhraseSet
    # Sentence shapes by a word they may start with.
    shapes: Mapping[str, tuple[Shape, ...]]
    # Every word of a social phrase or shape class (and ","): a sentence with any other word is content.
    vocabulary: frozenset[str]
    words: Mapping[str, PhraseSet]
    reason_priority: tuple[str, ...]
    min_cjk_chars: int
    min_letters: int
    max_social_tokens: int
    injection_rules: tuple[InjectionRule, ...]
    # The other readings of a text the injection rules check (patterns/injection.yaml: normalise).
    normaliser: Normaliser
    # Keyword automaton: lowercased keyword -> indices of the injection rules it unlocks.
    automaton: Any = field(compare=False, repr=False)
    # Sentence words -> social kinds (or None): short social sentences ("yeah", "i know") recur constantly.
    social_cache: dict[tuple[str, ...], frozenset[str] | None] = field(default_factory=dict, compare=False,
                                                                         repr=False)

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> Gatekeeper:
        """Load ``gate.yaml`` and ``injection.yaml``; cached per folder. Bad files raise ONE PatternError."""
        return _cached_gatekeeper(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    # ----------------------------------------------------------------------------------------- checks

    def is_injection(self, text: str) -> str | None:
        """The id of the first injection rule that matches ``text`` or one of its readings (look-alikes,
        zero-width characters, leetspeak, base64, rot13 undone: :class:`~factforge.normalise.Normaliser`),
        or None. A rule that runs out of time counts as a match: a guard that cannot finish fails closed."""
        if not text or not self.injection_rules:
            return None
        for reading in self.normaliser.readings(text):
            candidates: set[int] = set()
            for _end, indices in self.automaton.iter(reading.lower()):
                candidates.update(indices)
            for index in sorted(candidates):
                rule = self.injection_rules[index]
                try:
                    if rule.regex.search(reading, timeout=guard_budget(len(reading))) is not None:
                        return rule.id
                except TimeoutError:
                    logger.warning("injection rule %s ran out of time on %d chars; treated as a match",
                                   rule.id, len(reading))
                    return rule.id
        return None

    def judge(self, text: str) -> GateDecision:
        """Whether ``text`` can carry a fact; when not, ``reason`` is one of :data:`REASONS`."""
        if not text or text.isspace():
            return GateDecision(False, "empty", "no text")
        rule_id = self.is_injection(text)
        if rule_id is not None:
            return GateDecision(False, "injection", rule_id)
        sentences = self._sentences(text)
        if not sentences:
            return GateDecision(False, "empty", "no words")
        n_tokens = sum(len(s.words) for s in sentences)
        kinds: set[str] = set()
        content: list[_Sentence] = []
        for sentence in sentences:
            sentence_kinds = self._social_kinds(sentence.words) if n_tokens <= self.max_social_tokens else None
            if sentence_kinds is None:
                content.append(sentence)
            else:
                kinds.update(sentence_kinds)
        if not content:
            reason = next((k for k in self.reason_priority if k in kinds), "filler")
            return GateDecision(False, reason, "whole message is " + ", ".join(sorted(kinds)))
        question_details = [self._question(s) for s in content]
        if all(d is not None for d in question_details):
            return GateDecision(False, "question", question_details[0])
        cjk, letters = self._size(sentences)
        if cjk < self.min_cjk_chars and letters < self.min_letters:
            return GateDecision(False, "too_short", f"{cjk} CJK characters, {letters} letters")
        return GateDecision(True)

    # ---------------------------------------------------------------------------------------- helpers

    def _sentences(self, text: str) -> list[_Sentence]:
        """Word tokens per sentence (lowercased, apostrophes unified), with whether a '?' ended it."""
        out: list[_Sentence] = []
        words: list[str] = []
        for token in self.tokenizer.findall(text.lower().translate(_APOSTROPHES)):
            if token in self.question_marks:
                if words:
                    out.append(_Sentence(words, True))
                    words = []
            elif token in self.enders:
                if words:
                    out.append(_Sentence(words, False))
                    words = []
            elif token in self.clause_marks:
                # Kept as a token so a first-person pronoun after a comma reads as a new clause.
                if words:
                    words.append(",")
            else:
                words.append(token)
        if words:
            out.append(_Sentence(words, False))
        for sentence in out:
            while sentence.words and sentence.words[-1] == ",":
                sentence.words.pop()
        return [s for s in out if s.words]

    def _social_kinds(self, words: list[str]) -> set[str] | None:
        """The social kinds that make up the whole sentence, or None if any clause is not social talk.

        The sentence is tiled left to right with social phrases (longest first) and sentence shapes; a
        position from which no tiling reaches the end is remembered, so the search stays linear in practice.
        """
        # Every word must belong to some phrase or class: one set lookup per word settles most content.
        vocabulary = self.vocabulary
        if not all(w in vocabulary for w in words):
            return None
        key = tuple(words)
        cache = self.social_cache
        if key in cache:
            found = cache[key]
            return None if found is None else set(found)
        kinds: set[str] = set()
        result = kinds if self._tile(words, 0, kinds, set()) else None
        if len(cache) >= _SOCIAL_CACHE_SIZE:
            cache.clear()
        cache[key] = None if result is None else frozenset(result)
        return result

    def _tile(self, words: list[str], i: int, kinds: set[str], dead: set[int]) -> bool:
        n = len(words)
        while i < n and words[i] == ",":
            i += 1
        if i == n:
            return True
        if i in dead:
            return False
        length, kind = self.social.match_at(words, i)
        if kind is not None and self._tile(words, i + length, kinds, dead):
            kinds.add(kind)
            return True
        for shape in self.shapes.get(words[i], ()):
            for end in sorted(shape.ends(words, i), reverse=True):
                # A shape closes a clause: two shapes back to back ("he said" + "it was just") are not one.
                if end < n and words[end] != "," and not self.social.match_at(words, end)[0]:
                    continue
                if self._tile(words, end, kinds, dead):
                    kinds.add(shape.kind)
                    return True
        dead.add(i)
        return False

    def _question(self, sentence: _Sentence) -> str | None:
        """Why this sentence is a pure question, or None if it states something."""
        words = [w for w in sentence.words if w != ","]
        i = self._skip_social(words)
        starts_question = False
        if i < len(words):
            wh, _ = self.words["wh_words"].match_at(words, i)
            aux, _ = self.words["aux_words"].match_at(words, i)
            if wh:
                nxt = i + wh
                starts_question = (
                    "'" in words[i]
                    or _is_cjk(words[i][0])
                    or self._aux_then_subject(words, nxt)
                    # "Which is better?" asks; "which is good." (a relative clause) does not.
                    or (sentence.question_mark and nxt < len(words)
                        and self.words["aux_words"].match_at(words, nxt)[0] > 0)
                )
            elif aux:
                starts_question = self._aux_then_subject(words, i)
        if starts_question:
            return f"starts with {words[i]!r}"
        ends_question = sentence.question_mark or (
            bool(words) and self.words["question_particles"].match_at(words, len(words) - 1)[0] > 0
        )
        if ends_question and not self._states_first_person(sentence.words):
            return "question mark without a first-person statement"
        return None

    def _aux_then_subject(self, words: list[str], i: int) -> bool:
        """An auxiliary at ``i`` followed by a subject: the inverted word order of a question ("do you")."""
        if i >= len(words):
            return False
        aux, _ = self.words["aux_words"].match_at(words, i)
        return bool(aux) and i + aux < len(words) and self.words["subject_words"].match_at(words, i + aux)[0] > 0

    def _skip_social(self, words: list[str]) -> int:
        i = 0
        while i < len(words):
            length, _ = self.social.match_at(words, i)
            if not length:
                break
            i += length
        return i

    def _states_first_person(self, words: list[str]) -> bool:
        """A first-person pronoun not inverted behind an auxiliary or question word ("am I", "should we")."""
        first = self.words["first_person"]
        for i, word in enumerate(words):
            if word in first.starts and first.match_at(words, i)[0]:
                prev = words[i - 1] if i > 0 else ","
                if prev == ",":
                    return True
                if prev not in self.words["aux_words"].starts and prev not in self.words["wh_words"].starts:
                    return True
        return False

    def _size(self, sentences: Iterable[_Sentence]) -> tuple[int, int]:
        """CJK characters and letters, not counting filler words."""
        cjk = letters = 0
        for sentence in sentences:
            words = sentence.words
            i = 0
            while i < len(words):
                length, kind = self.social.match_at(words, i)
                if kind == "filler":
                    i += length
                    continue
                word = words[i]
                if len(word) == 1 and _is_cjk(word):
                    cjk += 1
                else:
                    letters += len(word) if word.isalpha() else sum(1 for ch in word if ch.isalpha())
                if cjk >= self.min_cjk_chars or letters >= self.min_letters:
                    return cjk, letters  # long enough: the exact count does not matter
                i += 1
        return cjk, letters


# ------------------------------------------------------------------------------------------- loading


def _build_tokenizer(segment: Mapping[str, str]) -> tuple[regex.Pattern[str], frozenset[str], frozenset[str]]:
    terminators = (segment["latin_terminators"] + segment["cjk_terminators"]).replace("?", "").replace("？", "")
    question_marks = frozenset("?？")
    clause_marks = ",，、:：;"
    # A word keeps inner apostrophes, hyphens, dots, slashes and underscores ("uh-huh", "i'm", "3.12").
    pattern = (
        r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"
        r"|[\p{L}\p{N}_]+(?:['\-./+#][\p{L}\p{N}_]+)*"
        r"|[?？]"
        f"|[{regex.escape(terminators)}\\n]"
        f"|[{regex.escape(clause_marks)}]"
    )
    return regex.compile(pattern), frozenset(terminators) | {"\n"}, question_marks


def _tokenise_phrase(tokenizer: regex.Pattern[str], phrase: str) -> tuple[str, ...]:
    return tuple(tokenizer.findall(phrase.lower().translate(_APOSTROPHES)))


def _load_gate(path: Path, problems: Problems) -> GateFileSpec | None:
    """gate.yaml, checked; its shapes name classes it defines and each has a class that must be there."""
    gate = read(GateFileSpec, path, problems)
    if gate is None:
        return None
    where = str(path)
    for kind, shapes in gate.shapes.kinds.items():
        for text in shapes:
            slots = _shape_slots(text, gate.shapes.classes)
            for part in text.split():
                m = _SLOT.fullmatch(part)
                if m is None or m.group(1) not in gate.shapes.classes:
                    problems.add(where, f"shapes.kinds.{kind}: {text!r}: {part!r} is not a class of shapes.classes")
            if slots and all(mod for _, mod in slots):
                problems.add(where, f"shapes.kinds.{kind}: {text!r} has no required class, so it matches nothing")
    return gate


def _shape_slots(text: str, classes: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (class, modifier) slots of one shape ("pointer linking? evaluation"); unknown classes left out."""
    return [(m.group(1), m.group(2)) for m in map(_SLOT.fullmatch, text.split())
            if m is not None and m.group(1) in classes]


def _build_shapes(tokenizer: regex.Pattern[str], spec: GateShapesSpec, where: str,
                  problems: Problems) -> dict[str, tuple[Shape, ...]]:
    """Compile the checked ``shapes`` block and index each shape by the words it may start with."""
    classes: dict[str, PhraseSet] = {}
    for name, values in spec.classes.items():
        phrases: dict[tuple[str, ...], str] = {}
        for value in values:
            phrase = _tokenise_phrase(tokenizer, value)
            if phrase:
                phrases[phrase] = name
            else:
                problems.add(f"{where}: shapes.classes.{name}", f"{value!r} has no words")
        classes[name] = PhraseSet.build(phrases)
    index: dict[str, list[Shape]] = {}
    for kind, texts in spec.kinds.items():
        for text in texts:
            slots = _shape_slots(text, spec.classes)
            compiled = tuple((classes[name], mod != "", mod == "*") for name, mod in slots)
            starts: set[str] = set()
            for words, optional, _ in compiled:
                starts |= words.starts
                if not optional:
                    break
            shape = Shape(kind, text, compiled, frozenset(starts))
            for word in starts:
                index.setdefault(word, []).append(shape)
    return {word: tuple(shapes) for word, shapes in index.items()}


def _load_injection(path: Path, problems: Problems) -> tuple[list[InjectionRule], Normaliser]:
    where = str(path)
    file = read(InjectionFileSpec, path, problems)
    if file is None:
        return [], Normaliser()
    rules: list[InjectionRule] = []
    for spec in unique(file.rules, where, set(), problems):
        at = f"{where}: rule {spec.id}"
        # Verbose mode so long rules can be folded over lines in YAML; spaces must be written as \s.
        rx = compile_regex(spec.regex, at, problems, regex.IGNORECASE | regex.VERBOSE,
                           hostile=tuple(k.lower() + " " for k in spec.keywords))
        if rx is None:
            continue
        rule = InjectionRule(spec.id, spec.language, tuple(k.lower() for k in spec.keywords), rx,
                             tuple(spec.examples), tuple(spec.counter_examples), spec.description)
        check_examples(rx, rule.keywords, rule.examples, rule.counter_examples, at, problems)
        rules.append(rule)
    return rules, Normaliser.from_spec(file.normalise)


def _build(patterns_dir: Path) -> Gatekeeper:
    problems = Problems()
    gate = _load_gate(patterns_dir / "gate.yaml", problems)
    rules, normaliser = _load_injection(patterns_dir / "injection.yaml", problems)
    if gate is None or problems.items:
        problems.raise_all()
    tokenizer, enders, question_marks = _build_tokenizer(gate.segment.model_dump())
    social: dict[tuple[str, ...], str] = {}
    words: dict[str, dict[tuple[str, ...], str]] = {k: {} for k in WORD_KINDS}
    for lang, block in gate.languages.items():
        for key, values in block.items():
            for value in values:
                phrase = _tokenise_phrase(tokenizer, value)
                if not phrase:
                    problems.add(f"{patterns_dir / 'gate.yaml'}: languages.{lang}.{key}", f"{value!r} has no words")
                elif key in SOCIAL_KINDS:
                    # A phrase listed under two kinds keeps the first (languages are read in file order).
                    social.setdefault(phrase, key)
                else:
                    words[key][phrase] = key
    shapes = _build_shapes(tokenizer, gate.shapes, str(patterns_dir / "gate.yaml"), problems)
    automaton = keyword_automaton(rule.keywords for rule in rules)
    keeper = Gatekeeper(
        tokenizer=tokenizer,
        enders=enders,
        question_marks=question_marks,
        clause_marks=frozenset(",，、:：;"),
        social=PhraseSet.build(social),
        shapes=shapes,
        vocabulary=frozenset({",", *(w for p in social for w in p),
                              *(w for shape_list in shapes.values() for shape in shape_list
                                for words, _, _ in shape.slots for p in words.phrases for w in p)}),
        words={k: PhraseSet.build(v) for k, v in words.items()},
        reason_priority=tuple(gate.reason_priority),
        min_cjk_chars=gate.thresholds.min_cjk_chars,
        min_letters=gate.thresholds.min_letters,
        max_social_tokens=gate.thresholds.max_social_tokens,
        injection_rules=tuple(rules),
        normaliser=normaliser,
        automaton=automaton,
    )
    # The file's own examples are part of its validation: a list edit that breaks one fails loading.
    where = str(patterns_dir / "gate.yaml")
    for reason, texts in gate.examples.items():
        for text in texts:
            got = keeper.judge(text)
            if got.reason != reason:
                problems.add(where, f"example {text!r}: expected {reason}, got {got.reason or 'passed'}")
    for text in gate.counter_examples:
        got = keeper.judge(text)
        if not got.passed:
            problems.add(where, f"counter-example {text!r}: expected to pass, got {got.reason}")
    for rule in rules:
        for text in rule.examples:
            got_id = keeper.is_injection(text)
            if got_id is None:
                problems.add(where, f"injection example {text!r} of {rule.id} is not flagged")
    problems.raise_if_any()
    logger.debug("gatekeeper loaded from %s: %d phrases, %d injection rules", patterns_dir, len(social), len(rules))
    return keeper


@lru_cache(maxsize=8)
def _cached_gatekeeper(patterns_dir: str) -> Gatekeeper:
    return _build(Path(patterns_dir))
