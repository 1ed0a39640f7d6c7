"""literals: the words a regex cannot match without (the pattern library's second prefilter), a regex's superset that
says where it can start a match (the third), and yes/no regexes run by their top-level alternatives."""

from __future__ import annotations

import time

import pytest
import regex

from factforge.rules import rulefile
from factforge.rules.literals import (STARTS_MAX_CHARS, Branches, Starts, branches, clause_checks, meets, relaxed,
                                      relaxed_tails, required)
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
    # ASCII text holds no "现在": the branch that needs it cannot match there, so the other's word is required
    (r"(?:now|现在)\s+write", [{"now"}, {"write"}]),
    (r"(?:现在|接下来)\s+write", [{"write"}]),  # nothing left of a clause: it is dropped, not read as "never"
    (r"(?:now|ſtop)\s+write", [{"write"}]),  # "ſ" matches "s" case-insensitively: the clause says nothing sure
])
def test_required(pattern: str, clauses: list[set[str]]) -> None:
    assert [set(c) for c in required(pattern)] == clauses


def test_relaxed_tails_require_what_follows_a_cut() -> None:
    """After the cut (a repeat of a wide class), "to me" must still occur as the regex has it: "to meet" is not it."""
    pattern = r"I\s+(?P<x>[^.!?]+?)\s+to\s+me(?![\p{L}])"
    flags = regex.IGNORECASE | regex.VERBOSE
    # (its opening run of spaces left out, as a superset's opening repeat is)
    assert relaxed_tails(pattern, flags, lower=True) == [r"to(?:[\x09-\x0d\x20]){1,}me(?![\x61-\x7a])"]
    starts = Starts(pattern, flags)
    assert starts.first("I think it's nice to meet you") == -1
    assert starts.first("I owe a lot to me.") == 0
    assert regex.search(pattern, "I owe a lot to me.", flags)
    assert relaxed_tails(r"I\s+like\s+tea", flags) == []  # no cut: the superset says it all


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


_FLAGS = regex.IGNORECASE | regex.VERBOSE


@pytest.mark.parametrize(("pattern", "source"), [
    # look-behinds dropped; common prefixes factored by the stdlib's parser
    (r"(?<![\p{L}'])I\s+(?:love|like)\s+(?P<obj>\w+)", r"I(?:[\x09-\x0d\x20]){1,}l(?:ove|ike)"
                                                      r"(?:[\x09-\x0d\x20]){1,}(?:[\x30-\x39\x41-\x5a\x5f\x61-\x7a]){1,}"),
    (r"(?!never)a(?=b)", "(?!never)a(?=b)"),  # look-aheads the stdlib reads alike kept
    (r"a(?![^x]*y)b", "ab"),  # a negative look-ahead that could backtrack over the text: dropped
    (r"a(?!(?<=b)c)d", "ad"),  # ... and one holding a look-behind
    (r"(?!(?-i:The)\b)x", r"(?!(?:(?-i:T)(?-i:h)(?-i:e))\b)x"),  # case-sensitive letters say so
    (r"(?-i:\p{Lu})x", r"(?:[\x41-\x5a\x61-\x7a])x"),  # case-sensitive, read case-insensitively too: widened
    (r"[^x]y", r"[\x00-\x77\x79-\x7f]y"),  # a negated class read case-sensitively keeps "X"
    (r"ab[^.!?]+?cd", r"ab(?:[\x00-\x20\x22-\x2d\x2f-\x3e\x40-\x7f])"),  # a wide repeat: its first round, then cut
    (r"ab(?:c\s+)+d", r"ab(?:c(?:[\x09-\x0d\x20]){1,})"),  # an unbounded repeat of a longer piece: cut the same way
    (r"ab(?:cd)*e", "ab"),  # ... and one that may not occur: cut before it
    (r"(a)x\1", "(?:a)x"),  # a back-reference: cut before it
    (r"(?:a|(?<=b))c", "(?:a|)c"),  # an alternative of look-arounds only matches the empty string
    (r"(?:a|(?=b)|b+)c", "(?:a|(?=b)|(?:b){1,})c"),
    (r"(a)?(?:\1|b)c", None),  # what is left matches the empty text: nothing known
    (r"[[:alpha:]]+ing", None),  # syntax the stdlib would read otherwise
    (r"(?:abc){e<=1}x", None),  # a fuzzy match: the stdlib would read "{e<=1}" as characters
    (r"a{,3}b\{c", r"(?:a){0,3}b\{c"),  # an optional opening is kept
])
def test_relaxed(pattern: str, source: str | None) -> None:
    assert relaxed(pattern, _FLAGS) == (None if source is None else (source, True))


@pytest.mark.parametrize(("pattern", "source"), [
    # for the lower-cased text: literals and classes in lower case, read case-sensitively
    (r"(?<![\p{L}'])I\s+(?:love|like)\s+(?P<obj>\w+)", r"i(?:[\x09-\x0d\x20]){1,}l(?:ove|ike)"
                                                      r"(?:[\x09-\x0d\x20]){1,}(?:[\x30-\x39\x5f\x61-\x7a]){1,}"),
    (r"(?!NEVER)A(?=B)", "(?!never)a(?=b)"),
    (r"(?-i:\p{Lu})X", r"(?:[\x61-\x7a])x"),  # case-sensitive, read case-insensitively too: all letters, as lower case
    (r"[^x]y", r"[\x00-\x40\x5b-\x7f]y"),  # "X" is not refused, so neither is its lower case
    # a kept look-ahead whose letters tell case apart cannot be read in lower-cased text: dropped (a wider superset)
    (r"(?!(?-i:The)\b)x", "x"),
    (r"a(?!(?-i:[A-Z]))b", "ab"),
    (r"a(?!(?-i:[A-Za-z]))b", r"a(?!(?:[\x61-\x7a]))b"),  # ... one that holds both cases of each letter is kept
    (r"a(?!(?-i:[0-9_]))b", r"a(?!(?:[\x30-\x39\x5f]))b"),  # ... and so is one of no letters
])
def test_relaxed_for_lower_cased_text(pattern: str, source: str) -> None:
    assert relaxed(pattern, _FLAGS, lower=True) == (source, True)


@pytest.mark.parametrize("text", ["Oh, I LOVE tea", "oh, i love tea", "WE Like It", "we like it", "The x", "THE X",
                                  "the x", "AB", "Ab", "aZb", "AzB", "a1b"])
def test_lower_cased_supersets_match_where_the_case_insensitive_ones_do(text: str) -> None:
    """Read in the lower-cased text, the superset finds what the case-insensitive one finds in the text (or, where a
    look-ahead had to be dropped, earlier)."""
    import re

    for pattern in (r"(?<![\p{L}'])(?:I|we)\s+(?:really\s+)?(?:love|like)(?!\s+it)", r"(?!(?-i:The)\b)x",
                    r"a(?!(?-i:[A-Z]))b", r"a(?!(?-i:[A-Za-z]))b", r"[^x]y|(?-i:\p{Lu})z"):
        cased, low = relaxed(pattern, _FLAGS), relaxed(pattern, _FLAGS, lower=True)
        assert cased is not None and low is not None
        found = re.search(cased[0], text, re.IGNORECASE)
        found_low = re.search(low[0], text.lower())
        if found is not None:
            assert found_low is not None and found_low.start() <= found.start(), (pattern, text)
        if "(?-i:" not in pattern:  # nothing dropped: the same positions
            assert (found and found.start()) == (found_low and found_low.start()), (pattern, text)


def test_relaxed_leaves_out_an_opening_run() -> None:
    assert relaxed(r"(?:(?:all|every)\s+)?[\p{L}-]+\s+is\s+required", _FLAGS) == (
        r"is(?:[\x09-\x0d\x20]){1,}required", False)


def test_relaxed_refuses_flags_it_does_not_read() -> None:
    assert relaxed("abc", regex.IGNORECASE | regex.REVERSE) is None
    assert relaxed("abc", regex.IGNORECASE | regex.FULLCASE) is None


def test_starts_finds_no_later_than_the_regex() -> None:
    starts = Starts(r"(?<![\p{L}'])(?:I|we)\s+(?:really\s+)?(?:love|like)(?!\s+it)", _FLAGS)
    assert starts.first("Oh, I love tea") == 4
    assert starts.first("the view, I think") == -1
    assert starts.first("I'd say we like it") == -1  # the refusal of "like it" is kept
    assert starts.first("swe like tea, we like tea") == 1  # the look-behind is not: earlier than the regex, never later
    opens_on_a_run = Starts(r"(?<=^)[\p{L}-]+\s+(?:is|are)\s+required", _FLAGS)  # its opening run is left out
    assert not opens_on_a_run.anchored
    assert opens_on_a_run.first("Tests are required") == 0 and opens_on_a_run.first("Tests are fine") == -1
    assert starts.first("x" * (STARTS_MAX_CHARS + 1)) == 0  # too long: not read, the regex runs from the start
    assert starts.first("the view, I think é") == 0  # not ASCII: not read (the superset is ASCII's only)
    assert Starts("(a)\\1", _FLAGS).rx is not None and Starts("\\1", 0).first("anything") == 0
    assert starts.first("Oh, I LOVE tea", "oh, i love tea") == 4  # the lower-cased text, handed over by the caller


@pytest.mark.parametrize(("pattern", "text"), [
    # the superset drops the look-behind: it matches at "swe" and "xwe" too, where the regex does not
    (r"(?<![\p{L}'])(?:I|we)\s+(?:really\s+)?(?:love|like)(?!\s+it)", "swe like tea, xwe love it, we like tea and I love it"),
    (r"(?<![\p{L}'])(?:I|we)\s+(?:really\s+)?(?:love|like)(?!\s+it)", "swe like x swe like x swe like x swe like x we like y"),
    (r"(?<=^|\.\s)(?:lost|started)\s+(?P<obj>\w+)", "I lost it. Started running. We started. lost keys"),
    (r"(?<![a-z])[a-z]+(?=\d)", "ab1 cd ef2 g3"),  # a superset that matches at nearly every letter: the regex searches
    (r"x?(?=y)", "ayby xy"),  # empty matches: the regex's own iteration
    (r"(?<![\p{L}'])(?:I|we)\s+like", "nothing here"),
])
def test_starts_finditer_finds_what_the_regex_does(pattern: str, text: str) -> None:
    rx = regex.compile(pattern, _FLAGS)
    starts = Starts(pattern, _FLAGS)
    assert starts.rx is not None
    first = starts.first(text)
    expected = [(m.span(), m.groupdict()) for m in rx.finditer(text)]
    if first < 0:
        assert expected == []
    else:
        assert [(m.span(), m.groupdict()) for m in starts.finditer(rx, text, first)] == expected
        assert [(m.span(), m.groupdict()) for m in starts.finditer(rx, text, first, text.lower())] == expected


def test_starts_finditer_tries_the_regex_only_where_its_superset_matches() -> None:
    """Where the superset matches at few places the regex is matched there, never searched: a regex that cannot
    be searched (it would time out at once) still finds its match."""

    class MatchOnly:
        def __init__(self, rx: regex.Pattern[str]) -> None:
            self.rx, self.calls = rx, []

        def match(self, text: str, pos: int = 0, timeout: float | None = None) -> regex.Match[str] | None:
            self.calls.append(pos)
            return self.rx.match(text, pos)

        def search(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("searched")

    pattern = r"(?<![\p{L}'])(?:I|we)\s+like\s+(?P<obj>\w+)"
    starts = Starts(pattern, _FLAGS)
    rx = MatchOnly(regex.compile(pattern, _FLAGS))
    text = "swe like x, and we like tea"
    found = starts.finditer(rx, text, starts.first(text))  # type: ignore[arg-type]
    assert [m.group("obj") for m in found] == ["tea"] and rx.calls == [1, 16]


def test_every_bundled_rule_matches_only_where_its_superset_does() -> None:
    """Every rule's example and counter-example text, and every fact: where the rule's regex matches, its superset
    matches no later (so the rule finds the same matches searching from there)."""
    library = PatternLibrary.from_dir()
    texts = {t.replace("’", "'") for rule in library.rules
             for t in (*(ex.text for ex in rule.examples), *rule.counter_examples, *(ex.fact for ex in rule.examples))}
    texts = {t for t in texts if t.isascii()}
    assert len(texts) > 1000
    relaxed_rules = [rule for rule in library.rules if rule.starts.rx is not None]
    assert len(relaxed_rules) > 0.9 * len(library.rules)
    for rule in relaxed_rules:
        for text in texts:
            found = rule.regex.search(text)
            first = rule.starts.first(text)
            if found is not None:
                assert 0 <= first <= found.start(), (rule.id, text)
                assert [m.span() for m in rule.regex.finditer(text, first)] == [
                    m.span() for m in rule.regex.finditer(text)], (rule.id, text)
                # tried only where the superset matches, the regex finds the same matches, groups and all
                assert [(m.span(), m.groupdict()) for m in rule.starts.finditer(rule.regex, text, first)] == [
                    (m.span(), m.groupdict()) for m in rule.regex.finditer(text)], (rule.id, text)


def test_the_bundled_supersets_scan_adversarial_text_fast() -> None:
    """The supersets run without a time budget: on the adversarial strings the rule regexes are checked against (and
    each rule's keywords repeated), at the longest length they read, each takes well under a rule regex's own budget
    (measured: ~3 ms at worst)."""
    from factforge.rules.gatekeeper import Gatekeeper

    library = PatternLibrary.from_dir()
    worst = 0.0
    for rule in (*library.rules, *Gatekeeper.from_dir().injection_rules):
        if rule.starts.rx is None:
            continue
        for unit in (*rulefile.ADVERSARIAL_RUNS, *(k + " " for k in rule.keywords)):
            text = (unit * (STARTS_MAX_CHARS // len(unit) + 1))[:STARTS_MAX_CHARS - 1] + "!"
            started = time.process_time()
            rule.starts.first(text)
            worst = max(worst, time.process_time() - started)
    assert worst < rulefile.REGEX_TIMEOUT, worst


def test_every_injection_rule_matches_only_where_its_superset_does() -> None:
    from factforge.rules.gatekeeper import Gatekeeper

    rules = [rule for rule in Gatekeeper.from_dir().injection_rules if rule.starts.rx is not None]
    assert len(rules) > 30
    texts = {t for rule in rules for t in (*rule.examples, *rule.counter_examples) if t.isascii()}
    for rule in rules:
        for text in texts:
            found = rule.regex.search(text)
            if found is not None:
                assert 0 <= rule.starts.first(text) <= found.start(), (rule.id, text)


def test_every_injection_rule_matches_only_where_its_required_words_occur() -> None:
    """The guard skips a rule whose required words an ASCII reading lacks: on every example and counter-example (each
    reading of it), wherever the rule's regex matches, its words are there; and praise without a hand-over ("great"
    without "now", the CJK branch's words left out in ASCII text) does not run the hand-over rule at all."""
    from factforge.rules.gatekeeper import Gatekeeper

    keeper = Gatekeeper.from_dir()
    texts = {t for rule in keeper.injection_rules for t in (*rule.examples, *rule.counter_examples)}
    checked = 0
    for rule in keeper.injection_rules:
        for text in texts:
            for reading in keeper.normaliser.readings(text):
                if reading.isascii() and rule.regex.search(reading):
                    assert meets(rule.requires, reading.lower()), (rule.id, reading)
                    checked += 1
    assert checked > 50
    hand_over = next(rule for rule in keeper.injection_rules if rule.id == "task_hijack_after_praise")
    assert not meets(hand_over.requires, "great job on the garden, it looks lovely.")
    assert meets(hand_over.requires, "great job! now write a poem.")
