"""literals: the words a regex cannot match without (the pattern library's second prefilter), and yes/no regexes run
by their top-level alternatives."""

from __future__ import annotations

import pytest
import regex

from factforge.rules.literals import Branches, branches, clause_checks, meets, required
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


@pytest.mark.parametrize(("pattern", "parts"), [
    (r"a|b(c|d)|e", ["a", "b(c|d)", "e"]),
    (r"[|)(]x|\|y|(?<=a|b)z", ["[|)(]x", r"\|y", "(?<=a|b)z"]),  # a class, an escape and a group keep their "|"
    (r"[]|]a|[^]|]b", ["[]|]a", "[^]|]b"]),  # "]" first in a class is a character
    (r"(?:x)", ["(?:x)"]),
    (r"(?i)a|b", None),  # a global flag would hold for the first part only
    (r"(a)\1|b", None),  # a back-reference may name a group of another part
    (r"(?P<x>a)(?P=x)|b", None),
    (r"a(?#c|d)|b", None),  # a comment may hide a "|"
    (r"a # c|d", None),  # so may a verbose comment
    (r"(a|b", None),
])
def test_branches_cut_only_at_the_top_level(pattern: str, parts: list[str] | None) -> None:
    assert branches(pattern) == parts


_CHECKED = [
    r"(?<![\p{L}'])(?:dont|cant)(?![\p{L}'])|\s(?:on|in)\s+(?:for|since)\s|(?<![\p{L}'])the\s+same\s+(?:way|thing)",
    r"(?<![\p{L}'])(?:you|your)(?![\p{L}'])|(?<![\p{L}'])(?-i:That)\s+same\s|(?<![\p{L}'-])one\s+(?:with|for)",
    r"^to\s+(?:go|do)$|(?:^|\s)it\s+too$|x",
]
_TEXTS = ["User dont know", "User has been on for a while", "User loves the same way", "User told you",
          "USER DONT KNOW", "That same day", "that same day", "User is working on one with their group", "to go",
          "User likes it too", "café dont", "nothing here", "", "Ünïcode the  same   thing", "xyz", "to do it"]


@pytest.mark.parametrize("pattern", _CHECKED)
def test_branches_answer_as_the_whole_regex(pattern: str) -> None:
    rx = regex.compile(pattern, regex.IGNORECASE | regex.VERBOSE)
    check = Branches(rx)
    assert len(check.parts) > 1
    for text in _TEXTS:
        assert check.search(text) == (rx.search(text) is not None), text


def test_the_librarys_yes_no_checks_answer_as_their_regexes() -> None:
    library = PatternLibrary.from_dir()
    assert library.broken_content is not None and library.dangling_inside is not None
    assert library.broken_parts is not None and library.dangling_parts is not None
    assert len(library.broken_parts.parts) > 1 and len(library.dangling_parts.parts) > 1
    texts = [*_TEXTS, *(ex.fact for rule in library.rules for ex in rule.examples),
             *(text for rule in library.rules for text in rule.counter_examples)]
    for text in texts:
        assert library.broken_parts.search(text) == (library.broken_content.search(text) is not None), text
        assert library.dangling_parts.search(text) == (library.dangling_inside.search(text) is not None), text
