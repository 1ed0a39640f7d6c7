"""Splitting long input (pasted logs, long messages) into sentences and lines, each judged on its own.

The terminator characters come from the ``segment`` section of ``patterns/gate.yaml``. Spans never lose
text: every non-space character of the input lies inside exactly one span, and no span is longer than
``max_chars``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import regex

from .rulefile import Problems, default_patterns_dir, read_yaml
from .schema import SegmentSpec, check
from ..types import Span

__all__ = ["Segmenter", "segments"]

logger = logging.getLogger("factforge.segment")

@dataclass(frozen=True, slots=True)
class Segmenter:
    """Sentence/line splitter built from the terminator characters in ``gate.yaml``."""

    piece_rx: regex.Pattern[str]
    latin_terminators: str
    cjk_terminators: str
    closers: str

    @classmethod
    def from_config(cls, latin_terminators: str, cjk_terminators: str, closers: str) -> Segmenter:
        lat, cjk, clo = (regex.escape(s) for s in (latin_terminators, cjk_terminators, closers))
        # One piece: a non-space character, then the shortest run up to a Latin terminator followed by
        # whitespace (so "3.12" stays whole), a CJK terminator, the end of the line or of the text. Every
        # branch is a character class or a lookahead, so the scan is linear even on 10 MB of input.
        alternatives = []
        if lat:
            alternatives.append(f"[{lat}]+[{clo}]*(?=\\s|\\Z)" if clo else f"[{lat}]+(?=\\s|\\Z)")
        if cjk:
            alternatives.append(f"[{cjk}]+[{clo}]*" if clo else f"[{cjk}]+")
        alternatives += [r"(?=\n)", r"\Z"]
        pattern = r"\S(?:.*?(?:" + "|".join(alternatives) + "))"
        return cls(regex.compile(pattern), latin_terminators, cjk_terminators, closers)

    @classmethod
    def from_dir(cls, patterns_dir: Path | None = None) -> Segmenter:
        """Load the ``segment`` section of ``gate.yaml``; a bad section raises one PatternError."""
        return _cached_segmenter(str(Path(patterns_dir or default_patterns_dir()).resolve()))

    def segments(self, text: str, max_chars: int) -> list[Span]:
        """Sentences/lines of ``text`` (whitespace-trimmed), none longer than ``max_chars``.

        Text no longer than ``max_chars`` comes back as one span (trimmed), so short messages are judged
        whole, exactly as written.
        """
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        if len(text) <= max_chars:
            span = _trimmed(text, 0, len(text))
            return [span] if span is not None else []
        out: list[Span] = []
        # No timeout here on purpose: the pattern is linear by construction and a fixed budget would cut
        # off large pastes, losing text.
        for m in self.piece_rx.finditer(text):
            start, end = m.span()
            while end > start and text[end - 1].isspace():
                end -= 1
            if end - start <= max_chars:
                out.append(Span(start, end, text[start:end]))
            else:
                out.extend(_hard_split(text, start, end, max_chars))
        return out


def _trimmed(text: str, start: int, end: int) -> Span | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return Span(start, end, text[start:end]) if end > start else None


def _hard_split(text: str, start: int, end: int, max_chars: int) -> list[Span]:
    """Cut an over-long sentence at the last whitespace inside each window (or mid-word if there is none)."""
    out: list[Span] = []
    while start < end:
        if end - start <= max_chars:
            cut = end
        else:
            limit = start + max_chars
            cut = max(text.rfind(" ", start + 1, limit + 1), text.rfind("\t", start + 1, limit + 1))
            if cut <= start:
                cut = limit
        span = _trimmed(text, start, cut)
        if span is not None:
            out.append(span)
        start = cut
        while start < end and text[start].isspace():
            start += 1
    return out


@lru_cache(maxsize=8)
def _cached_segmenter(patterns_dir: str) -> Segmenter:
    problems = Problems()
    path = Path(patterns_dir) / "gate.yaml"
    data = read_yaml(path, problems)
    spec = check(SegmentSpec, data.get("segment") if isinstance(data, dict) else None, f"{path}: segment", problems)
    if spec is None:
        problems.raise_all()
    return Segmenter.from_config(**spec.model_dump())


def segments(text: str, max_chars: int) -> list[Span]:
    """Split ``text`` into sentence/line spans of at most ``max_chars``, using the default pattern folder."""
    from .load import default_rules

    return default_rules().segmenter.segments(text, max_chars)
