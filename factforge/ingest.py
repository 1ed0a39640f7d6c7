"""Batch ingest of JSON lines (turns or activity sessions) into a :class:`~factforge.memory.Memory`.

Resumable and idempotent: every input has a stable key recorded with its facts (in the same transaction,
which stores a group of lines at once), so a re-run (after a crash, or of the same file) skips what is done
and adds nothing.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from .errors import DatabaseError, InputError, ValidationError
from .inputs import check_text, check_timestamp, iter_json_lines
from .memory import SEEN_BEFORE, Memory, RememberResult, turn_key

logger = logging.getLogger("factforge.ingest")

# Lines per transaction: a few hundred make commits a small share of the work; a crash redoes one group at most.
DEFAULT_BATCH_SIZE = 200

TURN_FIELDS = {"text", "user", "assistant", "agent_id", "team_id", "session_id", "timestamp", "visibility",
               "user_name", "speaker", "assistant_name"}
ACTIVITY_FIELDS = {"activity_session_id", "intent", "dialogue", "events", "agent_id", "team_id", "timestamp",
                   "visibility"}


@dataclass(slots=True)
class IngestSummary:
    """Counts for one ingest run."""

    lines: int = 0
    turns: int = 0
    activities: int = 0
    duplicates: int = 0
    facts: int = 0  # fact mentions: the same fact said again counts again (see new_facts)
    new_facts: int = 0  # rows the run added (distinct facts not stored before)
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
        self.new_facts += sum(1 for f in result.facts if f.action == "new")
        self.facts_by_category.update(f.category for f in result.facts)
        if not result.gate.passed:
            self.dropped_by_reason[result.gate.reason or "dropped"] += 1
        self.queued += int(result.queued)

    def record(self, obj: dict[str, Any] | InputError, outcome: RememberResult | str) -> None:
        """Count one line: its result, or the message of the error that rejected it."""
        self.lines += 1
        if isinstance(outcome, str):
            self.errors.append(outcome)
            return
        if isinstance(obj, dict) and "activity_session_id" in obj:
            self.activities += 1
        else:
            self.turns += 1
        self.add(outcome)

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": self.lines, "turns": self.turns, "activities": self.activities,
            "duplicates": self.duplicates, "facts": self.facts, "new_facts": self.new_facts,
            "facts_by_category": dict(self.facts_by_category),
            "dropped_by_reason": dict(self.dropped_by_reason), "queued_for_llm": self.queued,
            "errors": list(self.errors), "seconds": round(self.seconds, 3),
        }


class Progress:
    """A one-line progress bar with rate and ETA on a terminal; silent when the stream is piped."""

    def __init__(self, total: int, stream: TextIO | None = None, *, force: bool | None = None,
                 unit: str = "lines") -> None:
        self.stream = stream or sys.stderr
        self.unit = unit
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
        # The first items say little about the rate (imports, the first transaction): no ETA for a second.
        eta = f"{(self.total - done) / rate:4.0f}s" if rate > 0 and elapsed >= 1.0 else "   ?"
        width = 30
        filled = int(width * done / self.total)
        self.stream.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} {rate:,.0f} {self.unit}/s ETA {eta}"
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
    batch_size: int = DEFAULT_BATCH_SIZE,
) -> IngestSummary:
    """Ingest JSON lines, ``batch_size`` of them per transaction; a malformed line is reported in ``errors``
    and the run goes on."""
    if batch_size < 1:
        raise ValidationError(f"batch_size must be at least 1, not {batch_size}")
    summary = IngestSummary()
    started = time.perf_counter()
    group: list[tuple[int, dict[str, Any] | InputError]] = []
    for item in iter_json_lines(lines):
        group.append(item)
        if len(group) == batch_size:
            _ingest_group(memory, group, summary, progress=progress, wait_for_llm=wait_for_llm)
            group = []
    if group:
        _ingest_group(memory, group, summary, progress=progress, wait_for_llm=wait_for_llm)
    summary.seconds = time.perf_counter() - started
    return summary


def _ingest_group(memory: Memory, group: Sequence[tuple[int, dict[str, Any] | InputError]], summary: IngestSummary,
                  *, progress: Callable[[int], None] | None, wait_for_llm: bool) -> None:
    """Store a group of lines in one transaction; a line's turn key is recorded with its facts, so a crash
    loses the whole group or none of it and a re-run redoes exactly what is missing."""
    seen = _seen_turns(memory, group)
    if seen:
        # A re-run: lines already stored are counted as duplicates after one query for the whole group.
        for no, obj in group:
            if no in seen:
                summary.record(obj, seen[no])
                if progress is not None:
                    progress(summary.lines)
        group = [(no, obj) for no, obj in group if no not in seen]
        if not group:
            return
    if len(group) > 1:
        try:
            with memory.batch():
                outcomes = [_attempt(memory, no, obj, wait_for_llm) for no, obj in group]
        except DatabaseError as exc:
            # A conflict with another writer, or a row the database refuses: nothing of the group is stored.
            # One line at a time, the usual retries apply and the lines before a refused one are kept, as they
            # were before batching; a database that is gone fails again on the first line and ends the run.
            logger.info("lines %d-%d rolled back (%s); storing them one at a time", group[0][0], group[-1][0], exc)
        else:
            for (_no, obj), outcome in zip(group, outcomes):
                summary.record(obj, outcome)
                if progress is not None:
                    progress(summary.lines)
            return
    for no, obj in group:
        summary.record(obj, _attempt(memory, no, obj, wait_for_llm))
        if progress is not None:
            progress(summary.lines)


def _seen_turns(memory: Memory, group: Sequence[tuple[int, dict[str, Any] | InputError]]
                ) -> dict[int, RememberResult]:
    """The lines of ``group`` that are turns already stored, each with the result a re-run reports for it.

    A line that is not a well-formed turn is left to :func:`_attempt`, which reports what is wrong with it."""
    keys: dict[str, int] = {}
    for no, obj in group:
        if not isinstance(obj, dict) or "activity_session_id" in obj or set(obj) - TURN_FIELDS:
            continue
        try:
            key = turn_key(check_text("user", obj.get("user"), required=True) or "",
                           check_text("assistant", obj.get("assistant")),
                           check_text("agent_id", obj.get("agent_id"), required=True) or "",
                           check_text("team_id", obj.get("team_id")), check_text("session_id", obj.get("session_id")),
                           check_timestamp(obj.get("timestamp")),
                           check_text("user_name", obj.get("user_name", obj.get("speaker"))),
                           check_text("assistant_name", obj.get("assistant_name")))
        except InputError:
            continue
        keys[key] = no
    found = memory.store.seen_keys(list(keys))
    return {keys[k]: SEEN_BEFORE for k in found}


def _attempt(memory: Memory, no: int, obj: dict[str, Any] | InputError, wait_for_llm: bool) -> RememberResult | str:
    """The result of one line, or the message of the input error that rejects it."""
    try:
        if isinstance(obj, InputError):
            raise obj
        return _ingest_one(memory, obj, wait_for_llm=wait_for_llm)
    except (InputError, ValidationError) as exc:
        # Bad input is reported and skipped; database and other errors stop the run (re-run resumes).
        msg = str(exc)
        return msg if msg.startswith("line ") else f"line {no}: {msg}"


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
    if "text" in obj:  # the `extract --json` shape: a message on its own
        if "user" in obj:
            raise InputError("a turn has 'text' or 'user', not both")
        obj = {("user" if k == "text" else k): v for k, v in obj.items()}
    if "user" not in obj or "agent_id" not in obj:
        raise InputError("a turn needs 'user' (or 'text') and 'agent_id'")
    if "speaker" in obj:  # another name for user_name: who says the 'user' text
        if "user_name" in obj and obj["user_name"] != obj["speaker"]:
            raise InputError("'speaker' and 'user_name' name the same person: give one")
        obj = {**{k: v for k, v in obj.items() if k != "speaker"}, "user_name": obj["speaker"]}
    return memory.remember(wait_for_llm=wait_for_llm, **obj)


def ingest_file(memory: Memory, path: Path, *, show_progress: bool | None = None,
                wait_for_llm: bool = False, batch_size: int = DEFAULT_BATCH_SIZE) -> IngestSummary:
    """Ingest a JSON-lines file of turns or activity sessions (see the README for the fields)."""
    try:
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    bar = Progress(sum(1 for line in lines if line.strip()), force=show_progress)
    try:
        return ingest_lines(memory, lines, progress=bar.update, wait_for_llm=wait_for_llm, batch_size=batch_size)
    finally:
        bar.close()
