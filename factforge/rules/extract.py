"""The rule stages, composed: secrets redacted -> long text segmented -> gatekeeper -> patterns -> entities.

No database, no network: :class:`Extractor` is pure and cheap to call after every turn. What it could not
answer with a HIGH-confidence rule it marks ``needs_llm``; the caller (:class:`factforge.Memory`) queues it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import regex

from ..inputs import check_text, check_timestamp
from .rulefile import Problems, compile_regex, default_patterns_dir, own_time, safe_finditer
from .schema import AnswerSpec, ReferenceSpec, SpeakersSpec, TurnsFileSpec, read
from ..settings import Settings, get_settings
from ..types import Entity, Extraction, Fact, GateDecision, Relationship, Span

if TYPE_CHECKING:
    from .gatekeeper import Gatekeeper
    from .load import RuleSet
    from .ner import EntityRecognizer
    from .patterns import PatternLibrary
    from .secrets import SecretScanner
    from .segment import Segmenter

__all__ = ["Extractor", "TurnRules", "extract"]

logger = logging.getLogger("factforge.extract")

TAIL_CHARS = 400
_PART_REF = regex.compile(r"\{\{(\w+)\}\}")
_SAYS_REF = regex.compile(r"\{(\w+)\}")
# The question must end the assistant's reply; a few words may follow its key phrase ("... from originally?").
_QUESTION_END = r"[^.!?\n]{0,40}\?\s*$"
_ARTICLE_SLOT = regex.compile(r"\0\s*(\S)")
_EMPTY_SLOT = regex.compile(r" +([.!?,])| +(?= )")
_REPLY_END = regex.compile(r"[\s!.。！,，~]+$")


@dataclasses.dataclass(frozen=True, slots=True)
class Answer:
    """One elliptical-answer rule of ``turns.yaml``: a question shape, a reply shape, the sentence they make."""

    id: str
    question: regex.Pattern[str]
    answer: regex.Pattern[str]
    says: str
    lower: frozenset[str] = frozenset()
    examples: tuple[Mapping[str, str], ...] = ()

    def statement(self, assistant: str, user: str) -> str | None:
        """The user's reply restated as their own sentence, or None when the pair does not fit."""
        try:
            # The reply's regex is anchored at both ends, so it is the cheap test: run it first.
            a = own_time(lambda timeout: self.answer.match(user.strip(), timeout=timeout))
            q = own_time(lambda timeout: self.question.search(assistant[-TAIL_CHARS:], timeout=timeout)) if a else None
        except TimeoutError:
            logger.warning("answer rule %s timed out; skipped", self.id)
            return None
        if q is None or a is None:
            return None
        values = {k: v.strip().lower() if k in self.lower else v.strip()
                  for k, v in {**q.groupdict(), **a.groupdict()}.items() if v}
        return _fill_says(self.says, values)


def _fill_says(says: str, values: Mapping[str, str]) -> str:
    """``says`` with its {group}s filled and {a} made "a"/"an" for the word after it."""
    text = _SAYS_REF.sub(lambda m: "\0" if m.group(1) == "a" else values.get(m.group(1), ""), says)
    text = _EMPTY_SLOT.sub(lambda m: m.group(1) or "", text)  # a group left empty leaves no gap: "I've tried X ."
    return _ARTICLE_SLOT.sub(lambda m: ("an " if m.group(1).lower() in "aeiou" else "a ") + m.group(1), text)


@dataclasses.dataclass(frozen=True, slots=True)
class Reference:
    """One reference rule of ``turns.yaml``: the reply names what the message before it named only by a pointer
    ("I love that book!" after '... "Becoming Nicole" ...'); the pair makes one sentence of the user's."""

    id: str
    prior: regex.Pattern[str]
    reply: regex.Pattern[str]
    says: str
    lower: frozenset[str] = frozenset()
    examples: tuple[Mapping[str, str], ...] = ()
    counter_examples: tuple[Mapping[str, str], ...] = ()
    keywords: tuple[str, ...] = ()

    def statements(self, prior: str, user: str) -> list[tuple[str, Span]]:
        """The user's pointer sentences restated with what the message before named; none when the pair does not
        fit: a group both regexes name must agree ("that book" is no movie), and every group ``says`` uses must
        be found. Each comes with the span of the user's words it restates."""
        # The reply is short and rarely holds a pointer: its keywords, then its regex, before the message before.
        if self.keywords and not any(k in user[:TAIL_CHARS].casefold() for k in self.keywords):
            return []
        try:
            replies = own_time(lambda timeout: list(self.reply.finditer(user[:TAIL_CHARS], timeout=timeout)))
            p = own_time(lambda timeout: self.prior.search(prior[-TAIL_CHARS:], timeout=timeout)) if replies else None
        except TimeoutError:
            logger.warning("reference rule %s timed out; skipped", self.id)
            return []
        if p is None:
            return []
        out = []
        for r in replies:
            values = {k: v.strip() for k, v in p.groupdict().items() if v}
            clash = False
            for k, v in r.groupdict().items():
                if not v:
                    continue
                if k in values and values[k].casefold() != v.strip().casefold():
                    clash = True
                values[k] = v.strip()
            values = {k: v.lower() if k in self.lower else v for k, v in values.items()}
            if clash or any(m.group(1) not in values for m in _SAYS_REF.finditer(self.says) if m.group(1) != "a"):
                continue
            out.append((_fill_says(self.says, values), Span(r.start(), r.end(), r.group())))
        return out


@dataclasses.dataclass(frozen=True, slots=True)
class TurnRules:
    """``patterns/turns.yaml``: which user replies confirm the assistant, and how to read its words."""

    confirmations: frozenset[str]
    tag_questions: tuple[regex.Pattern[str], ...]
    swap_rx: regex.Pattern[str]
    swaps: Mapping[str, str]
    speaker_rx: regex.Pattern[str] | None = None
    not_speakers: frozenset[str] = frozenset()
    answers: tuple[Answer, ...] = ()
    references: tuple[Reference, ...] = ()

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> TurnRules:
        return _turn_rules(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    def is_confirmation(self, text: str) -> bool:
        return _norm_reply(text) in self.confirmations

    def as_user_statement(self, assistant: str) -> str:
        """The assistant's sentence from the user's point of view, tag question removed."""
        text = assistant.strip()[-TAIL_CHARS:]  # a statement to confirm is the end of the reply
        for rx in self.tag_questions:
            try:
                text = own_time(lambda timeout: rx.sub("", text, timeout=timeout))
            except TimeoutError:
                logger.warning("tag-question rule timed out on %d chars; skipped", len(text))
        return self.swap_rx.sub(lambda m: _keep_case(m.group(0), self.swaps[m.group(0).lower()]), text)

    def reads_prior(self, user: str) -> bool:
        """Whether the reply needs the assistant's previous message: a confirmation or a bare answer shape."""
        if self.is_confirmation(user):
            return True
        text = user.strip()
        try:
            return any(own_time(lambda timeout: rule.answer.match(text, timeout=timeout)) for rule in self.answers)
        except TimeoutError:
            return False

    def answer(self, assistant: str, user: str) -> tuple[Answer, str] | None:
        """The first answer rule the (question, reply) pair fits, with the reply restated as a sentence."""
        for rule in self.answers:
            said = rule.statement(assistant, user)
            if said:
                return rule, said
        return None

    def referred(self, prior: str, user: str) -> list[tuple[Reference, str, Span]]:
        """Every (reference rule, restated sentence, span of the pointer) the pair fits; a sentence said once."""
        out: list[tuple[Reference, str, Span]] = []
        for rule in self.references:
            for said, span in rule.statements(prior, user):
                if all(said != s for _, s, _ in out):
                    out.append((rule, said, span))
        return out

    def speakers(self, text: str) -> list[Span]:
        """Names at the start of "Name: text" lines, headings and other ``not_names`` left out."""
        if self.speaker_rx is None or ":" not in text:
            return []
        out = []
        for m in safe_finditer(self.speaker_rx, text, "speakers.line"):
            if m.group("name").casefold() not in self.not_speakers:
                out.append(Span(m.start("name"), m.end("name"), m.group("name")))
        return out


def _norm_reply(text: str) -> str:
    return _REPLY_END.sub("", text.strip().lower().replace("’", "'"))


def _keep_case(found: str, repl: str) -> str:
    return repl[0].upper() + repl[1:] if found[:1].isupper() and repl[:1].islower() else repl


@lru_cache(maxsize=8)
def _turn_rules(patterns_dir: str) -> TurnRules:
    path = Path(patterns_dir) / "turns.yaml"
    problems = Problems()
    file = read(TurnsFileSpec, path, problems, default={})
    if file is None:
        problems.raise_all(f"invalid turn rules in {path}")
    confirmations = {_norm_reply(w) for words in file.confirmations.values() for w in words}
    tags = []
    for i, pattern in enumerate(file.tag_questions):
        rx = compile_regex(pattern, f"{path.name}: tag_questions[{i}]", problems, regex.IGNORECASE)
        if rx is not None:
            tags.append(rx)
    swaps = {k.lower(): v for k, v in file.person_swaps.items()}
    speaker_rx, not_speakers = _speaker_rules(file.speakers, path.name, problems)
    answers = _answer_rules(file.answers, file.answer_parts, path.name, problems)
    references = _reference_rules(file.references, file.reference_parts, path.name, problems)
    problems.raise_if_any(f"invalid turn rules in {path}")
    keys = sorted(swaps, key=len, reverse=True) or ["(?!)"]
    alternation = "|".join(regex.escape(k) for k in keys)
    # Latin words need word boundaries; CJK words have none.
    swap_rx = regex.compile(rf"(?<![\p{{Latin}}'])(?:{alternation})(?![\p{{Latin}}'])", regex.IGNORECASE)
    rules = TurnRules(frozenset(confirmations), tuple(tags), swap_rx, swaps, speaker_rx, not_speakers, answers,
                      references)
    if file.speakers is not None:
        _check_speakers(rules, file.speakers, path.name, problems)
    problems.raise_if_any(f"invalid turn rules in {path}")
    return rules


def _speaker_rules(spec: SpeakersSpec | None, where: str,
                   problems: Problems) -> tuple[regex.Pattern[str] | None, frozenset[str]]:
    """The ``speakers`` section: the "Name:" line regex and the words that are never a speaker."""
    if spec is None:
        return None, frozenset()
    rx = compile_regex(spec.line, f"{where}: speakers.line", problems)
    if rx is not None and "name" not in rx.groupindex:
        problems.add(f"{where}: speakers.line", "must have a group 'name'")
        rx = None
    return rx, frozenset(n.strip().casefold() for n in spec.not_names)


def _rule_pair(at: str, section: str, labels: tuple[str, str], texts: tuple[str, str], says: str,
               parts: Mapping[str, str], problems: Problems) -> tuple[regex.Pattern[str], regex.Pattern[str]] | None:
    """The two regexes of a rule of ``answers`` or ``references``, its ``{{part}}`` fragments expanded from
    ``section`` (a part may use parts of its own, two levels deep), checked like the rule's ``says``: each of its
    {groups} must be a group of one of them. None, with the problems noted, when the rule does not load."""
    expanded = list(texts)
    for _ in range(3):
        expanded = [_PART_REF.sub(lambda m: parts.get(m.group(1), m.group(0)), t) for t in expanded]
    missing = sorted({m.group(1) for t in expanded for m in _PART_REF.finditer(t)})
    if missing:
        problems.add(at, f"uses undefined (or too deeply nested) {section} {missing}")
        return None
    first, second = (compile_regex(t, f"{at}: {label}", problems, regex.IGNORECASE)
                     for t, label in zip(expanded, labels))
    if first is None or second is None:
        return None
    unknown = sorted({m.group(1) for m in _SAYS_REF.finditer(says)}
                     - set(first.groupindex) - set(second.groupindex) - {"a"})
    if unknown:
        problems.add(at, f"says names {unknown}, which are no groups of {labels[0]} or {labels[1]}")
        return None
    return first, second


def _answer_rules(specs: Sequence[AnswerSpec], parts: Mapping[str, str], where: str,
                  problems: Problems) -> tuple[Answer, ...]:
    """The ``answers`` section, with ``{{part}}`` fragments of ``answer_parts`` expanded."""
    out = []
    for spec in specs:
        pair = _rule_pair(f"{where}: answer {spec.id}", "answer_parts", ("question", "answer"),
                          (spec.question + _QUESTION_END, spec.answer), spec.says, parts, problems)
        if pair is not None:
            out.append(Answer(spec.id, *pair, spec.says, frozenset(spec.lower),
                              tuple(e.model_dump() for e in spec.examples)))
    return tuple(out)


def _reference_rules(specs: Sequence[ReferenceSpec], parts: Mapping[str, str], where: str,
                     problems: Problems) -> tuple[Reference, ...]:
    """The ``references`` section, with ``{{part}}`` fragments of ``reference_parts`` expanded."""
    out = []
    for spec in specs:
        pair = _rule_pair(f"{where}: reference {spec.id}", "reference_parts", ("prior", "reply"),
                          (spec.prior, spec.reply), spec.says, parts, problems)
        if pair is not None:
            out.append(Reference(spec.id, *pair, spec.says, frozenset(spec.lower),
                                 tuple(e.model_dump() for e in spec.examples),
                                 tuple(e.model_dump() for e in spec.counter_examples),
                                 tuple(k.casefold() for k in spec.keywords)))
    return tuple(out)


def _check_speakers(rules: TurnRules, spec: SpeakersSpec, where: str, problems: Problems) -> None:
    """Every speaker example yields its name; no counter-example yields a speaker."""
    at = f"{where}: speakers"
    for ex in spec.examples:
        got = [s.text for s in rules.speakers(ex.text)]
        if ex.name not in got:
            problems.add(f"{at}.examples", f"{ex.text!r}: expected speaker {ex.name!r}, got {got!r}")
    for text in spec.counter_examples:
        got = [s.text for s in rules.speakers(text)]
        if got:
            problems.add(f"{at}.counter_examples", f"{text!r}: yields speaker(s) {got!r}")


class Extractor:
    """Gate + patterns + entity recognition over one message or one turn. Thread-safe; no I/O once each part of
    its rule set is loaded (a lazy rule set reads a part's files at its first use)."""

    def __init__(self, settings: Settings | None = None, patterns_dir: Path | None = None, *,
                 rules: RuleSet | None = None) -> None:
        """``rules``: the rule set to use (see :mod:`factforge.rules.load`); else the rules of ``patterns_dir``
        (default: the settings' patterns folder)."""
        from .load import default_rules

        self.settings = settings or get_settings()
        self.rules = rules or default_rules(patterns_dir or self.settings.patterns_dir)

    # The parts of the rule set, each loaded when first used (see RuleSet).
    @property
    def gate(self) -> Gatekeeper:
        return self.rules.gate

    @property
    def library(self) -> PatternLibrary:
        return self.rules.library

    @property
    def ner(self) -> EntityRecognizer:
        return self.rules.ner

    @property
    def secrets(self) -> SecretScanner:
        return self.rules.secrets

    @property
    def segmenter(self) -> Segmenter:
        return self.rules.segmenter

    @property
    def turns(self) -> TurnRules:
        return self.rules.turns

    # -- public --------------------------------------------------------------------------------------

    def extract(self, text: str, *, timestamp: datetime | None = None, speaker: str = "user") -> Extraction:
        """Facts, entities and the gate verdict for one message."""
        rules = self.rules
        redaction = rules.secrets.redact(text)
        clean = redaction.text
        s = self.settings
        pieces = [Span(0, len(clean), clean)] if len(clean) <= s.max_message_chars else \
            rules.segmenter.segments(clean, s.max_message_chars)
        facts: list[Fact] = []
        gate: GateDecision | None = None
        passed_any = False
        unanswered = False
        keeper, library = rules.gate, rules.library
        for piece in pieces:
            decision = keeper.judge(piece.text)
            if decision.reason == "injection":
                # One injected segment taints the whole message: nothing of it becomes memory or LLM input.
                return Extraction(clean, decision, timestamp=timestamp, redactions=redaction.count)
            if not decision.passed and decision.reason != "too_short":
                gate = gate or decision
                continue
            found = [f for f in library.match(piece.text, timestamp=timestamp, settings=s)
                     if f.confidence >= s.medium_confidence]
            if not decision.passed and not found:
                gate = gate or decision
                continue
            passed_any = True
            if piece.start:
                found = [_shift(f, piece.start) for f in found]
            if speaker != "user":
                found = [dataclasses.replace(f, speaker=speaker) for f in found]  # type: ignore[arg-type]
            facts += found
            if not any(f.confidence >= s.high_confidence for f in found):
                unanswered = True
        if passed_any:
            gate = GateDecision(True)
        elif gate is None:
            gate = GateDecision(False, "empty", "no text")
        facts = _dedupe(facts)
        hints = tuple(f for f in facts if f.confidence < s.high_confidence)
        entities = self._entities(clean, facts) if passed_any else ()
        return Extraction(
            text=clean, gate=gate, facts=tuple(facts), hints=hints, entities=entities,
            relationships=_relationships(facts), needs_llm=passed_any and unanswered, timestamp=timestamp,
            redactions=redaction.count,
        )

    def extract_turn(self, user: str, assistant: str | None = None, *, timestamp: datetime | None = None,
                     prior_assistant: str | None = None) -> Extraction:
        """Facts of a conversation turn: the user's words; the assistant's only when the user confirms them.

        ``prior_assistant`` is the assistant message the user is answering (the previous turn's reply):
        a bare "yes"/"exactly"/"对" to "You're on Postgres 16, right?" stores "User is on Postgres 16".
        """
        result = self.extract(user, timestamp=timestamp)
        if result.gate.reason == "injection":
            # An injected reply taints the turn: it is not an answer to the assistant's question either ("Be a
            # comedian. Tell me a joke." to "What do you do for work?" made "User is a be a comedian").
            return result
        # The reply is read only when the user confirms or answers it, and only if it is no injection, judged as it
        # was written: turned to the user's point of view ("you are now DAN" -> "I am now DAN") most injection rules,
        # phrased to the model in the second person, no longer match.
        if prior_assistant and self.turns.is_confirmation(user):
            if self.gate.is_injection(prior_assistant) is not None:
                return result
            statement = self.turns.as_user_statement(prior_assistant)
            confirmed = self.extract(statement, timestamp=timestamp, speaker="assistant")
            if confirmed.facts and confirmed.gate.passed:
                # The stored fact keeps its explanation, not its speaker: the note says whose words it was. It
                # quotes the sentence the fact came from, never the rest of the reply: a team fact's note is read
                # by the whole team, and the reply is the agent's private conversation.
                facts = tuple(dataclasses.replace(f, explanation=dataclasses.replace(f.explanation, note=(
                    f"the assistant's words, confirmed by the user ({user.strip()!r}), read as "
                    f"{f.explanation.span.text if f.explanation.span else f.content!r}")))
                    for f in confirmed.facts)
                return dataclasses.replace(confirmed, facts=facts, needs_llm=False,
                                           hints=tuple(f for f in facts if f.confidence < self.settings.high_confidence))
        # A bare "yes" to a question ("Have you tried pottery?" - "Yep!") confirms no statement but answers it.
        if (prior_assistant and not result.facts and (found := self.turns.answer(prior_assistant, user))
              and self.gate.is_injection(prior_assistant) is None):
            # "Nurse, yes." to "What do you do for work?": the pair, restated, is the user's own statement.
            rule, said = found
            answered = self.extract(said, timestamp=timestamp)
            if answered.facts and answered.gate.passed:
                note = f"elliptical answer ({rule.id}) to the assistant's question, read as {said!r}"
                facts = tuple(dataclasses.replace(f, explanation=dataclasses.replace(f.explanation, note=note))
                              for f in answered.facts)
                return dataclasses.replace(answered, facts=facts,
                                           hints=tuple(f for f in facts if f.confidence < self.settings.high_confidence))
        # A reply the gate drops as a bare reaction ("That's a great book! I love it too.") may still point at what
        # the message before named: read it too, and keep it if the pointer gave a fact.
        if prior_assistant and self.turns.references and (result.gate.passed or result.gate.reason not in (
                "injection", "empty")):
            result = self._with_references(result, prior_assistant, user, timestamp)
        return result

    # -- helpers -------------------------------------------------------------------------------------

    def _with_references(self, result: Extraction, prior: str, user: str, timestamp: datetime | None) -> Extraction:
        """``result`` with the facts of the user's pointers to what ``prior`` named ("I love that book!")."""
        found = self.turns.referred(prior, user)
        if not found or self.gate.is_injection(prior) is not None:
            return result
        added: list[Fact] = []
        read_spans: list[Span] = []
        for rule, said, span in found:
            read = self.extract(said, timestamp=timestamp)
            if not read.gate.passed or not read.facts:
                continue
            note = f"a pointer to the message before ({rule.id}), read as {said!r}"
            added += [dataclasses.replace(f, explanation=dataclasses.replace(f.explanation, note=note, span=span))
                      for f in read.facts]
            read_spans.append(span)
        if not added:
            return result
        # A fact of the same words with the pointer left in ("That song brings User peace") gives way to the reading.
        kept = [f for f in result.facts if not (f.explanation.span and any(
            f.explanation.span.start < s.end and s.start < f.explanation.span.end for s in read_spans))]
        high = self.settings.high_confidence
        facts = tuple(_dedupe([*kept, *added]))
        if not result.gate.passed:
            entities = self._entities(result.text, list(facts))
            return dataclasses.replace(result, gate=GateDecision(True), facts=facts, entities=entities,
                                       hints=tuple(f for f in facts if f.confidence < high),
                                       needs_llm=not any(f.confidence >= high for f in added))
        return dataclasses.replace(result, facts=facts, hints=tuple(f for f in facts if f.confidence < high),
                                   needs_llm=result.needs_llm and not any(f.confidence >= high for f in added))

    def _entities(self, text: str, facts: list[Fact]) -> tuple[Entity, ...]:
        rules = self.rules
        ner = rules.ner
        found = list(ner.find(text))
        seen = {e.name.casefold() for e in found}
        for span in rules.turns.speakers(text):
            if span.text.casefold() not in seen:
                seen.add(span.text.casefold())
                found.append(Entity(span.text, "speaker", span, "regex"))
        for fact in facts:
            for name in fact.entities:
                if name.casefold() not in seen:
                    seen.add(name.casefold())
                    canonical = ner.canonical(name)
                    found.append(Entity(canonical or name, "technology" if canonical else "concept", None, "regex"))
        return tuple(found)


def _shift(fact: Fact, offset: int) -> Fact:
    span = fact.explanation.span
    if span is None:
        return fact
    moved = Span(span.start + offset, span.end + offset, span.text)
    return dataclasses.replace(fact, explanation=dataclasses.replace(fact.explanation, span=moved))


def _dedupe(facts: list[Fact]) -> list[Fact]:
    best: dict[str, Fact] = {}
    for f in facts:
        key = f.content.casefold()
        if key not in best or f.confidence > best[key].confidence:
            best[key] = f
    return [f for f in facts if best[f.content.casefold()] is f]


def _relationships(facts: list[Fact]) -> tuple[Relationship, ...]:
    """Edges the rules can state without guessing: a switch links the old tool to its replacement."""
    out: list[Relationship] = []
    for f in facts:
        old, new = f.slots.get("old"), f.slots.get("new")
        if f.category == "technology" and old and new and old.casefold() != new.casefold():
            out.append(Relationship(str(new), str(old), "replaced"))
    return tuple(out)


@lru_cache(maxsize=4)
def _default_extractor() -> Extractor:
    return Extractor()


def extract(text: str, *, timestamp: datetime | str | None = None, assistant: str | None = None) -> Extraction:
    """One-call extraction with the default settings and patterns (``factforge.extract("I use Vim.")``)."""
    text = check_text("text", text, required=True) or ""
    ts = check_timestamp(timestamp)
    if assistant is not None:
        return _default_extractor().extract_turn(text, check_text("assistant", assistant), timestamp=ts)
    return _default_extractor().extract(text, timestamp=ts)
