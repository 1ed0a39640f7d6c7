"""Supersession rules (``patterns/supersession.yaml``): when a new fact makes an older one outdated.

A rule applies to a newly stored fact whose category/relation it names, and selects the current facts in
the same scope that it replaces. Rules are data; this module turns them into decisions (:class:`~factforge.types.Supersession`)
that storage applies:

* ``same``: fields that must be equal in old and new fact: ``subject``, ``relation``, ``category`` or
  ``slot:<name>`` (a value of the fact's structured slots);
* ``target_relations``: the old fact's relation must be one of these (default: the new fact's relation);
* ``link``: ``{new_slot: [old_slot, ...]}``: the new fact's slot value (e.g. the tool switched *from*) must
  equal one of the old fact's slots (e.g. the tool it *uses*), compared case-insensitively;
* ``same_suffix``: ``{slot: marker}``: the part of a slot after ``marker`` must be equal ("use Redis *for
  caching*" and "use Memcached *for caching*" decide about the same thing);
* ``similar_above``: the two facts' embeddings must be at least this similar (cosine); rules with it apply
  only when both facts have a vector ("Team decided to use Memcached for caching" vs "... Redis for caching");
* ``asserts``: a fact the new one implies, stored beside it ("Team switched from JWT to Clerk" asserts "Team
  uses Clerk"): ``{template, category, relation, slots: {name: source_slot}}``, filled from the new fact's
  subject and slots.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from .rulefile import Problems, default_patterns_dir
from .schema import SupersessionFileSpec, read, unique
from ..types import Explanation, Fact, Supersession

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True, slots=True)
class SupersessionRule:
    id: str
    description: str
    categories: tuple[str, ...]
    relations: tuple[str, ...]
    target_relations: tuple[str, ...]
    same: tuple[str, ...]
    link: Mapping[str, tuple[str, ...]]
    similar_above: float | None = None
    asserts: Mapping[str, Any] | None = None
    same_suffix: Mapping[str, str] | None = None

    def applies(self, category: str, relation: str | None) -> bool:
        if self.categories and category not in self.categories:
            return False
        return not self.relations or (relation is not None and relation in self.relations)

    def decide(self, fact: Fact, has_vector: bool) -> Supersession | None:
        """What ``fact`` (a new fact; ``has_vector``: stored with an embedding) supersedes by this rule, or None
        if the rule cannot apply to it (a value it compares is missing)."""
        slots = fact.slots or {}
        relations = tuple(self.target_relations) or ((fact.relation,) if fact.relation else ())
        equal: list[tuple[str, Any]] = []
        for name in self.same:
            value = slots.get(name[5:]) if name.startswith("slot:") else getattr(fact, name)
            if value in (None, ""):
                return None
            equal.append((name, value))
        link: list[tuple[tuple[str, ...], Any]] = []
        for new_slot, old_slots in self.link.items():
            value = slots.get(new_slot)
            if value in (None, ""):
                return None
            link.append((old_slots, value))
        suffix: list[tuple[str, str, str]] = []
        for slot, marker in (self.same_suffix or {}).items():
            value = str(slots.get(slot) or "")
            if marker not in value:
                return None
            suffix.append((slot, marker, value.split(marker, 1)[1].strip().lower()))
        if self.similar_above is not None and not has_vector:
            return None
        if not (relations or equal or link or suffix or self.similar_above is not None):
            return None
        return Supersession(self.id, relations, tuple(equal), tuple(link), tuple(suffix), self.similar_above)

    def implied(self, fact: Fact) -> Fact | None:
        """The fact ``asserts`` derives from ``fact``, or None when a slot it needs is missing."""
        spec = self.asserts
        if not spec:
            return None
        values = {"subject": fact.subject or ""}
        values.update({k: str(v) for k, v in fact.slots.items()})
        if any(not values.get(name) for name in _FIELD.findall(spec["template"])):
            return None
        slots = {name: values.get(src, "") for name, src in (spec.get("slots") or {}).items()}
        if any(not v for v in slots.values()):
            return None
        content = _FIELD.sub(lambda m: values[m.group(1)], spec["template"])
        exp = fact.explanation
        return dataclasses.replace(
            fact, content=content, category=spec["category"], relation=spec.get("relation"), slots=slots,
            entities=tuple(v for v in slots.values()), rule_id=self.id,
            explanation=Explanation(exp.stage, self.id, exp.original_confidence, exp.final_confidence, exp.span,
                                    0.0, f"implied by: {fact.content}"),
        )


@dataclass(frozen=True, slots=True)
class SupersessionRules:
    rules: tuple[SupersessionRule, ...]

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> SupersessionRules:
        return _cached(str(patterns_dir or default_patterns_dir()))

    def for_fact(self, category: str, relation: str | None) -> list[SupersessionRule]:
        return [r for r in self.rules if r.applies(category, relation)]

    def decide(self, fact: Fact, has_vector: bool) -> tuple[Supersession, ...]:
        """What a new fact supersedes, rule by rule (storage applies these once the fact is stored as new)."""
        decided = (rule.decide(fact, has_vector) for rule in self.for_fact(fact.category, fact.relation))
        return tuple(d for d in decided if d is not None)

    def needs_vector(self, fact: Fact) -> bool:
        """Whether what ``fact`` supersedes depends on its embedding (a ``similar_above`` rule applies to it): a
        writer that leaves vectors to a worker still embeds such a fact as it stores it."""
        return any(d.similar_above is not None for d in self.decide(fact, True))

    def implied(self, facts: Sequence[Fact]) -> list[Fact]:
        """Facts the given ones imply (see ``asserts``), not already among them."""
        have = {f.content.casefold() for f in facts}
        out: list[Fact] = []
        for fact in facts:
            for rule in self.for_fact(fact.category, fact.relation):
                extra = rule.implied(fact)
                if extra is not None and extra.content.casefold() not in have:
                    have.add(extra.content.casefold())
                    out.append(extra)
        return out


def load(path: Path) -> SupersessionRules:
    """The supersession rules of ``path`` (none if it does not exist); a bad file raises one PatternError."""
    problems = Problems()
    file = read(SupersessionFileSpec, path, problems, default={"rules": []})
    rules = tuple(
        SupersessionRule(
            id=spec.id, description=spec.description, categories=tuple(spec.categories),
            relations=tuple(spec.relations), target_relations=tuple(spec.target_relations), same=tuple(spec.same),
            link={k: tuple(v) for k, v in spec.link.items()}, similar_above=spec.similar_above,
            asserts=spec.asserts.model_dump(exclude_unset=True) if spec.asserts else None,
            same_suffix=dict(spec.same_suffix) if spec.same_suffix else None,
        )
        for spec in unique(file.rules if file else [], str(path), set(), problems)
    )
    problems.raise_if_any(f"invalid supersession rules in {path}")
    return SupersessionRules(rules)


@lru_cache(maxsize=8)
def _cached(patterns_dir: str) -> SupersessionRules:
    return load(Path(patterns_dir) / "supersession.yaml")


def describe(rules: Sequence[SupersessionRule]) -> list[str]:
    return [f"{r.id}: {r.description}" for r in rules]
