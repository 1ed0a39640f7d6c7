"""Checking an LLM reply against its source text before any of it becomes a fact.

A small local model hallucinates, restates questions and can be talked into writing instructions into
memory. Every item of a reply is therefore checked on its own; a bad item is rejected with a reason (the
counts travel back to the caller), the good ones become :class:`Fact` / :class:`Entity` /
:class:`Relationship` values with ``method="llm"`` and an explanation pointing at the source text.

Grounding is lexical: entity names must occur in the source (case-insensitive), every content word of a fact
(3+ letters, not a framing or function word such as "prefers" or "the") or CJK bigram must occur in the source,
and its numbers and names must too. Words are compared by light stem, by lemma (data/word_forms.tsv: "taught" is
"teach"), by derivational base ("bakery" / "baker"), through a related everyday word ("mother" by "mom"), a
narrower one ("pet" by "dog") or a place inside a broader one ("Portugal" by "Lisbon", data/places.yaml). The
source clause that supports the fact must agree with it on negation ("User owns a car" is not "I don't own a
car"), on whether it ended ("User has a dog" is not "I used to have a dog"; "User played hockey" is), on whom it
is about ("User is vegan" is not "my sister is vegan"; "User left their wife" is not "my wife left me"), and must
not only wish for it ("I've always wanted a dog") nor still plan it ("I'm about to call the city" is not "User
called the city"); a liking must not turn into a dislike or back, nor like what every clause naming it dislikes; a
named doer ("Tom owns the auth service") must be in the clause that says the deed, and a relative clause ("my
brother who lives in Australia") is about the one it follows. A good feeling ("User is excited about the
series") is grounded like a liking, by the source's liking or praise ("can't wait!"); "User owns X" needs a sentence
that names X and says the speaker has it ("I have", "bought", or "my" / "our" just before the thing; not
"family-owned"); a fact that places the user by a name or a word ("lives in", "born in", "lives on a farm") needs it
in the clause that says so; "my brother" says the speaker has one whatever its clause negates, wishes or ended. Stop
38 added: the two sides of one deed (take / teach, buy / sell, start / stop, play / watch) are not each other; a
clause that only appraises ("kayaking sounds fun") grounds only an opinion, liking or plan; "would be", "might", "to
become", "excited to" are still to be done, for a done deed and for what the user is; of clauses that each say part
of a fact, those with its name (or a pointer to it) say it; what the user's someone else is needs a stretch of the
source about them; a participle joined by a comma has the subject before it; a role only someone's ("a veteran's
hospital") is not the user's; and a fact its own words do not ground is read once more as data/fact_senses.yaml
restates it ("User doesn't eat meat" as "User is a vegetarian"). Stop 39 added everyday words, kin and times as data
(pup, hubby, "my mom's mom", in-laws, a job by its role, "on Thursdays" as weekly, an age by its decade), an ex-partner
that ends only themselves, "with my kids" as an object, before / after as two sides, and a negated or disliking fact
grounded by its own words and their equals only ("User has no pets" is more than "I don't have a dog"). Stop 40 added
dates made absolute (a weekday or month without a year read both ways unless the fact is told in the past, an open time
by its start), a first time that is not many times, who visits whom, where a change went ("Team moved to Jenkins" from
"from Jenkins to ..."), a fall or rise said by two amounts, and everyday and team-chat words as data. Stop 40b added a
fact told as something said, checked and stored without its frame ("User mentioned that they have a dog" -> "User has a
dog", data/fact_senses.yaml ``reporting``), a role only studied or the first word of another role ("I study nursing",
"a vet tech": no nurse, no veterinarian) and what ends only the thing it names ("I gave up my car", "since I finished
grad school"). Stop 41 added British and everyday words as data (nan, postie, telly, mate, a hen do), numbers with
a scale ("2 grand" is 2000, data/fact_checks.yaml ``scales``), not having as not owning, and a participle after "is" /
"getting" read as no past for a date ("User is getting married in June 2027"). Each rejection
names what was unsupported (``explain`` of :func:`validate_items`). A grounded fact whose category has no cue in
its words ("User mostly reads fiction" as a preference) is kept as "other", its explanation saying so. The floor
(words, a content word and a clause, not characters), the word lists and the cue words each category needs live in
``data/fact_checks.yaml``; what ended, wishes, possessives, derivational suffixes and changes from one thing to
another in ``data/fact_senses.yaml``.

A sentence embedding (MiniLM) was measured as a second judge of paraphrases and left out: it rates a swapped
object as close as a faithful paraphrase ("bank" / "bakery" 0.36, "baker" / "bakery" 0.73, "Japanese" /
"Korean" 0.66), and fact-to-sentence similarity told true from invented facts at an AUC of 0.64-0.71 on
bench/eval_validate.py's two case sets. Measured again in stop 36 on the facts that lexical grounding rejects
(old, heldout, fresh, blind, blind2: 121 true, 492 invented), where it would have to decide: similarity of the
fact to its best source clause 0.65 AUC, to the fact with the unsupported word swapped for a source word 0.69,
word-to-word 0.37-0.41 (co-hyponyms are closer than paraphrases); above 0.8 similarity it passes 10 true facts
and 33 invented ones. Measured again in stop 37 on the facts of the eight tuning sets (old .. tune36) that lexical
grounding rejects for exactly one unsupported word (187 true / 658 invented before stop 37's rules, 144 / 661
after): fact to best clause 0.647 AUC, the word to its nearest source word 0.35 (the swapped word of an invented
fact is the closer one); the best pair of thresholds (fact similarity >= t and word similarity < u) passes about as
many invented facts as true ones (0.75 / 0.40: 12 of the 144 true, 10 of the 661 invented; 0.70 / 0.35: 10 and 11;
0.80 / 0.30: none of either), where the rules of stop 37 pass 56 more true facts of those sets and no more invented
one (12 fewer). WordNet (3.x, its synonyms in any sense, or in each word's first three) as a further source of
related words was measured too and left out: on the blind3 set it let 4.6 points more true facts pass (0.685 ->
0.731) and 2.9 points more invented ones (0.119 -> 0.148), and no better share on any set; its senses are too broad
for a check whose job is to keep invented facts out. Measured once more in stop 40 (bench/eval_embed_judge.py) on the
eleven read sets' rejected facts (236 true, 1,467 invented): AUC 0.561; at similarity >= 0.90 it would pass 7 true and
14 invented, at >= 0.80 29 and 114.
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
from ..rules.names import mentions
from ..rules.patterns import third_person_verb
from ..rules.rulefile import Problems, compile_regex, safe_finditer, safe_search
from ..rules.schema import CuesSpec, FactChecksSpec, NegationSpec, Spec, Text, read_data
from ..rules.temporal import find_expressions, resolve
from ..errors import PatternError
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
    "category_mismatch",    # one word (a fact that lacks its category's cue is kept as "other", not rejected)
    "low_confidence",       # below settings.medium_confidence
    "duplicate",            # same content / name / edge twice in one reply
    "stoplisted",           # an entity that is only social talk ("thanks", "good morning")
    "unknown_entity",       # a relationship end that is not an accepted entity of this reply
    "unstated",             # a relationship whose two ends no accepted fact of the reply names together
    "bad_label",            # a relationship label with no usable characters
    "self_relationship",    # a relationship from an entity to itself
    "too_many",             # items beyond MAX_ITEMS
)

_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{N}'’_-]*")
_LATIN_WORD = regex.compile(r"\p{Latin}{3,}")
_LETTERS = regex.compile(r"\p{L}+")
_CJK_RUN = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]+")
_CJK_CHAR = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]")
# Suffixes stripped by the light stemmer, longest first: "coding"/"codes"/"code" all become "cod".
_SUFFIXES = ("ations", "ation", "ings", "ing", "ers", "ied", "ies", "ed", "er", "es", "ly", "s", "e")
# A sentence or line of the source; the best-matching one becomes a fact's span.
_SENTENCE = regex.compile(r"[^\n.!?。！？]+[.!?。！？]*")
_LABEL_OK = regex.compile(r"[a-z][a-z0-9_]*")
_HYPHENATED = regex.compile(r"\p{L}+(?:-\p{L}+)+")
_DIGIT = regex.compile(r"\p{N}")



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
    scale_rx: Any = None  # a word of ``scales`` right after a number ("k", " grand"), anchored where the number ends
    scales: Mapping[str, int] = field(default_factory=dict)
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
    # A phrase of a related group written in a fact stands for the group's first word ("passed away" -> "die").
    fact_phrases: Any = None
    phrase_heads: Mapping[str, str] = field(default_factory=dict)
    hedges: Any = None  # regex: phrases with a negation word that negate nothing ("not sure")
    feelings: frozenset[str] = frozenset()  # stems of the good feelings, grounded by the source's liking or praise
    naming: frozenset[str] = frozenset()  # participles that only name ("named"): no verb of a fragment
    object_markers: frozenset[str] = frozenset()  # "with", "for": "with my kids" opens no clause about them
    # the same without the narrower words of ``broader``: what grounds a negated fact ("User has no pets" is more than
    # "I don't have a dog") (stop 39)
    same: Mapping[str, frozenset[str]] = field(default_factory=dict)
    phrase_starts: frozenset[str] = frozenset()  # the first two words of ``fact_phrases``: a fact without them skips it


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
    heads: dict[str, str] = {}
    for group in grounding.related:
        stems = {_stem(w.casefold()) for w in group if " " not in w.strip()}
        several = [w for w in group if " " in w.strip()]  # "every day" grounds "daily"
        head = next((w.strip().casefold() for w in group if " " not in w.strip()), None)
        if head is not None:
            heads.update({" ".join(w.casefold().split()): head for w in several})
        for stem in stems:
            related.setdefault(stem, set()).update(stems)
            phrases.setdefault(stem, []).extend(several)
    synonyms = {k: frozenset(v) for k, v in related.items()}
    for word, narrower in grounding.broader.items():  # one way: "pet" is grounded by "dog", not back
        key = _stem(word.casefold())
        stems = {_stem(w.casefold()) for w in narrower if " " not in w.strip()}
        for same in synonyms.get(key, {key}):  # "children" as well as "child"
            related.setdefault(same, {same}).update(stems)
            phrases.setdefault(same, []).extend(w for w in narrower if " " in w.strip())  # "daily" by "every morning"
    numbers = {k.casefold(): v for k, v in spec.grounding.numbers.items()}
    words = "|".join(r"\s+".join(regex.escape(p) for p in w.split()) for w in sorted(numbers, key=len, reverse=True))
    number_rx = regex.compile(rf"(?<![\p{{L}}\p{{N}}.,])\d+(?:[.,]\d+)?(?![\p{{N}}])"
                              + (rf"|(?<![\p{{L}}])(?:{words})(?![\p{{L}}])" if words else ""), regex.IGNORECASE)
    scales = {k.casefold(): v for k, v in spec.grounding.scales.items()}
    # a scale word after a space, a scale letter also written on the number ("10k"); not before another letter
    scale_rx = regex.compile(r"\s*(" + "|".join(regex.escape(k) for k in sorted(scales, key=len, reverse=True))
                             + r")(?![\p{L}\p{N}])", regex.IGNORECASE) if scales else None
    polarity, negation = grounding.polarity, grounding.negation
    positive, negative = (_polarity(side) for side in (polarity.positive, polarity.negative))
    negated = negation.words + negation.implied if negation else []
    single = [w for w in [*polarity.positive, *polarity.negative, *negated] if regex.fullmatch(r"\p{Latin}+", w)]
    min_content = spec.min_content
    return _FactChecks(min_content.cjk_chars, min_content.min_words, min_content.content_words,
                       frozenset(w.casefold() for w in min_content.clause_words),
                       frozenset(w.casefold() for w in min_content.fragment_openers), cues, number_rx,
                       numbers, scale_rx, scales, positive, negative, {k: frozenset(v) for k, v in related.items()},
                       grounding.min_share, grounding.cjk_min_share,
                       frozenset(w.casefold() for w in [*grounding.light, *single]),
                       _polarity([*polarity.positive, *polarity.praise]), _polarity(negated), _clause_rx(negation),
                       frozenset(w.casefold() for w in grounding.others),
                       _polarity(polarity.contrast) if polarity.contrast else None,
                       {k: _polarity(v) for k, v in phrases.items() if v},
                       _polarity([w for w in grounding.light if " " in w.strip()]),
                       _polarity(list(heads)) if heads else None, heads,
                       _polarity(negation.hedges) if negation is not None and negation.hedges else None,
                       frozenset(_stem(w.casefold()) for w in polarity.feelings),
                       frozenset(w.casefold() for w in min_content.naming),
                       frozenset(w.casefold() for w in grounding.object_markers), synonyms,
                       frozenset(" ".join(h.replace("’", "'").split()[:2]) for h in heads))


class _ReportingSpec(Spec):
    """data/fact_senses.yaml ``reporting``: a fact framed as something said, and how its pronoun becomes the subject."""

    verbs: list[Text]
    pronoun: list[Text] = []
    possessive: list[Text] = []
    agree: dict[Text, Text] = {}
    gerunds: dict[Text, Text] = {}
    keep: list[Text] = []
    adverbs: list[Text] = []
    unclean: list[Text] = []


class _SensesSpec(Spec):
    """data/fact_senses.yaml: how a fact and its source agree beyond their words (see the file)."""

    ended: list[Text]
    ended_states: list[Text] = []
    ended_since: list[Text] = []
    purpose: list[Text] = []
    present: list[Text] = []
    onset: list[Text] = []
    plan: list[Text] = []
    wish: list[Text] = []
    unrealised: list[Text] = []
    relatives: list[Text] = []
    bounded: list[Text] = []
    durations: list[Text] = []
    possessives: list[Text] = []
    owning: list[Text] = []
    placed: list[Text] = []
    owned_by: list[Text] = []
    possessors: list[Text] = []
    possessor_gap: int = 2
    thing_ends: list[Text] = []
    modals: list[Text] = []
    pointers: list[Text] = []
    appraisals: list[Text] = []
    ended_source: list[Text] = []
    ended_own: list[Text] = []  # "gave up my": ends only what it names (stop 40b)
    ended_own_gap: int = 3
    studied: list[Text] = []  # "I study nursing" is no "User is a nurse" (stop 40b)
    studied_gap: int = 4
    role_heads: list[Text] = []  # "a vet tech" is no veterinarian (stop 40b)
    restate: list[list[Text]] = []  # [regex, words] pairs (checked in _restatements)
    age_decades: dict[Text, int] = {}  # "thirties" -> 30 (stop 39)
    age_decade_frame: Text = ""  # regex with a group ``decade``
    opinions: list[Text] = []
    converses: list[list[list[Text]]] = []  # pairs of sides (checked in _senses)
    derivation: list[Text] = []
    derivation_base: int = 5
    joining: list[Text] = []
    joining_after: int = 4
    negated_prefix: list[Text] = []
    transitions: list[Text] = []
    destinations: list[Text] = []  # regexes with a group ``new`` (stop 40)
    directions: dict[Text, list[Text]] = {}  # "down" / "up" -> the words of a fall / a rise (stop 40)
    reporting: _ReportingSpec | None = None  # "User mentioned that they ..." (stop 40b)


class _PlacesSpec(Spec):
    """data/places.yaml: a broader place -> the places in it."""

    places: dict[str, list[Text]]


@dataclass(frozen=True, slots=True)
class _Senses:
    """data/fact_senses.yaml, compiled."""

    ended: Any  # regex: "used to", "quit" - not followed by a purpose ("quit to pursue")
    ended_any: Any  # regex: the same, followed by anything
    present: frozenset[str]
    onset: Any
    plan: Any
    wish: Any
    bounded: Any  # regex: a past that is over ("for a few years", "when I was younger")
    duration: Any  # regex: "for" and a length of time ("for a few years", "for 20 years")
    exempt: frozenset[str]  # single ended words: checked as ended, not as content words (but ``ended_states``)
    possessives: frozenset[str]
    purpose: frozenset[str]
    negated_prefix: tuple[str, ...]
    transitions: tuple[Any, ...] = ()  # compiled regexes with groups "old" and "new"
    ended_frame: Any = None  # regex: the ended words but ``ended_states``, left out of a fact's content words
    unrealised: Any = None  # regex: what is still to be done ("I'll", "need to")
    owning: Any = None  # regex: the subject of a fact and an owning word after it ("User owns", "User doesn't own")
    owned_by: Any = None  # regex: what says that the speaker has a thing ("I have", "bought"), not hyphen-joined
    placed: frozenset[str] = frozenset()  # words that place the user somewhere ("lives", "born")
    possessor: Any = None  # regex: "my" / "our" and up to ``possessor_gap`` words after it
    thing_ends: frozenset[str] = frozenset()  # words that end the thing a fact says the user owns ("in", "with")
    modals: Any = None  # regex: "would", "could": no past of a clause still to be done
    pointers: Any = None  # regex: a clause opening with "it", "they": may be about a name said before it
    # the two sides of one deed: (keys of its single words, regex of its phrases) each
    converses: tuple[tuple[tuple[frozenset[str], Any], tuple[frozenset[str], Any]], ...] = ()
    appraisal: Any = None  # regex: "sounds", "seems": a clause that only appraises
    opinion: Any = None  # regex: what makes a fact an opinion ("thinks", "finds")
    ended_source: Any = None  # regex: "lost my job": ends its clause of the source, a content word of a fact
    ended_own: Any = None  # regex: "gave up my", "finished grad school" and the words after it that it ends (stop 40b)


@lru_cache(maxsize=1)
def _senses_spec() -> _SensesSpec:
    return read_data(_SensesSpec, "fact_senses.yaml")


@lru_cache(maxsize=1)
def _derivation() -> tuple[tuple[str, ...], int]:
    spec = _senses_spec()
    return tuple(sorted((s.casefold() for s in spec.derivation), key=len, reverse=True)), spec.derivation_base


@lru_cache(maxsize=1)
def _senses() -> _Senses:
    spec = _senses_spec()
    if any(len(pair) != 2 for pair in spec.converses):
        raise PatternError("invalid data file fact_senses.yaml: converses: each entry is two lists, one per side")
    states = {w.casefold() for w in spec.ended_states}
    ended = _polarity([w for w in spec.ended if w.casefold() not in states]).pattern
    if states:  # "a retired firefighter" ends the firefighting; "User is retired" ends nothing
        ended = rf"{ended}|(?:{_polarity(sorted(states)).pattern})(?=\s+\p{{L}})"
    if spec.purpose:
        ended = rf"(?:{ended})(?!\s+(?:{_polarity(spec.purpose).pattern}))"
    return _Senses(regex.compile(ended, regex.IGNORECASE), _polarity(spec.ended), frozenset(w.casefold() for w in spec.present),
                   _polarity(spec.onset), _polarity(spec.plan), _polarity(spec.wish), _polarity(spec.bounded),
                   regex.compile(rf"(?<![\p{{L}}])for\s+(?:[\p{{L}}\p{{N}}]+\s+){{0,2}}?(?:{_polarity(spec.durations).pattern})",
                                 regex.IGNORECASE),
                   frozenset(w.casefold() for w in spec.ended if regex.fullmatch(r"\p{Latin}+", w))
                   - {w.casefold() for w in spec.ended_states},
                   frozenset(w.casefold() for w in spec.possessives), frozenset(w.casefold() for w in spec.purpose),
                   tuple(p.casefold() for p in spec.negated_prefix), _transitions(spec.transitions),
                   _polarity([w for w in spec.ended if w.casefold() not in {s.casefold() for s in spec.ended_states}]),
                   _polarity(spec.unrealised),
                   regex.compile(rf"^\S+\s+(?:[\p{{L}}'’]+\s+){{0,2}}?(?:{_polarity(spec.owning).pattern})",
                                 regex.IGNORECASE) if spec.owning else None,
                   regex.compile(rf"(?<!-)(?:{_polarity(spec.owned_by).pattern})", regex.IGNORECASE),
                   frozenset(w.casefold() for w in spec.placed),
                   regex.compile(rf"(?:{_polarity(spec.possessors).pattern})((?:\s+[\p{{L}}\p{{N}}'’-]+){{1,{spec.possessor_gap + 1}}})",
                                 regex.IGNORECASE) if spec.possessors else None,
                   frozenset(w.casefold() for w in spec.thing_ends), _polarity(spec.modals),
                   regex.compile(rf"^(?:{_polarity(spec.pointers).pattern})", regex.IGNORECASE),
                   tuple((_side(a), _side(b)) for a, b in spec.converses), _polarity(spec.appraisals),
                   _polarity(spec.opinions), _polarity(spec.ended_source),
                   regex.compile(rf"(?:{_polarity(spec.ended_own).pattern})(?:\s+(?!(?:i|i['’]m|i['’]ve|we|we['’]ve|and|but|so|to|since|because)(?![\p{{L}}'’]))[\p{{L}}\p{{N}}'’-]+){{0,{spec.ended_own_gap}}}",
                                 regex.IGNORECASE) if spec.ended_own else None)


@lru_cache(maxsize=4)
def _reporting_rx(subjects: tuple[str, ...]) -> Any:
    """The frame of a fact told as something said, with the group ``rest`` (what follows it), or None."""
    spec = _senses_spec().reporting
    if spec is None or not spec.verbs:
        return None
    subject = "|".join(regex.escape(s) for s in subjects)
    verbs = "|".join(r"\s+".join(regex.escape(w) for w in v.split()) for v in sorted(spec.verbs, key=len, reverse=True))
    return regex.compile(rf"^(?:the\s+)?(?P<subject>{subject})\s+(?:{verbs})(?:\s+that)?\s+(?P<rest>.+)$",
                         regex.IGNORECASE)


@dataclass(frozen=True)
class _ReportingWords:
    """data/fact_senses.yaml ``reporting``'s word lists, case-folded once (:func:`_unreported`)."""

    pronoun: frozenset[str]
    possessive: frozenset[str]
    agree: Mapping[str, str]
    gerunds: Mapping[str, str]
    keep: frozenset[str]
    adverbs: tuple[tuple[str, ...], ...]  # longest first
    unclean: frozenset[str]


@lru_cache(maxsize=1)
def _reporting_words() -> _ReportingWords:
    spec = _senses_spec().reporting
    assert spec is not None  # read only once :func:`_reporting_rx` found a frame

    def fold(words: list[str]) -> frozenset[str]:
        return frozenset(w.casefold() for w in words)

    return _ReportingWords(fold(spec.pronoun), fold(spec.possessive), {k.casefold(): v for k, v in spec.agree.items()},
                           {k.casefold(): v for k, v in spec.gerunds.items()}, fold(spec.keep),
                           tuple(sorted({tuple(a.casefold().split()) for a in spec.adverbs}, key=len, reverse=True)),
                           fold(spec.unclean))


_PRONOUN_HEAD = regex.compile(r"(?P<pronoun>\p{L}+)(?P<clitic>['’]\p{L}+)?(?=\s|$)")


def _unreported(content: str, subjects: tuple[str, ...]) -> str | None:
    """The fact without the frame that tells it as something said, its opening pronoun made the subject ("User
    mentioned that they have a dog" -> "User has a dog", "User shared that their sister is vegan" -> "User's sister
    is vegan"), or None when it has no such frame or the rewrite is not clean (data/fact_senses.yaml ``reporting``)."""
    rx = _reporting_rx(subjects)
    m = rx.match(content) if rx is not None else None
    if m is None:
        return None
    words_of = _reporting_words()
    subject = next(s for s in subjects if s.casefold() == m.group("subject").casefold())
    rest = m.group("rest")
    head = _PRONOUN_HEAD.match(rest)
    if head is None:
        return None
    word, clitic = head.group("pronoun").casefold(), head.group("clitic")
    after = rest[head.end():].strip()
    if word in words_of.possessive and clitic is None:
        return f"{subject}'s {after}" if after else None
    gerunds = words_of.gerunds
    if word in gerunds and clitic is None and after:
        return f"{subject} {gerunds[word]} {after}"
    if word not in words_of.pronoun:
        return None  # "User mentioned a dog", "User said he ...": not clean
    agree, unclean = words_of.agree, words_of.unclean
    if clitic is not None:
        verb = agree.get(clitic.casefold())
        if verb is None or clitic.casefold() in unclean:
            return None  # "they'd": had or would
        return f"{subject} {verb} {after}".rstrip()
    words = after.split(" ")
    adverbs = words_of.adverbs
    i = 0
    while i < len(words):  # "they still have" -> "still has"
        for a in adverbs:
            if tuple(w.casefold() for w in words[i:i + len(a)]) == a:
                i += len(a)
                break
        else:
            break
    if i >= len(words):
        return None
    verb = words[i]
    low = verb.casefold()
    if low in unclean or not regex.fullmatch(r"\p{Ll}[\p{L}'’-]*", verb):
        return None
    if low in agree:
        verb = agree[low]
    elif low not in words_of.keep and not _past_form(low) and "'" not in low and "’" not in low:
        verb = third_person_verb(low)
    return " ".join([subject, *words[:i], verb, *words[i + 1:]])


def _side(words: list[str]) -> tuple[frozenset[str], Any]:
    """One side of data/fact_senses.yaml ``converses``: the keys (:func:`_keys`) of its single words, the regex of
    its phrases. A word in -er is matched as written, a phrase of one word: its light stem is another word ("fewer"
    would be "few", said by "a few countries"; "after" "aft") (stop 40)."""
    single = [w for w in words if regex.fullmatch(r"\p{L}+", w) and not w.casefold().endswith("er")]
    return frozenset(k for w in single for k in _keys(w.casefold())), _polarity([w for w in words if w not in single])


def _sides(text: str, side: tuple[frozenset[str], Any]) -> tuple[bool, str]:
    """(whether ``text`` says ``side``, ``text`` without that side's phrases)."""
    keys, phrases = side
    rest = phrases.sub(" ", text)
    return rest != text or any(not keys.isdisjoint(_keys(w.casefold())) for w in _WORD.findall(rest)), rest


_NONE = "(?!)"  # the pattern of _polarity([]): a side without phrases


def _converse(content: str, clause: str, senses: _Senses, terms: Iterable[str] = ()) -> str | None:
    """The fact's words of one side of a deed when ``clause`` says only the other side ("User takes piano lessons"
    from "I teach piano lessons"), or says both and the other one of the fact's thing ("User bought a guitar" from "I
    sold my old guitar and bought a keyboard": the side word nearest before one of ``terms``), else None."""
    if not senses.converses:
        return None
    said_keys = {k for w in _WORD.findall(content) for k in _keys(w.casefold())}
    for a, b in senses.converses:
        for mine, other in ((a, b), (b, a)):
            if said_keys.isdisjoint(mine[0]) and (mine[1].pattern == _NONE or mine[1].search(content) is None):
                continue  # the fact says nothing of this side (most facts: checked by their keys once)
            # a side's phrases first: "teaching myself" says learning, not teaching
            fact_other, rest = _sides(content, other)
            if fact_other or not _sides(rest, mine)[0]:
                continue
            said_other, rest = _sides(clause, other)
            if not said_other:
                continue
            word = next((w for w in _WORD.findall(content) if not mine[0].isdisjoint(_keys(w.casefold()))), content)
            if not _sides(rest, mine)[0] or _nearest_side(clause, terms, mine, other) == "other":
                return word
    return None


def _nearest_side(clause: str, terms: Iterable[str], mine: tuple[frozenset[str], Any],
                  other: tuple[frozenset[str], Any]) -> str | None:
    """Which side ("mine" / "other") the word nearest before the fact's thing in ``clause`` is of (a side's phrase,
    "teaching myself", counts as one word of it): for its first term that the clause has after a side word; None
    when there is none."""
    marked = other[1].sub(" \x01 ", mine[1].sub(" \x00 ", clause))
    words = [frozenset({"\x00"}) if w == "\x00" else frozenset({"\x01"}) if w == "\x01" else _keys(w.casefold())
             for w in regex.findall(r"[\x00\x01]|[\p{L}\p{N}][\p{L}\p{N}'’_-]*", marked)]
    for t in terms:
        keys = _keys(t)
        if not keys.isdisjoint(mine[0]) or not keys.isdisjoint(other[0]):
            continue  # a side word itself is no thing
        for i, k in enumerate(words):
            if keys.isdisjoint(k):
                continue
            for j in range(i - 1, -1, -1):
                if "\x00" in words[j] or not words[j].isdisjoint(mine[0]):
                    return "mine"
                if "\x01" in words[j] or not words[j].isdisjoint(other[0]):
                    return "other"
    return None


@lru_cache(maxsize=1)
def _restatements() -> tuple[tuple[Any, str], ...]:
    """data/fact_senses.yaml ``restate``, compiled and checked like rule regexes: (regex, words it stands for)."""
    problems = Problems()
    out = []
    for i, pair in enumerate(_senses_spec().restate):
        if len(pair) != 2:
            problems.add(f"fact_senses.yaml restate #{i + 1}", "needs [regex, words]")
            continue
        rx = compile_regex(pair[0], f"fact_senses.yaml restate #{i + 1}", problems, regex.IGNORECASE)
        if rx is not None:
            out.append((rx, pair[1]))
    if problems.items:
        problems.raise_all("invalid data file fact_senses.yaml")
    return tuple(out)


@lru_cache(maxsize=1)
def _any_restatement() -> Any:
    """One regex of all data/fact_senses.yaml ``restate`` regexes: most facts match none, and one search says so
    (stop 39: 25 of them, one sub each, cost a rejected fact ~50 us)."""
    patterns = [rx.pattern for rx, _ in _restatements()]
    return regex.compile("|".join(f"(?:{p})" for p in patterns) or "(?!)", regex.IGNORECASE)


def _age_frame(pattern: str) -> Any:
    """data/fact_senses.yaml ``age_decade_frame``, compiled and checked like a rule regex; it needs the group
    ``decade``."""
    problems = Problems()
    rx = compile_regex(pattern, "fact_senses.yaml age_decade_frame", problems, regex.IGNORECASE)
    if rx is not None and "decade" not in rx.groupindex:
        problems.add("fact_senses.yaml age_decade_frame", "needs a group named 'decade'")
    if problems.items:
        problems.raise_all("invalid data file fact_senses.yaml")
    return rx


@lru_cache(maxsize=1)
def _age_decades() -> tuple[Any, Mapping[str, int]]:
    """data/fact_senses.yaml ``age_decade_frame`` (None when not given) and ``age_decades``."""
    spec = _senses_spec()
    rx = _age_frame(spec.age_decade_frame) if spec.age_decade_frame else None
    return rx, {k.casefold(): v for k, v in spec.age_decades.items()}


def _age_readings(content: str, source: _Source, checks: _FactChecks) -> list[str]:
    """``content`` with an age said by its decade ("User is in their thirties") said as each age of that decade the
    source names ("User is 34" from "I'm 34"), for a second reading (data/fact_senses.yaml ``age_decades``)
    (stop 39)."""
    rx, decades = _age_decades()
    m = rx.search(content) if rx is not None else None
    if m is None or (start := decades.get(m.group("decade").casefold())) is None:
        return []
    ages = sorted({n for n in source.numbers(checks) if n.isdigit() and start <= int(n) < start + 10})
    return [content[:m.start()] + n + content[m.end():] for n in ages]


def _transitions(patterns: list[str]) -> tuple[Any, ...]:
    """data/fact_senses.yaml ``transitions``, compiled and checked like rule regexes; each needs "old" and "new"."""
    problems = Problems()
    compiled = [compile_regex(p, f"fact_senses.yaml transitions #{i + 1}", problems, regex.IGNORECASE)
                for i, p in enumerate(patterns)]
    for i, rx in enumerate(compiled):
        if rx is not None and not {"old", "new"} <= set(rx.groupindex):
            problems.add(f"fact_senses.yaml transitions #{i + 1}", "needs the groups 'old' and 'new'")
    if problems.items:
        problems.raise_all("invalid data file fact_senses.yaml")
    return tuple(rx for rx in compiled if rx is not None)


@lru_cache(maxsize=1)
def _places() -> tuple[Mapping[str, frozenset[str]], Mapping[str, Any]]:
    """data/places.yaml as (key of a broader place's word -> keys of the places in it, the same for places of
    several words as a regex); read the first time a fact has a word nothing else grounds."""
    places = read_data(_PlacesSpec, "places.yaml").places
    inside: dict[str, set[str]] = {}

    def within(place: str, seen: frozenset[str]) -> set[str]:
        out: set[str] = set()
        for p in places.get(place, []):
            if p not in seen:
                out |= {p} | within(p, seen | {p})
        return out

    for broad in places:
        inside[broad] = within(broad, frozenset({broad}))
    single: dict[str, set[str]] = {}
    several: dict[str, list[str]] = {}
    for broad, narrow in inside.items():
        for word in broad.split():  # "United States": each word of it is grounded by "Chicago"
            for key in _keys(word.casefold()):
                single.setdefault(key, set()).update(k for n in narrow if " " not in n for k in _keys(n.casefold()))
                several.setdefault(key, []).extend(n for n in narrow if " " in n)
    return {k: frozenset(v) for k, v in single.items()}, {k: _polarity(v) for k, v in several.items() if v}


def _clause_rx(negation: NegationSpec | None) -> Any:
    """Where a clause ends: punctuation, a break word, or a break word that needs a new subject after it
    ("so I'm careful" ends a clause, "not so sure" does not)."""
    # not inside "3.12" or "1,000"; a dash with a space after it ("lately- I took a class"), not "family-owned"
    parts = [r"(?:[;:!?()\n\u2014]|\.(?!\d)|,(?!\d{3}))+|\s-\s|(?<=\p{L})-\s"]
    if negation is not None and negation.clause_breaks:
        parts.append(_polarity(negation.clause_breaks).pattern)
    if negation is not None and negation.subject_breaks and negation.subjects:
        subjects = _polarity(negation.subjects).pattern
        parts.append(rf"(?:{_polarity(negation.subject_breaks).pattern})(?=\s+(?:{subjects}))")

    return regex.compile("|".join(parts), regex.IGNORECASE)


@lru_cache(maxsize=1)
def _joining_rx() -> Any:
    """Where a joining word ("and") meets a new subject; it ends a clause only after enough words (_split_joined)."""
    spec, negation = _senses_spec(), read_data(FactChecksSpec, "fact_checks.yaml").grounding.negation
    if not spec.joining or negation is None or not negation.subjects:
        return None
    return regex.compile(rf"(?:{_polarity(spec.joining).pattern})(?=\s+(?:{_polarity(negation.subjects).pattern}))",
                         regex.IGNORECASE)


def _split_joined(part: str) -> list[str]:
    """``part`` cut where "and" meets a new subject after data/fact_senses.yaml's `joining_after` words of it: "I
    gave up sugar three weeks ago and I have more energy" is two clauses, "My wife and I got back" one."""
    rx = _joining_rx()
    if rx is None:
        return [part]
    out, start = [], 0
    for m in rx.finditer(part):
        if len(_WORD.findall(part[start:m.start()])) >= _senses_spec().joining_after:
            out.append(part[start:m.start()])
            start = m.end()
    return [*out, part[start:]]


@lru_cache(maxsize=1)
def _relative_rx() -> Any:
    return _polarity(_senses_spec().relatives)


# The speaker named by what they are just before a relative word: "I'm a nurse who works nights", "I am a single dad
# who ..."; not "I'm dating a guy who ...", whose words after "I'm" are no description of the speaker.
_SPEAKER_AS = regex.compile(r"(?<![\p{L}'’])(?:i['’]?m|i\s+am)\s+(?:an?\s+)?"
                            r"(?:(?!(?:an?|the|my|your|his|her|their|our)\s)[\p{L}-]+\s+){0,2}[\p{L}-]+\s*$",
                            regex.IGNORECASE)


def _split_relative(part: str) -> list[tuple[str, str | None]]:
    """``part`` cut before a relative word of data/fact_senses.yaml, the relative clause with the word it is about:
    "I have a twin brother who lives in Australia" -> ("I have a twin brother", None), ("who lives in
    Australia", "brother"). One said of the speaker ("I, who ...") or with the speaker in it ("she was the one who
    taught me") is not cut: the clause checks read it whole."""
    m = _relative_rx().search(part)
    before = _WORD.findall(part[:m.start()]) if m is not None else []
    if m is None or not before:
        return [(part, None)]
    antecedent = _POSSESSIVE.sub("", before[-1].casefold())
    speaker = antecedent in _FIRST_PERSON or _SPEAKER_AS.search(part[:m.start()]) is not None \
        or any(w.casefold() in _FIRST_PERSON and w.casefold() not in _DETERMINERS
               for w in _WORD.findall(part[m.end():]))
    return [(part, None)] if speaker else [(part[:m.start()], None), (part[m.start():], antecedent)]


def _polarity(words: list[str]) -> Any:
    """Words as one regex of whole words; a word written "n't" matches the end of "doesn't" / "can’t", one written
    "'d love" the end of "I'd love" as well as a word of its own ("'cause")."""
    whole = sorted((w for w in words if not w.startswith("n't")), key=len, reverse=True)  # "no longer" before "no"
    parts = []
    apostrophed = [w for w in whole if w.startswith("'")]
    for opens, group in ((False, [w for w in whole if not w.startswith("'")]), (True, apostrophed)):
        if group:
            alternation = "|".join(r"\s+".join(regex.escape(p).replace("'", "['’]") for p in w.split()) for w in group)
            parts.append(("" if opens else r"(?<![\p{L}'’])") + rf"(?:{alternation})(?![\p{{L}}'’])")
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


@lru_cache(maxsize=1)
def _word_forms() -> tuple[Mapping[str, frozenset[str]], frozenset[str], frozenset[str], frozenset[str]]:
    """data/word_forms.tsv: (form -> lemmas, verb forms, past forms, -s forms) of the irregular words."""
    text = resources.files("factforge").joinpath("data/word_forms.tsv").read_text(encoding="utf-8")
    lemmas: dict[str, set[str]] = {}
    verbs, past, third = set(), set(), set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in ("verb", "noun") or not parts[2].split():
            raise PatternError(f"data/word_forms.tsv:{n}: expected 'form<TAB>verb|noun<TAB>lemma ...'")
        form, pos, of = parts[0], parts[1], parts[2].split()
        lemmas.setdefault(form, set()).update(of)
        if pos == "verb":
            verbs.add(form)
            if any(form in (lemma + "s", lemma + "es", lemma[:-1] + "ies") for lemma in of) or form in ("is", "has",
                                                                                                   "does"):
                third.add(form)
            elif not form.endswith("ing"):
                past.add(form)
    return ({k: frozenset(v) for k, v in lemmas.items()}, frozenset(verbs), frozenset(past), frozenset(third))


@lru_cache(maxsize=65536)
def _keys(word: str) -> frozenset[str]:
    """What a (casefolded) word is compared by: its light stem, the stems of its lemmas ("taught" -> "teach",
    "children" -> "child", data/word_forms.tsv) and its base without one derivational suffix of
    data/fact_senses.yaml ("bakery" -> "baker", "olympian" -> "olymp")."""
    keys = {_stem(word)}
    keys.update(_stem(lemma) for lemma in _word_forms()[0].get(word, ()))
    suffixes, base = _derivation()
    for form in {word, _stem(word)}:  # "olympics" by its stem "olympic"
        for suffix in suffixes:
            if form.endswith(suffix) and len(form) - len(suffix) >= base:
                keys.add(form[: -len(suffix)])
    if len(word) >= base:
        keys.add(word)
    return frozenset(keys)


def _numbers(text: str, checks: _FactChecks, scaled_only: bool = False) -> set[str]:
    """The numbers ``text`` names, as digit strings ("three" and "3" are both "3"); a number with a scale word of
    data/fact_checks.yaml after it ("10k", "2 grand") also as the product, and with ``scaled_only`` (a fact's
    numbers) only as that."""
    if checks.number_rx is None:
        return set()
    out = set()
    for m in checks.number_rx.finditer(text):
        word = " ".join(m.group().casefold().split())
        number = str(checks.numbers[word]) if word in checks.numbers else word.replace(",", "")
        scale = checks.scale_rx.match(text, m.end()) if checks.scale_rx is not None else None
        if scale is not None:
            try:
                scaled = float(number.replace(",", ".") if "." not in number else number) \
                    * checks.scales[scale.group(1).casefold()]
            except ValueError:
                scaled = None
            if scaled is not None:
                out.add(str(int(scaled)) if scaled == int(scaled) else str(scaled))
                if scaled_only:
                    continue
        out.add(number)
    return out


_NAME = regex.compile(r"(?<![\p{L}\p{N}'’])\p{Lu}[\p{L}\p{N}-]*")
# A word of letters and digits ("p99", "v2", "t3.medium", "Q3"), and its letter / digit runs; the source must have it,
# spaces between the runs allowed ("2 pm" for "2pm").
_CODE = regex.compile(r"(?<![\p{L}\p{N}])(?=[\p{L}\p{N}.]*\p{L})(?=[\p{L}\p{N}.]*\p{N})[\p{L}\p{N}]+(?:\.[\p{L}\p{N}]+)*")
_SCALED = regex.compile(r"\d+(?:\.\d+)?(\p{L}+)")  # a number with a scale letter written on it: "10k"
_CODE_PARTS = regex.compile(r"\p{L}+|\p{N}+|\.")
_CODE_SAID = r"(?<![\p{{L}}\p{{N}}]){}(?![\p{{L}}\p{{N}}])"
_POSSESSIVE = regex.compile(r"['’]s$")


def _specifics_unsupported(content: str, source: _Source, checks: _FactChecks, subjects: set[str]) -> str | None:
    """What of the fact's numbers, names and liking the source does not say (None: all of it is said)."""
    missing = sorted(_numbers(content, checks, scaled_only=True) - source.numbers(checks))
    if missing:
        return "number " + ", ".join(missing)
    for m in _CODE.finditer(content):  # "p50", "v2", "t3.medium": letters and digits, said as written
        if checks.scale_rx is not None and _SCALED.fullmatch(m.group()) \
                and checks.scale_rx.fullmatch(_SCALED.fullmatch(m.group()).group(1)):
            continue  # "10k" is a number, checked above ("10,000" says it)
        if not regex.search(_CODE_SAID.format(r"\s*".join(regex.escape(p) for p in _CODE_PARTS.findall(m.group()))),
                            source.text, regex.IGNORECASE):
            return f"name {m.group()}"
    for m in _NAME.finditer(content):
        if m.start() == 0:
            continue  # the first word is capitalised anyway
        name = _POSSESSIVE.sub("", m.group()).casefold()
        if name in subjects or name == "i":
            continue
        keys = _keys(name)
        if name not in source.words and keys.isdisjoint(source.stems) and not source.in_place(keys) \
                and all(checks.related.get(k, frozenset()).isdisjoint(source.stems) for k in keys):  # "k8s"
            return f"name {m.group()}"
    if checks.negative is not None and checks.positive is not None:
        fact_negative = checks.negative.search(content) is not None
        source_negative = checks.negative.search(source.text) is not None
        if fact_negative and not source_negative:
            return "a dislike"
        if not fact_negative and checks.positive.search(content):
            # A liking needs a liking or praise in the source, outside its dislikes ("can't stand" is no liking)
            # and its negated likings ("not really happy with it").
            if not _likes(source, checks):
                return "a liking"
    return None


def _likes(source: _Source, checks: _FactChecks) -> bool:
    """Whether the source likes or praises something outside its dislikes and negated likings."""
    if checks.positive is None:
        return False
    liked = checks.praise or checks.positive
    said = checks.negative.sub(" ", source.text) if checks.negative is not None else source.text
    if checks.negation is not None:
        said = _negated_liking(checks.negation.pattern, liked.pattern).sub(" ", said)
    return liked.search(said) is not None


@lru_cache(maxsize=4)
def _negated_liking(negation: str, liked: str) -> Any:
    """A liking or praise word up to two words after a negation ("not really happy")."""
    return regex.compile(rf"(?:{negation})(?:\s+[\p{{L}}'’]+){{0,2}}?\s+(?:{liked})", regex.IGNORECASE)


_NO_COMPOUND = regex.compile(r"(?<![\p{L}'’])no-(?=\p{L})", regex.IGNORECASE)


def _negated(text: str, checks: _FactChecks) -> bool:
    """Whether ``text`` negates (a dislike does not count: "can't stand" is a liking, checked as one; nor does a
    negation of data/fact_senses.yaml ``ended_since``: "haven't played since", checked as ended)."""
    if checks.negative is not None:
        text = checks.negative.sub(" ", text)
    text = _senses().ended_any.sub(" ", text)  # "no longer" says it ended (checked as such), not "no"
    text = _ended_since_rx().sub(" ", text)
    if "no-" in text or "No-" in text or "NO-" in text:
        text = _NO_COMPOUND.sub(" ", text)  # "a no-spend challenge" negates nothing of the challenge (stop 39)
    if checks.hedges is not None:
        text = checks.hedges.sub(" ", text)
    return checks.negation.search(text) is not None


@lru_cache(maxsize=1)
def _ended_since_rx() -> Any:
    """A negation and, at most five words on, a word of data/fact_senses.yaml ``ended_since``."""
    words, checks = _senses_spec().ended_since, _fact_checks()
    if not words or checks.negation is None:
        return regex.compile("(?!)")
    return regex.compile(rf"(?:{checks.negation.pattern})(?:\s+[\p{{L}}'’]+){{0,5}}?\s+(?:{_polarity(words).pattern})",
                         regex.IGNORECASE)


def _unframed(content: str, checks: _FactChecks) -> str:
    """``content`` without its liking and negation phrases ("no longer", "can't stand") and its numbers, which are
    checked as polarity, negation and numbers ("twenty" by "20"), not as words the source must contain."""
    for rx in (checks.negative, checks.positive, _senses().ended_frame, checks.negation, checks.light_phrases,
               checks.number_rx):
        if rx is not None:
            content = rx.sub(" ", content)
    return content


def _in_words(content: str, source: _Source, checks: _FactChecks) -> str:
    """``content`` as the source's words: a related phrase as its group's word ("passed away" -> "die"), and two
    words the source writes as one ("works out" -> "workout")."""
    # (a regex of many phrases is slow; most facts have none of their first two words) (stop 39)
    said = [w.casefold().replace("’", "'") for w in _WORD.findall(content)]
    if checks.fact_phrases is not None and any(f"{a} {b}" in checks.phrase_starts for a, b in zip(said, said[1:])):
        content = checks.fact_phrases.sub(lambda m: checks.phrase_heads.get(" ".join(m.group().casefold().split()),
                                                                            m.group()), content)
    words = list(_WORD.finditer(content))
    for a, b in reversed(list(zip(words, words[1:]))):
        if content[a.end():b.start()] != " ":
            continue
        first, second = a.group().casefold(), b.group().casefold()
        joined = next((k + second for k in (first, _stem(first)) if k + second in source.words), None)
        if joined is not None and first not in source.words:
            content = content[:a.start()] + joined + content[b.end():]
    return content


# "User's wife", "User's little sister": the someone else a fact is about is one of the two words after "User's".
_THEIRS = regex.compile(r"^\S+['’]s\s+(?P<first>[\p{L}-]+)(?:\s+(?P<second>[\p{L}-]+))?")


_THEY = regex.compile(r"\s*(?:he|she|they|he['’]s|she['’]s|they['’]re|they['’]ve|his|her|their)(?![\p{L}])",
                     regex.IGNORECASE)


def _apart(content: str, terms: list[str], source: _Source, checks: _FactChecks) -> str | None:
    """What is wrong when the fact is about the user's someone else ("User's wife is a firefighter") and no stretch
    of the source about them says any of the rest of it ("I'm a firefighter. My wife is a doctor."); None otherwise
    (stop 38). Its good feelings are grounded by a liking anywhere, and are left out."""
    m = _THEIRS.match(content)
    if m is None:
        return None
    people = {k for o in checks.others for k in _keys(o)}
    other = next((w.casefold() for w in (m.group("first"), m.group("second") or "")
                  if w and not _keys(w.casefold()).isdisjoint(people)), None)
    if other is None:
        return None
    keys = _keys(other)
    rest = [t for t in terms if _keys(t).isdisjoint(keys) and _stem(t) not in checks.feelings]
    if not rest:
        return None
    # A stretch of the source about them: a sentence that names them and the sentences after it, up to one that the
    # speaker opens ("I became an aircraft mechanic instead").
    sentences = [m.group() for m in _SENTENCE.finditer(source.text)]
    for i, sentence in enumerate(sentences):
        if not _Source(_without_theirs(sentence, other, checks), frozenset()).has_term(other, checks.related,
                                                                                         checks.phrases) \
                and not _THEY.match(sentence):
            continue  # a sentence that names them, or opens with a pronoun that may ("They love learning about ...")
        stretch = [sentence]
        for after in sentences[i + 1:]:
            first = _WORD.search(after)
            if first is None or first.group().casefold() in _FIRST_PERSON:
                break
            stretch.append(after)
        said = _Source(" ".join(stretch), frozenset())
        if any(said.has_term(t, checks.related, checks.phrases) for t in rest):
            return None
    return f"no stretch of the source about the user's {other} says any of {', '.join(rest)}"


_KIN_OF = regex.compile(r"(?<![\p{L}])(?P<owner>\p{L}+)['’]s\s+(?P<one>\p{L}+)")


def _without_theirs(sentence: str, other: str, checks: _FactChecks) -> str:
    """``sentence`` without the someone else's ``other`` ("my wife's mom" is not the user's mother) (stop 39)."""
    def theirs(m: Any) -> str:
        mine = m.group("owner").casefold() in checks.others and _Source(m.group("one"), frozenset()).has_term(
            other, checks.related)
        return " " if mine else m.group()
    return _KIN_OF.sub(theirs, sentence)


# Where a placing word puts the user: "lives on a farm", "grew up in a small town"; not "moved in with", "grows basil".
_PLACE_AT = frozenset({"in", "on", "at", "near", "to", "into", "from", "outside"})


def _place_terms(after: list[str], terms: Iterable[str]) -> list[str]:
    """The terms of the place that follows a placing word (``after``: the fact's words after it): the words after
    its place preposition up to the next preposition ("on a dairy farm in Wisconsin" -> "dairy", "farm")."""
    terms = set(terms)
    if after[:1] == ["up"]:
        after = after[1:]
    if not after or after[0] not in _PLACE_AT:
        return []
    out = []
    for w in after[1:]:
        if w in _PLACE_AT or w in ("with", "for", "of", "by"):
            break
        if w in terms:
            out.append(w)
    return out


def _misplaced(content: str, source: _Source, checks: _FactChecks, subjects: set[str],
               terms: Iterable[str] = ()) -> str | None:
    """What is wrong when the fact places the user by a name (data/fact_senses.yaml ``placed``: "User lives in
    Somalia") or by a word of ``terms`` after its relation ("User lives on a farm") and no clause of the source that
    has it says that relation; None otherwise."""
    words = [x.casefold() for x in _WORD.findall(content)]
    relations = [w for w in words if w in _senses().placed]
    if not relations:
        return None
    clauses = source.clauses(checks)
    for t in _place_terms(words[words.index(relations[0]) + 1:], terms):
        # "I grew up on a dairy farm" is no "User lives on a farm"
        having = [c for c in clauses if c.has_term(t, checks.related, checks.phrases)]
        if having and not any(c.has_term(r, checks.related, checks.phrases) for c in having for r in relations):
            return f"{t!r} is not where the source says the user {relations[0]}: {having[0].text!r}"
    for m in _NAME.finditer(content):
        name = _POSSESSIVE.sub("", m.group()).casefold()
        if m.start() == 0 or name in subjects:
            continue
        at = [i for i, c in enumerate(clauses) if name in c.words]
        # A clause of names only ("I grew up in Kyoto, Japan") goes with the one before it.
        at += [i - 1 for i in at if i > 0 and all(w[:1].isupper() for w in _WORD.findall(clauses[i].text))]
        if at and not any(clauses[i].has_term(r, checks.related, checks.phrases) for i in at for r in relations):
            return f"{m.group()!r} is not where the source says the user {relations[0]}: {clauses[at[0]].text!r}"
    return None


def _unowned(content: str, terms: list[str], source: _Source, checks: _FactChecks) -> str | None:
    """What is wrong when the fact says the user owns a thing and no sentence of the source that names it says the
    speaker has it (data/fact_senses.yaml ``owning`` / ``owned_by``); None otherwise. A sentence, not a clause: "I
    have a golden retriever, a border collie, and a lab mix" has the border collie."""
    senses = _senses()
    owning = senses.owning.search(content) if senses.owning is not None and terms else None
    if owning is None:
        return None
    thing = _owned_thing(content[owning.end():], terms, senses)
    having = [m.group() for m in _SENTENCE.finditer(source.text)
              if any(_Source(m.group(), frozenset()).has_term(t, checks.related) for t in thing)]
    if not having or any(senses.owned_by.search(sentence) or _possessed(sentence, thing, checks, senses)
                         for sentence in having):
        return None
    return f"ownership: no sentence that names it says the speaker has it ({having[0].strip()!r})"


def _owned_thing(rest: str, terms: list[str], senses: _Senses) -> list[str]:
    """The thing a fact says the user owns, as terms: the last term of ``rest`` (the fact after its owning word)
    before a word of data/fact_senses.yaml ``thing_ends`` ("a pizza shop in Ohio" -> "shop"); all ``terms`` when
    that word is none of them."""
    words: list[str] = []
    for w in (x.casefold() for x in _WORD.findall(rest)):
        if w in senses.thing_ends and words:
            break
        words.append(w)
    last = next((w for w in reversed(words) if w in terms), None)
    return [last] if last is not None else terms


def _possessed(sentence: str, thing: list[str], checks: _FactChecks, senses: _Senses) -> bool:
    """Whether ``sentence`` has a possessor of data/fact_senses.yaml ("my", "our") with the thing within its gap of
    words after it ("my old van")."""
    if senses.possessor is None:
        return False
    for m in senses.possessor.finditer(sentence):
        words = [w.casefold() for w in _WORD.findall(m.group(1))]
        if any(_Source(w, frozenset()).has_term(t, checks.related) for w in words for t in thing):
            return True
    return False


def _liking_turned(content: str, terms: list[str], source: _Source, checks: _FactChecks) -> str | None:
    """What is wrong when the fact likes a thing that every clause of the source naming it dislikes ("User is a
    Bears fan" from "I can't stand the Bears"), or dislikes what every such clause likes; None otherwise."""
    if checks.positive is None or checks.negative is None:
        return None
    fact_dislikes = checks.negative.search(content) is not None
    if not fact_dislikes and checks.positive.search(content) is None:
        return None
    liked = checks.praise or checks.positive
    for t in terms:
        having = [c.text for c in source.clauses(checks) if c.has_term(t, checks.related)]
        if not having:
            continue
        dislike = [checks.negative.search(c) is not None for c in having]
        like = [liked.search(checks.negative.sub(" ", c)) is not None for c in having]
        if not fact_dislikes and all(d and not lk for d, lk in zip(dislike, like)):
            return f"a liking of {t!r}, which the source dislikes"
        if fact_dislikes and all(lk and not d for d, lk in zip(dislike, like)):
            return f"a dislike of {t!r}, which the source likes"
    return None


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
    """(reason, what) when the source clause that supports the fact says it of someone else, negates it where
    the fact does not (or the other way round), says it ended where the fact says it holds, only wishes for it,
    or has the roles the other way round; None when one such clause agrees with the fact."""
    clauses = source.clauses(checks)
    about_speaker = any(content.casefold().startswith(s + " ") for s in subjects)
    if about_speaker:
        given = _given_to_other(content, terms, source, checks)
        if given is not None:
            return "other_subject", f"the source gives {given!r} to someone else"
    if not terms or len(clauses) == 0:
        return None
    scores = [sum(1 for t in terms if clause.has_term(t, checks.related, checks.phrases)) for clause in clauses]
    top = max(scores)
    if top == 0:
        return None
    names = {_POSSESSIVE.sub("", m.group()).casefold() for m in _NAME.finditer(content) if m.start() > 0} - subjects
    fact_negated = checks.negation is not None and _negated(content, checks)
    if fact_negated and _negated_scope(content, clauses, checks):
        return None  # "Burger King is not User's dream job" from "it's not my dream job"
    if not fact_negated and checks.negation is not None:
        for t in terms:  # "User's dream job is ..." from "it's not my dream job" (not "User drinks tea" from
            # "I never drink coffee, just tea": a part of the fact, two of its words, must be said only negated)
            having = [c for c in clauses if c.has_term(t, checks.related, checks.phrases)]
            # A name said only negated is negated on its own: "Team uses Opsgenie" from "PagerDuty now, not Opsgenie".
            # So is any word said only in a short clause that opens with a negation: "the flaky test is the S3 one,
            # not the db one" does not say the db test is flaky.
            enough = 1 if t in names else 2
            if having and all(_negated(c.text, checks)
                              and (scores[clauses.index(c)] >= enough or _negated_aside(c.text)) for c in having):
                return "negation", f"{t!r} only in a negated clause: {having[0].text!r}"
    best = [c for c, n in zip(clauses, scores) if n == top]
    # Of clauses that each say part of the fact, the one with its name is the one that says it: "I've been to a few
    # countries in Europe, but I'd love to go to Mexico" says of Mexico only the wish (stop 38).
    named = [c for c in best if any(c.has_term(n) for n in names) or _senses().pointers.match(c.text)] \
        if names and top < len(terms) else []
    best = named or best
    replaced = any(_Source(old, frozenset()).has_term(t) for old, _ in source.changes() for t in terms)
    doer = _named_subject(content, terms, source)
    if not about_speaker and doer is not None and not any(
            any(c.has_term(d) or d in c.words for d in doer) or _PRONOUN_OPENS.match(c.text) for c in best):
        return "other_subject", f"{doer[0]!r} is not in the clause that says it: {best[0].text!r}"
    fact_words = _Source(content, frozenset())
    senses = _senses()
    problem: tuple[str, str] | None = None
    for clause in best:
        other = clause.other if about_speaker else None
        # A fact may name the other one by a broader word: "User has a child" from "my daughter lost a tooth", or by
        # the name the clause gives it: "User is sad that Tom is moving" from "my best friend Tom is moving".
        # Named as what the user is ("User is the manager" from "my manager Priya wants ..."), it is not named.
        if other is not None and (_is_role(content, other)
                                  or not _names_other(other, clause.text, fact_words, terms, checks)
                                  and not _speakers_own(terms, clause)) and not _named_other(other, names, clause.text):
            problem = problem or ("other_subject", f"said of {other!r}: {clause.text!r}")
            continue
        if about_speaker and (swapped := _swapped(content, terms, clause, checks)) is not None:
            problem = problem or ("other_subject", f"{swapped!r} is done by someone else in {clause.text!r}")
            continue
        # "my husband" says the speaker has one whatever the clause does with him ("my husband drives bc I can't",
        # "I'll ask my brother if he wants to come"): a fact that the user has one is not negated nor wished there.
        had = about_speaker and not fact_negated and _presupposed(content, clause)
        if checks.negation is not None and fact_negated != _negated(clause.text, checks) and not had:
            problem = problem or ("negation", f"negation differs from {clause.text!r}")
            continue
        ended = _ended_differs(content, clause, senses, replaced, terms, checks)
        if ended is not None and not had:  # "I used to ride with my dad": User has a father
            problem = problem or ("negation", f"{ended}: {clause.text!r}")
            continue
        if (converse := _converse(content, clause.text, senses, terms)) is not None:
            problem = problem or ("ungrounded", f"unsupported: {converse!r}, where {clause.text!r} says the other side")
            continue
        if about_speaker and clause.other is None and senses.wish.search(clause.text) \
                and not _opinion(content, checks, senses) and not had:
            problem = problem or ("ungrounded", f"unsupported: only wished for in {clause.text!r}")
            continue
        if about_speaker and clause.other is None and senses.appraisal.search(clause.text) \
                and not _opinion(content, checks, senses) and not had:
            problem = problem or ("ungrounded", f"unsupported: only appraised in {clause.text!r}")
            continue
        if _unrealised(content, clause.text, senses):
            problem = problem or ("ungrounded", f"unsupported: done or so in the fact, still to be done in {clause.text!r}")
            continue
        return None
    return problem


def _opinion(content: str, checks: _FactChecks, senses: _Senses) -> bool:
    """Whether the fact is an opinion, a liking, a good feeling or a plan ("User thinks kayaking sounds fun", "User
    wants to try kayaking"): what a clause that only appraises a thing can say."""
    return senses.opinion.search(content) is not None or senses.plan.search(content) is not None \
        or checks.positive is not None and checks.positive.search(content) is not None \
        or any(_stem(w.casefold()) in checks.feelings for w in _WORD.findall(content))


def _negated_aside(clause: str) -> bool:
    """Whether ``clause`` is a short aside that opens with a negation ("not the db one", "no Fridays")."""
    checks = _fact_checks()
    m = checks.negation.match(clause) if checks.negation is not None else None
    return m is not None and len(_WORD.findall(clause)) <= 4


# "User has a dog", "User has two sisters", "User has a brother named Tom": what the user has, as its last word.
_HAVING = regex.compile(r"^\S+\s+(?:has|have)\s+(?:an?\s+|[\p{L}\p{N}]+\s+)?(?P<thing>\p{L}+)"
                        r"(?:\s+named\s+\p{Lu}\p{L}*)?\s*\.?$", regex.IGNORECASE)
_MY = regex.compile(r"(?<![\p{L}'’])(?:my|our)\s+(?P<thing>[\p{L}-]+(?:\s+[\p{L}-]+){0,2})", regex.IGNORECASE)


def _presupposed(content: str, clause: _Source) -> bool:
    """Whether the fact says the user has a thing that the clause calls "my" / "our" thing."""
    m = _HAVING.match(content)
    if m is None:
        return False
    thing, related = m.group("thing").casefold(), _fact_checks().related
    # "we lost our dog" says no dog now: a "my" / "our" inside a phrase of data/fact_senses.yaml ended_source (stop 39)
    lost = [(e.start(), e.end()) for e in _senses().ended_source.finditer(clause.text)]
    if _senses().ended_own is not None:  # "I gave up my car" (stop 40b)
        lost += [(e.start(), e.end()) for e in _senses().ended_own.finditer(clause.text)]
    return any(_Source(w, frozenset()).has_term(thing, related) for p in _MY.finditer(clause.text)
               if not any(start <= p.start() < end for start, end in lost)
               for w in p.group("thing").split()
               if not w.casefold().startswith("ex-"))  # "my dad": User has a father; "my ex-wife": no wife (stop 39)


# "User is the manager", "User was a night nurse": the role word, as one of the (at most) two words after the article.
_ROLE = regex.compile(r"\S+\s+(?:is|was|works\s+as|worked\s+as|became)\s+(?:an?|the)\s+(?P<first>[\p{L}-]+)"
                      r"(?:\s+(?P<second>[\p{L}-]+))?", regex.IGNORECASE)


def _role_of_another(content: str, source: _Source) -> str | None:
    """The role word of a fact that says what the user is ("User is a veteran") when the source has it only as
    someone's ("I visited a veteran's hospital"), else None (stop 38)."""
    m = _ROLE.match(content)
    if m is None:
        return None
    words = _WORD.findall(source.text)
    for g in ("first", "second"):
        role = (m.group(g) or "").casefold()
        said = [w.casefold() for w in words if _POSSESSIVE.sub("", w.casefold()) == role]
        if said and all(_POSSESSIVE.search(w) for w in said):
            return role
    return None


def _role_not_held(content: str, source: _Source, checks: _FactChecks) -> str | None:
    """The role word of a fact that says what the user is ("User is a nurse") when every word of the source that
    says it is only a field studied ("I study nursing") or the first word of another role ("a vet tech", "a nursing
    student"), with what it is; else None (data/fact_senses.yaml ``studied``, ``role_heads``; stop 40b)."""
    m = _ROLE.match(content)
    spec = _senses_spec()
    if m is None or not (spec.studied or spec.role_heads):
        return None
    heads = {w.casefold() for w in spec.role_heads}
    studied = {w.casefold() for w in spec.studied}
    if any(w.casefold() in heads or w.casefold() in studied for w in _WORD.findall(content)):
        return None  # the fact says the compound or the studying itself: "User is a vet tech"
    words = [w.casefold() for w in _WORD.findall(source.text)]
    for g in ("first", "second"):
        role = (m.group(g) or "").casefold()
        if not role or role in source.stopwords:
            continue
        said = [i for i, w in enumerate(words) if _Source(w, frozenset()).has_term(role, checks.related)]
        if not said:
            continue
        why = []
        for i in said:
            if i + 1 < len(words) and words[i + 1] in heads:
                why.append(f"part of {words[i]} {words[i + 1]!r}")
            elif not studied.isdisjoint(words[max(0, i - spec.studied_gap):i]):
                why.append(f"{words[i]!r} only studied")
            else:
                return None
        return f"{role!r} is not what the user is in the source: {why[0]}"
    return None


def _is_role(content: str, other: str) -> bool:
    """Whether the fact names ``other`` only as what the user is ("User is the manager" from "my manager Priya wants
    ..."): then it does not name the someone else the clause is about."""
    m = _ROLE.match(content)
    return m is not None and other in {(m.group(g) or "").casefold() for g in ("first", "second")}


def _names_other(other: str, clause: str, fact_words: _Source, terms: list[str], checks: _FactChecks) -> bool:
    """Whether the fact names ``other``, the someone else ``clause`` opens with: by its word or a broader one ("User
    has a child" from "my daughter ..."), or by a word that a phrase of data/fact_checks.yaml with it grounds
    ("grandmother" by "my mom's mom", "kids" by "our oldest"); a relative's relative ("mom's mom", "wife's mom") by
    such a word or by words for both ("User's spouse's mother"), not by the last alone ("User's mother" is not "my
    wife's mom") (stop 39)."""
    for t in terms:
        for k in _keys(t):
            rx = checks.phrases.get(k)
            if rx is not None and any(other.split(" ", 1)[-1] in m.group().casefold() for m in rx.finditer(clause)):
                return True
    if " " not in other:
        return fact_words.has_term(other, checks.related) or any(
            _Source(other, frozenset()).has_term(t, checks.related) for t in terms)
    owner, one = (_Source(_POSSESSIVE.sub("", w), frozenset()) for w in other.split(" ", 1))
    return any(owner.has_term(a, checks.related) and one.has_term(b, checks.related)
               for i, a in enumerate(terms) for j, b in enumerate(terms) if i != j)


def _named_other(other: str, names: set[str], clause: str) -> bool:
    """Whether the clause gives ``other`` (the someone else it opens with) one of the fact's ``names`` right after it:
    "my best friend Tom is moving" for a fact that names Tom."""
    words = [_POSSESSIVE.sub("", w.casefold()) for w in _WORD.findall(clause)]
    return any(a == other and b in names for a, b in zip(words, words[1:]))


def _named_subject(content: str, terms: list[str], source: _Source) -> list[str] | None:
    """The fact's opening name, when its first word is one of the fact's terms and a name - a word the source writes
    capitalised inside a sentence ("..., Tom is moving") - with the capitalised words and numbers that follow it
    ("Python 3.12"), casefolded; else None. The clause that says the rest of the fact must name one of them too,
    or open with a pronoun that may stand for it ("Tom owns the auth service" is not "Lena will own the auth
    service, Tom is moving")."""
    words = [m.group() for m in _WORD.finditer(content)]
    if not words or words[0].casefold() not in terms:
        return None
    word = _POSSESSIVE.sub("", words[0])
    inside = rf"(?<=[\p{{L}}\p{{N}},;'’\x22)]\s+){regex.escape(word)}(?![\p{{L}}\p{{N}}])"
    if not word[:1].isupper() or regex.search(inside, source.text) is None:
        return None
    out = [word.casefold()]
    for w in words[1:]:
        if not (w[:1].isupper() or any(ch.isdigit() for ch in w)):
            break
        out.append(_POSSESSIVE.sub("", w).casefold())
    return out


def _unrealised(content: str, clause: str, senses: _Senses) -> bool:
    """Whether the fact says in the past tense, or as what the user is, what the clause says is still to be done
    ("User called the city" from "I'm about to call the city", "User is a programmer" from "I'm planning to go back
    to school to become a programmer"); a fact that is a plan itself, or a clause with a past of its own, is fine."""
    still = senses.unrealised.search(clause)
    if still is None or senses.plan.search(content) or senses.unrealised.search(content):
        return False  # no such clause, or the fact says it is still to be done too ("User is excited to meet people")
    role = _ROLE.match(content)
    roles = [_keys((role.group(g) or "").casefold()) for g in ("first", "second") if role is not None and role.group(g)]
    if not _tense(content, senses)[1] and not any(not keys.isdisjoint(_keys(w.casefold())) for keys in roles
                                                  for w in _WORD.findall(clause[still.end():])):
        return False
    # its own past: not a modal ("would"), the marker itself ("excited to"), nor a participle that only names ("a new
    # show called ...")
    naming = _fact_checks().naming
    rest = senses.modals.sub(" ", clause[:still.start()] + " " + clause[still.end():])
    own = " ".join(w for w in _WORD.findall(rest) if w.casefold() not in naming)
    return not _tense(own, senses)[1]


def _clue_words(content: str, source: _Source, checks: _FactChecks) -> list[str]:
    """The words that find a fact's clause when it has no content word - its numbers and its short names and
    acronyms, that the source has ("User had twins", "User owns a TV") - so that such a fact meets the clause
    checks (negation, someone else) too."""
    words = [m.group() for m in _WORD.finditer(content) if m.start() > 0]
    # digits too: "User is 62" is not "My mom is 62" (stop 39)
    return [w for w in dict.fromkeys(x.casefold() for x in words
                                     if x.casefold() in checks.numbers or x[:1].isupper() or x.isdigit())
            if w not in source.stopwords and source.has_term(w)]


def _changes(text: str) -> list[tuple[str, str]]:
    """(old, new) of every change of data/fact_senses.yaml ``transitions`` in ``text`` (of a source:
    :meth:`_Source.changes`, found once per reply)."""
    return [(m.group("old"), m.group("new")) for rx in _senses().transitions
            for m in safe_finditer(rx, text, "fact_senses.transitions")]


_AMOUNT = regex.compile(r"(?<![\p{L}\p{N}.])(\d+(?:[.,]\d+)?)\s*(\p{L}+|%)?")


@lru_cache(maxsize=1)
def _direction_words() -> Mapping[str, str]:
    """data/fact_senses.yaml ``directions``: the key of each word of a fall or a rise -> "down" / "up"."""
    return {k: side for side, words in _senses_spec().directions.items() for w in words for k in _keys(w.casefold())}


def _direction_said(term: str, source: _Source) -> bool:
    """Whether a word of a fall or a rise ("decreased", "rose") is said by a change of the source between two amounts
    that goes that way ("p95 went from 40ms to 12ms" is a decrease) (stop 40)."""
    words = _direction_words()
    side = next((words[k] for k in _keys(term) if k in words), None)
    if side is None:
        return False
    for old, new in source.changes():
        a, b = _AMOUNT.search(old), _AMOUNT.search(new)
        # the same unit, or none said after the second: "from 90 seconds to 12"; not "from 1.2GB to 180MB"
        if a is not None and b is not None and \
                (a.group(2) or "").casefold() == (b.group(2) or a.group(2) or "").casefold():
            x, y = float(a.group(1).replace(",", "")), float(b.group(1).replace(",", ""))
            if x != y and (y < x) == (side == "down"):
                return True
    return False


@lru_cache(maxsize=1)
def _destinations() -> tuple[Any, ...]:
    """data/fact_senses.yaml ``destinations``, compiled once."""
    return _compile_destinations(_senses_spec().destinations)


def _compile_destinations(patterns: list[str]) -> tuple[Any, ...]:
    """``destinations`` regexes compiled and checked like rule regexes; each needs the group "new"."""
    problems = Problems()
    compiled = [compile_regex(p, f"fact_senses.yaml destinations #{i + 1}", problems, regex.IGNORECASE)
                for i, p in enumerate(patterns)]
    for i, rx in enumerate(compiled):
        if rx is not None and "new" not in rx.groupindex:
            problems.add(f"fact_senses.yaml destinations #{i + 1}", "needs the group 'new'")
    if problems.items:
        problems.raise_all("invalid data file fact_senses.yaml")
    return tuple(rx for rx in compiled if rx is not None)


def _reversed(content: str, source: _Source) -> str | None:
    """The change the fact states when the source states it the other way round ("from Loki to Elasticsearch"
    for "from Elasticsearch to Loki"), else None."""
    said = _changes(content)

    def names(part: str, other: str) -> bool:  # a word of ``part`` (3+ letters or with a digit) is in ``other``
        where = _Source(other, source.stopwords)
        return any(where.has_term(w) for w in (x.casefold() for x in _WORD.findall(part))
                   if w not in source.stopwords and (len(w) >= 3 or any(c.isdigit() for c in w)))

    if not said:
        # only where it went: "Team moved to Jenkins", "p99 decreased to 240ms" from "from Jenkins / 240ms to ..."
        # (stop 40)
        if not source.changes():
            return None
        for rx in _destinations():
            for m in safe_finditer(rx, content, "fact_senses.destinations"):
                for s_old, s_new in source.changes():
                    if names(m.group("new"), s_old) and not names(m.group("new"), s_new):
                        return f"{m.group('new')!r} is where the source's change from {s_old!r} to {s_new!r} started"
        return None

    for old, new in said:
        for s_old, s_new in source.changes():
            if names(old, s_new) and names(new, s_old) and not names(old, s_old) and not names(new, s_new):
                return f"the change from {old!r} to {new!r} goes the other way in the source"
    return None


def _negated_scope(content: str, clauses: list[_Source], checks: _FactChecks) -> bool:
    """Whether a negated clause of the source has the content words that follow the fact's negation."""
    m = checks.negation.search(content)
    if m is None:
        return False
    after = [w.casefold() for w in _LATIN_WORD.findall(content[m.end():])]
    scope = [w for w in after if w not in _base_stopwords() and w not in checks.exempt]
    return bool(scope) and any(_negated(c.text, checks) and all(c.has_term(w, checks.related) for w in scope)
                               for c in clauses)


def _unprefixed(content: str, source: _Source) -> str:
    """``content`` with a word of a negating prefix written as a negation when the source has its base and not
    the word ("unhappy" -> "not happy" for "I'm not really happy")."""
    prefixes = _senses().negated_prefix
    if not prefixes:
        return content

    def undo(m: Any) -> str:
        word = m.group()
        folded = word.casefold()
        for prefix in prefixes:
            base = folded[len(prefix):]
            if folded.startswith(prefix) and len(base) >= 4 and folded not in source.words \
                    and not _keys(base).isdisjoint(source.stems):
                return "not " + base
        return word

    return _WORD.sub(undo, content)


def _bare_ended(clause: str) -> bool:
    """Whether a clause is only its subject and an ended word with no object: "then I quit (to travel)"."""
    m = _senses().ended_any.search(clause)
    if m is None:
        return False
    head = [w.casefold() for w in _WORD.findall(clause[:m.start()])]
    tail = [w.casefold() for w in _WORD.findall(clause[m.end():])]
    return all(w in _FIRST_PERSON or w in ("then", "and", "but", "so", "finally", "eventually") for w in head) \
        and (not tail or tail[0] in _senses().purpose)


def _tense(text: str, senses: _Senses) -> tuple[bool, bool]:
    """(says it holds now, is set in the past) of a fact or clause: a present word of data/fact_senses.yaml or a
    verb in -s after the subject; a verb in the past tense (the lemmatiser's tables, or -ed)."""
    words = [w.casefold() for w in _WORD.findall(text)]
    present = past = False
    for i, w in enumerate(words):
        if w in senses.present or (i == 1 and _s_form(w) and w not in _PAST_AUX and not _inflected(w, "VBD")):
            present = True  # "User smokes"
        if w in _PAST_AUX or _past_form(w):
            past = True
    return present, past


_PAST_AUX = frozenset({"was", "were", "had", "did", "wasn't", "weren't", "hadn't", "didn't"})


def _s_form(word: str) -> bool:
    """Whether ``word`` reads as a verb in -s ("smokes", "needs"; not "class" nor "is")."""
    return word.endswith("s") and not word.endswith("ss") and len(word) > 3


def _past_form(word: str) -> bool:
    """Whether ``word`` reads as a past form: -ed ("moved"; not "red") or an irregular one ("taught")."""
    return (word.endswith("ed") and len(word) > 4) or _inflected(word, "VBD")


def _inflected(word: str, tag: str) -> bool:
    """Whether ``word`` is a past form (``tag`` "VBD") or a third-person present (``tag`` "VBZ") of an irregular
    verb of data/word_forms.tsv ("taught" is past; "was" is no -s form)."""
    if tag == "VBD":  # "are" and "am" are forms of "be" in neither -s nor -ing, and present (fact_senses `present`)
        return word in _word_forms()[2] and word not in _senses().present
    return word in _word_forms()[3]


_EX = regex.compile(r"(?<![\p{L}'’])(?:(?:my|our|his|her|their)\s+ex(?![\p{L}'’-])|ex-(?P<what>\p{L}+))",
                  regex.IGNORECASE)


def _without_exes(text: str, terms: Iterable[str], checks: _FactChecks | None) -> str:
    """``text`` without the ex-partners it names ("my ex-husband has the kids", "my ex"), unless the fact is about
    one of them ("User has a husband" is still not "my ex-husband"): an "ex-" ends that one, not the clause
    (stop 39)."""
    if checks is None or "ex" not in text.casefold():
        return text
    terms = list(terms)

    def kept(m: Any) -> str:
        what = m.group("what")
        said = what is not None and any(_Source(what, frozenset()).has_term(t, checks.related) for t in terms)
        return m.group() if said else " "
    return _EX.sub(kept, text)


_AND = regex.compile(r"(?<![\p{L}'’])and(?![\p{L}'’])", regex.IGNORECASE)


def _after_ended(text: str, senses: _Senses, terms: list[str], checks: _FactChecks | None) -> bool:
    """Whether every word of the fact that ``text`` has comes after an "and" that follows its ended word, and none
    before it: "I gave up my car last year and bike everywhere now" ends the car, not the biking."""
    m = senses.ended.search(text)
    joined = _AND.search(text, m.end()) if m is not None else None
    if joined is None or not terms or checks is None:
        return False
    # a verb of its own that holds now, not a second object of the ended word ("quit smoking and drinking")
    rest = [w.casefold() for w in _WORD.findall(text[joined.end():])]
    if not rest or rest[0].endswith("ing") or rest[0] in _NOUN_BEFORE or senses.present.isdisjoint(rest):
        return False
    after = _Source(text[joined.end():], frozenset())
    before = _Source(text[:joined.start()], frozenset())
    return all(after.has_term(t, checks.related) for t in terms) \
        and not any(before.has_term(t, checks.related) for t in terms)


def _ended_own(text: str, senses: _Senses, terms: Iterable[str], checks: _FactChecks | None) -> bool:
    """Whether a phrase of data/fact_senses.yaml ``ended_own`` in ``text`` ends a word of the fact, in it or in the
    words after it: "I gave up my car" ends the car, not "I walk everywhere now" (stop 40b)."""
    if senses.ended_own is None or checks is None:
        return False
    terms = list(terms)
    return any(_Source(m.group(), frozenset()).has_term(t, checks.related) for m in senses.ended_own.finditer(text)
               for t in terms)


def _ended_differs(content: str, clause: _Source, senses: _Senses, replaced: bool = False,
                   terms: Iterable[str] = (), checks: _FactChecks | None = None) -> str | None:
    """What is wrong when the fact and its clause disagree on whether it ended ("User has a dog" from "I used to
    have a dog", "User started smoking" from "I quit smoking", "User no longer smokes" from "I smoke").
    ``replaced``: the source has what the fact says ended as the old side of a change ("from MySQL to Postgres").
    ``terms`` and ``checks``: the fact's words, to leave an ex-partner it is not about out of the clause."""
    since = _ended_since_rx()
    fact_ended = senses.ended.search(content) is not None or since.search(content) is not None
    states = {w.casefold() for w in _senses_spec().ended_states}
    said = {w.casefold() for w in _WORD.findall(content)} & states
    if said and not said.isdisjoint(w.casefold() for w in _WORD.findall(clause.text)):
        return None  # the state the fact says is the one the clause ends with: "User is retired" from "I retired last
        # year", "a retired mailman" (stop 39)
    text = _without_exes(clause.text, terms, checks)
    clause_ended = clause.ended or senses.ended.search(text) is not None or since.search(text) is not None \
        or senses.ended_source.search(text) is not None or _ended_own(text, senses, terms, checks)
    if clause_ended and not fact_ended and _after_ended(text, senses, list(terms), checks):
        clause_ended = False  # "I gave up my car last year and bike everywhere now": the biking did not end (stop 40)
    if clause_ended and not fact_ended:
        if senses.onset.search(content):
            return "begun in the fact, ended in the source"
        if _tense(content, senses)[0]:
            return "holds now in the fact, ended in the source"
    if fact_ended and not clause_ended and not replaced and not (
            _tense(clause.text, senses)[1] and (senses.bounded.search(clause.text) or senses.duration.search(clause.text))):
        return "ended in the fact, not in the source"
    return None


def _swapped(content: str, terms: list[str], clause: _Source, checks: _FactChecks) -> str | None:
    """The fact's first verb when the clause has someone else do it to the speaker ("My wife left me" is not
    "User left their wife"), else None."""
    words = [w.casefold() for w in _WORD.findall(clause.text)]
    opener = _opening_other(words, checks)
    if opener is None or not terms:
        return None
    said = [w.casefold() for w in _WORD.findall(content)]
    if len(said) > 1 and said[1] in _PASSIVE:
        return None  # "User was taught chess by their uncle"
    later = [i for i, w in enumerate(words) if w in _OBJECT_SPEAKER and i > opener]
    if not later:
        return None
    between = _Source(" ".join(words[opener + 1:later[0]]), frozenset())
    first = terms[0]
    return first if between.has_term(first) else None


# A clause opening with a pronoun of a third person may be about any name said before it ("he's moving to ...").
_PRONOUN_OPENS = regex.compile(r"(?:he|she|they|he['’]s|she['’]s|they['’]re|they['’]ve)(?![\p{L}])", regex.IGNORECASE)
_OBJECT_SPEAKER = frozenset({"me", "us", "myself"})
_PASSIVE = frozenset({"was", "were", "is", "are", "got", "gets", "has", "have", "had", "been", "being"})


def _verb_form(word: str) -> bool:
    """Whether ``word`` reads as a verb form: -ing ("thinking"), a past form ("took", "moved") or another form of
    an irregular verb of data/word_forms.tsv. Before the word for someone else, it makes that one an object
    ("Thinking about asking my boss ...": the speaker asks), not the clause's subject."""
    return (word.endswith("ing") and len(word) > 4) or _past_form(word) or word in _word_forms()[1]


def _opening_other(words: list[str], checks: _FactChecks) -> int | None:
    """Where the word for someone else that opens a clause is ("my wife left me": 1), or None."""
    for i, word in enumerate(words[:4]):
        if word in _FIRST_PERSON and word not in _DETERMINERS or _verb_form(word):
            return None
        if word in _DETERMINERS and i > 0 and words[i - 1] in checks.object_markers:
            return None  # "English with my kids": they are its object, not whom it is about (stop 39)
        at = i + 1 if word in _DETERMINERS else i
        for j in range(at, min(at + 2, len(words))):
            if _POSSESSIVE.sub("", words[j]) in checks.others and (j > i or word not in _DETERMINERS):
                return j
        if word in _DETERMINERS:
            return None
    return None


def _speakers_own(terms: list[str], clause: _Source) -> bool:
    """Whether every term of the fact that ``clause`` has is the speaker's there ("my fish" of "My neighbor's been
    feeding my fish": "User has fish"; not "feeding", so not "User feeds fish")."""
    words = [w.casefold() for w in _WORD.findall(clause.text)]
    found = False
    for t in terms:
        keys = _keys(t)
        at = [i for i, w in enumerate(words) if w == t or not keys.isdisjoint(_keys(w))]
        if not at:
            continue
        found = True
        if not all(any(words[j] in _SPEAKERS_OWN for j in range(max(0, i - 2), i)) for i in at):
            return False
    return found


_SPEAKERS_OWN = frozenset({"my", "our"})


def _given_to_other(content: str, terms: list[str], source: _Source, checks: _FactChecks) -> str | None:
    """A word of a speaker fact that the source has only as someone else's ("her triplets"), when the fact names
    no one else; else None."""
    senses = _senses()
    fact = [w.casefold() for w in _WORD.findall(content)]
    if any(w in senses.possessives - {"their"} or _POSSESSIVE.sub("", w) in checks.others
           or _POSSESSIVE.search(w) for w in fact):
        return None
    words = [w.casefold() for w in _WORD.findall(source.text)]
    own = [w for w in (x.casefold() for x in _LATIN_WORD.findall(content)) if w not in source.stopwords]
    for term in dict.fromkeys([*terms, *own]):
        keys = _keys(term)
        at = [i for i, w in enumerate(words) if w == term or not keys.isdisjoint(_keys(w))]
        if at and all(i > 0 and (words[i - 1] in senses.possessives or _POSSESSIVE.search(words[i - 1])
                                  and _POSSESSIVE.sub("", words[i - 1]) in checks.others) for i in at) \
                and (_theirs(content, term) or not _speakers_deed(term, terms, source, checks)):
            return term
    return None


def _theirs(content: str, term: str) -> bool:
    """Whether the fact gives ``term`` to the user ("their own job"), which the source gives to someone else."""
    words = [w.casefold() for w in _WORD.findall(content)]
    keys = _keys(term)
    return any(not keys.isdisjoint(_keys(w)) and "their" in words[max(0, i - 3):i] for i, w in enumerate(words))


def _speakers_deed(term: str, terms: list[str], source: _Source, checks: _FactChecks) -> bool:
    """Whether a clause that the speaker or a verb opens ("helping people with their ...") has ``term`` with another
    of the fact's terms: the fact is then the speaker's deed on the other one's thing ("I coach my daughter's soccer team": "User coaches soccer"; not "I'm
    babysitting my neighbor's twins": "User has twins", whose only term is the twins)."""
    rest = [t for t in terms if t != term]
    for clause in source.clauses(checks):
        first = _WORD.match(clause.text)
        opener = first.group().casefold() if first is not None else ""
        if (opener in _FIRST_PERSON - _DETERMINERS or _verb_form(opener)) and clause.has_term(term) \
                and any(clause.has_term(t, checks.related) for t in rest):
            return True
    return False


# What opens a time expression that runs on from (or up to) its time: "since Sunday" names Sunday.
_OPEN_TIME = regex.compile(r"^(?:since|from|starting|as\s+of|until|till)\s+", regex.IGNORECASE)


@lru_cache(maxsize=1024)
def _readings(expression: str, said_at: datetime, past: bool = False) -> tuple[tuple[datetime, datetime], ...]:
    """The periods a time expression may name said at ``said_at``: a weekday or month without a year is the last one
    or, unless its clause is in the past (``past``), the coming one ("staging is down Thursday" is the coming
    Thursday, "my grandma died in January" the last January), and an open one ("since Sunday", "starting Monday")
    names the time it runs from (stop 40)."""
    out = []
    for future in (False,) if past else (False, True):
        start, end = resolve(expression, said_at, future=future)
        if start is None or end is None:
            start, end = resolve(_OPEN_TIME.sub("", expression), said_at, future=future)
        if start is not None and end is not None and (start, end) not in out:
            out.append((start, end))
    return tuple(out)


def _periods(text: str, said_at: datetime, past: bool = False) -> list[tuple[datetime, datetime]]:
    return [period for span in find_expressions(text) for period in _readings(span.text, said_at, past)]


def _other_subject(clause: str, checks: _FactChecks) -> str | None:
    """The word for someone other than the speaker that opens ``clause`` ("my sister is ...", "she ..."), unless
    the speaker joins it ("my partner and I") or appears after it ("my grandpa taught me"); else None."""
    words = [w.casefold() for w in _WORD.findall(clause)]
    for i, word in enumerate(words[:4]):
        if word in _FIRST_PERSON and word not in _DETERMINERS or _verb_form(word):
            return None  # the speaker opens the clause, or a verb does ("Thinking about asking my boss ...")
        if word in _DETERMINERS and i > 0 and words[i - 1] in checks.object_markers:
            return None  # "English with my kids": they are its object, not whom it is about (stop 39)
        at = i + 1 if word in _DETERMINERS else i
        # "my sister", "my little sister", "our dog Max", "she"
        for j in range(at, min(at + 2, len(words))):
            other = _POSSESSIVE.sub("", words[j])
            # "my ex-husband" is someone else too, named as such ("User is divorced" names him) (stop 39)
            if other.removeprefix("ex-") in checks.others and (j > i or word not in _DETERMINERS):
                if other != words[j] and j + 1 < len(words) and _POSSESSIVE.sub("", words[j + 1]) in checks.others:
                    j += 1  # a relative's relative, "my mom's mom": the one of theirs, as "mom's mom" (stop 39)
                    other = f"{words[j - 1]} {_POSSESSIVE.sub('', words[j])}"
                rest = words[j + 1:]
                if any(w in _FIRST_PERSON and w not in _DETERMINERS for w in rest):
                    return None
                if word not in _DETERMINERS and rest[:1] == ["of"]:
                    return None  # the speaker says what they are: "Single dad of two boys here", "Mom of three"
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
    return not any(w in subjects or w in checks.clause_words for w in words) and not _finite_verb(words, checks)


# Words after which an -s word is a noun's plural, not a verb ("the dogs of ...", "the dogs and cats").
_NOUN_GOES_ON = frozenset({"of", "and", "or", "'s"})


def _finite_verb(words: list[str], checks: _FactChecks) -> bool:
    """Whether a fact that opens like a noun phrase goes on with a verb of its own: a past form ("The Cubs lost")
    or an -s form followed by more words ("The linter enforces 4 spaces", "Every PR needs two approvals"), after
    at least one word of the noun phrase. A participle that only names ("a dog named Biscuit", data/fact_checks.yaml
    ``naming``) is no verb, nor a light word in -s ("The trip costs"); a light past form is ("The spike happened
    on Friday")."""
    for i in range(2, len(words)):
        word = words[i]
        if word in checks.naming:
            continue
        if word in checks.exempt:
            if _past_form(word) and i + 1 < len(words):
                return True
            continue
        if _past_form(word):
            return True
        if i + 1 < len(words) and words[i + 1] not in _NOUN_GOES_ON and (_inflected(word, "VBZ") or _s_form(word)):
            return True
    return False


def _category_fits(content: str, category: str, checks: _FactChecks) -> bool:
    """Whether the fact carries a cue of its category (data/fact_checks.yaml ``categories``)."""
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


# Words after which a word is a noun, not a verb ("the rent", "a listed owner").
_NOT_PAST_BEFORE = frozenset({"is", "are", "am", "be", "being", "get", "gets", "getting", "will", "'ll", "’ll"})
_NOUN_BEFORE = frozenset({"a", "an", "the", "my", "our", "your", "his", "her", "their", "its", "this", "that"})
_FIRST_PERSON = frozenset({"i", "me", "my", "myself", "we", "us", "our", "i'm", "i've", "i'd", "i'll", "we're",
                           "we've", "i’m", "i’ve", "we’re"})
_DETERMINERS = frozenset({"my", "our", "his", "her", "their"})


_COMMA_ONLY = regex.compile(r"\s*,\s*")
# A participle that opens a clause ("going through a divorce", "and ending up homeless"), after a joining word.
_PARTICIPLE = regex.compile(r"^\s*(?:(?:and|or|then|also|even)\s+)*\p{L}{2,}ing(?![\p{L}'’])", regex.IGNORECASE)


def _participial(part: str) -> bool:
    """Whether ``part`` opens with a participle and has no first person of its own ("going through a divorce"; not
    "leaving me heartbroken")."""
    return _PARTICIPLE.match(part) is not None and all(w.casefold() not in _FIRST_PERSON for w in _WORD.findall(part))


def _first_marked(cuts: list[tuple[str, str | None]], mark: bool) -> list[tuple[str, str | None, bool]]:
    """``cuts`` with ``mark`` on the first and False on the rest."""
    return [(part, antecedent, mark and i == 0) for i, (part, antecedent) in enumerate(cuts)]


class _Source:
    """The source text prepared once for all grounding checks of one reply."""

    def __init__(self, text: str, stopwords: frozenset[str], said_at: datetime | None = None) -> None:
        self.text = text
        self.said_at = said_at
        self._periods: dict[bool, list[tuple[datetime, datetime]]] = {}
        self.folded = text.casefold()
        # Latin runs too: "从MySQL迁移到PostgreSQL" is one word to _WORD.
        self.words = {w.casefold() for w in [*_WORD.findall(text), *_LATIN_WORD.findall(text)]}
        # Keys (stems, lemmas, derivational bases) of every word and of every piece of a hyphenated/apostrophed
        # one ("I've" -> "ve", "i").
        self.stems: set[str] = set()
        for w in _LETTERS.findall(text):
            self.stems |= _keys(w.casefold())
        for w in _HYPHENATED.findall(text):  # "fire-fighting" as "firefighting" too: "firefighter"
            self.stems |= _keys(w.replace("-", "").casefold())
        if _DIGIT.search(text):  # a word with digits as written, for a related word: "k8s" / "kubernetes"
            self.stems.update(w.casefold() for w in _WORD.findall(text) if _DIGIT.search(w))
        self.stopwords = stopwords
        self._numbers: set[str] | None = None
        self._clauses: list[_Source] | None = None
        self._changes: list[tuple[str, str]] | None = None
        self.other: str | None = None  # as a clause: the someone else it is about, if it opens with one
        self.ended = False  # as a clause: the next clause ends it without an object ("..., but then I quit")

    def periods(self, past: bool = False) -> list[tuple[datetime, datetime]]:
        """The periods the source's time expressions name, resolved against when it was said; ``past``: for a fact in
        the past tense, a weekday or month without a year only as the last one."""
        if past not in self._periods:
            self._periods[past] = [] if self.said_at is None else _periods(self.text, self.said_at, past)
        return self._periods[past]

    def undated(self, content: str) -> str:
        """``content`` without the dates that write out a time the source names: the prompt has the model turn
        "yesterday" into "2025-01-08", whose numbers and month the source does not contain."""
        if self.said_at is None or not self.periods():
            return content
        # a fact told in the past ("User's cat died on October 13") does not take a weekday's coming reading
        spans = find_expressions(content)
        rest = content
        for span in reversed(spans):
            rest = rest[:span.start] + " " + rest[span.end:]
        words = [w.casefold() for w in _WORD.findall(rest)]
        # (not a word after a determiner or a possessive: "User's rent increases", "a listed owner")
        # (nor a participle after a present or future "be" / "get": "User is getting married in June 2027", "Android
        # is expected on Wednesday" are ahead) (stop 41)
        past = any(_past_form(w) for i, w in enumerate(words)
                   if i == 0 or words[i - 1] not in _NOUN_BEFORE and words[i - 1] not in _NOT_PAST_BEFORE
                   and _POSSESSIVE.search(words[i - 1]) is None)
        for span in reversed(spans):
            if any(start <= period[0] and period[1] <= end or period[0] <= start and end <= period[1]
                   for period in _readings(span.text, self.said_at) for start, end in self.periods(past)):
                content = content[:span.start] + " " + content[span.end:]
        return content

    def clauses(self, checks: _FactChecks) -> list[_Source]:
        """The source cut at punctuation and clause breaks, each clause with whom it is about."""
        if self._clauses is None:
            self._clauses = []
            parts, commas = [self.text], [False]  # each part, and whether a comma alone cut it from the one before
            if checks.clause is not None:
                parts, commas, at = [], [False], 0
                for m in checks.clause.finditer(self.text):
                    parts.append(self.text[at:m.start()])
                    commas.append(_COMMA_ONLY.fullmatch(m.group()) is not None)
                    at = m.end()
                parts.append(self.text[at:])
            for part, antecedent, first in (cut for p, comma in zip(parts, commas) if p
                                            for n, piece in enumerate(_split_joined(p))
                                            for cut in _first_marked(_split_relative(piece), comma and n == 0)):
                if part and part.strip():
                    clause = _Source(part.strip(), self.stopwords)
                    clause.other = antecedent or _other_subject(part, checks)
                    if clause.other is None and self._clauses and all(w[:1].isupper() for w in _WORD.findall(part)):
                        # a clause of names only goes with the one before: "My son got into college, Michigan!"
                        clause.other = self._clauses[-1].other
                    if clause.other is None and self._clauses and first and _participial(part):
                        # a clause that a comma joins and a participle opens has the subject of the one before:
                        # "She had a tough time, going through a divorce" (stop 38)
                        clause.other = self._clauses[-1].other
                    if self._clauses and _bare_ended(clause.text):
                        self._clauses[-1].ended = True  # "I taught for years, but then I quit to travel"
                    self._clauses.append(clause)
        return self._clauses

    def changes(self) -> list[tuple[str, str]]:
        """(old, new) of every change from one thing to another the source states (:func:`_changes`)."""
        if self._changes is None:
            self._changes = _changes(self.text)
        return self._changes

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
        keys = _keys(term)
        if term in self.words or not keys.isdisjoint(self.stems):
            return True  # "codes" is grounded by "coding", "taught" by "teaching", "bakery" by "baker"
        if related and any(not related.get(k, frozenset()).isdisjoint(self.stems) for k in keys):
            return True  # "mother" by "mom"
        if phrases and any(k in phrases and phrases[k].search(self.text) for k in keys):
            return True  # "daily" by "every day"
        if self.in_place(keys):
            return True  # "Portugal" by "Lisbon"
        # Long words also by a shared 5-letter beginning: "migration" by "migrating"; not the words for people,
        # whose beginnings say little ("grandmother" and "grandpa" are two people).
        prefix = term[:5] if len(term) >= 6 else None
        if prefix is None:
            return False
        people = _fact_checks().others
        return term not in people and any(w.startswith(prefix) and w not in people for w in self.words)

    def in_place(self, keys: frozenset[str]) -> bool:
        """Whether the source names a place inside the broader place one of ``keys`` names (data/places.yaml)."""
        places, phrases = _places()
        for k in keys:
            if not places.get(k, frozenset()).isdisjoint(self.stems):
                return True
            if k in phrases and phrases[k].search(self.text):
                return True
        return False

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
    source = _Source(source_text, _base_stopwords() | subjects | _fact_checks().exempt | _senses().exempt, timestamp)
    rejections: Counter[str] = Counter()
    facts = _valid_facts(raw, source, keeper, settings, subjects, timestamp, rejections, explain)
    entities, by_name = _valid_entities(raw, source, keeper, subjects, rejections)
    relationships = _valid_relationships(raw, by_name, [f.content for f in facts], rejections)
    if rejections:
        logger.debug("LLM reply: %d item(s) rejected: %s", sum(rejections.values()), dict(rejections))
    return tuple(facts), tuple(entities), tuple(relationships), rejections


def _valid_facts(raw: Mapping[str, Any], source: _Source, keeper: Gatekeeper, settings: Settings, subjects: set[str],
                 timestamp: datetime | None, rejections: Counter[str],
                 explain: list[tuple[str, str, str]] | None) -> list[Fact]:
    """The reply's facts that pass :func:`_validate_fact`, each content once."""
    facts: list[Fact] = []
    position: dict[str, int] = {}  # normalised content -> its index in facts
    for item in _items(raw, "facts", rejections):
        fact = _validate_fact(item, source, keeper, settings, subjects, timestamp, rejections, explain)
        if fact is None:
            continue
        key = normalize_content(fact.content)
        if key in position:
            rejections["duplicate"] += 1
            # The same words twice: the one with a category of its own wins over "other".
            if facts[position[key]].category == "other" and fact.category != "other":
                facts[position[key]] = fact
            continue
        position[key] = len(facts)
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
        elif (verdict := keeper.judge(name).reason) == "injection":
            reason = "instruction_injection"  # an entity name is stored and shown to agents like a fact
        elif verdict in SOCIAL_KINDS:
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


def _valid_relationships(raw: Mapping[str, Any], by_name: Mapping[str, str], facts: list[str],
                         rejections: Counter[str]) -> list[Relationship]:
    """The reply's relationships between accepted entities that one accepted fact (of ``facts``, their contents)
    names together, with a usable label, each once. A relationship is stored on a fact of the reply and seen by
    whoever sees that fact: one between names of another sentence (a private one, behind a team fact) is not."""
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
        elif not any(mentions(fact, src) and mentions(fact, dst) for fact in facts):
            reason = "unstated"
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
    content: str, confidence: float, names: list[str], source: _Source, keeper: Gatekeeper, settings: Settings,
    subjects: set[str],
) -> tuple[str | None, str, list[Span | None], list[str]]:
    """Why a fact is rejected (None: it is kept) and what exactly (the unsupported words, the clause it
    contradicts), checked cheapest first, with the spans of its entity names and its words found in the source
    (what the kept fact's explanation points at)."""
    if not content:
        return "empty", "no content", [], []
    if len(content) > MAX_CONTENT_CHARS:
        return "too_long", f"{len(content)} characters", [], []
    checks = _fact_checks()
    content = _unprefixed(content, source)
    said = source.undated(content)
    terms = source.content_terms(_unframed(_in_words(said, source, checks), checks))
    if _too_short(content, terms, checks, subjects):
        return "too_short", "under the floor of data/fact_checks.yaml", [], []
    if keeper.is_injection(content) is not None:
        return "instruction_injection", "reads like an instruction to the model", [], []
    if content.endswith("?") or keeper.judge(content).reason == "question":
        return "question", "a question", [], []
    spans = [source.find(n) for n in names]
    if any(s is None for s in spans):
        return "ungrounded_entity", ", ".join(n for n, s in zip(names, spans) if s is None), spans, []
    # A negated or disliking fact by its own words or their equals only: not having a dog is not having no pets,
    # hating running is not hating exercise (stop 39).
    against = checks.negation is not None and _negated(content, checks) \
        or checks.negative is not None and checks.negative.search(content) is not None
    related = checks.same if against else checks.related
    grounded = [t for t in terms if source.has_term(t, related, checks.phrases)
                or _stem(t) in checks.feelings and _likes(source, checks) or _direction_said(t, source)]
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
    role = _role_of_another(content, source)
    if role is not None:
        return "ungrounded", f"unsupported: {role!r} is only someone's in the source ({role}'s ...)", spans, grounded
    held = _role_not_held(content, source, checks)
    if held is not None:
        return "ungrounded", "unsupported: " + held, spans, grounded
    apart = _apart(content, grounded, source, checks)
    if apart is not None:
        return "ungrounded", "unsupported: " + apart, spans, grounded
    misplaced = _misplaced(content, source, checks, subjects, grounded)
    if misplaced is not None:
        return "ungrounded", "unsupported: " + misplaced, spans, grounded
    about_user = content.casefold().startswith(settings.user_subject.casefold())
    unowned = _unowned(content, grounded, source, checks) if about_user else None
    if unowned is not None:
        return "ungrounded", "unsupported: " + unowned, spans, grounded
    turned_liking = _liking_turned(content, grounded, source, checks)
    if turned_liking is not None:
        return "ungrounded", f"unsupported: {turned_liking}", spans, grounded
    less = _liked_less(content, grounded, source, checks)
    if less is not None:
        return "ungrounded", f"unsupported: a liking of {less!r}, which the source likes less", spans, grounded
    turned = _reversed(content, source)
    if turned is not None:
        return "ungrounded", f"unsupported: {turned}", spans, grounded
    contradiction = _negation_or_other(content, grounded or _clue_words(content, source, checks), source, checks, subjects)
    if contradiction is not None:
        return contradiction[0], contradiction[1], spans, grounded
    if _trivial_rx().search(content):
        return "trivial", "about the conversation", spans, grounded
    if not _CJK_CHAR.search(content) and len(_WORD.findall(content)) < checks.min_words:
        return "category_mismatch", "one word", spans, grounded
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
    told = content
    unreported = _unreported(content, (settings.user_subject, settings.team_subject))
    if unreported is not None:  # "User mentioned that they have a dog" is checked and stored as "User has a dog"
        content = unreported
    names_raw = item.get("entities") or []
    if not isinstance(names_raw, list):
        names_raw = []
    names = [" ".join(n.split()) for n in names_raw if isinstance(n, str)]
    names = [n for n in names if n and n.casefold() not in subjects]
    original, confidence = _confidence(item.get("confidence"))
    category = str(item.get("category") or "").strip().lower()
    if category not in CATEGORIES:
        category = "other"
    reason, detail, spans, grounded = _fact_rejection(content, confidence, names, source, keeper, settings, subjects)
    if reason in ("ungrounded", "negation"):
        readings = [rx.sub(words, content) for rx, words in _restatements()] \
            if _any_restatement().search(content) else []
        for restated in [*readings, *_age_readings(content, source, _fact_checks())]:
            if restated != content:  # "User doesn't eat meat" read as "User is a vegetarian"
                second = _fact_rejection(restated, confidence, names, source, keeper, settings, subjects)
                if second[0] is None:
                    reason, detail, spans, grounded = second
                    break
    note = "validated against source"
    if content != told:
        note += f"; told as {told!r}"
    if reason is None and not _category_fits(content, category, _fact_checks()):
        # The words are the source's; only the label is wrong ("User mostly reads fiction" as a preference). The
        # fact is kept as "other": a label the words do not bear must not drive what a category does (a
        # "temporal" fact's start, an "instruction" in the prompt snippet), and throwing the fact away loses it.
        note += f"; category {category} -> other (no cue of {category})"
        category = "other"
    if reason is not None:
        rejections[reason] += 1
        logger.debug("LLM fact rejected, %s (%s): %r", reason, detail, content)
        if explain is not None:
            explain.append((told, reason, detail if content == told else f"read as {content!r}: {detail}"))
        return None
    entity_names: list[str] = []
    for name, span in zip(names, spans):
        assert span is not None
        # Only names the fact says: its entities are shown and searched with it and link it to the entity graph,
        # and a name from another sentence of the message (a private one, behind a team fact) must not ride along.
        if span.text not in entity_names and (mentions(content, span.text) or mentions(content, name)):
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
            note=note,
        ),
        entities=tuple(entity_names),
        subject=_subject(content, settings),
        # Only events carry the message time as their start; a preference is not "valid from" when it was said.
        valid_from=timestamp if category == "temporal" else None,
    )
