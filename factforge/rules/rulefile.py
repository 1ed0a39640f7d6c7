"""Loading rule files: YAML's safe loader only (a key written twice is an error, not a silent override), every
problem collected into one :class:`PatternError`."""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import ahocorasick
import regex
import yaml

from ..errors import PatternError

if TYPE_CHECKING:
    from .literals import Starts

logger = logging.getLogger("factforge")

# Per-call regex time budget in seconds; a pattern that exceeds it is logged and skipped.
REGEX_TIMEOUT = 0.05
# A guard (secrets, injection) must finish, so its budget grows with the text: a linear rule runs well under a
# microsecond per character, so 2 µs per character is ample headroom; what still runs out fails closed.
GUARD_SECONDS_PER_CHAR = 2e-6


def guard_budget(n_chars: int) -> float:
    """Time budget of one guard regex over ``n_chars`` characters (fails closed when exceeded)."""
    return REGEX_TIMEOUT + n_chars * GUARD_SECONDS_PER_CHAR


# Curly and back quotes read as the straight apostrophe: one character for one, so offsets stay valid.
APOSTROPHES: tuple[tuple[str, str], ...] = (("\u2019", "'"), ("\u2018", "'"), ("`", "'"))


def straight_quotes(text: str) -> str:
    """``text`` with the characters of :data:`APOSTROPHES` replaced, as ``str.translate`` with their table would:
    translate looks every character up in the table (~3 us for a 90-character message), ``in`` and ``replace``
    scan in C (~0.1 us), and most messages hold none of them."""
    for old, new in APOSTROPHES:
        if old in text:
            text = text.replace(old, new)
    return text


_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")
# Entries of one per-value cache of the rule path (the gate's social readings, the pattern library's slot values).
CACHE_SIZE = 4096


def remember(cache: dict[_K, _V], key: _K, value: _V, size: int = CACHE_SIZE) -> None:
    """Store in a per-value cache of the rule path, emptied when full: a long-running process meets unboundedly
    many values, and the values that recur ("love", "I'm in") are back in it at once."""
    if len(cache) >= size:
        cache.clear()
    cache[key] = value


OWN_TIME_ATTEMPTS = 4  # each retry's allowance already covers the contention seen; a bound, not a budget
OWN_TIME_CONTENTION = 32.0  # the largest multiple of the budget one retry may be allowed in process time


def own_time(call: Callable[[float], _T], budget: float = REGEX_TIMEOUT) -> _T:
    """``call(timeout)``, a ``regex`` call given its ``timeout=``, stopped only when one run of it has spent about
    ``budget`` seconds of *this thread's* CPU.

    The ``regex`` module counts a timeout in the process's CPU time, every thread's together: a regex that needs
    300 ms, given 0.1 s, raised after 100 ms of process time but only 23-52 ms of its own while one to three
    other threads ran C code (measured). In a busy multi-threaded process (the API server's request threads, the
    embedder's ONNX threads) a rule could then lose its fact, and a guard fail closed on an innocent message,
    having used a fraction of its budget. A run that runs out before spending most of its own budget is run
    again with an allowance scaled by how fast the process spent CPU against the thread meanwhile (at most
    :data:`OWN_TIME_CONTENTION` times); a run that did spend it raises TimeoutError as before. The first run
    reads no clock (two reads cost ~3 us, more than most rule regexes): a regex that is really too slow is
    stopped after about twice its budget."""
    try:
        return call(budget)
    except TimeoutError:
        pass
    timeout = budget
    for _attempt in range(OWN_TIME_ATTEMPTS):
        thread0, process0 = time.thread_time(), time.process_time()
        try:
            return call(timeout)
        except TimeoutError:
            own = time.thread_time() - thread0
            if own >= budget * 0.9:
                raise
            # the process spent ``ratio`` seconds of CPU per second of this thread's during the run (1: alone)
            ratio = (time.process_time() - process0) / max(own, 1e-6)
            timeout = budget * min(max(ratio, 1.0) * 1.5, OWN_TIME_CONTENTION)
    raise TimeoutError(f"regex ran out of time {OWN_TIME_ATTEMPTS} times in a busy process")


def default_patterns_dir() -> Path:
    """The bundled ``patterns/`` folder (the checkout's, or the installed wheel's copy)."""
    from ..settings import bundled_dir

    return bundled_dir("patterns")


class Problems:
    """Collects problems while a rule file is validated; :meth:`raise_if_any` raises them all at once."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, what: str) -> None:
        self.items.append(f"{where}: {what}")

    def raise_if_any(self, header: str = "invalid pattern files") -> None:
        if self.items:
            self.raise_all(header)

    def raise_all(self, header: str = "invalid pattern files") -> NoReturn:
        """Raise the problems so far (a loader that cannot go on: its file failed a check that noted why)."""
        raise PatternError(f"{header} ({len(self.items)} problem(s)):\n  " + "\n  ".join(self.items))


def keyword_automaton(keywords_per_rule: Iterable[Iterable[str]]) -> Any:
    """An Aho-Corasick automaton from each keyword to the indices of the rules that list it (in order): one
    pass over a text finds every rule worth running on it."""
    automaton = ahocorasick.Automaton()
    by_keyword: dict[str, list[int]] = {}
    for index, keywords in enumerate(keywords_per_rule):
        for keyword in keywords:
            by_keyword.setdefault(keyword, []).append(index)
    for keyword, indices in by_keyword.items():
        automaton.add_word(keyword, tuple(sorted(set(indices))))
    if by_keyword:
        automaton.make_automaton()
    return automaton


def grammar_words() -> dict[str, Any]:
    """data/grammar_words.yaml: English grammar words the pattern library renders with. Word lists come back as
    one regex alternation each (in file order; a space matches any whitespace), ``irregular_third`` and
    ``irregular_past`` as dicts."""
    from .schema import GrammarWordsSpec, read_data

    def alternation(phrases: list[str]) -> str:
        return "|".join(w.replace(" ", r"\s+") for w in phrases)

    words = read_data(GrammarWordsSpec, "grammar_words.yaml")
    out: dict[str, Any] = {k: alternation(getattr(words, k))
                           for k in ("articles", "no_carry", "item_verbs", "item_links", "approximators", "bare_times")}
    # What dangles before any other time expression: its prepositions and the approximators.
    out["dangling"] = alternation([*words.prepositions, *words.approximators])
    out["irregular_third"] = dict(words.irregular_third)
    out["irregular_past"] = dict(words.irregular_past)
    return out


# libyaml's parser where PyYAML was built with it (its wheels are): the bundled rule files parse in a tenth of
# the pure-Python parser's time (1.8 s of a command's start before). Same safe constructors either way.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """``yaml.safe_load``, except that a mapping holding a key twice is an error: YAML would keep the last one
    and silently drop the first (a rule list written twice, a threshold set twice)."""


def _unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue  # a list or mapping as a key: construct_mapping refuses it with its own message
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (line {key_node.start_mark.line + 1})", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def load_yaml(text: Any) -> Any:
    """Parse YAML text (or an open file) with the safe loader, refusing duplicate keys."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def read_yaml(path: Path, problems: Problems) -> Any:
    """Parse one YAML file safely; a parse error becomes a problem, not an exception."""
    try:
        with path.open(encoding="utf-8") as fh:
            return load_yaml(fh)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        problems.add(str(path), f"cannot read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
        return None


def yaml_files(directory: Path, glob: str = "*.yaml") -> Iterator[Path]:
    """The rule files in a folder, in a stable order."""
    yield from sorted(directory.glob(glob))


def compile_regex(
    pattern: str, where: str, problems: Problems, flags: int = 0, *, hostile: tuple[str, ...] = ()
) -> regex.Pattern[str] | None:
    """Compile with the ``regex`` module (V1 semantics off, IGNORECASE etc. via flags) and refuse a regex that
    backtracks catastrophically (:func:`check_speed`, with ``hostile`` as extra units such as keywords)."""
    try:
        rx = regex.compile(pattern, flags)
    except (regex.error, TypeError) as exc:
        problems.add(where, f"regex does not compile: {exc}")
        return None
    before = len(problems.items)
    check_speed(rx, where, problems, hostile)
    return rx if len(problems.items) == before else None


def compiled_once(cell: list[regex.Pattern[str]], pattern: str, flags: int, where: str) -> regex.Pattern[str]:
    """The regex kept in ``cell`` (a rule's one-element list), compiled on first use; two threads may both compile
    it and either result serves. A pattern that no longer compiles (files trusted by digest, then a ``regex``
    upgrade) is a PatternError naming the rule, not a raw ``regex.error`` in the middle of a call."""
    if not cell:
        try:
            cell.append(regex.compile(pattern, flags))
        except (regex.error, TypeError) as exc:
            raise PatternError(f"{where}: regex does not compile: {exc}") from None
    return cell[0]


def safe_finditer(rx: regex.Pattern[str], text: str, rule_id: str, pos: int = 0, starts: Starts | None = None,
                  low: str | None = None) -> list[regex.Match[str]]:
    """All matches of ``rx`` in ``text`` starting at ``pos`` or later (look-behinds still read the text before it), or
    none if the regex exceeds its time budget (logged). ``starts``: ``rx``'s superset, the regex then tried only where
    it matches (:meth:`literals.Starts.finditer`; ``pos`` its :meth:`~literals.Starts.first`, ``low``
    ``text.lower()``)."""
    try:
        if starts is not None:
            return own_time(lambda timeout: starts.finditer(rx, text, pos, low, timeout))
        return own_time(lambda timeout: list(rx.finditer(text, pos, timeout=timeout)))
    except TimeoutError:
        logger.warning("regex of rule %s timed out on %d chars; skipped", rule_id, len(text))
        return []


def safe_search(rx: regex.Pattern[str], text: str, rule_id: str) -> regex.Match[str] | None:
    """First match of ``rx`` in ``text``, or None if the regex exceeds its time budget (logged)."""
    try:
        return own_time(lambda timeout: rx.search(text, timeout=timeout))
    except TimeoutError:
        logger.warning("regex of rule %s timed out on %d chars; skipped", rule_id, len(text))
        return None


TIMED_OUT = object()

# Adversarial inputs a guard rule must get through in linear time: long runs of one character class each,
# ended by a character that makes a pattern anchored at the end fail (the classic "(a|aa)+$" trap).
ADVERSARIAL_RUNS = ("a", "A", "0", " ", "\n", "a ", "-", ".", ",", ":", "aA1", "ab cd. ", "/", "=")
ADVERSARIAL_CHARS = 5000
# Seconds of CPU per adversarial string. Most linear rules take well under a millisecond on one; the longest
# (activity.past, exfiltrate_memory) take 40-44 ms, linearly (~8 µs per character). Catastrophic backtracking
# takes seconds to ages, so the budget can be wide: at 50 ms, a CI machine slowed by its neighbours failed
# linear rules.
ADVERSARIAL_BUDGET = 0.25


# Every rule regex of every rule file goes through this check at load. It costs about a second for the bundled
# rules (~200 regexes), so a verdict is remembered by the digest of what it depends on (pattern, flags, hostile
# units and the check's own settings), never by file name: a digest that passed once passes again, whatever file
# or folder it comes from. Two places remember passes: this process (``_PASSED``) and LINEAR_REGEXES, the
# digests of the bundled rules' regexes, shipped with the package. tests/test_rulefile_speed.py runs the full
# check on the bundled rules (trust off) and fails unless that file lists exactly their digests, so CI re-proves
# every shipped verdict; an edited rule changes its digest and is checked at load until the file is regenerated
# with `python -m factforge.rules.rulefile`. A failure is never remembered, so a slow rule is refused on every load.
# `factforge patterns check` trusts nothing and times every regex.
LINEAR_REGEXES = Path(__file__).resolve().parents[1] / "data" / "linear_regexes.txt"
_PASSED: set[str] = set()
_SEEN: set[str] = set()  # every digest checked or trusted since the last reset (what the test compares)
_trust_shipped = True


def _digest(rx: regex.Pattern[str], extra: tuple[str, ...]) -> str:
    key = repr((rx.pattern, rx.flags, extra, ADVERSARIAL_RUNS, ADVERSARIAL_CHARS, ADVERSARIAL_BUDGET))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


@lru_cache(maxsize=4)
def shipped_digests(path: Path) -> frozenset[str]:
    """The digests a file shipped with the package lists, one per line (none if it is missing)."""
    try:
        return frozenset(path.read_text(encoding="ascii").split())
    except OSError:
        return frozenset()


def full_speed_checks(full: bool = True) -> None:
    """Check every regex again from now on, trusting no remembered verdict (``patterns check``, tests)."""
    global _trust_shipped
    _trust_shipped = not full
    _PASSED.clear()
    _SEEN.clear()


def trusts_shipped() -> bool:
    """Whether shipped verdicts stand (LINEAR_REGEXES, the pattern library's VERIFIED_RULES): not after
    :func:`full_speed_checks`."""
    return _trust_shipped


def _scan_all(rx: regex.Pattern[str], text: str, timeout: float) -> None:
    """Run ``rx`` over the whole of ``text``, keeping no match."""
    for _ in rx.finditer(text, timeout=timeout):
        pass


def check_speed(rx: regex.Pattern[str], where: str, problems: Problems, extra: tuple[str, ...] = ()) -> None:
    """Refuse a rule whose regex backtracks badly: it must scan each adversarial string (and each of
    ``extra``, such as the rule's keywords, repeated) within :data:`ADVERSARIAL_BUDGET` seconds."""
    digest = _digest(rx, extra)
    _SEEN.add(digest)
    if digest in _PASSED or (_trust_shipped and digest in shipped_digests(LINEAR_REGEXES)):
        return
    for unit in ADVERSARIAL_RUNS + extra:
        text = (unit * (ADVERSARIAL_CHARS // len(unit) + 1))[:ADVERSARIAL_CHARS] + "!"
        started = time.perf_counter()
        try:
            own_time(partial(_scan_all, rx, text), ADVERSARIAL_BUDGET)
        except TimeoutError:
            took = (time.perf_counter() - started) * 1000
            problems.add(where, f"regex takes over {ADVERSARIAL_BUDGET * 1000:.0f} ms (stopped at {took:.0f} ms; a linear "
                         f"rule needs a few ms) on {ADVERSARIAL_CHARS:,} characters of {unit!r} "
                         "(catastrophic backtracking): make it linear")
            return
    _PASSED.add(digest)


def bounded_matches(rx: regex.Pattern[str], text: str) -> list[regex.Match[str]] | object:
    """All matches within the time budget, or :data:`TIMED_OUT` (for loaders checking a rule's examples:
    a rule whose own example backtracks catastrophically is a load error, not a hang)."""
    try:
        return own_time(lambda timeout: list(rx.finditer(text, timeout=timeout)), REGEX_TIMEOUT * 20)
    except TimeoutError:
        return TIMED_OUT


def check_examples(rx: regex.Pattern[str], keywords: Sequence[str], examples: Iterable[str],
                   counter_examples: Iterable[str], at: str, problems: Problems,
                   found_enough: Callable[[list[regex.Match[str]]], bool] = bool) -> None:
    """A guard rule's own examples: each holds one of its (lower-case) ``keywords``, so the rule runs on it, and
    is matched (``found_enough`` of its matches); no counter-example is matched. A rule whose example
    backtracks catastrophically is a load error, not a hang."""
    for text in examples:
        found = bounded_matches(rx, text)
        if not any(k in text.lower() for k in keywords):
            problems.add(at, f"example {text!r} contains none of the keywords, so the rule never runs on it")
        elif found is TIMED_OUT:
            problems.add(at, f"example {text!r} takes too long to match (catastrophic backtracking?)")
        elif not found_enough(cast(list[regex.Match[str]], found)):
            problems.add(at, f"example {text!r} does not match")
    for text in counter_examples:
        found = bounded_matches(rx, text)
        if found is TIMED_OUT:
            problems.add(at, f"counter-example {text!r} takes too long to match (catastrophic backtracking?)")
        elif found:
            problems.add(at, f"counter-example {text!r} matches")


def check_bundled() -> list[str]:
    """Load every bundled rule file (facts, gate, injection, secrets, entities, turns) from a fresh copy, trusting
    no remembered verdict: the sorted digests of all their regexes. Raises PatternError if one is too slow."""
    import shutil
    import tempfile

    from .load import RuleSet

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "patterns"
        shutil.copytree(default_patterns_dir(), copy)  # a new folder, so no loader cache answers for it
        full_speed_checks()
        try:
            RuleSet.from_dir(copy)
            return sorted(_SEEN)
        finally:
            full_speed_checks(False)


# Loading checks every rule: its regex compiles, is linear and names the template's groups, and its examples and
# counter-examples give what they say (fact rules, injection rules, the gate's own examples). That costs seconds of
# a command's start (compiling ~250 long regexes), so files already verified are trusted: VERIFIED_RULES holds the
# digest (library_digest) of the bundled rule files, for which tests/test_rulefile_speed.py proves every check
# (check_bundled loads them all, trusting nothing), and the pattern library and the gatekeeper loaded from files
# with that digest compile each regex on first use instead. Any edit changes the digest, so edited files are
# checked in full at load until the file is regenerated with `python -m factforge.rules.rulefile`; `factforge
# patterns check` and the tests trust nothing (rulefile.full_speed_checks).
VERIFIED_RULES: Path = Path(__file__).resolve().parents[1] / "data" / "verified_rules.txt"
# The package's data files the library's checks read, besides the rule files themselves.
_LIBRARY_DATA = ("grammar_words.yaml", "time_words.yaml")


def library_digest(patterns_dir: Path) -> str:
    """sha256 over the names and bytes of a patterns folder's YAML files and the data files they rely on."""
    digest = hashlib.sha256()
    paths = [*yaml_files(patterns_dir), *(VERIFIED_RULES.parent / name for name in _LIBRARY_DATA)]
    for path in paths:
        digest.update(path.name.encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\1unreadable")
        digest.update(b"\0")
    return digest.hexdigest()


def verified_folder(patterns_dir: Path) -> bool:
    """Whether ``patterns_dir`` holds the verified bundled rule files (:data:`VERIFIED_RULES`), whose checks need
    not run again at load, and whether shipped verdicts are trusted at all (not after ``full_speed_checks``)."""
    return trusts_shipped() and library_digest(patterns_dir) in shipped_digests(VERIFIED_RULES)


if __name__ == "__main__":  # regenerate LINEAR_REGEXES after editing a bundled rule: python -m factforge.rules.rulefile
    from factforge.rules import rulefile  # the loaders use the package's module, not this __main__ copy

    digests = rulefile.check_bundled()  # every check, trusting nothing: raises PatternError on any problem
    LINEAR_REGEXES.write_text("".join(d + "\n" for d in digests), encoding="ascii")
    print(f"{len(digests)} regex digests written to {LINEAR_REGEXES}")
    rulefile.VERIFIED_RULES.write_text(rulefile.library_digest(default_patterns_dir()) + "\n", encoding="ascii")
    print(f"the digest of the verified rule files written to {rulefile.VERIFIED_RULES}")
