"""Batch ingest of JSON lines (turns or activity sessions) into a :class:`~factforge.memory.Memory`.

Resumable and idempotent: every input has a stable key recorded after its facts are stored, so a re-run
(after a crash, or of the same file) skips what is done and adds nothing.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .errors import InputError, ValidationError
from .inputs import iter_json_lines
from .memory import Memory, RememberResult

TURN_FIELDS = {"user", "assistant", "agent_id", "team_id", "session_id", "timestamp", "visibility"}
ACTIVITY_FIELDS = {"activity_session_id", "intent", "dialogue", "events", "agent_id", "team_id", "timestamp",
                   "visibility"}


@dataclass(slots=True)
class IngestSummary:
    """Counts for one ingest run."""

    lines: int = 0
    turns: int = 0
    activities: int = 0
    duplicates: int = 0
    facts: int = 0
    facts_by_category: Counter[str] = field(default_factory=Counter)
    dropped_by_reason: Counter[str] = field(default_factory=Counter)
    queued: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, result: RememberResult) -> None:
        if result.duplicate:
            self.duplicates += 1
            return
        self.facts += len(result.facts)
        self.facts_by_category.update(f.category for f in result.facts)
        if not result.gate.passed:
            self.dropped_by_reason[result.gate.reason or "dropped"] += 1
        self.queued += int(result.queued)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines, "turns": self.turns, "activities": self.activities,
            "duplicates": self.duplicates, "facts": self.facts,
            "facts_by_category": dict(self.facts_by_category),
            "dropped_by_reason": dict(self.dropped_by_reason), "queued_for_llm": self.queued,
            "errors": list(self.errors), "seconds": round(self.seconds, 3),
        }


class Progress:
    """A one-line progress bar with rate and ETA on a terminal; silent when the stream is piped."""

    def __init__(self, total: int, stream: TextIO | None = None, *, force: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = force if force is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = max(total, 1)
        self.start = time.monotonic()
        self._last = 0.0

    def update(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if done < self.total and now - self._last < 0.1:
            return
        self._last = now
        elapsed = max(now - self.start, 1e-9)
        rate = done / elapsed
        eta = (self.total - done) / rate if rate > 0 else 0.0
        width = 30
        filled = int(width * done / self.total)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {rate:,.0f} lines/s ETA {eta:4.0f}s"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def ingest_lines(
    memory: Memory,
    lines: Iterable[str],
    *,
    progress: Callable[[int], None] | None = None,
    wait_for_llm: bool = False,
) -> IngestSummary:
    """Ingest JSON lines; a malformed line is reported in ``errors`` and the run goes on."""
    summary = IngestSummary()
    started = time.perf_counter()
    for no, obj in iter_json_lines(lines):
        summary.lines += 1
        try:
            if isinstance(obj, InputError):
                raise obj
            result = _ingest_one(memory, obj, wait_for_llm=wait_for_llm)
        except (InputError, ValidationError) as exc:
            # Bad input is reported and skipped; database and other errors stop the run (re-run resumes).
            msg = str(exc)
            summary.errors.append(msg if msg.startswith("line ") else f"line {no}: {msg}")
        else:
            if "activity_session_id" in obj:
                summary.activities += 1
            else:
                summary.turns += 1
            summary.add(result)
        if progress is not None:
            progress(summary.lines)
    summary.seconds = time.perf_counter() - started
    return summary


def _ingest_one(memory: Memory, obj: dict[str, Any], *, wait_for_llm: bool) -> RememberResult:
    if "activity_session_id" in obj:
        unknown = set(obj) - ACTIVITY_FIELDS
        if unknown:
            raise InputError(f"unknown field(s) {', '.join(sorted(unknown))} in an activity session")
        if "agent_id" not in obj:
            raise InputError("an activity session needs 'activity_session_id' and 'agent_id'")
        return memory.observe(wait_for_llm=wait_for_llm, **obj)
    unknown = set(obj) - TURN_FIELDS
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))} in a turn")
    if "user" not in obj or "agent_id" not in obj:
        raise InputError("a turn needs 'user' and 'agent_id'")
    return memory.remember(wait_for_llm=wait_for_llm, **obj)


def ingest_file(memory: Memory, path: Path, *, show_progress: bool | None = None,
                wait_for_llm: bool = False) -> IngestSummary:
    """Ingest a JSON-lines file of turns or activity sessions (see the README for the fields)."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    bar = Progress(sum(1 for line in lines if line.strip()), force=show_progress)
    try:
        return ingest_lines(memory, lines, progress=bar.update, wait_for_llm=wait_for_llm)
    finally:
        bar.close()
