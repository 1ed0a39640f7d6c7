"""The LLM half of the write path: due items of the extraction queue go to the model, its facts are stored.

Failures back off and retry later; an outage (Ollama down, overloaded or too slow) gives the work back
untouched and ends the pass, so it never turns queued work into 'failed'.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .errors import DatabaseError, LLMCall, LLMError, LLMUnavailableError
from .inputs import check_timestamp
from .redaction import Redactor
from .rules.extract import Extractor
from .settings import Settings
from .storage.records import Provenance, QueueItem
from .storage.store import Store
from .types import Extraction

if TYPE_CHECKING:
    from .models.llm import LLMRequest, LLMResult
    from .writing import Writer

logger = logging.getLogger("factforge.memory")

__all__ = ["DrainReport", "Drainer"]


@dataclass(frozen=True, slots=True)
class DrainReport:
    """Outcome of one pass over the extraction queue."""

    processed: int = 0
    stored_facts: int = 0
    failed: int = 0
    retried_later: int = 0
    rejections: Mapping[str, int] = field(default_factory=dict)
    # why items were not answered: the error message (naming Ollama's URL, the model, the timeout) -> items
    errors: Mapping[str, int] = field(default_factory=dict)
    # set when the pass stopped because Ollama was unreachable or overloaded (the work stays queued)
    outage: str | None = None


@dataclass
class _Tally:
    processed: int = 0
    stored: int = 0
    failed: int = 0
    retried: int = 0
    answered: bool = False  # whether the LLM answered any item in this pass
    rejections: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    def report(self, outage: str | None = None) -> DrainReport:
        return DrainReport(self.processed, self.stored, self.failed, self.retried, dict(self.rejections),
                           dict(self.errors), outage)


class _ClaimLost(Exception):
    """Rolls back a queue item's facts when its claim expired before they were stored."""


class Drainer:
    """Works the extraction queue with the LLM that ``llm`` returns (None: no LLM, nothing to do)."""

    def __init__(self, store: Store, settings: Settings, extractor: Extractor, redactor: Redactor, writer: Writer,
                 llm: Callable[[], Any]) -> None:
        self.store = store
        self.settings = settings
        self.extractor = extractor
        self.redactor = redactor
        self.writer = writer
        self._llm = llm

    def drain(self, *, limit: int | None = None, progress: Callable[[int], None] | None = None,
              keys: Sequence[str] | None = None) -> DrainReport:
        """Process due items with the LLM (only the items of the calls ``keys`` when given); ``progress`` is
        called with the number processed after each one."""
        llm = self._llm()
        if llm is None:
            return DrainReport()
        # Every rule part an item needs is loaded before the first claim: a claim's clock must not run while a fresh
        # process loads its rules (seconds on a busy machine), or a live worker loses its items to others. (A
        # long-running worker also compiles every regex first: worker.run_worker.)
        self.extractor.rules.load()
        tally = _Tally()
        while limit is None or tally.processed < limit:
            items = self.store.claim_due(1 if limit is None else min(16, limit - tally.processed), keys=keys)
            if not items:
                break
            index = 0
            try:
                for index, item in enumerate(items):
                    tally.processed += 1
                    outage = self._one(llm, item, items[index:], tally)
                    if outage is not None:
                        return tally.report(outage)
                    if progress is not None:
                        progress(tally.processed)
            except BaseException:
                # Stopped mid-pass (Ctrl-C, SIGTERM, a database error): the claims go back at once instead of
                # waiting to expire; only a hard kill leaves them to the expiry (Settings.claim_seconds).
                try:
                    self.store.release_claims([i.id for i in items[index:]])
                except DatabaseError as exc:
                    logger.warning("could not give back queue claims (%s); they expire in %.0f s", exc,
                                   self.store.claim_seconds)
                raise
        return tally.report()

    def _one(self, llm: Any, item: QueueItem, rest: Sequence[QueueItem], tally: _Tally) -> str | None:
        """Ask the LLM about one item and store what it adds; returns the outage that ends the pass, if any."""
        p = item.payload
        ts = check_timestamp(p.get("timestamp"))
        extraction = (
            self.extractor.extract_turn(p.get("user") or "", p.get("assistant"), timestamp=ts)
            if p.get("kind") == "turn"
            else self.extractor.extract(p.get("user") or "", timestamp=ts)
        )
        request = self._request(extraction, p, ts)
        started = time.perf_counter()
        try:
            result = llm.extract(request)
        except LLMError as exc:
            return self._on_error(exc, item, rest, tally, started)
        tally.answered = True
        usage = result.usage
        self.record_calls(result.calls or (
            LLMCall(usage.prompt_tokens, usage.output_tokens, usage.latency_ms, rejections=result.rejections),))
        tally.rejections.update(result.rejections)
        tally.stored += len(self._store_answer(item, extraction, result, ts))
        return None

    def _request(self, extraction: Extraction, p: Mapping[str, Any], ts: datetime | None) -> LLMRequest:
        from .models.llm import LLMRequest

        return LLMRequest(
            text=self.for_llm(extraction.text) or "",
            user=self.for_llm(p.get("user")),
            assistant=self.for_llm(p.get("assistant")),
            timestamp=ts,
            hints=extraction.hints,
            known_entities=tuple(n for n in self.store.known_entities(20, agent_id=p.get("agent_id"),
                                                                      team_id=p.get("team_id"))
                                 if not self.redactor.secret_name(n)),
        )

    def _on_error(self, exc: LLMError, item: QueueItem, rest: Sequence[QueueItem], tally: _Tally,
                  started: float) -> str | None:
        from .models.llm import is_transient

        calls = exc.calls
        if not calls and not isinstance(exc, LLMUnavailableError):
            # an LLM that does not itself account for its calls: one failed exchange took place
            calls = (LLMCall(latency_ms=(time.perf_counter() - started) * 1000, ok=False, error=str(exc)),)
        self.record_calls(calls)
        tally.errors[str(exc)] += 1
        # A 5xx or timeout after another item of this pass succeeded is this item's own problem (too long for
        # the model, say): it counts as an attempt, so it cannot stay queued forever.
        outage = isinstance(exc, LLMUnavailableError) or (is_transient(exc) and not tally.answered)
        if not outage:
            status = self.store.fail(item.id, str(exc), self.settings.queue_max_attempts)
            if status == "failed":
                tally.failed += 1
            else:
                tally.retried += 1
            return None
        # Ollama is down, overloaded (5xx) or too slow: not the item's fault. It goes back untouched (no attempt
        # counted, retried after a back-off) and the pass stops, so an outage never turns queued work into
        # 'failed'.
        for untouched in rest:  # this item and the rest of the claimed batch
            self.store.release(untouched.id, str(exc))
        tally.retried += 1
        logger.warning("LLM unavailable (%s); %s stays queued", exc, item.source_key[:12])
        return str(exc)

    def _store_answer(self, item: QueueItem, extraction: Extraction, result: LLMResult,
                      ts: datetime | None) -> list[Any]:
        """Store the facts the LLM adds to the rules' (those were stored by remember()) and mark the item done:
        together, or neither. A worker that was too slow (its claim expired and another worker took the item)
        stores nothing: 'done' is fenced by the claim."""
        from .models.llm import merge

        p = item.payload
        provenance = Provenance(  # the message itself is in the turn row (see Writer)
            source_key=item.source_key,
            session_id=p.get("session_id"),
            activity_session=p.get("activity_session"),
            message_ts=ts,
        )
        new_facts = merge(extraction, result)[len(extraction.facts):]
        try:
            with self.store.atomic():
                saved = self.writer.save(
                    new_facts,
                    provenance,
                    agent_id=p["agent_id"],
                    team_id=p.get("team_id"),
                    visibility=p.get("visibility"),
                    entities=result.entities,
                    relationships=result.relationships,
                    user_name=p.get("user_name"),
                    assistant_name=p.get("assistant_name"),
                    max_visibility=p.get("max_visibility"),
                )
                if not self.store.complete(item.id, attempts=item.attempts):
                    raise _ClaimLost
        except _ClaimLost:
            logger.warning("queue item %s was taken by another worker while the LLM answered; "
                           "this answer is dropped", item.source_key[:12])
            saved = []
        return saved

    def for_llm(self, text: str | None) -> str | None:
        """``text`` cut to ``llm_max_chars`` for the prompt: the rules have read all of it, and a model given
        megabytes only times out (or costs a fortune)."""
        cap = self.settings.llm_max_chars
        if text is None or len(text) <= cap:
            return text
        logger.info("text of %d chars cut to %d for the LLM (FACTFORGE_LLM_MAX_CHARS)", len(text), cap)
        return text[:cap]

    def record_calls(self, calls: Sequence[LLMCall]) -> None:
        """One ``llm_calls`` row per HTTP call, so a correction retry's tokens and failure are counted."""
        for call in calls:
            self.store.record_llm_call(
                self.settings.llm_model, call.ok, call.prompt_tokens, call.output_tokens, call.latency_ms,
                call.error, rejections=call.rejections,
            )
