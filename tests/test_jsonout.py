"""to_jsonable: every value the API and the CLI serialise, as JSON-ready values."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

import pytest

from factforge.jsonout import to_jsonable

ID = uuid.UUID("12345678-1234-5678-1234-567812345678")
AT = datetime(2026, 11, 28, 8, 5, tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class _One:
    when: datetime


@dataclass
class _Many:
    id: uuid.UUID
    name: str
    score: float
    rank: int | None
    ok: bool
    tags: tuple[str, ...]
    related: tuple[uuid.UUID, ...]
    inner: _One | None
    extra: dict[Any, Any]


@pytest.mark.parametrize(("value", "expected"), [
    ("text", "text"), (3, 3), (0.5, 0.5), (True, True), (None, None),
    (AT, "2026-11-28T08:05:00+00:00"), (date(2026, 11, 28), "2026-11-28"), (ID, str(ID)),
    ((ID, "a", AT), [str(ID), "a", "2026-11-28T08:05:00+00:00"]), ([1, [AT]], [1, ["2026-11-28T08:05:00+00:00"]]),
    ({ID: AT, "k": (1,)}, {str(ID): "2026-11-28T08:05:00+00:00", "k": [1]}), (frozenset({ID}), [str(ID)]),
    (_One(AT), {"when": "2026-11-28T08:05:00+00:00"}),
    (_Many(ID, "n", 1.5, None, False, ("x", "y"), (ID,), _One(AT), {"a": {ID}}),
     {"id": str(ID), "name": "n", "score": 1.5, "rank": None, "ok": False, "tags": ["x", "y"], "related": [str(ID)],
      "inner": {"when": "2026-11-28T08:05:00+00:00"}, "extra": {"a": [str(ID)]}}),
])
def test_values_become_json_ready(value: Any, expected: Any) -> None:
    out = to_jsonable(value)
    assert out == expected
    if isinstance(expected, dict):  # a dataclass keeps its field order
        assert list(out) == list(expected)
