"""Plain-dict views of factforge values, for JSON output (CLI ``--json``) and logs."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any


def to_jsonable(value: Any) -> Any:
    """Dataclasses, datetimes, UUIDs, tuples and mappings turned into JSON-ready values."""
    kind = type(value)
    if kind in _PLAIN:
        return value
    if kind is list or kind is tuple:
        return [to_jsonable(v) for v in value]
    if kind is dict:
        return {k if type(k) is str else str(k): to_jsonable(v) for k, v in value.items()}
    names = _FIELDS.get(kind)
    if names is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS[kind] = tuple(f.name for f in dataclasses.fields(value))
    if names is not None:
        return {name: to_jsonable(getattr(value, name)) for name in names}
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
_FIELDS: dict[type, tuple[str, ...]] = {}


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
