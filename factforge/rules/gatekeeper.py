"""The gatekeeper: decides per message whether it can carry a fact, and says why when it drops one.

Checks run in this order: empty, injection, then sentence by sentence - social talk (greeting / thanks / goodbye /
acknowledgement / reaction / filler, judged per clause: a sentence is social only when every clause is), a pure
question, or talk to the listener and general remarks with nothing of the speaker in them (no first person, name,
number, time, past tense, third person: :meth:`Gatekeeper._to_listener`); a message every sentence of which is one of
these is dropped - and last too_short: the pipeline still runs the patterns on a too_short message, so "I use Vim."
survives.
Social talk is fixed phrases plus sentence shapes (sequences of word classes, "pointer linking degree*
evaluation": "That sounds like a lot of fun"). Word lists, shapes and thresholds live in
``patterns/gate.yaml``, injection rules in ``patterns/injection.yaml``.

The common path costs one tokenising regex, a few set lookups per word and one Aho-Corasick pass for the
injection keywords; injection regexes run only for rules whose keyword occurs in the text.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import islice
from pathlib import Path
from typing import Any, cast

import regex

from .literals import Starts, clause_checks, meets, required
from .normalise import Normaliser
from .rulefile import (Problems, check_examples, compile_regex, compiled_once, default_patterns_dir, guard_budget,
                       keyword_automaton, own_time, remember, straight_quotes, verified_folder)
from .schema import (REASONS, SOCIAL_KINDS, WORD_KINDS, GateFileSpec, GateShapesSpec, InjectionFileSpec, read,
                     unique)
from ..types import GateDecision

__all__ = ["Gatekeeper", "InjectionRule", "PhraseSet", "REASONS", "SOCIAL_KINDS", "Shape"]

logger = logging.getLogger("factforge.gatekeeper")

# Injection rules are verbose, so long rules can be folded over lines in YAML (spaces are written as \s).
INJECTION_FLAGS = regex.IGNORECASE | regex.VERBOSE
# A shape slot is a class name, or names joined by "|" (a phrase of any of them), optionally followed by "?" (zero
# or one) or "*" (zero or more).
_SLOT = regex.compile(r"([a-z_]+(?:\|[a-z_]+)*)([?*]?)")
# The open slot: a shape slot may be ``rest``, one or more words of any kind within the clause except
# first-person ones and the language's ``open_tail_stop`` ("That's so cool how you ...": talk about the
# listener; "... my sister" is content), and no capitalised word (a name: :data:`NAME`).
REST = "rest"
# Stands for a capitalised word (a name, a place, a title) in the words the social check reads.
NAME = "\x00name"

# Characters of scripts written without spaces: each one is a token of its own.
_CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF),
    (0x20000, 0x2FA1F),
)
_CJK_LOWEST = min(lo for lo, _ in _CJK_RANGES)  # everything below it (all of ASCII) is answered at once
# Content sentences up to this many words are cached too: short ones recur, long ones would only churn the cache.
_SHORT_SENTENCE = 8
# Messages up to this many characters have their decision cached (:attr:`Gatekeeper.decision_cache`).
_CACHED_CHARS = 500
_CLAUSE_MARKS = ",，、:：;"
# Social kinds that say nothing of the speaker even in the first person ("Thanks for sharing it with me").
_COURTESY = frozenset({"thanks", "greeting", "goodbye"})
# Word kinds read as sets of single words (talk to the listener, :meth:`Gatekeeper._to_listener`).
_SINGLE_WORD_KINDS = ("listener", "anchors", "anchor_endings", "generic_anchors", "views", "general_verbs")


def _is_cjk(ch: str) -> bool:
    o = ord(ch)
    return o >= _CJK_LOWEST and any(lo <= o <= hi for lo, hi in _CJK_RANGES)


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
    slots: tuple[tuple[PhraseSet | None, bool, bool], ...]  # (class or None for ``rest``, optional, repeated)
    starts: frozenset[str]  # the words a match can begin with ("" when any word can: it opens with ``rest``)
    # The words an open slot may not hold.
    stop: frozenset[str] = frozenset()
    # The classes a match must hold a phrase of (derived from ``slots``: the required ones).
    required: tuple[PhraseSet, ...] = field(default=None, compare=False, repr=False)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        if self.required is None:
            object.__setattr__(self, "required", tuple(
                words for words, optional, _ in self.slots if words is not None and not optional))

    def ends(self, tokens: Sequence[str], i: int) -> set[int]:
        """Every position at which a match of this shape that starts at ``tokens[i]`` can end."""
        # Slot by slot, the positions a partial match can have reached: most shapes die at their first or
        # second slot, after a dictionary lookup or two.
        n = len(tokens)
        positions: set[int] | tuple[int, ...] = (i,)
        for words, optional, repeated in self.slots:
            reached: set[int] = set()
            if words is None:
                # The open slot: one or more words of the clause, up to a comma or a stop word.
                stop = self.stop
                for p in positions:
                    j = p
                    while j < n and tokens[j] != "," and tokens[j] not in stop:
                        j += 1
                        reached.add(j)
            else:
                by_start, phrases = words.by_start, words.phrases
                frontier = positions
                while frontier:
                    found: set[int] = set()
                    for p in frontier:
                        lengths = by_start.get(tokens[p]) if p < n else None
                        if lengths is not None:
                            for length in lengths:
                                if length == 1 or (p + length <= n and tuple(tokens[p:p + length]) in phrases):
                                    found.add(p + length)
                    if not repeated:
                        reached = found
                        break
                    # A repeated slot ("*", optional by construction) takes zero or more phrases.
                    frontier = found - reached
                    reached |= frontier
                if repeated and not optional:
                    reached = set()  # never leaves the slot: the state walk this replaces could not either
                elif optional:
                    reached.update(positions)
            if not reached:
                return reached
            positions = reached
        out = set(positions)
        out.discard(i)
        return out


@dataclass(frozen=True, slots=True)
class ClassMasks:
    """Which shape classes a sentence holds a phrase of, one bit per class: one pass over the sentence answers
    for every class at once (a shape needs a phrase of each of its required classes before it is tried)."""

    singles: Mapping[str, int]  # a one-word phrase -> the classes holding it
    phrases: Mapping[tuple[str, ...], int]  # a longer phrase -> the classes holding it
    # The first two words of a longer phrase -> (the classes holding those two words as a phrase, the lengths of the
    # phrases of three or more words they open): most words that open a phrase are followed by no second word of one,
    # so a sentence is read pair by pair, and a longer slice is looked up only behind a pair that opens one.
    pairs: Mapping[tuple[str, str], tuple[int, tuple[int, ...]]]
    required: Mapping[int, int]  # id of a shape -> its required classes

    @classmethod
    def build(cls, shapes: Mapping[str, tuple[Shape, ...]]) -> ClassMasks:
        bits = {id(words): 1 << i for i, words in enumerate(_classes(shapes))}
        singles: dict[str, int] = {}
        phrases: dict[tuple[str, ...], int] = {}
        for words in _classes(shapes):
            for phrase in words.phrases:
                if len(phrase) == 1:
                    singles[phrase[0]] = singles.get(phrase[0], 0) | bits[id(words)]
                else:
                    phrases[phrase] = phrases.get(phrase, 0) | bits[id(words)]
        pairs: dict[tuple[str, str], tuple[int, set[int]]] = {}
        for phrase, found in phrases.items():
            mask, longer = pairs.get((phrase[0], phrase[1]), (0, set()))
            if len(phrase) == 2:
                mask |= found
            else:
                longer.add(len(phrase))
            pairs[phrase[0], phrase[1]] = (mask, longer)
        required: dict[int, int] = {}
        for shape_list in shapes.values():
            for shape in shape_list:
                mask = 0
                for words in shape.required:
                    mask |= bits[id(words)]
                required[id(shape)] = mask
        return cls(singles, phrases, {k: (m, tuple(sorted(ls))) for k, (m, ls) in pairs.items()}, required)

    def of(self, words: Sequence[str], present: Iterable[str]) -> int:
        """The classes a phrase of which occurs in ``words`` (``present``: their set)."""
        mask = 0
        singles = self.singles
        for word in present:
            found = singles.get(word)
            if found:
                mask |= found
        pairs, phrases = self.pairs, self.phrases
        n = len(words)
        for i, pair in enumerate(zip(words, islice(words, 1, None))):
            entry = pairs.get(pair)
            if entry is not None:
                mask |= entry[0]
                for length in entry[1]:
                    if i + length <= n:
                        found = phrases.get(tuple(words[i:i + length]))
                        if found:
                            mask |= found
        return mask


@dataclass(frozen=True, slots=True)
class InjectionRule:
    """One prompt-injection rule: it fires when a keyword occurs (lowercased) and the regex matches.

    ``pattern``: the regex's source (compiled IGNORECASE and VERBOSE on first use), or a regex already compiled
    (kept as given; ``pattern`` then holds its source)."""

    id: str
    language: str
    keywords: tuple[str, ...]
    pattern: str | regex.Pattern[str]
    examples: tuple[str, ...] = ()
    counter_examples: tuple[str, ...] = ()
    description: str = ""
    # Compiled at load when the folder's files are checked then; from verified files, on first use.
    _compiled: list[regex.Pattern[str]] = field(default_factory=list, repr=False, compare=False)
    _starts: list[Starts] = field(default_factory=list, repr=False, compare=False)
    _requires: list[tuple[Any, ...]] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.pattern, regex.Pattern):
            self._compiled.append(self.pattern)
            object.__setattr__(self, "pattern", self.pattern.pattern)

    @property
    def regex(self) -> regex.Pattern[str]:
        """The compiled regex (IGNORECASE and VERBOSE unless given compiled), compiled once."""
        if self._compiled:
            return self._compiled[0]
        return compiled_once(self._compiled, str(self.pattern), INJECTION_FLAGS, f"injection rule {self.id}")

    @property
    def starts(self) -> Starts:
        """Where the regex can first start a match in an ASCII text (:class:`~.literals.Starts`), worked out once."""
        if not self._starts:
            self._starts.append(Starts(str(self.pattern), self.regex.flags))
        return self._starts[0]

    @property
    def requires(self) -> tuple[Any, ...]:
        """The words the regex cannot match an ASCII text without (:func:`~.literals.required`, as checks of the
        lower-cased text: :func:`~.literals.meets`), less those every keyword holds; worked out once."""
        if not self._requires:
            rx = self.regex
            self._requires.append(clause_checks(
                c for c in required(rx.pattern, bool(rx.flags & regex.VERBOSE))
                if not all(any(w in k for w in c) for k in self.keywords)))
        return self._requires[0]


@dataclass(frozen=True, slots=True)
class _Sentence:
    words: list[str]
    question_mark: bool
    # Positions of capitalised words in ``words`` (a name is only ever one of these).
    capitals: frozenset[int] = frozenset()


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
    # Per shape with an open slot (by ``id``), its required classes: a sentence with words outside
    # ``vocabulary`` may still be social when, for some such shape, a phrase of each of them occurs in it.
    open_keys: tuple[tuple[int, tuple[PhraseSet, ...]], ...]
    # The same shapes (id, required classes as in ``masks``) by a first word of their most selective required
    # class (the one with fewest first words): only shapes indexed under a word of the sentence are checked further.
    open_index: Mapping[str, tuple[tuple[int, int], ...]]
    # ``shapes`` split by start word into the closed ones and the ones with an open slot.
    closed_shapes: Mapping[str, tuple[Shape, ...]]
    open_shapes: Mapping[str, tuple[Shape, ...]]
    reason_priority: tuple[str, ...]
    # Talk to the listener (:meth:`_to_listener`): its words, the words that keep a sentence (first person, names'
    # stand-in, instruction words and ``anchors``), and word endings that keep one unless the word is social.
    listener_words: frozenset[str]
    anchor_words: frozenset[str]
    anchor_endings: tuple[str, ...]
    # A clause with none of the ``generic_anchors`` (a definite or third-person subject) and one of these words (an
    # evaluation) is a general remark: "Animals are amazing", "Yoga is a great way to relax".
    generic_anchors: frozenset[str]
    truism_cues: frozenset[str]
    # Words of a view (``views``): a message that holds one is never dropped as talk to the listener.
    view_words: frozenset[str]
    first_person_words: frozenset[str]
    general_verbs: frozenset[str]
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
    # ``tokenizer`` for ASCII text, on the stdlib engine: the same tokens, found in a third of the time.
    ascii_tokenizer: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    # The shape classes as bits (derived from ``shapes``).
    masks: ClassMasks = field(default=None, compare=False, repr=False)  # type: ignore[assignment]
    # Message -> decision, for messages up to _CACHED_CHARS: a chat repeats itself ("Thanks!", "Uh-huh.", "What do
    # you do for fun?": a fifth of the benchmark's mix). Never an injection verdict: one reached by running out
    # of time is no property of the text.
    decision_cache: dict[str, GateDecision] = field(default_factory=dict, init=False, compare=False, repr=False)

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> Gatekeeper:
        """Load ``gate.yaml`` and ``injection.yaml``; cached per folder. Bad files raise ONE PatternError."""
        return _cached_gatekeeper(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    # ----------------------------------------------------------------------------------------- checks

    def compile_all(self) -> int:
        """Compile every injection rule's regex now rather than on first use (a server or a worker does this at
        start); how many were not compiled yet."""
        fresh = sum(not rule._compiled for rule in self.injection_rules)
        for rule in self.injection_rules:
            _ = rule.regex, rule.starts, rule.requires
        return fresh

    def is_injection(self, text: str) -> str | None:
        """The id of the first injection rule that matches ``text`` or one of its readings (look-alikes,
        zero-width characters, leetspeak, base64, rot13 undone: :class:`~factforge.normalise.Normaliser`),
        or None. A rule that runs out of time counts as a match: a guard that cannot finish fails closed."""
        if not text or not self.injection_rules:
            return None
        for reading in self.normaliser.readings(text):
            candidates: set[int] = set()
            low = reading.lower()
            for _end, indices in self.automaton.iter(low):
                candidates.update(indices)
            if not candidates:
                continue
            ascii_text = reading.isascii()
            for index in sorted(candidates):
                rule = self.injection_rules[index]
                # In ASCII text a rule whose regex needs a word the text lacks cannot match ("great" without "now":
                # praise, no hand-over); the regex's own verdict is still the only "yes".
                if ascii_text and not meets(rule._requires[0] if rule._requires else rule.requires, low):
                    continue
                # In ASCII text the regex's superset says whether it can match at all, and from where; it answers
                # only "no" or "search from here", so the guard still fails closed on the regex's own verdict.
                starts = rule.starts
                pos = starts.first(reading, low)
                if pos < 0:
                    continue
                try:
                    # ... and the regex is tried where the superset matches (Starts.search), not at every position.
                    found = own_time(lambda timeout: starts.search(rule.regex, reading, pos, low, timeout),
                                     guard_budget(len(reading)))
                    if found is not None:
                        return rule.id
                except TimeoutError:
                    logger.warning("injection rule %s ran out of time on %d chars; treated as a match",
                                   rule.id, len(reading))
                    return rule.id
        return None

    def judge(self, text: str) -> GateDecision:
        """Whether ``text`` can carry a fact; when not, ``reason`` is one of :data:`REASONS`."""
        decision = self.decision_cache.get(text)
        if decision is None:
            decision = self._judge(text)
            if decision.reason != "injection" and len(text) <= _CACHED_CHARS:
                remember(self.decision_cache, text, decision)
        return decision

    def _judge(self, text: str) -> GateDecision:
        if not text or text.isspace():
            return GateDecision(False, "empty", "no text")
        rule_id = self.is_injection(text)
        if rule_id is not None:
            return GateDecision(False, "injection", rule_id)
        sentences = self._sentences(text)
        if not sentences:
            return GateDecision(False, "empty", "no words")
        # Sentence by sentence: social talk (read by the shapes in a short message only: a long one is never just
        # "thanks"), a question, or talk to the listener with nothing of the speaker in it each carry no fact; the
        # first sentence that is none of these passes the message.
        social = sum(len(s.words) for s in sentences) <= self.max_social_tokens
        kinds: set[str] = set()
        question = None  # why the first question is one
        listener = False  # talk to the listener or a general remark
        own = False  # a reaction or an agreement in the first person ("Me too!", "I love them too"), not thanks
        for sentence in sentences:
            words = _social_words(self, sentence, alone=len(sentences) == 1)
            if social:
                sentence_kinds = self._social_kinds(words)
                if sentence_kinds is not None:
                    kinds.update(sentence_kinds)
                    own = own or (sentence_kinds.isdisjoint(_COURTESY) and not self.first_person_words.isdisjoint(words))
                    continue
            asked = self._question(sentence)
            if asked is not None:
                question = question or asked
                continue
            if self._to_listener(words):
                listener = True
                continue
            break
        else:
            # A view ("Finding support is key") or a reaction in the first person ("Queen is great! I love them too.",
            # "Me too! It's the perfect music to get you pumped up.") in a message the shapes read as social talk alone
            # stays social; next to talk to the listener or a general remark it may be the speaker's own: the message
            # passes.
            if not (listener and (own or any(not self.view_words.isdisjoint(s.words) for s in sentences))):
                if question is not None:
                    return GateDecision(False, "question", question)
                if listener:
                    return GateDecision(False, "reaction", "every sentence is social talk, a question or talk to "
                                        "the listener with nothing of the speaker")
                reason = next((k for k in self.reason_priority if k in kinds), "filler")
                return GateDecision(False, reason, "whole message is " + ", ".join(sorted(kinds)))
        cjk, letters = self._size(sentences)
        if cjk < self.min_cjk_chars and letters < self.min_letters:
            return GateDecision(False, "too_short", f"{cjk} CJK characters, {letters} letters")
        return GateDecision(True)

    # ---------------------------------------------------------------------------------------- helpers

    def _sentences(self, text: str) -> list[_Sentence]:
        """Word tokens per sentence (lowercased, apostrophes unified), with whether a '?' ended it."""
        out: list[_Sentence] = []
        words: list[str] = []
        capitals: list[int] = []
        text = straight_quotes(text)
        tokenizer = self.ascii_tokenizer if self.ascii_tokenizer is not None and text.isascii() else self.tokenizer
        raws = tokenizer.findall(text)
        # One lower() for all tokens (the separator is no token character, so the split keeps them aligned).
        tokens = "\x01".join(raws).lower().split("\x01") if raws else []
        question_marks, enders, clause_marks = self.question_marks, self.enders, self.clause_marks
        for raw, token in zip(raws, tokens, strict=True):
            if token in question_marks or token in enders:
                if words:
                    out.append(_Sentence(words, token in question_marks, frozenset(capitals)))
                    words = []
                    capitals = []
            elif token in clause_marks:
                # Kept as a token so a first-person pronoun after a comma reads as a new clause.
                if words:
                    words.append(",")
            else:
                # "Caroline", "NASA" (a lone "I" is never a name; "I'm" is first-person, "OK" a social word).
                if raw != token and raw[0].isupper() and len(raw) > 1:
                    capitals.append(len(words))
                words.append(token)
        if words:
            out.append(_Sentence(words, False, frozenset(capitals)))
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
        all_known = vocabulary.issuperset(words)
        if not all_known and not self.open_keys:
            return None
        key = tuple(words)
        cache = self.social_cache
        if key in cache:
            found = cache[key]
            return None if found is None else set(found)
        foreign: list[bool] | None = None
        # The classes a phrase of which occurs in the sentence: a shape is tried only where each of its required
        # classes does.
        present = set(words)
        mask = self.masks.of(words, present)
        # The open shapes worth a try: a phrase of each of their required classes occurs in the sentence.
        allowed = {shape_id for word in present for shape_id, required in self.open_index.get(word, ())
                   if required & mask == required} if self.open_keys else set()
        if not all_known:
            if not allowed:
                if len(words) <= _SHORT_SENTENCE:
                    self._remember(key, None)  # short replies recur ("I'm in", "Boston, yes")
                return None
            # Per position: does a word outside the vocabulary follow in its clause? Only an open slot can
            # cover it, so the closed shapes need not be tried there.
            foreign = [False] * len(words)
            ahead = False
            for i in range(len(words) - 1, -1, -1):
                w = words[i]
                ahead = False if w == "," else ahead or w not in vocabulary
                foreign[i] = ahead
        kinds: set[str] = set()
        result = kinds if self._tile(words, 0, kinds, set(), foreign, allowed, mask) else None
        self._remember(key, result)
        return result

    def _remember(self, key: tuple[str, ...], result: set[str] | None) -> None:
        remember(self.social_cache, key, None if result is None else frozenset(result))

    def _tile(self, words: list[str], i: int, kinds: set[str], dead: set[int],
              foreign: list[bool] | None = None, allowed: set[int] | frozenset[int] = frozenset(),
              mask: int | None = None) -> bool:
        n = len(words)
        while i < n and words[i] == ",":
            i += 1
        if i == n:
            return True
        if i in dead:
            return False
        length, kind = self.social.match_at(words, i)
        if kind is not None and self._tile(words, i + length, kinds, dead, foreign, allowed, mask):
            kinds.add(kind)
            return True
        only_open = foreign is not None and foreign[i]
        shapes: tuple[Shape, ...] = () if only_open else self.closed_shapes.get(words[i], ())
        if allowed:
            opened = self.open_shapes.get(words[i], ())
            if i == 0 or words[i - 1] == ",":
                # A shape that opens with the open slot (a general subject) starts a clause, never inside one.
                opened += self.open_shapes.get("", ())
            shapes += tuple(shape for shape in opened if id(shape) in allowed)
        if mask is None:
            mask = self.masks.of(words, set(words))
        required_of = self.masks.required
        for shape in shapes:
            required = required_of[id(shape)]
            if required & mask != required:
                continue
            for end in sorted(shape.ends(words, i), reverse=True):
                # A shape closes a clause: two shapes back to back ("he said" + "it was just") are not one.
                if end < n and words[end] != "," and not self.social.match_at(words, end)[0]:
                    continue
                if self._tile(words, end, kinds, dead, foreign, allowed, mask):
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

    def _to_listener(self, words: list[str]) -> bool:
        """Whether a sentence holds nothing that could be a fact of the speaker's: every clause of it is social talk,
        speaks to or about the listener (a word of ``listener``) with an evaluation ("Your passion and commitment are
        awesome"), or is a general remark (an evaluation of something, no definite or third-person subject: "Animals
        are amazing"). Never with a first-person word, a name, a number, an instruction word (``open_tail_stop``) or
        another anchor (a third person, a time, a past tense, a view): not "You should come to my party", "You met
        her last year" or "Talking about it is crucial, and you're so brave"."""
        if len(words) > self.max_social_tokens:
            return False
        anchors, endings, vocabulary = self.anchor_words, self.anchor_endings, self.vocabulary
        for word in words:
            if word in anchors or word == NAME:
                return False
            if not word.isalpha() and any(ch.isdigit() for ch in word):
                return False
            if endings and word.endswith(endings) and word not in vocabulary and len(word) > 4:
                return False
        listener, generic, cues = self.listener_words, self.generic_anchors, self.truism_cues
        start = 0
        for i in range(len(words) + 1):
            if i == len(words) or words[i] == ",":
                clause = words[start:i]
                start = i + 1
                if not clause:
                    continue
                if self._social_kinds(clause) is not None:
                    continue
                # Without an evaluation a clause may tell how things go for the speaker, "you" meaning anyone ("you
                # call this number", "you can smell ether in the air sometimes").
                if cues.isdisjoint(clause):
                    return False
                if not listener.isdisjoint(clause):
                    continue
                # A general remark says what something is: without a verb of being ("just relaxing and listening to
                # some music") it tells what the speaker does.
                if generic.isdisjoint(clause) and any(w in self.general_verbs or w.endswith("'s") for w in clause):
                    continue
                return False
        return True

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
                # A question word inside the clause opens a subordinate clause, not an inverted question:
                # "Remember when we volunteered together?" tells what the speaker did.
                if prev in self.words["wh_words"].starts and i > 1 and words[i - 2] != "," \
                        and words[i - 2] not in self.words["aux_words"].starts:
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
    terminators = _terminators(segment)
    question_marks = frozenset("?？")
    clause_marks = _CLAUSE_MARKS
    # A word keeps inner apostrophes, hyphens, dots, slashes and underscores ("uh-huh", "i'm", "3.12").
    pattern = (
        r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"
        r"|[\p{L}\p{N}_]+(?:['\-./+#][\p{L}\p{N}_]+)*"
        r"|[?？]"
        f"|[{regex.escape(terminators)}\\n]"
        f"|[{regex.escape(clause_marks)}]"
    )
    return regex.compile(pattern), frozenset(terminators) | {"\n"}, question_marks


def _terminators(segment: Mapping[str, str]) -> str:
    return (segment["latin_terminators"] + segment["cjk_terminators"]).replace("?", "").replace("？", "")


def _build_ascii_tokenizer(segment: Mapping[str, str]) -> re.Pattern[str]:
    """:func:`_build_tokenizer`'s pattern as it reads ASCII text: no CJK character can occur there, and the only
    letters and digits of ``\\p{L}`` and ``\\p{N}`` are ``A-Za-z`` and ``0-9``."""
    terminators = "".join(ch for ch in _terminators(segment) if ch.isascii())
    clause_marks = "".join(ch for ch in _CLAUSE_MARKS if ch.isascii())
    return re.compile(
        r"[A-Za-z0-9_]+(?:['\-./+#][A-Za-z0-9_]+)*"
        r"|[?]"
        f"|[{re.escape(terminators)}\\n]"
        f"|[{re.escape(clause_marks)}]"
    )


def _social_words(keeper: Gatekeeper, sentence: _Sentence, alone: bool = True) -> list[str]:
    """The words the social check reads: names addressed to the listener cut ("Thanks, Caroline!", "Hey
    John, ..."), and any other capitalised word outside the vocabulary replaced by :data:`NAME`, which no
    open tail may hold ("You look great in that dress from Zara" names something, so it is content).

    A vocative is a capitalised word outside the gate's vocabulary that stands alone between clause
    marks - after a comma, at the sentence start or after a one-word social phrase ("hey", "thanks"),
    and before a comma or the sentence end; or, the comma left out, at a clause's start before a word of
    ``vocative_next`` ("Jon you've got this") or at its end after a social phrase of two words or more ("Same here
    Caroline"). So "Caroline moved to Boston" keeps its name, and a bare
    answer ("Yes, Boston.") keeps it too: with the name gone, only ``bare_answers`` would be left. A bare answer
    keeps it in a message of one sentence only (``alone``): "Yeah, Maria! We can do it together!" opens with the
    listener's name, while a lone name stays an answer wherever it stands ("Boston. It's lovely.").
    """
    words = sentence.words
    caps = sentence.capitals
    vocative_next = keeper.words["vocative_next"]
    # Most sentences hold only their capitalised first word, which is neither a vocative nor a name.
    if not caps or (len(caps) == 1 and 0 in caps and (len(words) < 2 or (words[1] != ","
                                                                         and words[1] not in vocative_next.starts))):
        return words
    n = len(words)
    names = {i for i in sentence.capitals
             if words[i] not in keeper.vocabulary and words[i] not in keeper.words["first_person"].starts}
    drop: set[int] = set()
    for i in names:
        if i + 1 < n and words[i + 1] != ",":
            # Chat often leaves out the comma after a name: "Jon you've got this", "John that's awesome".
            if (i == 0 or words[i - 1] == ",") and vocative_next.match_at(words, i + 1)[0]:
                drop.add(i)
            continue
        prev = words[i - 1] if i else ","
        if prev == "," or keeper.social.phrases.get((prev,)) is not None:
            drop.add(i)
            continue
        # ... or before it: "Same here Caroline", "Great news John" (a social phrase that is the whole clause before).
        j = i
        while j > 0 and words[j - 1] != ",":
            j -= 1
        if j < i - 1 and keeper.social.match_at(words, j)[0] == i - j:
            drop.add(i)
    # A sentence's first word is capitalised whatever it is, so it says nothing about a name.
    names.discard(0)
    kept = [NAME if i in names else w for i, w in enumerate(words) if i not in drop]
    # Commas left doubled or at an edge by the cut carry nothing.
    out = [w for i, w in enumerate(kept) if w != "," or (0 < i < len(kept) - 1 and kept[i - 1] != ",")]
    content = [w for w in out if w != ","]
    if drop and (not content or (alone and len(content) == 1 and keeper.words["bare_answers"].match_at(content, 0)[0])):
        return [NAME if i in names else w for i, w in enumerate(words)]
    return out


def _class_phrases(gate: GateFileSpec, name: str, tokenizer: regex.Pattern[str]) -> list[tuple[str, ...]]:
    """The phrases of the shape class ``name`` as token tuples (none if there is no such class)."""
    return [_tokenise_phrase(tokenizer, value) for value in gate.shapes.classes.get(name, ())]


def _tokenise_phrase(tokenizer: regex.Pattern[str], phrase: str) -> tuple[str, ...]:
    return tuple(tokenizer.findall(straight_quotes(phrase.lower())))


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
                if m is None or (m.group(1) != REST and not _known(m.group(1), gate.shapes.classes)):
                    problems.add(where, f"shapes.kinds.{kind}: {text!r}: {part!r} is not a class of shapes.classes")
            if any(name == REST and mod for name, mod in slots):
                problems.add(where, f"shapes.kinds.{kind}: {text!r}: {REST!r} takes no ? or *")
            if slots and all(mod or name == REST for name, mod in slots):
                problems.add(where, f"shapes.kinds.{kind}: {text!r} has no required class, so it matches nothing")
    return gate


def _shape_slots(text: str, classes: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (class, modifier) slots of one shape ("pointer linking? evaluation", "compliment rest"); unknown
    classes left out."""
    return [(m.group(1), m.group(2)) for m in map(_SLOT.fullmatch, text.split())
            if m is not None and (m.group(1) == REST or _known(m.group(1), classes))]


def _known(slot: str, classes: Mapping[str, Any]) -> bool:
    """Whether every class a slot names ("evaluation", "noun|evaluation") is defined."""
    return all(name in classes for name in slot.split("|"))


def _build_shapes(tokenizer: regex.Pattern[str], spec: GateShapesSpec, where: str,
                  problems: Problems, stop: frozenset[str] = frozenset()) -> dict[str, tuple[Shape, ...]]:
    """Compile the checked ``shapes`` block and index each shape by the words it may start with.

    ``stop``: the words an open slot (``rest``) may not hold."""
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
            for name, _ in slots:
                if "|" in name and name not in classes:
                    classes[name] = PhraseSet.build({p: name for part in name.split("|") for p in classes[part].phrases})
            compiled = tuple((None if name == REST else classes[name], mod != "", mod == "*") for name, mod in slots)
            starts: set[str] = set()
            for words, optional, _ in compiled:
                if words is None:
                    starts.add("")
                    break
                starts |= words.starts
                if not optional:
                    break
            rest = any(words is None for words, _, _ in compiled)
            shape = Shape(kind, text, compiled, frozenset(starts), stop if rest else frozenset())
            for word in starts:
                index.setdefault(word, []).append(shape)
    return {word: tuple(shapes) for word, shapes in index.items()}


def _key_words(shape: Shape) -> tuple[PhraseSet, ...]:
    """The required classes of a shape: a phrase of each occurs in every match."""
    return shape.required


def _classes(shapes: Mapping[str, tuple[Shape, ...]]) -> list[PhraseSet]:
    """The distinct word classes the shapes use: each shape is indexed under every word it may start with, and a
    class recurs across shapes, so walking the index entries reads each class many times (2.5M steps)."""
    return list({id(words): words for shape_list in shapes.values() for shape in shape_list
                 for words, _, _ in shape.slots if words is not None}.values())


def _open_index(shapes: Mapping[str, tuple[Shape, ...]], masks: ClassMasks) -> tuple[
        tuple[tuple[int, tuple[PhraseSet, ...]], ...], dict[str, tuple[tuple[int, int], ...]]]:
    """The open shapes (with a ``rest`` slot) with their required classes, and those indexed by a word of
    their most selective required class: a message holding none of its words cannot match the shape."""
    unique_shapes = {id(s): s for shape_list in shapes.values() for s in shape_list}.values()
    # How many classes a word opens a phrase of: a word many classes share ("is", "can", "really") is a common
    # one, found in most sentences, so a class of such words selects little.
    shared: dict[str, int] = {}
    for words in _classes(shapes):
        for word in words.starts:
            shared[word] = shared.get(word, 0) + 1

    def breadth(key: PhraseSet) -> int:
        return sum(shared[word] for word in key.starts)

    open_keys = tuple((id(shape), _key_words(shape)) for shape in unique_shapes if shape.stop)
    index: dict[str, list[tuple[int, int]]] = {}
    for shape_id, keys in open_keys:
        if keys:
            for word in min(keys, key=breadth).starts:
                index.setdefault(word, []).append((shape_id, masks.required[shape_id]))
    return open_keys, {w: tuple(v) for w, v in index.items()}


def _check_gate_examples(keeper: Gatekeeper, gate: GateFileSpec, rules: Sequence[InjectionRule], where: str,
                         problems: Problems) -> None:
    """The file's own examples are part of its validation: a list edit that breaks one fails loading."""
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
            if keeper.is_injection(text) is None:
                problems.add(where, f"injection example {text!r} of {rule.id} is not flagged")


def _load_injection(path: Path, problems: Problems, verified: bool) -> tuple[list[InjectionRule], Normaliser]:
    """The injection rules of ``path``; from ``verified`` files (see :func:`~.rulefile.verified_folder`) without
    compiling or checking them again (each regex compiles on first use), else each compiled, timed and run on its
    examples now."""
    where = str(path)
    file = read(InjectionFileSpec, path, problems)
    if file is None:
        return [], Normaliser()
    rules: list[InjectionRule] = []
    for spec in unique(file.rules, where, set(), problems):
        rule = InjectionRule(spec.id, spec.language, tuple(k.lower() for k in spec.keywords), spec.regex,
                             tuple(spec.examples), tuple(spec.counter_examples), spec.description)
        if not verified:
            at = f"{where}: rule {spec.id}"
            rx = compile_regex(spec.regex, at, problems, INJECTION_FLAGS,
                               hostile=tuple(k.lower() + " " for k in spec.keywords))
            if rx is None:
                continue
            rule._compiled.append(rx)
            check_examples(rx, rule.keywords, rule.examples, rule.counter_examples, at, problems)
        rules.append(rule)
    return rules, Normaliser.from_spec(file.normalise)


def _build(patterns_dir: Path) -> Gatekeeper:
    problems = Problems()
    gate = _load_gate(patterns_dir / "gate.yaml", problems)
    # Verified files passed every check below when they were verified (rulefile.check_bundled loads them all).
    verified = verified_folder(patterns_dir)
    rules, normaliser = _load_injection(patterns_dir / "injection.yaml", problems, verified)
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
                elif key in _SINGLE_WORD_KINDS and len(phrase) != 1:
                    problems.add(f"{patterns_dir / 'gate.yaml'}: languages.{lang}.{key}", f"{value!r} is not one word")
                elif key in SOCIAL_KINDS:
                    # A phrase listed under two kinds keeps the first (languages are read in file order).
                    social.setdefault(phrase, key)
                else:
                    words[key][phrase] = key
    for name in gate.truism_cues:
        if name not in gate.shapes.classes:
            problems.add(str(patterns_dir / "gate.yaml"), f"truism_cues: {name!r} is not a class of shapes.classes")
    stop = frozenset({NAME, *(w for kind in ("first_person", "open_tail_stop") for p in words[kind] for w in p)})
    shapes = _build_shapes(tokenizer, gate.shapes, str(patterns_dir / "gate.yaml"), problems, stop)
    automaton = keyword_automaton(rule.keywords for rule in rules)
    masks = ClassMasks.build(shapes)
    open_keys, open_index = _open_index(shapes, masks)
    keeper = Gatekeeper(
        tokenizer=tokenizer,
        enders=enders,
        question_marks=question_marks,
        clause_marks=frozenset(_CLAUSE_MARKS),
        social=PhraseSet.build(social),
        shapes=shapes,
        vocabulary=frozenset({",", *(w for p in social for w in p),
                              *(w for words in _classes(shapes) for p in words.phrases for w in p)}),
        words={k: PhraseSet.build(v) for k, v in words.items()},
        open_keys=open_keys,
        open_index=open_index,
        closed_shapes={w: c for w, sl in shapes.items() if (c := tuple(x for x in sl if not x.stop))},
        open_shapes={w: o for w, sl in shapes.items() if (o := tuple(x for x in sl if x.stop))},
        reason_priority=tuple(gate.reason_priority),
        listener_words=frozenset(w for p in words["listener"] for w in p),
        anchor_words=frozenset(w for kind in ("first_person", "open_tail_stop", "anchors", "views") for p in words[kind]
                               for w in p),
        anchor_endings=tuple(p[0] for p in words["anchor_endings"]),
        generic_anchors=frozenset(p[0] for p in words["generic_anchors"]),
        view_words=frozenset(p[0] for p in words["views"]),
        first_person_words=frozenset(w for p in words["first_person"] for w in p),
        general_verbs=frozenset(p[0] for p in words["general_verbs"]),
        # A word of degree is no evaluation of its own ("pretty", "kind of", "real quick").
        truism_cues=frozenset(p[0] for name in gate.truism_cues for p in _class_phrases(gate, name, tokenizer)
                              if len(p) == 1) - {p[0] for p in _class_phrases(gate, "degree", tokenizer)},
        min_cjk_chars=gate.thresholds.min_cjk_chars,
        min_letters=gate.thresholds.min_letters,
        max_social_tokens=gate.thresholds.max_social_tokens,
        injection_rules=tuple(rules),
        normaliser=normaliser,
        automaton=automaton,
        ascii_tokenizer=_build_ascii_tokenizer(gate.segment.model_dump()),
        masks=masks,
    )
    if not verified:
        _check_gate_examples(keeper, gate, rules, str(patterns_dir / "gate.yaml"), problems)
    problems.raise_if_any()
    logger.debug("gatekeeper loaded from %s: %d phrases, %d injection rules", patterns_dir, len(social), len(rules))
    return keeper


@lru_cache(maxsize=8)
def _cached_gatekeeper(patterns_dir: str) -> Gatekeeper:
    return _build(Path(patterns_dir))
