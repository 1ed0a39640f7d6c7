"""The literal words a regex cannot match without: a second, finer prefilter for the pattern library.

A rule's ``keywords`` decide whether its regex runs at all; but a long rule regex often needs more words than
its keywords ("I was a ..." needs one of ~50 job names), and running it costs 10-200 us. :func:`required`
reads a regex's syntax tree and returns what any text it matches holds: a tuple of clauses, each a set of
lower-case strings of which at least one occurs in the lower-cased text. Only ASCII clauses are kept, and the
library applies them to ASCII texts only, where lower-casing and the ``regex`` module's case-insensitive
matching agree.

The tree is read with the stdlib's regex parser (the ``regex`` module exposes none). ``\\p{...}`` classes and
group names are rewritten first (the stdlib has neither Unicode properties nor repeated group names); anything
the stdlib cannot parse yields no clause, so the rule runs whenever its keywords occur, as before. The reading
is conservative: a construct it does not know requires nothing.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any

import ahocorasick
import regex

# The stdlib's own parser (``sre_parse``, a deprecated alias of it since Python 3.11), and its node names.
_sre_parse: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

__all__ = ["Branches", "branches", "clause_checks", "meets", "required"]

# The most strings one exact set (the strings a piece of the regex can match in full) may hold.
_MAX_SET = 64
# A clause that holds a string this short is met by nearly every text: it would cost more than it spares.
_MIN_CHARS = 2
_PROPERTY = re.compile(r"\\[pP]\{[^}]*\}")
_GROUP_NAME = re.compile(r"\(\?P<\w+>")
# Syntax the stdlib would read differently from the ``regex`` module rather than refuse: skip such a regex.
_FOREIGN = ("[[:", "(?|", "\\L<", "(?V", "(?r", "(?f")

_GLOBAL_FLAGS = re.compile(r"\(\?[a-zA-Z]+\)")
_BACKREF = re.compile(r"\\[1-9]|\(\?P=|\\g<")

_Exact = set[str] | None
_Clauses = list[set[str]]


def required(pattern: str, verbose: bool = True) -> tuple[frozenset[str], ...]:
    """Clauses of lower-case ASCII strings: any text ``pattern`` matches holds, per clause, one of its strings
    (compared lower-cased); () when nothing is known. ``verbose``: the pattern is compiled with VERBOSE (its
    spaces are no literals)."""
    if any(token in pattern for token in _FOREIGN):
        return ()
    # A property class becomes \w: a class of no known characters, which requires nothing.
    text = _GROUP_NAME.sub("(?:", _PROPERTY.sub(r"\\w", pattern))
    try:
        tree = _sre_parse.parse(text, re.IGNORECASE | (re.VERBOSE if verbose else 0))
    except (re.error, RecursionError, OverflowError, ValueError):
        return ()
    _, clauses = _sequence(list(tree))
    out: list[frozenset[str]] = []
    for clause in clauses:
        if clause and all(len(s) >= _MIN_CHARS and s.isascii() for s in clause) and frozenset(clause) not in out:
            out.append(frozenset(clause))
    return tuple(out)


def branches(pattern: str, verbose: bool = True) -> list[str] | None:
    """The top-level alternatives of a regex's source (``"a|b(c|d)"`` -> ``["a", "b(c|d)"]``), or None when the
    source is not safely cut that way: a global inline flag at its start (it would hold for the first part only),
    a back-reference (it may name a group of another part), or a comment (it may hide a ``|``)."""
    if pattern.lstrip().startswith("(?") and _GLOBAL_FLAGS.match(pattern.lstrip()):
        return None
    if _BACKREF.search(pattern) or "(?#" in pattern:
        return None
    out: list[str] = []
    depth = start = i = 0
    n = len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":  # a class: its "|", "(" and ")" are characters ("]" first in it is one too)
            i += 1
            if i < n and pattern[i] == "^":
                i += 1
            if i < n and pattern[i] == "]":
                i += 1
            while i < n and pattern[i] != "]":
                if pattern[i] == "[" and pattern[i + 1:i + 2] == ":":
                    return None  # a POSIX class inside a class: not worth reading
                i += 2 if pattern[i] == "\\" else 1
            i += 1
            continue
        if ch == "#" and verbose:
            return None
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            out.append(pattern[start:i])
            start = i + 1
        i += 1
    if depth != 0:
        return None
    out.append(pattern[start:])
    return out


class Branches:
    """A regex asked only whether it occurs in a text, run as its top-level alternatives one by one.

    The ``regex`` module finds each alternative alone faster than their union (it can skip ahead to a literal of
    one alternative, not of six: ``broken_content`` took 9.6 us a value as one regex, 5.6 us as its six parts), and
    in ASCII text an alternative runs only where the words it cannot match without (:func:`required`) occur. The
    regex occurs wherever one of its alternatives does, so the answer is the regex's own. A regex whose source is not
    cut safely (:func:`branches`) is run whole."""

    __slots__ = ("parts", "whole")

    def __init__(self, rx: regex.Pattern[str]) -> None:
        self.whole = rx
        verbose = bool(rx.flags & regex.VERBOSE)
        sources = None if rx.flags & regex.REVERSE else branches(rx.pattern, verbose)
        parts: list[tuple[regex.Pattern[str], tuple[str | Any, ...]]] = []
        for source in sources or ():
            try:
                part = regex.compile(source, rx.flags)
            except (regex.error, TypeError):
                parts = []
                break
            parts.append((part, clause_checks(required(source, verbose))))
        self.parts: tuple[tuple[regex.Pattern[str], tuple[str | Any, ...]], ...] = tuple(parts) if len(parts) > 1 else ()

    def search(self, text: str) -> bool:
        """Whether the regex occurs in ``text`` (``bool(rx.search(text))``)."""
        if not self.parts:
            return self.whole.search(text) is not None
        low = text.lower() if text.isascii() else None
        for part, checks in self.parts:
            if low is not None and not meets(checks, low):
                continue
            if part.search(text) is not None:
                return True
        return False


def clause_checks(clauses: Iterable[frozenset[str]]) -> tuple[str | Any, ...]:
    """What tests each clause on a lower-cased text (:func:`meets`): its one string, or an Aho-Corasick automaton of
    its strings (a third of the time of a stdlib alternation over the ~50 verbs a clause can hold)."""
    out: list[str | Any] = []
    for clause in clauses:
        if len(clause) == 1:
            out.append(next(iter(clause)))
            continue
        automaton = ahocorasick.Automaton()
        for word in clause:
            automaton.add_word(word, word)
        automaton.make_automaton()
        out.append(automaton)
    return tuple(out)


def meets(checks: tuple[str | Any, ...], low: str) -> bool:
    """Whether the lower-cased text ``low`` holds a string of each clause (``checks``: :func:`clause_checks`)."""
    for check in checks:
        if isinstance(check, str):
            if check not in low:
                return False
        elif next(check.iter(low), None) is None:
            return False
    return True


def _cross(left: _Exact, right: _Exact) -> _Exact:
    if left is None or right is None or len(left) * len(right) > _MAX_SET:
        return None
    return {a + b for a in left for b in right}


def _sequence(items: list[tuple[Any, Any]]) -> tuple[_Exact, _Clauses]:
    """(the exact strings a concatenation matches, or None; its clauses). A run of exact pieces is one clause."""
    clauses: _Clauses = []
    run: set[str] = {""}
    whole: _Exact = {""}
    for op, av in items:
        exact, inner = _node(op, av)
        clauses += inner
        if op in (_c.AT, _c.ASSERT, _c.ASSERT_NOT):
            continue  # zero-width: the text either side is contiguous
        if exact is not None:
            joined = _cross(run, exact)
            if joined is None:
                clauses.append(run)
                run = set(exact)
            else:
                run = joined
            whole = _cross(whole, exact)
        else:
            clauses.append(run)
            run = {""}
            whole = None
    clauses.append(run)
    return whole, clauses


def _node(op: Any, av: Any) -> tuple[_Exact, _Clauses]:
    """(the exact strings one node matches, or None; the clauses it requires)."""
    if op is _c.LITERAL:
        return {chr(av).lower()}, []
    if op is _c.IN:
        chars = set()
        for item_op, item in av:
            if item_op is not _c.LITERAL:
                return None, []  # a range, a category, a negation: no short list of characters
            chars.add(chr(item).lower())
        return (chars if len(chars) <= _MAX_SET else None), []
    if op is _c.BRANCH:
        branches = [_sequence(list(b)) for b in av[1]]
        exacts = [exact for exact, _ in branches if exact is not None]
        if len(exacts) == len(branches):
            union = set().union(*exacts)
            if len(union) <= _MAX_SET:
                return union, []
        # Each branch needs one of its own clauses: the alternation needs one string of their union.
        either: set[str] = set()
        for exact, inner in branches:
            best = _best(inner + ([exact] if exact is not None else []))
            if best is None:
                return None, []
            either |= best
        return None, [either]
    if op is _c.SUBPATTERN:
        return _sequence(list(av[3]))
    if op is _c.ATOMIC_GROUP:
        return _sequence(list(av))
    if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
        low, high, body = av
        exact, inner = _sequence(list(body))
        if low == 0:
            if high == 1 and exact is not None:
                return exact | {""}, []
            return None, []
        if low == high == 1:
            return exact, inner
        return None, inner + ([exact] if exact is not None else [])
    if op is _c.ASSERT:  # a lookahead or lookbehind that must match: its text is in the string too
        exact, inner = _sequence(list(av[1]))
        return None, inner + ([exact] if exact is not None else [])
    return None, []  # ASSERT_NOT, AT, ANY, NOT_LITERAL, CATEGORY, GROUPREF, GROUPREF_EXISTS: nothing required


def _best(clauses: _Clauses) -> set[str] | None:
    """The clause that says most: no empty string, fewest strings, then the longest shortest string."""
    usable: list[set[str]] = [c for c in clauses if c and "" not in c]
    if not usable:
        return None

    def rank(clause: set[str]) -> tuple[bool, int, int]:
        # A clause that required() keeps first (no string too short, none outside ASCII).
        kept = all(len(s) >= _MIN_CHARS and s.isascii() for s in clause)
        return not kept, len(clause), -min(len(s) for s in clause)

    best: set[str] = min(usable, key=rank)
    return set(best)
