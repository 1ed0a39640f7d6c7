"""literals.required: the words a regex cannot match without, the pattern library's second prefilter."""

from __future__ import annotations

import pytest
import regex

from factforge.rules.literals import clause_checks, meets, required
from factforge.rules.patterns import PatternLibrary


@pytest.mark.parametrize(("pattern", "clauses"), [
    (r"I\s+(?:love|like)\s+(?P<obj>\w+)", [{"love", "like"}]),
    (r"(?<![\p{L}'])my\s+(?:dog|cat)\s+is\s+named", [{"my"}, {"dog", "cat"}, {"is"}, {"named"}]),
    (r"(?:was|were)\s+(?:born|raised)?", [{"was", "were"}]),  # an optional part requires nothing
    (r"(?:foo|ba\w+)\s+end", [{"foo", "ba"}, {"end"}]),  # each branch gives its best clause
    (r"(?!never)(?:a|bb)\s+x", []),  # a negative lookahead, one-letter words: nothing worth checking
    (r"(?<=(?:^|\.)\s*)today", [{"today"}]),
    (r"(?-i:\p{Lu})abc", [{"abc"}]),
    (r"(?P<a>x)(?P<a>yy)", [{"xyy"}]),  # a group name used twice (the regex module allows it)
    (r"[[:alpha:]]+ing", []),  # syntax the stdlib would read otherwise: nothing assumed
])
def test_required(pattern: str, clauses: list[set[str]]) -> None:
    assert [set(c) for c in required(pattern)] == clauses


@pytest.mark.parametrize(("pattern", "text"), [
    (r"I\s+(?:love|like)\s+(?P<obj>\w+)", "so I LIKE tea"),
    (r"(?:very\s+)*(?:good|great)\s+at", "I'm Great At chess"),
    (r"(?:x{2,3})yz", "xxxyz"),
])
def test_a_matching_text_meets_its_clauses(pattern: str, text: str) -> None:
    assert regex.search(pattern, text, regex.IGNORECASE | regex.VERBOSE)
    assert meets(clause_checks(required(pattern)), text.lower())


def test_every_bundled_example_meets_its_rules_clauses() -> None:
    library = PatternLibrary.from_dir()
    for rule in library.rules:
        for example in rule.examples:
            text = example.text.replace("’", "'")
            if text.isascii():
                assert rule.may_match(text.lower()), (rule.id, example.text)


def test_a_pattern_without_verbose_keeps_its_spaces() -> None:
    assert required("i was a (?:nurse|teacher)", verbose=False) == (frozenset({"i was a nurse", "i was a teacher"}),)
    assert required("i was a (?:nurse|teacher)") == (frozenset({"iwasanurse", "iwasateacher"}),)  # VERBOSE: no spaces
