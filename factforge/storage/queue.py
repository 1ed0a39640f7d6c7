"""The LLM work queue and the accounting of LLM calls.

A worker claims an item by setting status 'processing' and locked_at; the claim lasts
``Settings.queue_claim_seconds`` (FACTFORGE_QUEUE_CLAIM_SECONDS). A worker that stops cleanly gives its
claims back (release_claims); one that is killed leaves them to expire, after which any worker may
take the item again. An expired claim costs an attempt, so an item that kills its worker every time
still ends as 'failed'. These functions are the one place that decides who works on an item and for how long.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .records import QueueItem

if TYPE_CHECKING:
    from .store import Store

__all__ = ["enqueue", "claim_due", "release_claims", "fail", "release", "complete", "retry_failed",
           "queue_counts", "queue_waiting", "record_llm_call"]


def enqueue(store: Store, source_key: str, payload: Mapping[str, Any]) -> bool:
    """Queue work for the LLM; the same source twice is queued once. Returns whether it was added."""
    with store._tx() as conn:
        row = conn.exec_driver_sql(ENQUEUE_SQL, enqueue_params(source_key, payload)).first()
    return row is not None


ENQUEUE_INSERT = "INSERT INTO extraction_queue (source_key, payload)"
ENQUEUE_CONFLICT = "ON CONFLICT (source_key) DO NOTHING"
ENQUEUE_SQL = f"{ENQUEUE_INSERT} VALUES (%(k)s, %(p)s::jsonb) {ENQUEUE_CONFLICT} RETURNING id"


def enqueue_params(source_key: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    return {"k": source_key, "p": json.dumps(dict(payload), ensure_ascii=False, default=str)}


def claim_due(store: Store, n: int = 1, *, stale_after_s: float | None = None,
              keys: Sequence[str] | None = None) -> list[QueueItem]:
    """Take up to n due items (pending, or processing under a claim that has expired); only those of the
    calls ``keys`` (their source keys) when given.

    Items that never errored come first: one the model keeps failing on must not hold up fresh work, and
    a failure right after a fresh item succeeded is then known to be the item's own."""
    only = "" if keys is None else "AND source_key = ANY(%(keys)s)"
    rows = store._all(
        f"""
        UPDATE extraction_queue SET status = 'processing', locked_at = now(), attempts = attempts + 1,
            updated_at = now()
        WHERE id IN (
            SELECT id FROM extraction_queue
            WHERE ((status = 'pending' AND next_try_at <= now())
                   OR (status = 'processing' AND locked_at < now() - make_interval(secs => %(stale)s))) {only}
            ORDER BY (last_error IS NOT NULL), id LIMIT %(n)s FOR UPDATE SKIP LOCKED)
        RETURNING id, source_key, payload, attempts, (last_error IS NOT NULL) AS errored
        """,
        {"n": n, "stale": store.claim_seconds if stale_after_s is None else stale_after_s,
         "keys": list(keys or ())},
    )
    rows.sort(key=lambda r: (r["errored"], r["id"]))
    return [QueueItem(r["id"], r["source_key"], r["payload"], r["attempts"]) for r in rows]


def release_claims(store: Store, item_ids: Sequence[int]) -> None:
    """Give claimed items back at once, attempt not counted (a worker stopping before it finished them)."""
    if item_ids:
        store._all("UPDATE extraction_queue SET status = 'pending', attempts = greatest(0, attempts - 1), "
                  "locked_at = NULL, updated_at = now(), next_try_at = now() "
                  "WHERE id = ANY(%(ids)s) AND status = 'processing' RETURNING id", {"ids": list(item_ids)})


def fail(store: Store, item_id: int, error: str, max_attempts: int) -> str:
    """Record a failed attempt: back off exponentially, or mark 'failed' (kept, never deleted)."""
    rows = store._all(
        """
        UPDATE extraction_queue SET
            status = CASE WHEN attempts >= %(max)s THEN 'failed' ELSE 'pending' END,
            last_error = %(err)s, locked_at = NULL, updated_at = now(),
            next_try_at = now() + make_interval(secs => least(3600, 5 * power(2, attempts)))
        WHERE id = %(id)s RETURNING status
        """,
        {"id": item_id, "err": error[:2000], "max": max_attempts},
    )
    return rows[0]["status"] if rows else "missing"


def release(store: Store, item_id: int, error: str, retry_in_s: float = 30.0) -> None:
    """Give an item back without counting the attempt (the LLM was unreachable, not wrong)."""
    store._all(
        "UPDATE extraction_queue SET status = 'pending', attempts = greatest(0, attempts - 1), "
        "last_error = %(err)s, locked_at = NULL, updated_at = now(), "
        "next_try_at = now() + make_interval(secs => %(s)s) WHERE id = %(id)s RETURNING id",
        {"id": item_id, "err": error[:2000], "s": retry_in_s},
    )


def complete(store: Store, item_id: int, attempts: int | None = None) -> bool:
    """Mark an item done. With ``attempts`` (the claim's count, a fencing token), only if that claim still
    holds it: False when it expired and another worker took the item meanwhile."""
    fence = " AND status = 'processing' AND attempts = %(attempts)s" if attempts is not None else ""
    return bool(store._all("UPDATE extraction_queue SET status = 'done', locked_at = NULL, last_error = NULL, "
                          f"updated_at = now() WHERE id = %(id)s{fence} RETURNING id",
                          {"id": item_id, "attempts": attempts}))


def retry_failed(store: Store) -> int:
    """Put every failed item back in the queue (after fixing the model or the prompt)."""
    return len(store._all("UPDATE extraction_queue SET status = 'pending', attempts = 0, next_try_at = now(), "
                         "updated_at = now() WHERE status = 'failed' RETURNING id"))


def queue_counts(store: Store) -> dict[str, int]:
    rows = store._all("SELECT status, count(*) AS n FROM extraction_queue GROUP BY status")
    counts = {s: 0 for s in ("pending", "processing", "done", "failed")}
    counts.update({r["status"]: int(r["n"]) for r in rows})
    return counts


def queue_waiting(store: Store) -> list[dict[str, Any]]:
    """Pending items not yet due (backing off after an error), grouped by their last error: ``error``,
    ``items``, ``next_try_at`` (the earliest)."""
    return store._all(
        "SELECT last_error AS error, count(*) AS items, min(next_try_at) AS next_try_at FROM extraction_queue "
        "WHERE status = 'pending' AND next_try_at > now() GROUP BY last_error ORDER BY min(next_try_at)")


def record_llm_call(store: Store, model: str, ok: bool, prompt_tokens: int, output_tokens: int, latency_ms: float,
                    error: str | None, *, rejections: Mapping[str, int] | None = None) -> None:
    """Account for one HTTP call to the model; ``rejections`` counts its reply's dropped items by reason."""
    counts = {str(k): int(v) for k, v in (rejections or {}).items() if int(v)}
    store._all(
        "INSERT INTO llm_calls (model, ok, prompt_tokens, output_tokens, latency_ms, error, rejections) "
        "VALUES (%(m)s, %(ok)s, %(pt)s, %(ot)s, %(ms)s, %(e)s, %(r)s::jsonb) RETURNING id",
        {"m": model, "ok": ok, "pt": int(prompt_tokens), "ot": int(output_tokens), "ms": float(latency_ms),
         "e": error[:2000] if error else None, "r": json.dumps(counts, sort_keys=True)},
    )

