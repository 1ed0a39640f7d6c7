"""``factforge extract --json``: one JSON line out per JSON line in, in order, with no database."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from .errors import FactforgeError, InputError, LLMError
from .rules.extract import Extractor
from .jsonout import fact_line
from .inputs import check_text, check_timestamp, iter_json_lines


def extract_stream(lines: Iterable[str], extractor: Extractor, llm: Any = None) -> Iterator[dict[str, Any]]:
    """Extract each ``{"text"}`` or ``{"user", "assistant"}`` line; a bad line yields ``{"error": ...}``.

    With ``llm`` (an object with ``extract(LLMRequest)``), lines the rules did not answer are sent to it
    directly; without it nothing but the rules runs.
    """
    for no, obj in iter_json_lines(lines):
        if isinstance(obj, InputError):
            yield {"line": no, "error": str(obj)}
            continue
        try:
            yield _one(obj, extractor, llm)
        except FactforgeError as exc:
            yield {"line": no, "error": str(exc)}


def _one(obj: dict[str, Any], extractor: Extractor, llm: Any) -> dict[str, Any]:
    ts = check_timestamp(obj.get("timestamp"))
    if "text" in obj:
        text = check_text("text", obj["text"], required=True) or ""
        extraction = extractor.extract(text, timestamp=ts)
    elif "user" in obj:
        user = check_text("user", obj["user"], required=True) or ""
        extraction = extractor.extract_turn(user, check_text("assistant", obj.get("assistant")), timestamp=ts)
    else:
        raise InputError("expected a 'text' or a 'user' field")
    out: dict[str, Any] = {
        "gate": {"passed": extraction.gate.passed, "reason": extraction.gate.reason},
        "facts": [fact_line(f) for f in extraction.facts],
        "needs_llm": extraction.needs_llm,
    }
    if extraction.needs_llm and llm is not None:
        from .models.llm import LLMRequest, merge

        try:
            result = llm.extract(
                LLMRequest(text=extraction.text, user=obj.get("user"), assistant=obj.get("assistant"),
                           timestamp=ts, hints=extraction.hints, known_entities=())
            )
        except LLMError as exc:
            out["llm_error"] = str(exc)
        else:
            merged = merge(extraction, result)
            out["facts"] = [fact_line(f) for f in merged]
            out["needs_llm"] = False
    return out
