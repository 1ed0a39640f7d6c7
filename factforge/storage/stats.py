"""Statistics: pattern misses (for rule writers) and the counts of `factforge stats`."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..types import normalize_content
from .graphs import graph_counts
from .queue import ENQUEUE_SQL, enqueue_params, queue_counts
from .records import Miss

if TYPE_CHECKING:
    from .store import Store

__all__ = ["record_miss", "enqueue_unanswered", "top_misses", "stats", "miss_hash"]


def miss_hash(text: str) -> str:
    return hashlib.sha256(normalize_content(text)[:2000].encode()).hexdigest()


def record_miss(store: Store, text: str, *, session_id: str | None = None, agent_id: str | None = None) -> None:
    """Count an informative message that no pattern answered (for rule writers: `patterns misses`).

    ``session_id``/``agent_id`` say whose message it was, so forgetting them removes it too."""
    store._all(_MISS_SQL + " RETURNING count", miss_params(text, session_id, agent_id))


def enqueue_unanswered(store: Store, source_key: str, payload: Mapping[str, Any], text: str, *,
                       session_id: str | None = None, agent_id: str | None = None) -> bool:
    """:func:`~factforge.storage.queue.enqueue` and :func:`record_miss` in one statement (one round trip): what
    a message no rule answered costs. Returns whether the item was queued (once per source)."""
    rows = store._all(f"WITH q AS ({ENQUEUE_SQL}), m AS ({_MISS_SQL}) SELECT id FROM q",
                      {**enqueue_params(source_key, payload), **miss_params(text, session_id, agent_id)})
    return bool(rows)


MISS_INSERT = "INSERT INTO pattern_misses AS p (text_hash, text, session_ids, agent_ids)"
MISS_VALUES = "%(h)s, %(t)s, %(sessions)s, %(agents)s"
MISS_CONFLICT = (
    "ON CONFLICT (text_hash) DO UPDATE SET count = p.count + 1, last_seen_at = now(), "
    "session_ids = (SELECT coalesce(array_agg(DISTINCT x), '{}') FROM unnest(p.session_ids || excluded.session_ids) x), "
    "agent_ids = (SELECT coalesce(array_agg(DISTINCT x), '{}') FROM unnest(p.agent_ids || excluded.agent_ids) x)")
_MISS_SQL = f"{MISS_INSERT} VALUES ({MISS_VALUES}) {MISS_CONFLICT}"


def miss_params(text: str, session_id: str | None, agent_id: str | None) -> dict[str, Any]:
    return {"h": miss_hash(text), "t": text[:2000], "sessions": [session_id] if session_id else [],
            "agents": [agent_id] if agent_id else []}


def top_misses(store: Store, n: int = 20) -> list[Miss]:
    return [Miss(r["text"], int(r["count"]), r["first_seen_at"], r["last_seen_at"], int(r["agents"]))
            for r in store._all(
        "SELECT text, count, first_seen_at, last_seen_at, cardinality(agent_ids) AS agents FROM pattern_misses "
        "ORDER BY count DESC, last_seen_at DESC LIMIT %(n)s", {"n": n})]


def stats(store: Store) -> dict[str, Any]:
    """Counts for `factforge stats`: facts by category/method/scope, turns, gate drops, queue, LLM cost."""
    one = store._all(
        """
        SELECT
          (SELECT count(*) FROM facts WHERE superseded_at IS NULL) AS facts,
          (SELECT count(*) FROM facts WHERE superseded_at IS NOT NULL) AS superseded,
          (SELECT count(*) FROM turns) AS turns,
          (SELECT count(*) FROM turns WHERE visibility IS NOT NULL) AS episodes,
          (SELECT count(*) FROM turns WHERE visibility IS NOT NULL AND embedding IS NULL) AS episodes_without_vector,
          (SELECT count(*) FROM entities) AS entities,
          (SELECT count(*) FROM relationships) AS relationships,
          (SELECT count(*) FROM facts WHERE embedding IS NULL AND superseded_at IS NULL) AS facts_without_vector,
          (SELECT count(*) FROM llm_calls) AS llm_calls,
          (SELECT count(*) FROM llm_calls WHERE NOT ok) AS llm_errors,
          (SELECT coalesce(sum(prompt_tokens), 0) FROM llm_calls) AS llm_prompt_tokens,
          (SELECT coalesce(sum(output_tokens), 0) FROM llm_calls) AS llm_output_tokens,
          (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY latency_ms) FROM llm_calls WHERE ok) AS llm_median_ms,
          (SELECT coalesce(sum(count), 0) FROM pattern_misses) AS pattern_misses,
          (SELECT count(*) FROM turns WHERE gate_reason IS NULL) AS turns_passed_gate,
          (SELECT count(*) FROM turns t WHERE t.gate_reason IS NULL
              AND EXISTS (SELECT 1 FROM extraction_queue q WHERE q.source_key = t.key)) AS turns_needing_llm
        """
    )[0]
    out: dict[str, Any] = {k: (float(v) if isinstance(v, float) else (int(v) if v is not None else None))
                           for k, v in one.items()}

    def grouped(sql: str) -> dict[str, int]:
        return {str(r["k"]): int(r["n"]) for r in store._all(sql)}

    passed = out.get("turns_passed_gate") or 0
    # The headline figure: of the turns that could carry a fact, the share no HIGH rule answered.
    out["llm_share"] = round((out.get("turns_needing_llm") or 0) / passed, 4) if passed else None
    out["by_category"] = grouped("SELECT category AS k, count(*) AS n FROM facts WHERE superseded_at IS NULL GROUP BY 1 ORDER BY 1")
    out["by_method"] = grouped("SELECT extraction_method AS k, count(*) AS n FROM facts WHERE superseded_at IS NULL GROUP BY 1 ORDER BY 1")
    out["by_visibility"] = grouped("SELECT visibility AS k, count(*) AS n FROM facts WHERE superseded_at IS NULL GROUP BY 1 ORDER BY 1")
    out["llm_rejections"] = grouped(
        "SELECT r.key AS k, sum(r.value::bigint) AS n FROM llm_calls, jsonb_each_text(llm_calls.rejections) r "
        "GROUP BY 1 ORDER BY 1")
    out["dropped_by_reason"] = grouped("SELECT gate_reason AS k, count(*) AS n FROM turns WHERE gate_reason IS NOT NULL GROUP BY 1 ORDER BY 1")
    out["queue"] = queue_counts(store)
    with store._tx() as conn:  # agents and teams with a vector graph of their own, per table (storage.graphs)
        out["agent_graphs"] = graph_counts(conn.exec_driver_sql, "agent")
        out["team_graphs"] = graph_counts(conn.exec_driver_sql, "team")
    return out

