"""Plain-dict views of factforge values, for JSON output (CLI ``--json``) and logs."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime
from operator import attrgetter
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Dataclasses, datetimes, UUIDs, tuples and mappings turned into JSON-ready values."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else to_jsonable(v) for v in value]
    if kind is dict:
        return {k if type(k) is str else str(k): to_jsonable(v) for k, v in value.items()}
    if kind is datetime or kind is date:
        return value.isoformat()
    if kind is uuid.UUID:
        return str(value)
    fields = _FIELDS.get(kind)
    if fields is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = tuple(f.name for f in dataclasses.fields(value))
        fields = _FIELDS[kind] = (names, attrgetter(*names) if len(names) > 1 else lambda v: (getattr(v, names[0]),))
    if fields is not None:
        # every field read at once; one of a plain type (most of a search hit's) as it is, without a call
        return dict(zip(fields[0], [v if type(v) in _PLAIN else to_jsonable(v) for v in fields[1](value)]))
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value


# Types returned as they are, and each dataclass's field names (read once: dataclasses.fields() is slow, and
# the API serialises every hit and fact of every answer through here).
_PLAIN: frozenset[type] = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[tuple[str, ...], Callable[[Any], tuple[Any, ...]]]] = {}


def fact_line(fact: Any) -> dict[str, Any]:
    """The compact fact object of ``factforge extract --json``."""
    return {
        "content": fact.content,
        "category": fact.category,
        "confidence": round(float(fact.confidence), 4),
        "method": fact.method,
        "entities": list(fact.entities),
        "rule": fact.rule_id,
        "valid_from": to_jsonable(fact.valid_from),
        "valid_to": to_jsonable(fact.valid_to),
        "explanation": to_jsonable(fact.explanation),
    }
