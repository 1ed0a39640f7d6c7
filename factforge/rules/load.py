"""One rule set: every rule file of a patterns folder, loaded and validated once, then passed to what uses it.

A :class:`~factforge.memory.Memory` builds one :class:`RuleSet` and hands its parts to the extractor, the
store (supersession decisions, entity spellings), the secret scanner and the LLM's validation, so no part of
the pipeline can end up with other rules than the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar, cast

from .extract import TurnRules
from .gatekeeper import Gatekeeper
from .lifecycle import SupersessionRules
from .ner import EntityRecognizer
from .patterns import PatternLibrary
from .rulefile import default_patterns_dir, verified_folder
from .secrets import SecretScanner
from .segment import Segmenter

__all__ = ["RuleSet", "default_rules"]

_T = TypeVar("_T")


class RuleSet:
    """The rules of one patterns folder (``patterns/*.yaml``): the gatekeeper, the fact rules (``library``),
    entity recognition, the secret scanner, the segmenter, the turn rules and supersession.

    :meth:`from_dir` loads and checks every file at once, so a bad file raises
    :class:`~factforge.errors.PatternError` (naming each problem) before anything uses the rules. A folder whose
    files are the verified shipped ones (their digest is in ``data/verified_rules.txt``: nothing in them can fail
    to load) may be loaded ``lazy``: each part when first used, so a command that only reads the database
    (``factforge stats``, ``facts``, ``search``) does not spend a second loading fact rules it never runs."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._parts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _part(self, name: str, load: Callable[[Path], _T]) -> _T:
        """Part ``name``, loaded once whichever thread asks first (a server's start-up thread or a request)."""
        part = self._parts.get(name)
        if part is None:
            with self._lock:
                part = self._parts.get(name)
                if part is None:
                    part = self._parts[name] = load(self.directory)
        return cast(_T, part)

    @property
    def loaded(self) -> tuple[str, ...]:
        """The parts loaded so far, in the order they were."""
        return tuple(self._parts)

    @property
    def gate(self) -> Gatekeeper:
        return self._part("gate", Gatekeeper.from_dir)

    @property
    def library(self) -> PatternLibrary:
        return self._part("library", PatternLibrary.from_dir)

    @property
    def ner(self) -> EntityRecognizer:
        return self._part("ner", EntityRecognizer.from_dir)

    @property
    def secrets(self) -> SecretScanner:
        return self._part("secrets", SecretScanner.from_dir)

    @property
    def segmenter(self) -> Segmenter:
        return self._part("segmenter", Segmenter.from_dir)

    @property
    def turns(self) -> TurnRules:
        return self._part("turns", TurnRules.from_dir)

    @property
    def supersession(self) -> SupersessionRules:
        return self._part("supersession", SupersessionRules.from_dir)

    def load(self) -> RuleSet:
        """Load every part now (each loader keeps its own cache)."""
        for part in ("gate", "library", "ner", "secrets", "segmenter", "turns", "supersession"):
            getattr(self, part)
        return self

    def warm(self) -> RuleSet:
        """Load every part and compile every regex loaded lazily (fact and injection rules): seconds, so a server
        does it at start and a worker before it claims work, and no request or claimed item waits for it."""
        self.load()
        self.library.compile_all()
        self.gate.compile_all()
        return self

    @classmethod
    def from_dir(cls, directory: Path | None = None, *, lazy: bool = False) -> RuleSet:
        """The rule set of ``directory`` (default: the shipped rules), every file loaded and checked now; with
        ``lazy``, each part when first used if the folder holds the verified shipped files (else now, as
        without)."""
        rules = cls(Path(directory or default_patterns_dir()))
        if not (lazy and verified_folder(rules.directory)):
            rules.load()
        return rules


def default_rules(directory: Path | None = None) -> RuleSet:
    """The rule set of ``directory`` (default: the shipped rules), loaded once per process: what a convenience
    that was not given a rule set uses (``Extractor()``, ``parse_inline``, ``segments``, an LLM client, the
    store's decisions), so every caller of one folder works with the same rules. Lazy where the folder holds the
    verified shipped files (see :class:`RuleSet`)."""
    return _default_rules(str(Path(directory or default_patterns_dir()).resolve()))


@lru_cache(maxsize=8)
def _default_rules(directory: str) -> RuleSet:
    return RuleSet.from_dir(Path(directory), lazy=True)
