"""Checking caller input once, at the edge: field values, timestamps, JSON lines, input keys."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from .errors import InputError

# Timestamps are kept a few years away from the ends of what datetime can hold, so date arithmetic on them
# (relative dates, intervals) cannot overflow.
_EARLIEST = datetime(10, 1, 1)
_LATEST = datetime(9990, 12, 31)

# Characters a field value may not contain: PostgreSQL text cannot hold NUL.
_FORBIDDEN = ("\x00",)


def check_text(name: str, value: object, *, required: bool = False) -> str | None:
    """The value as a string, or an InputError naming the field and what is wrong."""
    if value is None:
        if required:
            raise InputError(f"{name} is required")
        return None
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}")
    if any(ch in value for ch in _FORBIDDEN):
        raise InputError(f"{name} contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{name} is not valid Unicode text (lone surrogate or undecodable bytes)") from None
    if required and not value.strip():
        raise InputError(f"{name} must not be empty")
    return value


def check_timestamp(value: datetime | str | None) -> datetime | None:
    """An aware datetime (naive ones are taken as UTC) from a datetime or an ISO 8601 string."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            raise InputError(f"timestamp {value!r} is not ISO 8601") from None
    if not isinstance(value, datetime):
        raise InputError(f"timestamp must be a datetime or an ISO 8601 string, got {type(value).__name__}")
    value = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    # Dates are compared and shifted in UTC ("yesterday", supersession): one at the edge of what Python
    # can hold ("0001-01-01T00:00:00+14:00") would overflow later, in the middle of a write.
    try:
        utc = value.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise InputError(f"timestamp {value.isoformat()!r} is out of range") from None
    if not _EARLIEST <= utc.replace(tzinfo=None) <= _LATEST:
        raise InputError(f"timestamp {value.isoformat()!r} is out of range (years {_EARLIEST.year}-{_LATEST.year})")
    return value


def source_key(*parts: object) -> str:
    """A stable key for one input (turn or activity dialogue): re-ingesting it finds the same key."""
    h = hashlib.sha256()
    for part in parts:
        h.update(b"\x1f")
        h.update(("" if part is None else str(part)).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def iter_json_lines(lines: Iterable[str]) -> Iterable[tuple[int, dict[str, Any] | InputError]]:
    """Parse JSON lines; a bad line yields an :class:`InputError` in its place, the rest go on."""
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            # exc.msg may itself end in "at" ("Unterminated string starting at")
            yield no, InputError(f"line {no}: not JSON ({exc.msg.removesuffix(' at')} at column {exc.colno})")
            continue
        except (RecursionError, ValueError) as exc:  # nesting too deep, integers too long
            yield no, InputError(f"line {no}: JSON too deeply nested or a number too long ({type(exc).__name__})")
            continue
        if not isinstance(obj, dict):
            yield no, InputError(f"line {no}: expected a JSON object, got {type(obj).__name__}")
            continue
        yield no, obj
