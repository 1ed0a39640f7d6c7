"""The library's front door: a :class:`Memory` bound to one database.

Data flows one way: text -> extraction (gate, patterns, NER; no database) -> store; what the rules could not
answer is put in the extraction queue *before* anything else happens, so a crash, an unreachable Ollama or a
broken reply never loses it. The LLM works from the queue, in a background thread or through :meth:`drain`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar
from uuid import UUID

from .errors import DatabaseError, EmbedderError, InputError, LLMCall, LLMError, LLMUnavailableError, ValidationError
from .inputs import check_text, check_timestamp, source_key
from .models.embed import EmbedReport, embed_pending
from .rules.extract import Extractor
from .rules.inline import parse_inline
from .rules.names import name_speakers
from .rules.secrets import SecretScanner, has_placeholder
from .settings import VISIBILITIES, Settings, get_settings
from .storage.store import MAX_TX_ATTEMPTS, Provenance, Scope, Store, StoredFact
from .types import Entity, Extraction, Fact, GateDecision, Relationship

if TYPE_CHECKING:
    from .storage.search import SearchHit

logger = logging.getLogger("factforge.memory")

# What drop mode (FACTFORGE_SECRETS=drop) stores instead of a message that held a secret.
DROPPED = "[DROPPED: message contained a secret]"

_PRIVATE_FIRST = VISIBILITIES  # ("private", "team", "global")

T = TypeVar("T")
P = ParamSpec("P")


@dataclass(frozen=True, slots=True)
class RememberResult:
    """What one :meth:`Memory.remember` or :meth:`Memory.observe` call did."""

    facts: tuple[StoredFact, ...]
    gate: GateDecision
    queued: bool
    duplicate: bool
    clean_reply: str | None = None
    inline_skipped: tuple[tuple[str, str], ...] = ()
    extraction: Extraction | None = None


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


class Memory:
    """Fact memory bound to one PostgreSQL database (the embedded one unless a URL is given).

    ``llm``: an object with ``extract(LLMRequest) -> LLMResult`` (default: Ollama per settings; ``None``
    disables the LLM, work then waits in the queue). ``background``: run queued LLM work in a thread so
    :meth:`remember` returns as soon as the pattern facts are stored.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        settings: Settings | None = None,
        llm: Any = "auto",
        embedder: Any = "auto",
        background: bool = True,
    ) -> None:
        self.settings = settings or get_settings()
        if url is not None:
            self.settings = self.settings.with_(database_url=url)
        self.store = Store.open(self.settings)
        self.extractor = Extractor(self.settings, self.settings.patterns_dir)
        self.secrets = SecretScanner.from_dir(self.settings.patterns_dir)
        self._llm = self._make_llm() if llm == "auto" else llm
        self._embedder = self._make_embedder() if embedder == "auto" else embedder
        self._background = background
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._embed_thread: threading.Thread | None = None
        self._embed_again = threading.Event()
        self._closed = False

    # -- construction helpers ------------------------------------------------------------------------

    def _make_llm(self) -> Any:
        if not self.settings.llm_enabled:
            return None
        from .models.llm import OllamaLLM

        return OllamaLLM(self.settings)

    def _make_embedder(self) -> Any:
        from .models.embed import make_embedder

        try:
            return make_embedder(self.settings)
        except EmbedderError as exc:
            logger.warning("no embedder (%s); facts are stored without vectors, backfill later", exc)
            return None

    # -- writing -------------------------------------------------------------------------------------

    def remember(
        self,
        *,
        user: str,
        assistant: str | None = None,
        agent_id: str,
        team_id: str | None = None,
        session_id: str | None = None,
        timestamp: datetime | str | None = None,
        visibility: str | None = None,
        wait_for_llm: bool = False,
        user_name: str | None = None,
        assistant_name: str | None = None,
    ) -> RememberResult:
        """Extract and store the facts of one conversation turn; returns the stored facts.

        Pattern facts are stored at once. If the rules did not answer the turn, it is queued for the LLM
        (processed in the background, or before returning when ``wait_for_llm`` is true). A turn the gate
        passes is also stored as an *episode* (its redacted words, searchable at once). ``user_name`` /
        ``assistant_name``: who speaks; facts about the user then read "Maria ..." instead of "User ...".
        """
        user = self._check_size("user", check_text("user", user, required=True)) or ""
        assistant = self._check_size("assistant", check_text("assistant", assistant))
        user_name = check_text("user_name", user_name)
        assistant_name = check_text("assistant_name", assistant_name)
        agent_id = check_text("agent_id", agent_id, required=True) or ""
        team_id = check_text("team_id", team_id)
        session_id = check_text("session_id", session_id)
        ts = check_timestamp(timestamp)
        self._check_visibility(visibility, team_id)

        key = turn_key(user, assistant, agent_id, team_id, session_id, ts, user_name, assistant_name)
        if self.store.turn_seen(key):
            # Seen before (a re-run of an ingest): one indexed lookup, no scanning, extraction or writes.
            return RememberResult(facts=(), gate=GateDecision(True, None, "seen before"), queued=False,
                                  duplicate=True)

        # Secrets leave at the edge: everything below (inline tags, extraction, sessions, queue, misses, the
        # LLM prompt) only ever sees the redacted text. Drop mode keeps no stored message that had one.
        user_red, user_stored = self._scrub(user)
        assistant_red, assistant_stored = self._scrub(assistant)

        clean_reply, inline_facts, inline_entities, inline_rels, skipped = None, (), (), (), ()
        if assistant_red and ("<ff:" in assistant_red or "<vm:" in assistant_red):
            parsed = parse_inline(assistant_red)
            clean_reply, skipped = parsed.clean_reply, parsed.skipped
            inline_facts = tuple(f for f in (self._redact_fact(x) for x in parsed.facts) if f is not None)
            inline_entities = tuple(e for e in parsed.entities if not self._secret_name(e.name))
            inline_rels = tuple(r for r in parsed.relationships
                                if not self._secret_name(r.source) and not self._secret_name(r.target))
            assistant_stored = DROPPED if assistant_stored == DROPPED else clean_reply
            assistant_red = clean_reply

        prior = None
        if session_id is not None and self.extractor.turns.reads_prior(user_red or ""):
            prior = self.store.last_assistant_message(session_id, agent_id=agent_id, team_id=team_id)
        extraction = self.extractor.extract_turn(user_red or "", assistant_red, timestamp=ts, prior_assistant=prior)
        provenance = Provenance(
            source_key=key,
            session_id=session_id,
            user_message=user_stored,
            assistant_message=assistant_stored,
            message_ts=ts,
        )
        result = self._store_extraction(
            extraction,
            provenance,
            agent_id=agent_id,
            team_id=team_id,
            visibility=visibility,
            kind="conversation",
            extra_facts=inline_facts,
            extra_entities=inline_entities,
            extra_relationships=inline_rels,
            payload={"kind": "turn", "user": user_stored, "assistant": assistant_stored, "user_name": user_name,
                     "assistant_name": assistant_name},
            wait_for_llm=wait_for_llm,
        )
        return RememberResult(
            facts=result[0],
            gate=extraction.gate,
            queued=result[1],
            duplicate=result[2],
            clean_reply=clean_reply,
            inline_skipped=skipped,
            extraction=extraction,
        )

    def observe(
        self,
        *,
        activity_session_id: str,
        agent_id: str,
        intent: str | None = None,
        dialogue: Sequence[Mapping[str, str]] | str | None = None,
        events: Sequence[Mapping[str, Any] | str] | None = None,
        team_id: str | None = None,
        timestamp: datetime | str | None = None,
        visibility: str | None = None,
        wait_for_llm: bool = False,
    ) -> RememberResult:
        """Extract and store the facts of an observed activity session (the observational pathway).

        ``dialogue`` is a list of ``{"speaker", "text"}`` (or one string); ``events`` a list of strings or
        ``{"text"|"description": ...}``. Provenance goes to ``source_activity_session``.
        """
        activity_session_id = check_text("activity_session_id", activity_session_id, required=True) or ""
        agent_id = check_text("agent_id", agent_id, required=True) or ""
        team_id = check_text("team_id", team_id)
        intent = self._redact(self._check_size("intent", check_text("intent", intent)))
        ts = check_timestamp(timestamp)
        self._check_visibility(visibility, team_id)
        raw = self._check_size("dialogue and events", _activity_text(dialogue, events)) or ""
        if not raw.strip():
            raise InputError("observe() needs a non-empty dialogue or events")
        text, stored = self._scrub(raw)
        extraction = self.extractor.extract(text or "", timestamp=ts)
        key = source_key("activity", agent_id, team_id, activity_session_id, ts.isoformat() if ts else None, raw)
        provenance = Provenance(
            source_key=key,
            session_id=activity_session_id,
            user_message=stored,
            activity_session=activity_session_id,
            message_ts=ts,
        )
        facts, queued, duplicate = self._store_extraction(
            extraction,
            provenance,
            agent_id=agent_id,
            team_id=team_id,
            visibility=visibility,
            kind="activity",
            intent=intent,
            payload={"kind": "activity", "user": stored, "assistant": None},
            wait_for_llm=wait_for_llm,
        )
        return RememberResult(facts=facts, gate=extraction.gate, queued=queued, duplicate=duplicate,
                              extraction=extraction)

    def batch(self) -> AbstractContextManager[None]:
        """Store the :meth:`remember`/:meth:`observe` calls made in this block (in this thread) in one
        transaction, committed when the block ends: far fewer commits for a batch of turns.

        Each call sees the ones before it exactly as if they had been committed (duplicates, supersession).
        A call that raises leaves nothing behind and the others stay; a :class:`DatabaseError` rolls the
        whole block back. Queued LLM work starts after the commit.
        """
        return self.store.unit_of_work()

    def _check_size(self, name: str, text: str | None) -> str | None:
        """``text``, or an InputError when it is longer than ``max_input_chars``: every stage after this one
        is linear, but a 50 MB "message" is a mistake or an attack, and is refused before any work."""
        limit = self.settings.max_input_chars
        if text is not None and len(text) > limit:
            raise InputError(f"{name} is {len(text):,} characters; the limit is {limit:,} "
                             "(FACTFORGE_MAX_INPUT_CHARS)")
        return text

    def _check_visibility(self, visibility: str | None, team_id: str | None) -> None:
        if visibility is None:
            return
        if visibility not in VISIBILITIES:
            raise ValidationError(f"visibility {visibility!r} must be one of {', '.join(VISIBILITIES)}")
        if visibility == "team" and not team_id:
            raise ValidationError("visibility 'team' needs a team_id")

    def _redact_fact(self, fact: Fact) -> Fact | None:
        """A tag-supplied fact (from the already redacted reply) with no secret left in its content or entity
        names, or None in drop mode when it had one (secrets never become memory)."""
        red = self.secrets.redact(fact.content)
        names = tuple(n for n in fact.entities if not self._secret_name(n))
        if not red.count and not has_placeholder(fact.content) and names == fact.entities:
            return fact
        if self.settings.secrets_mode == "drop" and (red.count or has_placeholder(fact.content)):
            return None
        return dataclasses.replace(fact, content=red.text, entities=names)

    def _secret_name(self, name: str) -> bool:
        """Whether an entity name is (or holds) a secret, redacted or not: it is never stored or sent."""
        return has_placeholder(name) or self.secrets.contains_secret(name)

    def _scrub(self, text: str | None) -> tuple[str | None, str | None]:
        """(text to work on, text to store): both redacted; in drop mode the stored one says it was dropped."""
        if text is None:
            return None, None
        red = self.secrets.redact(text)
        if red.count and self.settings.secrets_mode == "drop":
            return red.text, DROPPED
        return red.text, red.text

    def _redact(self, text: str | None) -> str | None:
        return self._scrub(text)[1]

    def _episode_visibility(self, extraction: Extraction, provenance: Provenance, requested: str | None,
                            team_id: str | None) -> str | None:
        """Who may search this turn as an episode; None if it is none (dropped by the gate, or by a secret).

        The user's own words are private unless settings widen that; a turn stored with an explicit
        visibility shares its episode as far as its facts."""
        if not extraction.gate.passed or not provenance.user_message or provenance.user_message == DROPPED:
            return None
        vis = requested or self.settings.episode_visibility
        return "private" if vis == "team" and not team_id else vis

    def _visibility_for(self, fact: Fact, requested: str | None, team_id: str | None) -> str:
        vis = requested or self.settings.default_visibility.get(fact.category, "private")
        if vis == "team" and not team_id:
            return "private"
        return vis

    def _store_extraction(
        self,
        extraction: Extraction,
        provenance: Provenance,
        *,
        agent_id: str,
        team_id: str | None,
        visibility: str | None,
        kind: str,
        payload: dict[str, Any],
        wait_for_llm: bool,
        intent: str | None = None,
        extra_facts: Sequence[Fact] = (),
        extra_entities: Sequence[Entity] = (),
        extra_relationships: Sequence[Relationship] = (),
    ) -> tuple[tuple[StoredFact, ...], bool, bool]:
        # One call is one transaction (inside a batch, a savepoint of it): a crash or a failure leaves none of
        # it behind, so mention counts cannot drift on a redo. A conflict with a concurrent writer redoes it.
        for attempt in range(1, MAX_TX_ATTEMPTS + 1):
            try:
                with self.store.atomic():
                    stored, queued, duplicate, episode = self._write(
                        extraction, provenance, agent_id=agent_id, team_id=team_id, visibility=visibility,
                        kind=kind, payload=payload, intent=intent, extra_facts=extra_facts,
                        extra_entities=extra_entities, extra_relationships=extra_relationships)
                break
            except DatabaseError as exc:
                if attempt == MAX_TX_ATTEMPTS or not self.store.retryable(exc):
                    raise
                logger.info("concurrent write conflict (%s); redoing the call (%d)", exc, attempt)
                time.sleep(0.01 * attempt)
        if duplicate:
            return (), False, True
        if episode is not None and self._background and self._embedder is not None:
            self.store.after_commit(self._kick_embedder)
        if queued:
            # After the commit: the worker (another connection) must see the queue row, and a drain must not
            # hold the batch's transaction open through LLM calls.
            if wait_for_llm:
                self.store.after_commit(self.drain)
            elif self._background and self._llm is not None:
                self.store.after_commit(self._kick_worker)
        return tuple(stored), queued, False

    def _write(
        self,
        extraction: Extraction,
        provenance: Provenance,
        *,
        agent_id: str,
        team_id: str | None,
        visibility: str | None,
        kind: str,
        payload: dict[str, Any],
        intent: str | None,
        extra_facts: Sequence[Fact],
        extra_entities: Sequence[Entity],
        extra_relationships: Sequence[Relationship],
    ) -> tuple[list[StoredFact], bool, bool, str | None]:
        """The writes of one call, inside its transaction: (stored facts, queued, seen before, the turn's
        episode visibility or None)."""
        session_id = provenance.session_id
        if session_id is not None:
            self.store.upsert_session(session_id, kind=kind, agent_id=agent_id, team_id=team_id, intent=intent)
        episode = self._episode_visibility(extraction, provenance, visibility, team_id)
        user_name, assistant_name = payload.get("user_name"), payload.get("assistant_name")
        # The turn's key is taken first, in this transaction: a concurrent call with the same turn (two
        # ingests of one file) waits for it here and then finds it taken, so nothing is counted twice; a
        # crash rolls the key back with everything else, so a redo is exact.
        if not self.store.record_turn(
            provenance.source_key,
            session_id=session_id,
            activity_session=provenance.activity_session,
            agent_id=agent_id,
            team_id=team_id,
            user_message=provenance.user_message,
            assistant_message=provenance.assistant_message,
            message_ts=provenance.message_ts,
            gate_reason=extraction.gate.reason,
            episode=episode,
            user_name=user_name,
            assistant_name=assistant_name,
            entities=[n for n in (user_name, *(e.name for e in extraction.entities)) if n],
            **_spoken_of(provenance.user_message if episode else None, provenance.message_ts),
        ):
            return [], False, True, None
        facts = list(extraction.facts) + list(extra_facts)
        stored = self._save(
            facts,
            # The turn row holds the message (once); facts' sources reference it by source_key.
            dataclasses.replace(provenance, user_message=None, assistant_message=None),
            agent_id=agent_id,
            team_id=team_id,
            visibility=visibility,
            entities=list(extraction.entities) + list(extra_entities),
            relationships=list(extraction.relationships) + list(extra_relationships),
            user_name=user_name,
            assistant_name=assistant_name,
        )
        queued = False
        if extraction.needs_llm:
            assistant_text = payload.get("assistant")
            if assistant_text and self.extractor.gate.is_injection(assistant_text):
                # Injected text never reaches the LLM prompt, whoever wrote it.
                payload = {**payload, "assistant": None}
            # Queued before anything can fail: the LLM works from the queue, never from memory only.
            self.store.enqueue(
                provenance.source_key,
                {
                    **payload,  # user and assistant: redacted (or dropped) at the edge
                    "agent_id": agent_id,
                    "team_id": team_id,
                    "session_id": session_id,
                    "activity_session": provenance.activity_session,
                    "timestamp": provenance.message_ts.isoformat() if provenance.message_ts else None,
                    "visibility": visibility,
                },
            )
            queued = True
            if not extraction.facts and extraction.gate.passed:
                self.store.record_miss(extraction.text, session_id=session_id or provenance.activity_session,
                                       agent_id=agent_id)
        if stored:
            self.store.set_turn_fact_count(provenance.source_key, len(stored))
        return stored, queued, False, episode

    def _save(
        self,
        facts: Sequence[Fact],
        provenance: Provenance,
        *,
        agent_id: str,
        team_id: str | None,
        visibility: str | None,
        entities: Sequence[Entity] = (),
        relationships: Sequence[Relationship] = (),
        user_name: str | None = None,
        assistant_name: str | None = None,
    ) -> list[StoredFact]:
        if not facts and not entities:
            return []
        # Facts the rules imply ("switched from JWT to Clerk" -> "Team uses Clerk"), stored beside them.
        facts = list(facts) + self.store.rules.implied(facts)
        if user_name or assistant_name:
            # "User went to a pottery class" -> "Maria went to ...": after the rules, so they keep one wording.
            facts = name_speakers(facts, user_subject=self.settings.user_subject, user_name=user_name,
                                  assistant_name=assistant_name)
            entities = [*entities, *(Entity(n, "person") for n in (user_name, assistant_name) if n)]
        vectors = self._embed([f.content for f in facts])
        groups: dict[str, list[int]] = {}
        for i, fact in enumerate(facts):
            groups.setdefault(self._visibility_for(fact, visibility, team_id), []).append(i)
        stored: list[StoredFact] = []
        if not groups:  # entities with no fact still count as mentions
            groups = {"private": []}
        # Most private first: the turn's entities and relationships hang on the first scope's fact, and a
        # relationship from a private turn must not become visible through the turn's team or global fact.
        for vis, idx in sorted(groups.items(), key=lambda g: _PRIVATE_FIRST.index(g[0])):
            scope = Scope(agent_id=agent_id, team_id=team_id, visibility=vis)
            stored += self.store.save(
                [facts[i] for i in idx],
                scope,
                provenance,
                entities=entities,
                relationships=relationships,
                embeddings=[vectors[i] for i in idx] if vectors is not None else None,
                embedding_model=getattr(self._embedder, "model", None) if vectors is not None else None,
            )
            entities, relationships = (), ()  # upserted once per call, not once per scope
        return stored

    def _embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        if self._embedder is None or not texts:
            return None
        try:
            return self._embedder.embed(list(texts))
        except EmbedderError as exc:
            logger.warning("embedding failed (%s); facts stored without vectors, run `factforge embed backfill`", exc)
            return None

    # -- the LLM queue -------------------------------------------------------------------------------

    def drain(self, *, limit: int | None = None, progress: Callable[[int], None] | None = None) -> DrainReport:
        """Process due items of the extraction queue with the LLM; failures back off and retry later.

        ``progress`` is called with the number of items processed so far after each one.
        """
        if self._llm is None:
            return DrainReport()
        from .models.llm import LLMRequest, is_transient, merge

        processed = stored_n = failed = retried = 0
        answered = False  # whether the LLM answered any item in this pass
        rejections: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        while limit is None or processed < limit:
            items = self.store.claim_due(1 if limit is None else min(16, limit - processed))
            if not items:
                break
            index = 0
            try:
                for index, item in enumerate(items):
                    processed += 1
                    p = item.payload
                    ts = check_timestamp(p.get("timestamp"))
                    extraction = (
                        self.extractor.extract_turn(p.get("user") or "", p.get("assistant"), timestamp=ts)
                        if p.get("kind") == "turn"
                        else self.extractor.extract(p.get("user") or "", timestamp=ts)
                    )
                    request = LLMRequest(
                        text=self._for_llm(extraction.text) or "",
                        user=self._for_llm(p.get("user")),
                        assistant=self._for_llm(p.get("assistant")),
                        timestamp=ts,
                        hints=extraction.hints,
                        known_entities=tuple(n for n in self.store.known_entities(20, agent_id=p.get("agent_id"),
                                                                                  team_id=p.get("team_id"))
                                             if not self._secret_name(n)),
                    )
                    started = time.perf_counter()
                    try:
                        result = self._llm.extract(request)
                    except LLMError as exc:
                        calls = exc.calls
                        if not calls and not isinstance(exc, LLMUnavailableError):
                            # an LLM that does not itself account for its calls: one failed exchange took place
                            calls = (LLMCall(latency_ms=(time.perf_counter() - started) * 1000, ok=False,
                                             error=str(exc)),)
                        self._record_calls(calls)
                        errors[str(exc)] += 1
                        # A 5xx or timeout after another item of this pass succeeded is this item's own problem
                        # (too long for the model, say): it counts as an attempt, so it cannot stay queued forever.
                        outage = isinstance(exc, LLMUnavailableError) or (is_transient(exc) and not answered)
                        if not outage:
                            status = self.store.fail(item.id, str(exc), self.settings.queue_max_attempts)
                            if status == "failed":
                                failed += 1
                            else:
                                retried += 1
                            if progress is not None:
                                progress(processed)
                            continue
                        # Ollama is down, overloaded (5xx) or too slow: not the item's fault. It goes back
                        # untouched (no attempt counted, retried after a back-off) and the pass stops, so an
                        # outage never turns queued work into 'failed'.
                        for untouched in items[index:]:  # this item and the rest of the claimed batch
                            self.store.release(untouched.id, str(exc))
                        retried += 1
                        logger.warning("LLM unavailable (%s); %s stays queued", exc, item.source_key[:12])
                        return DrainReport(processed, stored_n, failed, retried, dict(rejections), dict(errors),
                                           str(exc))
                    answered = True
                    usage = result.usage
                    self._record_calls(result.calls or (
                        LLMCall(usage.prompt_tokens, usage.output_tokens, usage.latency_ms,
                                rejections=result.rejections),))
                    rejections.update(result.rejections)
                    provenance = Provenance(  # the message itself is in the turn row (see _write)
                        source_key=item.source_key,
                        session_id=p.get("session_id"),
                        activity_session=p.get("activity_session"),
                        message_ts=ts,
                    )
                    # Pattern facts of this turn were stored by remember(); keep only what the LLM adds.
                    new_facts = merge(extraction, result)[len(extraction.facts):]
                    # The facts and the item's 'done' together, or neither. A worker that was too slow (its claim
                    # expired and another worker took the item) stores nothing: 'done' is fenced by the claim.
                    try:
                        with self.store.atomic():
                            saved = self._save(
                                new_facts,
                                provenance,
                                agent_id=p["agent_id"],
                                team_id=p.get("team_id"),
                                visibility=p.get("visibility"),
                                entities=result.entities,
                                relationships=result.relationships,
                                user_name=p.get("user_name"),
                                assistant_name=p.get("assistant_name"),
                            )
                            if not self.store.complete(item.id, attempts=item.attempts):
                                raise _ClaimLost
                    except _ClaimLost:
                        logger.warning("queue item %s was taken by another worker while the LLM answered; "
                                       "this answer is dropped", item.source_key[:12])
                        saved = []
                    stored_n += len(saved)
                    if progress is not None:
                        progress(processed)
            except BaseException:
                # Stopped mid-pass (Ctrl-C, SIGTERM, a database error): the claims go back at once instead of
                # waiting to expire; only a hard kill leaves them to the expiry (Settings.claim_seconds).
                try:
                    self.store.release_claims([i.id for i in items[index:]])
                except DatabaseError as exc:
                    logger.warning("could not give back queue claims (%s); they expire in %.0f s", exc,
                                   self.store.claim_seconds)
                raise
        return DrainReport(processed, stored_n, failed, retried, dict(rejections), dict(errors))

    def _for_llm(self, text: str | None) -> str | None:
        """``text`` cut to ``llm_max_chars`` for the prompt: the rules have read all of it, and a model given
        megabytes only times out (or costs a fortune)."""
        cap = self.settings.llm_max_chars
        if text is None or len(text) <= cap:
            return text
        logger.info("text of %d chars cut to %d for the LLM (FACTFORGE_LLM_MAX_CHARS)", len(text), cap)
        return text[:cap]

    def _record_calls(self, calls: Sequence[LLMCall]) -> None:
        """One ``llm_calls`` row per HTTP call, so a correction retry's tokens and failure are counted."""
        for call in calls:
            self.store.record_llm_call(
                self.settings.llm_model, call.ok, call.prompt_tokens, call.output_tokens, call.latency_ms,
                call.error, rejections=call.rejections,
            )

    def _kick_worker(self) -> None:
        with self._worker_lock:
            if self._worker is not None and self._worker.is_alive():
                return
            self._worker = threading.Thread(target=self._work, name="factforge-llm", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        try:
            self.drain()
        except Exception:  # a background thread must not die silently: the queue keeps the work
            logger.exception("background LLM drain failed; the work stays queued")

    def wait(self, timeout: float | None = None) -> None:
        """Block until the background LLM worker and embedder (if any) are idle."""
        for worker in (self._worker, self._embed_thread):
            if worker is not None:
                worker.join(timeout)

    # -- the background embedder ---------------------------------------------------------------------

    def embed_pending(self, *, batch: int = 64, limit: int | None = None) -> EmbedReport:
        """Embed facts and episodes still without a vector, in batches (see :func:`factforge.models.embed.embed_pending`).

        ``remember()`` leaves episode vectors to this, so it never waits for the model: with ``background``
        a thread calls it after each commit; a worker process can call it on a schedule."""
        if self._embedder is None:
            return EmbedReport()
        return embed_pending(self.store, self._embedder, batch=batch, limit=limit)

    def _kick_embedder(self) -> None:
        with self._worker_lock:
            self._embed_again.set()  # a running pass looks again before it stops
            if self._embed_thread is not None and self._embed_thread.is_alive():
                return
            self._embed_thread = threading.Thread(target=self._embed_loop, name="factforge-embed", daemon=True)
            self._embed_thread.start()

    def _embed_loop(self) -> None:
        try:
            while self._embed_again.is_set() and not self._closed:
                self._embed_again.clear()
                self.embed_pending()
        except Exception:  # the rows keep waiting without a vector: the next pass (or a backfill) embeds them
            logger.exception("background embedding failed; episodes stay BM25-only until the next pass")

    # -- reading -------------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        agent_id: str | None,
        team_id: str | None = None,
        k: int = 10,
        mode: str = "hybrid",
        kinds: Sequence[str] | None = None,
        **filters: Any,
    ) -> list[SearchHit]:
        """Hybrid (vector + BM25) search over the facts and episodes this agent may see.

        ``mode``: "hybrid", "vector" or "bm25". ``kinds``: "fact", "episode" or both (default). Other
        filters: see :func:`factforge.storage.search.search`. Every hit is dated (validity, first/last seen, the
        source's timestamp and session) and says which ``kind`` it is.
        """
        from .storage.search import search

        query = check_text("query", query, required=True) or ""
        return search(self.store, query, agent_id=agent_id, team_id=team_id, k=k, embedder=self._embedder,
                      mode=mode, kinds=kinds, **filters)

    def sources(self, fact_id: UUID | str, *, agent_id: str | None = None,
                team_id: str | None = None) -> list[dict[str, Any]]:
        """Where a fact was said, oldest first: session, time, speaker and the message.

        Give the caller's ``agent_id``/``team_id``: a message from another agent's private turn (behind a
        team or global fact) is then shown only as the evidence sentence the fact came from. Without a scope
        every message is shown (the analyst's view).
        """
        return self.store.sources(fact_id, agent_id=agent_id, team_id=team_id)

    def facts(self, *, agent_id: str | None, team_id: str | None = None, **filters: Any) -> list[StoredFact]:
        """List the facts this agent may see, newest first."""
        return self.store.facts(agent_id=agent_id, team_id=team_id, **filters)

    def forget(self, *, dry_run: bool = False, **selector: Any) -> int:
        """Delete facts by id, agent, session or filter; returns how many (would be) deleted."""
        return self.store.forget(dry_run=dry_run, **selector)

    def stats(self) -> dict[str, Any]:
        """Counts: facts by category and method, queue depth, LLM calls and tokens, misses."""
        return self.store.stats()

    def close(self) -> None:
        """Wait for background work and release the database connections."""
        if self._closed:
            return
        self._closed = True
        self.wait(timeout=self.settings.llm_timeout)
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def turn_key(user: str, assistant: str | None, agent_id: str, team_id: str | None, session_id: str | None,
             timestamp: datetime | None, user_name: str | None = None, assistant_name: str | None = None) -> str:
    """The stable key of one conversation turn: a re-run finds the same key and skips the turn. Speaker
    names are part of it only when given, so keys of turns without names stay what they were."""
    names = (user_name or "", assistant_name or "") if user_name or assistant_name else ()
    return source_key("turn", agent_id, team_id, session_id, timestamp.isoformat() if timestamp else None, user,
                      assistant, *names)


class _ClaimLost(Exception):
    """Rolls back a queue item's facts when its claim expired before they were stored."""


def _activity_text(dialogue: Sequence[Mapping[str, str] | str] | str | None,
                   events: Sequence[Mapping[str, Any] | str] | None) -> str:
    """The text of an activity session; anything but the documented shapes is an :class:`InputError`."""
    lines: list[str] = []
    if isinstance(dialogue, str):
        lines.append(check_text("dialogue", dialogue) or "")
    elif dialogue is not None:
        for i, turn in enumerate(_as_list("dialogue", dialogue, "a string or a list of {speaker, text}")):
            if isinstance(turn, str):
                lines.append(check_text(f"dialogue[{i}]", turn) or "")
                continue
            if not isinstance(turn, Mapping) or not isinstance(turn.get("text"), str):
                raise InputError(f"dialogue[{i}] must be a string or an object with a string 'text'")
            # The speaker's words only: "Name:" prefixes would make every line look like dialogue metadata.
            lines.append(check_text(f"dialogue[{i}].text", turn["text"]) or "")
    for i, event in enumerate(_as_list("events", events, "a list of strings or objects") if events is not None else ()):
        if isinstance(event, str):
            lines.append(check_text(f"events[{i}]", event) or "")
        elif isinstance(event, Mapping):
            text = event.get("text") or event.get("description")
            if not isinstance(text, str):
                raise InputError(f"events[{i}] needs a string 'text' or 'description'")
            lines.append(check_text(f"events[{i}].text", text) or "")
        else:
            raise InputError(f"events[{i}] must be a string or an object, got {type(event).__name__}")
    return "\n".join(line.strip() for line in lines if line.strip())


def _spoken_of(text: str | None, ts: datetime | None) -> dict[str, datetime | None]:
    """The time an episode speaks of ("yesterday" said on 8 May: 7 May), resolved like a fact's validity."""
    from .rules.temporal import find_anchor

    anchor = find_anchor(text, ts) if text and ts is not None else None
    if anchor is None:
        return {}
    return {"valid_from": anchor.valid_from, "valid_to": anchor.valid_to}


def _as_list(name: str, value: object, expected: str) -> Sequence[Any]:
    # A JSON line can put anything here: a number, true, a string or an object is not a list of items
    # (iterating a string or a dict would silently turn characters or keys into events).
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise InputError(f"{name} must be {expected}, got {type(value).__name__}")
    return value


def _in_thread(method: Callable[Concatenate[Memory, P], T]) -> Callable[Concatenate[AsyncMemory, P], Awaitable[T]]:
    """An async method of :class:`AsyncMemory` running ``method`` of its :class:`Memory` in a worker thread.

    ``functools.wraps`` and ``ParamSpec`` carry the exact signature and docstring over, so the async API
    can never drift from the sync one.
    """

    @wraps(method)
    async def run(self: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await asyncio.to_thread(method, self._memory, *args, **kwargs)

    return run


class AsyncMemory:
    """The asyncio face of :class:`Memory`: same code, each call run in a worker thread.

    Database and extraction work is blocking; running the one implementation in ``asyncio.to_thread``
    keeps a single code path instead of a copied async one. Every method takes the arguments of the
    :class:`Memory` method of the same name.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        settings: Settings | None = None,
        llm: Any = "auto",
        embedder: Any = "auto",
        background: bool = True,
    ) -> None:
        self._memory = Memory(url, settings=settings, llm=llm, embedder=embedder, background=background)

    @property
    def memory(self) -> Memory:
        """The synchronous :class:`Memory` underneath."""
        return self._memory

    remember = _in_thread(Memory.remember)
    observe = _in_thread(Memory.observe)
    search = _in_thread(Memory.search)
    sources = _in_thread(Memory.sources)
    embed_pending = _in_thread(Memory.embed_pending)
    facts = _in_thread(Memory.facts)
    forget = _in_thread(Memory.forget)
    drain = _in_thread(Memory.drain)
    wait = _in_thread(Memory.wait)
    stats = _in_thread(Memory.stats)
    close = _in_thread(Memory.close)

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
