"""The shape of every rule file, declared once as pydantic models, and the one check that turns a failed shape
into "file: rule id: what" problems.

A loader reads its YAML with ``rulefile.read_yaml``, calls :func:`check` with the file's model and gets the typed
file back (or None). What a shape cannot say - a regex compiles, a template names groups of its regex, the
examples come out right - stays in the loader and runs over the typed values.

One failed item does not hide the others: every problem of the first validation is reported, then the items
that failed (a rule, a gazetteer entry, one word of a list, an unknown key) are left out and the rest is
validated again, so the loader still checks what is left and one error lists every problem of the file.
"""

from __future__ import annotations

import copy
import re
import types
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, ClassVar, TypeVar, Union, get_args, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from .rulefile import Problems, load_yaml, read_yaml
from ..types import CATEGORIES, ENTITY_TYPES

__all__ = ["Spec", "check", "read", "read_data", "unique"]

S = TypeVar("S", bound="Spec")
_MAX_PRUNES = 12
_REPR_CHARS = 60


class Spec(BaseModel):
    """A part of a rule file: unknown keys are errors and nothing is coerced (YAML's ``1`` is no string) unless
    a field says so (``Scalar``: example values compared as text)."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    # How an item of a list of these is named in messages ("rule cve", "gazetteer entry Foo", "example #2"),
    # and the field that names it (empty: by its number).
    label: ClassVar[str] = ""
    key: ClassVar[str] = "id"

    @model_validator(mode="before")
    @classmethod
    def _null_is_default(cls, data: Any) -> Any:
        """A key written without a value (``defines:``) means the field's default, as the loaders always read
        it; where null itself means something (``blockers: null``: none), the default is None and it stays."""
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {k: v for k, v in data.items() if v is not None or k not in fields or fields[k].default is None}


# ----------------------------------------------------------------------------------- value types


def _one_of(choices: Iterable[str]) -> AfterValidator:
    allowed = tuple(choices)

    def check_choice(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"is not one of {', '.join(allowed)}")
        return value

    return AfterValidator(check_choice)


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _trimmed(value: str) -> str:
    if not value or value.strip() != value:
        raise ValueError("must be non-empty, without surrounding spaces")
    return value


def _lower(value: str) -> str:
    if value != value.lower():
        raise ValueError("must be lower-case (it is matched against the lower-cased text)")
    return value


def _unit(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be a number in 0..1")
    return value


def _positive(value: int) -> int:
    if value < 1:
        raise ValueError("must be a positive whole number")
    return value


def _as_text(value: Any) -> Any:
    """Example values are compared as text: a YAML date or number becomes its string."""
    return value if value is None or isinstance(value, str) else str(value)


def _punctuation(value: str) -> str:
    if any(ch.isspace() or ch.isalnum() for ch in value):
        raise ValueError("must be a string of punctuation characters")
    return value


Text = Annotated[str, AfterValidator(_not_blank)]
Word = Annotated[str, AfterValidator(_trimmed)]
Keyword = Annotated[str, AfterValidator(_not_blank), AfterValidator(_lower)]
Unit = Annotated[float, AfterValidator(_unit)]
Positive = Annotated[int, AfterValidator(_positive)]
Scalar = Annotated[str, BeforeValidator(_as_text)]
Punctuation = Annotated[str, AfterValidator(_punctuation)]
Category = Annotated[str, _one_of(CATEGORIES)]
EntityType = Annotated[str, _one_of(ENTITY_TYPES)]
Char = Annotated[str, Field(min_length=1, max_length=1)]


# ----------------------------------------------------------------------------------- facts (patterns/*.yaml)

TIME_MODES = ("since", "range")
# "future": a date without a year in the rule's sentence is the next one ("in May" of a plan), not the last.
TENSES = ("any", "future")


class FactExampleSpec(Spec):
    label: ClassVar[str] = "example"
    key: ClassVar[str] = ""
    text: str
    fact: str
    entities: list[Scalar] | None = None
    slots: dict[Scalar, Scalar] | None = None
    confidence: float | None = None
    valid_from: Scalar | None = None
    valid_to: Scalar | None = None


class FactRuleSpec(Spec):
    label: ClassVar[str] = "rule"
    id: Text
    category: Category
    language: Text | None = None  # default: the file's
    regex: str
    template: Text
    confidence: Unit
    relation: Text
    keywords: list[Keyword] = Field(min_length=1)
    examples: list[FactExampleSpec] = Field(min_length=1)
    counter_examples: list[Text] = Field(min_length=1)
    entity_groups: list[Text] = []
    boost_words: list[Text] = []
    boost: Unit | None = None  # default: 0.05 with boost_words, else 0
    subject: str = "user"
    time_group: str | None = None
    time_mode: Annotated[str, _one_of(TIME_MODES)] = "since"
    blockers: str | None = None  # absent: the file's guards.blockers; null: none
    allow_questions: bool = False
    description: str = ""
    list_group: str | None = None
    verbatim_groups: list[Text] = []  # names quoted as written: no pronoun swap, no article cut
    tense: Annotated[str, _one_of(TENSES)] = "any"


class GuardsSpec(Spec):
    blockers: str | None = None


class FactsFileSpec(Spec):
    kind: str
    version: int | str | None = None
    language: Text | None = None
    defines: dict[str, str] = {}
    subjects: dict[Annotated[str, _one_of(("user", "team"))], list[Text]] = {}
    pronouns: dict[Text, Text] = {}
    guards: GuardsSpec = GuardsSpec()
    rules: list[FactRuleSpec] = Field(min_length=1)


# ----------------------------------------------------------------------------------- gate.yaml, injection.yaml

SOCIAL_KINDS: tuple[str, ...] = ("greeting", "thanks", "goodbye", "acknowledgement", "reaction", "filler")
REASONS: tuple[str, ...] = ("empty", "injection", *SOCIAL_KINDS, "question", "too_short")
WORD_KINDS: tuple[str, ...] = ("wh_words", "aux_words", "subject_words", "first_person", "question_particles",
                                "bare_answers", "open_tail_stop", "listener", "anchors", "anchor_endings",
                                "generic_anchors", "views", "general_verbs", "vocative_next")
SocialKind = Annotated[str, _one_of(SOCIAL_KINDS)]


class SegmentSpec(Spec):
    latin_terminators: Punctuation
    cjk_terminators: Punctuation
    closers: Punctuation


class ThresholdsSpec(Spec):
    min_cjk_chars: Positive
    min_letters: Positive
    max_social_tokens: Positive


def _each_kind_once(value: list[str]) -> list[str]:
    if sorted(value) != sorted(SOCIAL_KINDS):
        raise ValueError(f"must list each of {', '.join(SOCIAL_KINDS)} once")
    return value


class GateShapesSpec(Spec):
    classes: dict[str, list[Text]] = {}
    kinds: dict[SocialKind, list[Text]] = {}


class GateFileSpec(Spec):
    version: int | str | None = None
    thresholds: ThresholdsSpec
    reason_priority: Annotated[list[str], AfterValidator(_each_kind_once)]
    # language -> social kind or word kind -> phrases (in file order: a phrase under two kinds keeps the first)
    languages: dict[str, dict[Annotated[str, _one_of(SOCIAL_KINDS + WORD_KINDS)], list[Text]]] = Field(min_length=1)
    shapes: GateShapesSpec = GateShapesSpec()
    # Shape classes whose one-word phrases make a clause with no person in it a general remark (truism_cues).
    truism_cues: list[Text] = []
    segment: SegmentSpec
    examples: dict[Annotated[str, _one_of(REASONS)], list[str]] = {}
    counter_examples: list[str] = []


class InjectionRuleSpec(Spec):
    label: ClassVar[str] = "rule"
    id: Text
    language: str
    description: str = ""
    keywords: list[Text]
    regex: str
    examples: list[Text]
    counter_examples: list[Text]


class NormaliseSpec(Spec):
    zero_width: list[Char] = []
    # a target letter -> the characters that look like it
    confusables: dict[Char, Annotated[str, Field(min_length=1)]] = {}
    leet: dict[Char, Annotated[str, Field(min_length=1)]] = {}
    rot13_hints: list[Annotated[str, Field(min_length=1)]] = []
    base64_min_chars: Annotated[int, Field(ge=8)] = 16
    max_chars: Annotated[int, Field(ge=8)] = 20_000


class InjectionFileSpec(Spec):
    version: int | str | None = None
    normalise: NormaliseSpec | None = None
    rules: list[InjectionRuleSpec]


# ----------------------------------------------------------------------------------- secrets.yaml


def _kind_name(value: str) -> str:
    if not re.fullmatch(r"[a-z][a-z0-9_]*", value):
        raise ValueError("must be a lowercase identifier (it appears in [REDACTED:<kind>])")
    return value


class SecretRuleSpec(Spec):
    label: ClassVar[str] = "rule"
    id: Text
    kind: Annotated[str, AfterValidator(_kind_name)]
    keywords: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    regex: str
    group: str | None = None
    examples: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)
    counter_examples: list[Annotated[str, Field(min_length=1)]] = Field(min_length=1)


class SecretsFileSpec(Spec):
    version: int | str | None = None
    rules: list[SecretRuleSpec]


# ----------------------------------------------------------------------------------- entities.yaml

NORMALIZE = ("none", "upper", "lower")
SCOPES = ("line", "match")


def _text_or_mapping(value: Any) -> Any:
    return {"text": value} if isinstance(value, str) and value else value


class RegexExampleSpec(Spec):
    label: ClassVar[str] = "example"
    key: ClassVar[str] = "text"
    text: str
    match: str | None = None
    name: str | None = None


class RegexKindSpec(Spec):
    label: ClassVar[str] = "rule"
    id: Text
    type: EntityType
    regex: Annotated[str, Field(min_length=1)]
    description: str = ""
    ignore_case: bool = False
    normalize: Annotated[str, _one_of(NORMALIZE)] = "none"
    needs: list[Word] = []
    after_technology: bool = False
    # a text, or a mapping {text, match, name}
    examples: list[Annotated[RegexExampleSpec, BeforeValidator(_text_or_mapping)]] = Field(min_length=1)
    counter_examples: list[Word] = []


class GazetteerEntrySpec(Spec):
    label: ClassVar[str] = "gazetteer entry"
    key: ClassVar[str] = "name"
    name: Word
    type: EntityType | None = None  # default: the group's
    aliases: list[Word] = []
    case_sensitive: bool = False
    any_case_aliases: list[Word] = []
    exact_aliases: list[Word] = []


class GazetteerGroupSpec(Spec):
    label: ClassVar[str] = "gazetteer group"
    key: ClassVar[str] = "group"
    group: Text
    type: EntityType = "technology"
    entries: list[GazetteerEntrySpec]


class CodeContextRuleSpec(Spec):
    label: ClassVar[str] = "code_context rule"
    id: Text
    description: str = ""
    scope: Annotated[str, _one_of(SCOPES)] = "line"
    needs: list[Word] = []
    regex: Annotated[str, Field(min_length=1)]
    examples: list[Word] = Field(min_length=1)
    counter_examples: list[Word] = []


class CodeContextSpec(Spec):
    types: list[EntityType] = Field(min_length=1)
    rules: list[CodeContextRuleSpec] = Field(min_length=1)


class TextExampleSpec(Spec):
    label: ClassVar[str] = "example"
    key: ClassVar[str] = "text"
    text: str
    entities: list[str]


class EntitiesFileSpec(Spec):
    version: int | str | None = None
    regex: list[RegexKindSpec]
    gazetteer: list[GazetteerGroupSpec]
    examples: list[TextExampleSpec] = []
    code_context: CodeContextSpec | None = None


# ----------------------------------------------------------------------------------- supersession.yaml

SAME_FIELDS = ("subject", "relation", "category")


def _identifier(value: str) -> str:
    if not value.isidentifier():
        raise ValueError("must be an identifier (a slot name)")
    return value


Identifier = Annotated[str, AfterValidator(_identifier)]


def _same_entry(value: str) -> str:
    if value not in SAME_FIELDS and not (value.startswith("slot:") and value[5:].isidentifier()):
        raise ValueError(f"must be one of {', '.join(SAME_FIELDS)} or slot:<name>")
    return value


class AssertsSpec(Spec):
    template: str
    category: Category
    relation: str | None = None
    slots: dict[str, str] = {}


class SupersessionRuleSpec(Spec):
    label: ClassVar[str] = "rule"
    id: Text
    description: str = ""
    categories: list[Category] = []
    relations: list[Text] = []
    target_relations: list[Text] = []
    same: list[Annotated[str, AfterValidator(_same_entry)]] = []
    link: dict[Identifier, list[Identifier]] = {}  # a new-fact slot -> the old-fact slots it must equal
    same_suffix: dict[Identifier, Text] | None = None  # a slot -> a marker string
    similar_above: Annotated[float, Field(gt=0, le=1)] | None = None
    asserts: AssertsSpec | None = None
    examples: Any = None

    @model_validator(mode="after")
    def _narrows(self) -> SupersessionRuleSpec:
        if not self.same and not self.link and not self.same_suffix:
            raise ValueError("needs 'same' or 'link' (otherwise it would supersede every fact)")
        return self


class SupersessionFileSpec(Spec):
    kind: str | None = None
    version: int | str | None = None
    rules: list[SupersessionRuleSpec] = []


# ----------------------------------------------------------------------------------- turns.yaml


class SpeakerExampleSpec(Spec):
    label: ClassVar[str] = "example"
    key: ClassVar[str] = "text"
    text: str
    name: str


class SpeakersSpec(Spec):
    line: str
    not_names: list[Text] = []
    examples: list[SpeakerExampleSpec] = []
    counter_examples: list[Scalar] = []


class AnswerExampleSpec(Spec):
    label: ClassVar[str] = "example"
    key: ClassVar[str] = ""
    question: str
    answer: str
    fact: str


class AnswerSpec(Spec):
    label: ClassVar[str] = "answer"
    id: str
    question: str
    answer: str
    says: str
    lower: list[str] = []
    examples: list[AnswerExampleSpec] = []


class ReferenceExampleSpec(Spec):
    label: ClassVar[str] = "example"
    key: ClassVar[str] = ""
    prior: str
    reply: str
    fact: str


class ReferenceCounterSpec(Spec):
    label: ClassVar[str] = "counter-example"
    key: ClassVar[str] = ""
    prior: str
    reply: str


class ReferenceSpec(Spec):
    label: ClassVar[str] = "reference"
    id: str
    prior: str
    reply: str
    says: str
    lower: list[str] = []
    examples: list[ReferenceExampleSpec] = []
    counter_examples: list[ReferenceCounterSpec] = []
    keywords: list[str] = []


class TurnsFileSpec(Spec):
    kind: str | None = None
    confirmations: dict[str, list[str]] = {}
    tag_questions: list[Scalar] = []
    person_swaps: dict[Scalar, Scalar] = {}
    speakers: SpeakersSpec | None = None
    examples: Any = None
    answers: list[AnswerSpec] = []
    answer_parts: dict[str, str] = {}
    references: list[ReferenceSpec] = []
    reference_parts: dict[str, str] = {}


# ----------------------------------------------------------------------------------- data/*.yaml word lists


class GrammarWordsSpec(Spec):
    """data/grammar_words.yaml: the English grammar words the pattern library renders with."""

    articles: list[str]
    no_carry: list[str]
    item_verbs: list[str]
    item_links: list[str]
    prepositions: list[str]
    approximators: list[str]
    bare_times: list[str]
    irregular_third: dict[str, str]
    irregular_past: dict[str, str]


class ZhTimeWordsSpec(Spec):
    fixed: dict[str, str]  # a Chinese expression -> the English one it means
    digits: dict[str, int]
    units: dict[str, str]


class TimeWordsSpec(Spec):
    """data/time_words.yaml: the words of the time expressions (rules/temporal.py combines them)."""

    number_words: dict[str, int]
    weekdays: list[str]
    weekday_short: dict[str, str]
    seasons: list[str]
    season_start: dict[str, int]
    relative: list[str]
    zh: ZhTimeWordsSpec


def _not_negative(value: int) -> int:
    if value < 0:
        raise ValueError("must be a whole number >= 0")
    return value


class MinContentSpec(Spec):
    cjk_chars: Annotated[int, AfterValidator(_not_negative)]
    min_words: Annotated[int, AfterValidator(_not_negative)]
    content_words: Annotated[int, AfterValidator(_not_negative)]
    clause_words: list[Text]
    fragment_openers: list[Text]
    naming: list[Text] = []  # participles that only name ("a dog named Biscuit"): no verb of a fragment's own


class CuesSpec(Spec):
    words: list[Text] = []
    patterns: list[Text] = []  # regexes, compiled (and checked) by the loader


class PolaritySpec(Spec):
    positive: list[Text]
    negative: list[Text]
    praise: list[Text] = []  # grounds a liking beside the positive words ("great", "fun")
    contrast: list[Text] = []  # what follows is liked less ("tea over coffee")
    feelings: list[Text] = []  # a fact's good feelings, grounded like a liking ("excited" by "can't wait")


def _share(value: float) -> float:
    if not 0.0 < value <= 1.0:
        raise ValueError("must be above 0 and at most 1")
    return value


class NegationSpec(Spec):
    words: list[Text]  # explicit negation ("not", "never", "n't")
    implied: list[Text] = []  # words that say "no more" on their own ("quit", "no longer", "former")
    hedges: list[Text] = []  # phrases with a negation word that negate nothing ("not sure", "not only")
    clause_breaks: list[Text] = []  # words that end a clause beside punctuation ("but", "because")
    subject_breaks: list[Text] = []  # words that end one only before a new subject ("so I'm", not "not so sure")
    subjects: list[Text] = []  # what opens a new subject ("I", "she", "my")


class GroundingSpec(Spec):
    min_share: Annotated[float, AfterValidator(_share)] = 1.0  # of a fact's content words the source supports
    cjk_min_share: Annotated[float, AfterValidator(_share)] = 0.5  # of its CJK bigrams
    light: list[Text] = []  # words that carry no claim of their own ("named", "lives"): not checked
    numbers: dict[str, int] = {}  # number words -> whole numbers
    scales: dict[str, int] = {}  # words after a number that multiply it ("10k", "2 grand") -> the factor
    polarity: PolaritySpec
    negation: NegationSpec | None = None
    related: list[list[str]] = []  # groups of words that ground each other
    broader: dict[str, list[str]] = {}  # a word -> the narrower words that ground it ("pet" <- "dog"), not back
    others: list[Text] = []  # words for someone other than the speaker ("sister", "he"): see validate.py
    object_markers: list[Text] = []  # words before "my sister" that make her an object ("with my kids"): validate.py


class FactChecksSpec(Spec):
    """data/fact_checks.yaml: the quality checks of LLM facts (models/validate.py)."""

    min_content: MinContentSpec
    categories: dict[Category, CuesSpec] = {}
    grounding: GroundingSpec


# ----------------------------------------------------------------------------------- the check


def read(spec: type[S], path: Path, problems: Problems, *, default: Any = None) -> S | None:
    """Read and :func:`check` one rule file; ``default``: what a missing file holds (else it is a problem)."""
    if default is not None and not path.exists():
        raw = default
    else:
        before = len(problems.items)
        raw = read_yaml(path, problems)
        if len(problems.items) > before:
            return None
        if raw is None:
            problems.add(str(path), "file is empty")
            return None
        if not isinstance(raw, dict):
            problems.add(str(path), "top level must be a mapping")
            return None
    return check(spec, raw, str(path), problems)


def read_data(spec: type[S], name: str) -> S:
    """One word list of the package's ``data/`` folder, checked; a bad one raises one PatternError."""
    path = resources.files("factforge").joinpath(f"data/{name}")
    problems = Problems()
    checked = check(spec, load_yaml(path.read_text(encoding="utf-8")), str(path), problems)
    if checked is None or problems.items:
        problems.raise_all(f"invalid data file {name}")
    return checked


def check(spec: type[S], raw: Any, where: str, problems: Problems) -> S | None:
    """``raw`` as a ``spec``; each problem becomes "``where``: <item>: <field>: what" in ``problems``. What
    failed is left out and the rest validated again (see the module docstring); None if the file as a whole
    cannot be read as a ``spec`` (a required part is missing or wrong)."""
    data = raw
    for attempt in range(_MAX_PRUNES):
        try:
            return spec.model_validate(data)
        except ValidationError as exc:
            errors = exc.errors()
        if attempt == 0:
            for error in errors:
                problems.add(*_describe(spec, raw, error, where))
            data = copy.deepcopy(raw)
        cuts = {_cut(spec, data, tuple(error["loc"]), error["type"]) for error in errors}
        if None in cuts:
            return None
        for cut in sorted(cuts, key=_deepest_last, reverse=True):
            _delete(data, cut or ())
    return None


def unique(items: Iterable[S], where: str, seen: set[str] | dict[str, str], problems: Problems) -> list[S]:
    """The items of file ``where`` whose ``id`` was not seen before (``seen`` grows; a dict also says in which
    file each was seen); a repeated one is a problem "``where``: rule <id>: duplicate id"."""
    out = []
    for item in items:
        rule_id = getattr(item, "id")
        if rule_id in seen:
            problems.add(f"{where}: {item.label} {rule_id}", f"duplicate id (also in {seen[rule_id]})"
                         if isinstance(seen, dict) else "duplicate id")
            continue
        if isinstance(seen, dict):
            seen[rule_id] = where
        else:
            seen.add(rule_id)
        out.append(item)
    return out


def _inner(annotation: Any) -> Any:
    """The model, list or dict type under Annotated[...] and ``X | None``."""
    while True:
        origin = get_origin(annotation)
        if origin is Annotated:
            annotation = get_args(annotation)[0]
        elif origin in (Union, types.UnionType):
            options = [a for a in get_args(annotation) if a is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        else:
            return annotation


def _is_spec(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, Spec)


def _steps(spec: type[Spec], raw: Any, loc: Sequence[Any]) -> list[tuple[Any, Any, Any]]:
    """For each step of ``loc``: (the step, the type it leads to, the raw value there, or None)."""
    out = []
    annotation: Any = spec
    value = raw
    for step in loc:
        if step == "[key]":
            out.append((step, None, None))
            break
        if _is_spec(annotation):
            field = annotation.model_fields.get(step) if isinstance(step, str) else None
            annotation = _inner(field.annotation) if field is not None else None
        elif get_origin(annotation) in (list, dict):
            annotation = _inner(get_args(annotation)[-1])
        else:
            annotation = None
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            value = None
        out.append((step, annotation, value))
    return out


def _describe(spec: type[Spec], raw: Any, error: Any, where: str) -> tuple[str, str]:
    """("``where``: rule X", "field: what") for one pydantic error."""
    kind, loc = error["type"], tuple(error["loc"])
    steps = _steps(spec, raw, loc)
    if loc and loc[-1] == "[key]":  # a bad dict key: said of the dict ("kinds: 'smalltalk' is not one of ...")
        steps = steps[:-2]
    elif kind in ("extra_forbidden", "missing"):  # said of what holds the key
        steps = steps[:-1]
    place = [where]
    path = ""
    for step, annotation, value in steps:
        if _is_spec(annotation) and annotation.label and isinstance(step, int):
            name = value.get(annotation.key) if annotation.key and isinstance(value, dict) else None
            place.append(f"{annotation.label} {name}" if isinstance(name, str) and name
                         else f"{annotation.label} #{step + 1}")
            path = ""
        elif isinstance(step, int):
            path += f"[{step}]"
        else:
            path += f".{step}" if path else str(step)
    message = error["msg"].removeprefix("Value error, ")
    if kind == "extra_forbidden":
        what = f"unknown key {loc[-1]!r}"
    elif kind == "missing":
        what = f"missing {loc[-1]}"
    elif kind in ("model_type", "dict_type"):
        what = "must be a mapping"
    elif message.startswith("is "):  # "'hobby' is not one of ..."
        what = f"{_short(error['input'])} {message}"
    else:
        what = f"{message[:1].lower()}{message[1:]} (got {_short(error['input'])})"
    return ": ".join(place), f"{path}: {what}" if path else what


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _REPR_CHARS else text[:_REPR_CHARS - 3] + "..."


def _cut(spec: type[Spec], data: Any, loc: tuple[Any, ...], kind: str) -> tuple[Any, ...] | None:
    """What to leave out for one error, so the rest can be validated again: the innermost named item (a rule,
    an entry) holding it, else an unknown key, else the innermost list item or dict entry, else a top-level
    part. None when nothing can be left out (the error is about the file as a whole)."""
    steps = _steps(spec, data, loc)
    cut = None
    for depth, (step, annotation, _value) in enumerate(steps):
        if isinstance(step, int) and _is_spec(annotation) and annotation.label:
            cut = depth
    if cut is None and kind == "extra_forbidden":
        cut = len(loc) - 1
    if cut is None:
        for depth, (step, _annotation, _value) in enumerate(steps):
            parent = steps[depth - 1][1] if depth else spec
            if step == "[key]":
                cut = depth - 1
            elif isinstance(step, int) or get_origin(parent) is dict:
                cut = depth
    if cut is None and loc and kind != "missing":
        cut = 0
    return None if cut is None or cut < 0 else loc[:cut + 1]


def _deepest_last(cut: tuple[Any, ...] | None) -> list[tuple[int, int, str]]:
    """Sort key of the parts to leave out: sorted by it in reverse, the deepest and last go first, so a list
    index still points at its item when it is deleted (indices and keys compare apart, never with each other)."""
    return [(0, step, "") if isinstance(step, int) else (1, 0, str(step)) for step in cut or ()]


def _delete(data: Any, path: tuple[Any, ...]) -> None:
    container = data
    try:
        for step in path[:-1]:
            container = container[step]
        del container[path[-1]]
    except (KeyError, IndexError, TypeError):
        pass  # already left out with what held it
