"""The literal words a regex cannot match without: a second, finer prefilter for the pattern library.

A rule's ``keywords`` decide whether its regex runs at all; but a long rule regex often needs more words than
its keywords ("I was a ..." needs one of ~50 job names), and running it costs 10-200 us. :func:`required`
reads a regex's syntax tree and returns what any text it matches holds: a tuple of clauses, each a set of
lower-case strings of which at least one occurs in the lower-cased text. The library applies them to ASCII texts
only, where lower-casing and the ``regex`` module's case-insensitive matching agree, so a clause keeps its ASCII
strings: one that cannot occur in ASCII text is left out of it ("现在" in a clause of "now|现在").

The tree is read with the stdlib's regex parser (the ``regex`` module exposes none). ``\\p{...}`` classes and
group names are rewritten first (the stdlib has neither Unicode properties nor repeated group names); anything
the stdlib cannot parse yields no clause, so the rule runs whenever its keywords occur, as before. The reading
is conservative: a construct it does not know requires nothing.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any, cast

import ahocorasick
import regex

# The stdlib's own parser (``sre_parse``, a deprecated alias of it since Python 3.11), and its node names.
_sre_parse: Any = importlib.import_module("re._parser")
_c: Any = importlib.import_module("re._constants")

__all__ = ["Branches", "Starts", "branches", "clause_checks", "meets", "relaxed", "relaxed_tails", "required"]

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
        kept = _in_ascii(clause)
        if kept and kept not in out:
            out.append(kept)
    return tuple(out)


def _in_ascii(clause: set[str]) -> frozenset[str] | None:
    """A clause as it reads ASCII text: its strings that can occur there (a string with a character no ASCII
    character matches, even case-insensitively, cannot: "现在" in "now|现在"), or None when it says nothing
    worth checking (a string too short, one whose non-ASCII characters may match ASCII ones, none left)."""
    kept = set()
    for s in clause:
        if s.isascii():
            if len(s) < _MIN_CHARS:
                return None
            kept.add(s)
        elif not any(not ch.isascii() and not _ascii_matches(regex.escape(ch), regex.IGNORECASE) for ch in s):
            return None
    return frozenset(kept) or None


# Placeholders for ``\\p{...}`` classes while the stdlib reads a pattern for :func:`relaxed`: characters of the
# Private Use Area, which no bundled pattern holds (a pattern that does is not relaxed).
_PRIVATE = 0xE000
_PRIVATE_CHARS = re.compile("[\uE000-\uF8FF]")
# The flags :func:`relaxed` knows how to read a pattern with; any other (FULLCASE, REVERSE, WORD, MULTILINE ...) gives None.
_RELAXABLE_FLAGS = regex.IGNORECASE | regex.VERBOSE | regex.UNICODE | regex.VERSION0
_ASCII_CHARS = tuple(chr(i) for i in range(128))
_ASCII_TEXT = "".join(_ASCII_CHARS)
_ANY_CHAR = r"[\x00-\x7f]"
_CATEGORIES = {_c.CATEGORY_DIGIT: r"\d", _c.CATEGORY_NOT_DIGIT: r"\D", _c.CATEGORY_SPACE: r"\s",
               _c.CATEGORY_NOT_SPACE: r"\S", _c.CATEGORY_WORD: r"\w", _c.CATEGORY_NOT_WORD: r"\W"}
_ascii_sets: dict[tuple[str, int], frozenset[str]] = {}
# A brace that opens no counted repeat: the stdlib reads it as a character, the regex module may not ("{e<=1}" asks for
# a fuzzy match).
_ODD_BRACE = re.compile(r"(?<!\\)\{(?!\d*(?:,\d*)?\})")
# Zero-width assertions both engines read alike in ASCII text without MULTILINE (which :func:`relaxed` refuses).
_EXACT_AT = {_c.AT_BEGINNING: "^", _c.AT_BEGINNING_STRING: r"\A", _c.AT_END: "$", _c.AT_END_STRING: r"\Z",
             _c.AT_BOUNDARY: r"\b", _c.AT_NON_BOUNDARY: r"\B"}
# A class of at most this many ASCII characters is narrow (letters of both cases and "'-" are 54; "\\s" is 6): the
# relaxed regex repeats it; a wider one ("[^.!?]") only a few times (_SHORT_RUN).
_NARROW = 64
_SHORT_RUN = 3
# The longest text :class:`Starts` reads. Its superset has no look-behind to keep it from starting inside a long run of
# letters, so where a repeat follows it scans the run from each position: quadratic in the run's length, ~40 ms at
# 2,000 characters for the worst bundled rule, ~3 ms at 500 (chat turns are mostly far shorter; a longer text runs the
# rule regex from its start, as before).
STARTS_MAX_CHARS = 500
# The positions :meth:`Starts.search` tries the regex at (``match``) before it lets the regex search on by itself.
MATCH_TRIES = 2


def relaxed(pattern: str, flags: int = 0, lower: bool = False) -> tuple[str, bool] | None:
    """A simpler regex that, in ASCII text, matches at every position where ``pattern`` (a ``regex`` module pattern
    compiled with ``flags``) can start a match - and at others, so a text where it finds nothing holds no match
    of ``pattern``, and a search for ``pattern`` can start at its first match. None when nothing useful is known.

    It is ``pattern`` read by the stdlib's parser and rewritten into a superset: every look-behind and negative
    look-ahead dropped (each only ever refuses a match), every character class widened to the ASCII characters
    it or its case-insensitive reading matches, possessive and lazy repeats and atomic groups made plain, and a
    concatenation cut after its first piece that cannot be written so (a back-reference, a repeat of something cut).
    A search with it runs where the rule's own regex would spend its time on the look-arounds and alternatives at
    every position. Compile the result with IGNORECASE (it widens, never narrows; it names ASCII characters only,
    so the stdlib's engine reads it as the ``regex`` module does) and apply it to ASCII text only.

    Returned with whether it is anchored: a pattern that opens on a repeat (:func:`_unanchored_lead`) loses its
    opening, and its superset then says only whether the pattern can match, not from where.

    ``lower``: the same superset written for the lower-cased text instead, compiled without IGNORECASE: every literal
    and class in lower case, so the stdlib's engine compares characters as they are (a case-insensitive alternation
    of words makes it try every word at every position; a case-sensitive one skips a word on its first letter, about
    2.7 times faster over the bundled rules). A piece of a kept look-ahead that tells case apart (``(?-i:The)``) cannot
    be read in lower-cased text: that look-ahead is dropped, which only widens."""
    parsed = _relax_tree(pattern, flags)
    if parsed is None:
        return None
    tree, source = parsed
    items, anchored = _unanchored_lead(tree)
    try:
        out, _ = _Relax(source, lower).sequence(items, bool(flags & regex.IGNORECASE))
        # A superset that matches the empty text matches everywhere: it says nothing.
        return None if re.match(out, "", 0 if lower else re.IGNORECASE) is not None else (out, anchored)
    except (re.error, regex.error, KeyError, RecursionError, OverflowError):
        return None


def relaxed_tails(pattern: str, flags: int = 0, lower: bool = False) -> list[str]:
    """Supersets, in ASCII text, of the later runs of ``pattern``: its top-level concatenation (its groups without
    flags opened) is cut where :func:`relaxed` cuts it, and each run of pieces after such a cut (up to the next one)
    is rewritten the same way. A match of ``pattern`` holds a match of each run, so a text where one of these finds
    nothing holds no match either: "to me" must be followed by what ends a clause ("to meet" is no "to me"), whatever
    the cut subject before it was. Runs that say little (ones matching an empty text, one character or a space) are
    left out; ``flags`` and ``lower`` as for :func:`relaxed`."""
    parsed = _relax_tree(pattern, flags)
    if parsed is None:
        return []
    tree, source = parsed
    flat = _opened(tree)
    relax = _Relax(source, lower)
    icase = bool(flags & regex.IGNORECASE)
    out: list[str] = []
    run: list[tuple[Any, Any]] = []
    cuts = 0
    try:
        for op, av in flat:
            piece, whole = relax.node(op, av, icase)
            if piece is not None:
                run.append((op, av))
            if piece is None or not whole:
                if cuts and run:
                    out.append(_tail_source(relax, run, icase))
                cuts += 1
                run = []
        if cuts and run:
            out.append(_tail_source(relax, run, icase))
        flag = 0 if lower else re.IGNORECASE
        return [t for t in dict.fromkeys(out) if t and not any(
            re.match(t, sample, flag) for sample in ("", " ", "a", "1", ".", "\n"))]
    except (re.error, regex.error, KeyError, RecursionError, OverflowError):
        return []


def _tail_source(relax: _Relax, run: list[tuple[Any, Any]], icase: bool) -> str:
    """A run of pieces as a superset's source, an opening unbounded repeat left out (see :func:`_unanchored_lead`)."""
    items, _ = _unanchored_lead(run)
    return relax.sequence(items, icase)[0]


def _opened(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """A concatenation's pieces with its groups without flags opened (a group's pieces follow each other as its
    neighbours do)."""
    out: list[tuple[Any, Any]] = []
    for op, av in items:
        if op is _c.SUBPATTERN and not av[1] and not av[2]:
            out += _opened(list(av[3]))
        else:
            out.append((op, av))
    return out


def _relax_tree(pattern: str, flags: int) -> tuple[list[tuple[Any, Any]], dict[str, str]] | None:
    """``pattern`` read by the stdlib's parser for :func:`relaxed` (its ``\\p{...}`` classes as placeholders), with the
    placeholders' classes; None when it cannot be read the same way the ``regex`` module reads it."""
    if flags & ~_RELAXABLE_FLAGS or any(token in pattern for token in _FOREIGN) or "\\\\p" in pattern.replace(
            "\\\\P", "\\\\p") or _PRIVATE_CHARS.search(pattern):
        return None
    properties: dict[str, str] = {}

    def placeholder(m: re.Match[str]) -> str:
        return properties.setdefault(m.group(), chr(_PRIVATE + len(properties)))

    text = _GROUP_NAME.sub("(?:", _PROPERTY.sub(placeholder, pattern))
    if len(properties) > 0x1000 or _ODD_BRACE.search(text):
        return None
    try:
        tree = _sre_parse.parse(text, (re.IGNORECASE if flags & regex.IGNORECASE else 0)
                                | (re.VERBOSE if flags & regex.VERBOSE else 0))
    except (re.error, RecursionError, OverflowError, ValueError):
        return None
    if tree.state.flags & (re.MULTILINE | re.DOTALL | re.ASCII | re.LOCALE):
        return None  # an inline global flag ("(?m)") that changes what "^", "." or a class means
    return list(tree), {ch: prop for prop, ch in properties.items()}


def _unanchored_lead(items: list[tuple[Any, Any]]) -> tuple[list[tuple[Any, Any]], bool]:
    """The pieces of a pattern's tree from its first one that cannot start anywhere, and whether none was left out.

    A pattern that opens on a repeat of a class ("[\\p{L}-]+ (?:are|is) required", its start held by a look-behind)
    would be tried by the superset at every position of a run of that class, scanning to the run's end each time: in a
    long run (2,000 letters) quadratic. The rest of it matches wherever the pattern's match goes on, so a text where the
    rest finds nothing holds no match either; only where the match starts is then unknown."""
    flat = list(items)
    start = i = 0  # the pieces before ``start`` are left out
    while i < len(flat):
        op, av = flat[i]
        if op is _c.SUBPATTERN and not av[1] and not av[2]:
            flat[i:i + 1] = list(av[3])  # a group without flags opens where its first piece does
        elif op is _c.AT or op is _c.ASSERT_NOT or (op is _c.ASSERT and av[0] < 0):
            i += 1  # zero-width: kept if nothing after it is left out
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) and av[1] == _c.MAXREPEAT:
            i += 1
            start = i  # an unbounded repeat: left out with all before it
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT) and av[0] == 0:
            i += 1  # an optional piece: left out only if an unbounded repeat follows
        else:
            break
    return (items, True) if start == 0 else (flat[start:], False)


class _Relax:
    """The rewriting of :func:`relaxed`: each piece becomes (its superset's source, whether it is whole); a source of
    None stops the concatenation before the piece, a piece not whole stops it after the piece. ``lower``: written for
    the lower-cased text, read case-sensitively (see :func:`relaxed`)."""

    def __init__(self, properties: dict[str, str], lower: bool = False) -> None:
        self.properties = properties
        self.lower = lower

    def char(self, ch: str) -> str:
        """``ch`` in a ``regex`` class, a property placeholder as its property."""
        return self.properties.get(ch) or f"\\U{ord(ch):08x}"

    def ascii_set(self, source: str) -> frozenset[str]:
        """The ASCII characters a one-character ``regex`` source matches, read case-sensitively and -insensitively
        (a negated class matches more of them case-sensitively, a class of a non-ASCII letter more insensitively)."""
        return _ascii_matches(source, 0) | _ascii_matches(source, regex.IGNORECASE)

    def ascii_set_of(self, item: tuple[Any, Any]) -> frozenset[str]:
        """The ASCII characters a one-character piece (a literal, a class, ".") matches."""
        op, av = item
        if op is _c.ANY:
            return frozenset(_ASCII_CHARS)
        if op is _c.LITERAL:
            return self.ascii_set(self.char(chr(av)))
        if op is _c.NOT_LITERAL:
            return self.ascii_set(f"[^{self.char(chr(av))}]")
        return self.ascii_set(self.class_source(av))

    def class_source(self, items: Any) -> str:
        """A class of the stdlib's tree as ``regex`` source."""
        parts = []
        for item_op, item in items:
            if item_op is _c.LITERAL:
                parts.append(self.char(chr(item)))
            elif item_op is _c.RANGE:
                parts.append(f"{self.char(chr(item[0]))}-{self.char(chr(item[1]))}")
            elif item_op is _c.NEGATE:
                parts.append("^")
            else:
                parts.append(_CATEGORIES[item])
        return "[" + "".join(parts) + "]"

    def klass(self, source: str) -> str:
        # Read case-insensitively, the class matches a character when its lower case is one of the set's lower cases.
        chars = self.ascii_set(source)
        return self.render(frozenset(ch.lower() for ch in chars) if self.lower else chars)

    @staticmethod
    def render(chars: frozenset[str]) -> str:
        """A set of ASCII characters as a stdlib class ("(?!)" when empty)."""
        if not chars:
            return "(?!)"
        if len(chars) == len(_ASCII_CHARS):
            return _ANY_CHAR
        codes = sorted(ord(ch) for ch in chars)
        parts: list[str] = []
        start = prev = codes[0]
        for code in codes[1:] + [-1]:
            if code == prev + 1:
                prev = code
                continue
            parts.append(f"\\x{start:02x}" + (f"-\\x{prev:02x}" if prev > start else ""))
            start = prev = code
        return "[" + "".join(parts) + "]"

    def sequence(self, items: list[tuple[Any, Any]], icase: bool) -> tuple[str, bool]:
        out: list[str] = []
        for op, av in items:
            piece, whole = self.node(op, av, icase)
            if piece is None:
                return "".join(out), False
            out.append(piece)
            if not whole:
                return "".join(out), False
        return "".join(out), True

    def group(self, items: list[tuple[Any, Any]], icase: bool) -> tuple[str | None, bool]:
        inner, whole = self.sequence(items, icase)
        if not inner:
            return ("", True) if whole else (None, False)
        return f"(?:{inner})", whole

    def node(self, op: Any, av: Any, icase: bool) -> tuple[str | None, bool]:
        if op is _c.LITERAL:
            ch = chr(av)
            if ch.isascii() and ch not in self.properties:
                return re.escape(ch.lower() if self.lower else ch), True
            return self.klass(self.char(ch)), True
        if op is _c.NOT_LITERAL:
            return self.klass(f"[^{self.char(chr(av))}]"), True
        if op is _c.ANY:
            return _ANY_CHAR, True
        if op is _c.IN:
            return self.klass(self.class_source(av)), True
        if op is _c.AT:
            return "", True  # zero-width and only ever refusing: dropped
        if op is _c.ASSERT_NOT:
            direction, body = av
            # A negative look-ahead the stdlib reads exactly as the regex module does is kept (it refuses the same
            # texts); any other is dropped, which only widens.
            refused = self.exact(list(body), icase) if direction > 0 else None
            return (f"(?!{refused})" if refused else ""), True
        if op is _c.ASSERT:
            direction, body = av
            if direction < 0:
                return "", True  # a look-behind: the stdlib cannot read every one back, and dropping it widens
            inner, _ = self.sequence(list(body), icase)
            return (f"(?={inner})" if inner else ""), True
        if op is _c.BRANCH:
            alternatives = [self.sequence(list(b), icase) for b in av[1]]
            if any(not inner and not whole for inner, whole in alternatives):
                return None, False
            return "(?:" + "|".join(inner for inner, _ in alternatives) + ")", all(w for _, w in alternatives)
        if op is _c.SUBPATTERN:
            return self.group(list(av[3]), _scoped(icase, av[1], av[2]))
        if op is _c.ATOMIC_GROUP:
            return self.group(list(av), icase)
        if op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
            low, high, body = av
            items = list(body)
            repeated, whole = self.group(items, icase)
            if repeated == "" and whole:
                return "", True
            one_char = len(items) == 1 and items[0][0] in (_c.LITERAL, _c.NOT_LITERAL, _c.ANY, _c.IN)
            # Kept as a repeat: one character of a narrow class, or a bounded repeat of a longer piece (which holds no
            # repeat of a wide class either: it would have been cut). A repeat of a wide class ("[^.!?]+?") or an
            # unbounded one of a longer piece would let the search backtrack over the text at each position (where the
            # rule's regex has look-arounds to stop it): the concatenation is cut there instead.
            if whole and repeated is not None and (
                    (one_char and (len(self.ascii_set_of(items[0])) <= _NARROW or high <= _SHORT_RUN))
                    or (not one_char and high != _c.MAXREPEAT)):
                return f"{repeated}{{{low},{'' if high == _c.MAXREPEAT else high}}}", True
            # A repeat that is cut: its first round is still required when there is one.
            return (repeated, False) if low >= 1 and repeated else (None, False)
        return None, False  # a back-reference, a conditional: the concatenation stops before it

    def exact(self, items: list[tuple[Any, Any]], icase: bool) -> str | None:
        """A concatenation as stdlib source that matches in ASCII text exactly where the ``regex`` module's reading does,
        with ``icase`` its case-insensitivity (the relaxed regex is compiled IGNORECASE: exact classes say their case);
        None when some piece has no such reading (a look-behind, "." or a flag the stdlib reads otherwise, a letter
        whose case counts when the text is lower-cased) or could backtrack over the text (a repeat of a wide class or an
        unbounded one of a longer piece)."""
        out: list[str] = []
        for op, av in items:
            if op is _c.LITERAL and chr(av).isascii() and chr(av) not in self.properties:
                # the stdlib reads an ASCII literal as the regex module does; its case only where the group says so
                ch = re.escape(chr(av).lower() if self.lower else chr(av))
                if icase or not chr(av).isalpha():
                    out.append(ch)
                elif self.lower:
                    return None  # "T" alone: the lower-cased text no longer says whether it was "T" or "t"
                else:
                    out.append(f"(?-i:{ch})")
            elif op in (_c.LITERAL, _c.NOT_LITERAL, _c.IN):
                source = self.char(chr(av)) if op is _c.LITERAL else f"[^{self.char(chr(av))}]" \
                    if op is _c.NOT_LITERAL else self.class_source(av)
                klass = self.exact_class(source, icase)
                if klass is None:
                    return None
                out.append(klass)
            elif op is _c.AT and av in _EXACT_AT:
                out.append(_EXACT_AT[av])
            elif op is _c.BRANCH:
                alternatives = [self.exact(list(b), icase) for b in av[1]]
                if any(a is None for a in alternatives):
                    return None
                out.append("(?:" + "|".join(cast(list[str], alternatives)) + ")")
            elif op is _c.SUBPATTERN:
                if (av[1] | av[2]) & ~(re.IGNORECASE | re.VERBOSE):
                    return None
                inner = self.exact(list(av[3]), _scoped(icase, av[1], av[2]))
                if inner is None:
                    return None
                out.append(f"(?:{inner})")
            elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT, _c.POSSESSIVE_REPEAT):
                low, high, body = av
                body = list(body)
                one_char = len(body) == 1 and body[0][0] in (_c.LITERAL, _c.NOT_LITERAL, _c.IN)
                if (one_char and high > _SHORT_RUN and len(self.ascii_set_of(body[0])) > _NARROW) or (
                        not one_char and high == _c.MAXREPEAT):
                    return None
                inner = self.exact(body, icase)
                if inner is None:
                    return None
                lazy = "?" if op is _c.MIN_REPEAT else "+" if op is _c.POSSESSIVE_REPEAT else ""
                out.append(f"(?:{inner}){{{low},{'' if high == _c.MAXREPEAT else high}}}{lazy}")
            elif op in (_c.ASSERT, _c.ASSERT_NOT) and av[0] > 0:
                inner = self.exact(list(av[1]), icase)
                if inner is None:
                    return None
                out.append(f"(?{'=' if op is _c.ASSERT else '!'}{inner})")
            else:
                return None
        return "".join(out)

    def exact_class(self, source: str, icase: bool) -> str | None:
        """A one-character ``regex`` source as a stdlib class of exactly the ASCII characters it matches; for the
        lower-cased text, of their lower cases, or None when the class holds a letter in one case only (the text no
        longer tells the two apart)."""
        chars = _ascii_matches(source, regex.IGNORECASE if icase else 0)
        if not self.lower:
            return "(?-i:" + self.render(chars) + ")"
        if any(ch.swapcase() not in chars for ch in chars if ch.isalpha()):
            return None
        return self.render(frozenset(ch.lower() for ch in chars))


def _ascii_matches(source: str, flags: int) -> frozenset[str]:
    """The ASCII characters a one-character ``regex`` source matches with ``flags``; kept once worked out."""
    found = _ascii_sets.get((source, flags))
    if found is None:
        found = frozenset(regex.findall(source, _ASCII_TEXT, flags))
        _ascii_sets[source, flags] = found
    return found


def _scoped(icase: bool, add: int, remove: int) -> bool:
    """Case-insensitivity inside a group with the inline flags ``add`` and ``remove`` (``(?-i:...)``)."""
    return (icase or bool(add & re.IGNORECASE)) and not remove & re.IGNORECASE


class Starts:
    """Where a regex can first start a match in an ASCII text, read from its :func:`relaxed` superset: a rule's regex
    spends most of its time failing at every position of a text it does not match (its look-behinds, its long
    alternatives), and most texts its keywords let through hold no match. The superset's search settles those, and
    for the others says where the regex's own search can start: no match of the regex starts before the superset's
    first one.

    The superset runs on the stdlib's engine, several times faster than the ``regex`` module on it, without a time
    budget: it holds no look-behind, no back-reference, no repeat of a wide class and no unbounded repeat of more
    than one character (:func:`relaxed` cuts them), so it cannot backtrack catastrophically, and it reads texts of
    at most :data:`STARTS_MAX_CHARS` (a longer one is left to the regex itself, with its budget), where its worst case
    (quadratic in a run of letters) stays a few milliseconds."""

    __slots__ = ("anchored", "rx", "tails")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        # Written for the lower-cased text and read case-sensitively (``relaxed(lower=True)``): the same positions, found
        # faster, and a caller that lower-cases the text anyway (for its keyword automaton) hands it over.
        found = relaxed(pattern, flags, lower=True)
        self.anchored = found is not None and found[1]
        try:
            self.rx = re.compile(found[0]) if found else None
        except (re.error, RecursionError, OverflowError):
            self.rx = None
        # The supersets of the regex's later runs (:func:`relaxed_tails`): where its superset matches (its opening), a
        # text can still lack what it must go on with ("I'm" matched, "... named X" nowhere).
        try:
            self.tails: tuple[re.Pattern[str], ...] = tuple(
                re.compile(t) for t in relaxed_tails(pattern, flags, lower=True)
                if self.rx is None or t != self.rx.pattern)  # a regex that lost its opening run: its superset is one
        except (re.error, RecursionError, OverflowError):
            self.tails = ()

    def first(self, text: str, low: str | None = None) -> int:
        """The position of ``text`` from which to search for the regex: -1 when it matches nowhere in it (its superset,
        or the superset of a later run of it, finds nothing), 0 when that is not known (no superset, a text longer than
        :data:`STARTS_MAX_CHARS`, or one that is not ASCII). ``low``: ``text.lower()``, when the caller has it."""
        if (self.rx is None and not self.tails) or len(text) > STARTS_MAX_CHARS or not text.isascii():
            return 0
        if low is None:
            low = text.lower()
        found = self.rx.search(low) if self.rx is not None else None
        if found is None and self.rx is not None:
            return -1
        for tail in self.tails:
            if tail.search(low) is None:
                return -1
        return found.start() if found is not None and self.anchored else 0

    def finditer(self, rx: regex.Pattern[str], text: str, pos: int, low: str | None = None,
                 timeout: float | None = None) -> list[regex.Match[str]]:
        """``list(rx.finditer(text, pos, timeout=timeout))``, the regex whose superset this is, tried only where the
        superset matches (:meth:`search`); ``pos``: :meth:`first`'s answer for ``text`` (not -1), ``low``:
        ``text.lower()``. The search that follows a match ends where the superset finds nothing more."""
        sup = self.rx
        if sup is None or not self.anchored or len(text) > STARTS_MAX_CHARS or not text.isascii():
            return list(rx.finditer(text, pos, timeout=timeout))
        if low is None:
            low = text.lower()
        out: list[regex.Match[str]] = []
        while True:
            m = self._search(sup, rx, text, low, pos, timeout)
            if m is None:
                return out
            if m.end() == m.start():
                # An empty match: what may follow it is the regex's own iteration's to say (it starts with this match).
                return out + list(rx.finditer(text, m.start(), timeout=timeout))
            out.append(m)
            found = sup.search(low, m.end())
            if found is None:
                return out
            pos = found.start()

    def search(self, rx: regex.Pattern[str], text: str, pos: int, low: str | None = None,
               timeout: float | None = None) -> regex.Match[str] | None:
        """``rx.search(text, pos, timeout=timeout)``, the regex whose superset this is, tried only where the superset
        matches; ``pos``: :meth:`first`'s answer for ``text`` (not -1), ``low``: ``text.lower()``.

        A match of the regex can only start where its superset matches, so its search from a position finds the first
        of those positions where its match (``rx.match``) succeeds. A rule's regex that does not match where its
        superset does (a look-behind or a look-ahead the superset dropped) otherwise scans the rest of the text
        position by position, each time through its look-arounds: 40-150 us a message for some bundled rules. Where
        the superset matches at more than :data:`MATCH_TRIES` positions (one cut after a class matches at nearly every
        letter), the regex searches from the next one itself, so a text costs at most that many more calls of the
        regex than its own search, each with ``timeout``."""
        sup = self.rx
        if sup is None or not self.anchored or len(text) > STARTS_MAX_CHARS or not text.isascii():
            return rx.search(text, pos, timeout=timeout)
        return self._search(sup, rx, text, text.lower() if low is None else low, pos, timeout)

    @staticmethod
    def _search(sup: re.Pattern[str], rx: regex.Pattern[str], text: str, low: str, pos: int,
                timeout: float | None) -> regex.Match[str] | None:
        """:meth:`search` with a superset that can be read (``sup``) and ``low`` given."""
        n = len(text)
        for _ in range(MATCH_TRIES):
            m = rx.match(text, pos, timeout=timeout)
            if m is not None:
                return m
            found = sup.search(low, pos + 1) if pos < n else None
            if found is None:
                return None
            pos = found.start()
        return rx.search(text, pos, timeout=timeout)


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
