"""Speaker names on facts: "User went to a pottery class" becomes "Maria went to a pottery class".

A post-step on the facts of one turn, after extraction (rules, tags, LLM) and before storage, so the
pattern library keeps its one wording ("User ...") and no rule needs to know a name. Only the leading
subject word is replaced: the templates put it there, and a captured "User" further in ("prefers the User
model") is the speaker's own text. Team facts keep their team wording; who said them stays in provenance.
The name becomes an entity of the fact, so a search or an entity filter for "Maria" finds it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import regex

from ..types import Fact

__all__ = ["mentions", "name_speakers"]

ASSISTANT_SUBJECT = "Assistant"


def mentions(content: str, name: str) -> bool:
    """Whether the fact ``content`` names ``name`` (case-insensitive, as a whole word or words): what a fact may
    carry as its entities (the LLM's, an inline tag's), since they are shown and searched with it."""
    return regex.search(r"(?<!\w)" + regex.escape(name) + r"(?!\w)", content, regex.IGNORECASE) is not None


def _renamer(subject: str, name: str) -> tuple[regex.Pattern[str], str]:
    # "User", "The user" (LLM wording) at the start, and its possessive "User's".
    return regex.compile(rf"^(?:the\s+)?{regex.escape(subject)}\b", regex.IGNORECASE), name


def name_speakers(facts: Sequence[Fact], *, user_subject: str, user_name: str | None = None,
                  assistant_name: str | None = None) -> list[Fact]:
    """The facts with the speakers' subject words replaced by their names (unchanged without a name)."""
    renamers = [_renamer(subject, name.strip()) for subject, name in
                ((user_subject, user_name), (ASSISTANT_SUBJECT, assistant_name)) if name and name.strip()]
    if not renamers:
        return list(facts)
    out: list[Fact] = []
    for fact in facts:
        for pattern, name in renamers:
            content = pattern.sub(lambda _m: name, fact.content, count=1)
            if content != fact.content:
                entities = (name, *(e for e in fact.entities if e.casefold() != name.casefold()))
                fact = dataclasses.replace(fact, content=content, entities=entities)
                break
        out.append(fact)
    return out
