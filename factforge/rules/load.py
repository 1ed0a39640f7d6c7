"""One rule set: every rule file of a patterns folder, loaded and validated once, then passed to what uses it.

A :class:`~factforge.memory.Memory` builds one :class:`RuleSet` and hands its parts to the extractor, the
store (supersession decisions, entity spellings), the secret scanner and the LLM's validation, so no part of
the pipeline can end up with other rules than the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .extract import TurnRules
from .gatekeeper import Gatekeeper
from .lifecycle import SupersessionRules
from .ner import EntityRecognizer
from .patterns import PatternLibrary
from .rulefile import default_patterns_dir
from .secrets import SecretScanner
from .segment import Segmenter

__all__ = ["RuleSet", "default_rules"]


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules of one patterns folder (``patterns/*.yaml``)."""

    directory: Path
    gate: Gatekeeper
    library: PatternLibrary
    ner: EntityRecognizer
    secrets: SecretScanner
    segmenter: Segmenter
    turns: TurnRules
    supersession: SupersessionRules

    @classmethod
    def from_dir(cls, directory: Path | None = None) -> RuleSet:
        """Load every rule file of ``directory`` (default: the shipped rules); a bad file raises
        :class:`~factforge.errors.PatternError` naming each problem. Each loader keeps its own cache."""
        directory = Path(directory or default_patterns_dir())
        return cls(
            directory=directory,
            gate=Gatekeeper.from_dir(directory),
            library=PatternLibrary.from_dir(directory),
            ner=EntityRecognizer.from_dir(directory),
            secrets=SecretScanner.from_dir(directory),
            segmenter=Segmenter.from_dir(directory),
            turns=TurnRules.from_dir(directory),
            supersession=SupersessionRules.from_dir(directory),
        )


def default_rules(directory: Path | None = None) -> RuleSet:
    """The rule set of ``directory`` (default: the shipped rules), loaded once per process: what a convenience
    that was not given a rule set uses (``Extractor()``, ``parse_inline``, ``segments``, an LLM client, the
    store's decisions), so every caller of one folder works with the same rules."""
    return _default_rules(str(Path(directory or default_patterns_dir()).resolve()))


@lru_cache(maxsize=8)
def _default_rules(directory: str) -> RuleSet:
    return RuleSet.from_dir(Path(directory))
