"""The library's front door: a :class:`Memory` bound to one database.

Data flows one way: text -> extraction (gate, patterns, NER; no database) -> store; what the rules could not
answer is put in the extraction queue *before* anything else happens, so a crash, an unreachable Ollama or a
broken reply never loses it. The LLM works from the queue, in a background thread or through :meth:`drain`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from functools import cached_property, wraps
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar
from uuid import UUID

from .background import Background
from .draining import Drainer, DrainReport
from .errors import ConfigError, EmbedderError, InputError
from .inputs import check_text, check_timestamp, source_key
from .redaction import DROPPED, Redactor
from .rules.extract import Extractor
from .rules.inline import parse_inline
from .rules.load import RuleSet, default_rules
from .rules.temporal import asked_period, when_said
from .settings import DEFAULT_AGENT_GRAPH_MIN_ROWS, DEFAULT_TEAM_GRAPH_MIN_ROWS, Settings, get_settings
from .storage.embeddings import EmbedReport, embed_pending
from .storage.graphs import GraphBuild
from .storage.keys import KeyStore
from .storage.store import Miss, Provenance, Store, StoredFact
from .types import Entity, Extraction, Fact, GateDecision, Relationship
from .writing import WriteRequest, WriteResult, Writer

if TYPE_CHECKING:
    from .storage.search import SearchHit

logger = logging.getLogger("factforge.memory")

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


# What a call answers for a turn (or activity) already stored: a re-run stores nothing.
SEEN_BEFORE = RememberResult(facts=(), gate=GateDecision(True, None, "seen before"), queued=False, duplicate=True)


@dataclass(frozen=True, slots=True)
class _Inline:
    """What the inline tags of an assistant reply supplied (see :meth:`Memory._inline`)."""

    clean_reply: str | None = None
    skipped: tuple[tuple[str, str], ...] = ()
    facts: tuple[Fact, ...] = ()
    entities: tuple[Entity, ...] = ()
    relationships: tuple[Relationship, ...] = ()


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
        check_embedder: bool = True,
    ) -> None:
        """``check_embedder=False``: open a database that holds another embedder's vectors (to
        :meth:`reset_embeddings` it)."""
        self.settings = settings or get_settings()
        if url is not None:
            self.settings = self.settings.with_(database_url=url)
        self.rules = default_rules(self.settings.patterns_dir)  # every rule file, loaded once, passed on
        self.store = open_store(self.settings, check_embedder=check_embedder, rules=self.rules)
        self.supersession = self.rules.supersession
        self.extractor = Extractor(self.settings, rules=self.rules)
        self.secrets = self.rules.secrets
        self._llm = _default_llm(self.settings, self.rules) if llm == "auto" else llm
        self._embedder = _default_embedder(self.settings) if embedder == "auto" else embedder
        self._redactor = Redactor(self.settings, self.secrets)
        self._writer = Writer(self.store, self.settings, self.extractor, self.supersession, lambda: self._embedder)
        self._drainer = Drainer(self.store, self.settings, self.extractor, self._redactor, self._writer,
                                lambda: self._llm)
        self._background = background
        self._closed = False
        self._threads = Background(lambda: self.drain(), lambda: self.embed_pending(), lambda: self._closed)

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
        max_visibility: str | None = None,
    ) -> RememberResult:
        """Extract and store the facts of one conversation turn; returns the stored facts.

        Pattern facts are stored at once. If the rules did not answer the turn, it is queued for the LLM
        (processed in the background, or before returning when ``wait_for_llm`` is true). A turn the gate
        passes is also stored as an *episode* (its redacted words, searchable at once). ``user_name`` /
        ``assistant_name``: who speaks; facts about the user then read "Maria ..." instead of "User ...".
        ``max_visibility``: the widest scope this turn's facts and episode may be shared to (facts that
        ``visibility`` or the settings would share further are stored at it; an explicit wider ``visibility`` is
        an error). The HTTP API and MCP pass their key's limit here.
        """
        guard = self._redactor
        user = guard.check_size("user", check_text("user", user, required=True)) or ""
        assistant = guard.check_size("assistant", check_text("assistant", assistant))
        is_injection = self.extractor.gate.is_injection
        user_name = guard.check_name("user_name", check_text("user_name", user_name), is_injection)
        assistant_name = guard.check_name("assistant_name", check_text("assistant_name", assistant_name), is_injection)
        agent_id = check_text("agent_id", agent_id, required=True) or ""
        team_id = check_text("team_id", team_id)
        session_id = check_text("session_id", session_id)
        ts = check_timestamp(timestamp)
        guard.check_visibility(visibility, team_id, max_visibility)

        # A turn seen before (a re-run) is found when its key is taken, first in the write's transaction, which
        # then writes nothing: no lookup ahead of it, which every new turn would pay for with a round trip.
        key = turn_key(user, assistant, agent_id, team_id, session_id, ts, user_name, assistant_name)

        # Secrets leave at the edge: everything below (inline tags, extraction, sessions, queue, misses, the
        # LLM prompt) only ever sees the redacted text. Drop mode keeps no stored message that had one.
        user_red, user_stored = guard.scrub(user)
        assistant_red, assistant_stored = guard.scrub(assistant)
        inline = _Inline()
        if assistant_red and ("<ff:" in assistant_red or "<vm:" in assistant_red):
            inline = self._inline(assistant_red)
            # Taking the tags out can join the halves of a secret the scan could not see split ("sk-proj-Ab"
            # <ff:entity .../> "3dEf..."): the reply without its tags is scanned again.
            clean_red, clean_stored = guard.scrub(inline.clean_reply)
            assistant_stored = DROPPED if assistant_stored == DROPPED else clean_stored
            assistant_red = clean_red
            inline = replace(inline, clean_reply=clean_red)

        extraction = _extract_turn(self.store, self.extractor, user_red or "", assistant_red, ts, session_id,
                                   agent_id, team_id)
        provenance = Provenance(source_key=key, session_id=session_id, user_message=user_stored,
                                assistant_message=assistant_stored, message_ts=ts)
        result = self._store_extraction(WriteRequest(
            extraction, provenance, agent_id=agent_id, team_id=team_id, visibility=visibility,
            max_visibility=max_visibility, kind="conversation",
            payload={"kind": "turn", "user": user_stored, "assistant": assistant_stored, "user_name": user_name,
                     "assistant_name": assistant_name},
            extra_facts=inline.facts, extra_entities=inline.entities, extra_relationships=inline.relationships,
        ), wait_for_llm=wait_for_llm)
        if result.duplicate:
            return SEEN_BEFORE
        return RememberResult(facts=result.facts, gate=extraction.gate, queued=result.queued,
                              duplicate=False, clean_reply=inline.clean_reply,
                              inline_skipped=inline.skipped, extraction=extraction)

    def _inline(self, reply: str) -> _Inline:
        """The inline tags of an assistant reply (already redacted): the facts, entities and relationships they
        supply, without any that still hold a secret, and the reply without its tags."""
        guard = self._redactor
        parsed = parse_inline(reply, self.rules.gate)
        return _Inline(
            clean_reply=parsed.clean_reply,
            skipped=parsed.skipped,
            facts=tuple(f for f in (guard.redact_fact(x) for x in parsed.facts) if f is not None),
            entities=tuple(e for e in parsed.entities if not guard.secret_name(e.name)),
            relationships=tuple(r for r in parsed.relationships
                                if not guard.secret_name(r.source) and not guard.secret_name(r.target)),
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
        max_visibility: str | None = None,
    ) -> RememberResult:
        """Extract and store the facts of an observed activity session (the observational pathway).

        ``dialogue`` is a list of ``{"speaker", "text"}`` (or one string); ``events`` a list of strings or
        ``{"text"|"description": ...}``. Provenance goes to ``source_activity_session``. ``max_visibility``: as
        for :meth:`remember`.
        """
        activity_session_id = check_text("activity_session_id", activity_session_id, required=True) or ""
        agent_id = check_text("agent_id", agent_id, required=True) or ""
        team_id = check_text("team_id", team_id)
        guard = self._redactor
        intent = guard.redact(guard.check_size("intent", check_text("intent", intent)))
        ts = check_timestamp(timestamp)
        guard.check_visibility(visibility, team_id, max_visibility)
        raw = guard.check_size("dialogue and events", _activity_text(dialogue, events)) or ""
        if not raw.strip():
            raise InputError("observe() needs a non-empty dialogue or events")
        text, stored = guard.scrub(raw)
        extraction = self.extractor.extract(text or "", timestamp=ts)
        key = source_key("activity", agent_id, team_id, activity_session_id, ts.isoformat() if ts else None, raw)
        provenance = Provenance(source_key=key, session_id=activity_session_id, user_message=stored,
                                activity_session=activity_session_id, message_ts=ts)
        result = self._store_extraction(WriteRequest(
            extraction, provenance, agent_id=agent_id, team_id=team_id, visibility=visibility,
            max_visibility=max_visibility, kind="activity",
            intent=intent, payload={"kind": "activity", "user": stored, "assistant": None},
        ), wait_for_llm=wait_for_llm)
        if result.duplicate:
            return SEEN_BEFORE
        return RememberResult(facts=result.facts, gate=extraction.gate, queued=result.queued,
                              duplicate=False, extraction=extraction)

    def batch(self) -> AbstractContextManager[None]:
        """Store the :meth:`remember`/:meth:`observe` calls made in this block (in this thread) in one
        transaction, committed when the block ends: far fewer commits for a batch of turns.

        Each call sees the ones before it exactly as if they had been committed (duplicates, supersession).
        A call that raises leaves nothing behind and the others stay; a :class:`DatabaseError` rolls the
        whole block back. Queued LLM work starts after the commit.
        """
        return self.store.unit_of_work()

    def _store_extraction(self, request: WriteRequest, *, wait_for_llm: bool) -> WriteResult:
        """Write one call (:meth:`Writer.write`), then start what must wait for its commit."""
        result = self._writer.write(request)
        if result.duplicate:
            return WriteResult(duplicate=True)
        if (result.episode is not None and self._background and self.settings.background_embed
                and self.settings.embed_in == "api" and self._embedder is not None):
            self.store.after_commit(self._threads.kick_embedder)
        if result.queued:
            # After the commit: the worker (another connection) must see the queue row, and a drain must not
            # hold the batch's transaction open through LLM calls.
            if wait_for_llm:
                # This call's own item: a caller that waits for its answer must not work off (and wait for)
                # every other agent's queue; the background worker and `factforge worker` do that.
                key = request.provenance.source_key
                self.store.after_commit(lambda: self._drainer.drain(keys=[key]))
            elif self._background and self._llm is not None:
                self.store.after_commit(self._threads.kick_worker)
        return result

    # -- the LLM queue -------------------------------------------------------------------------------

    def drain(self, *, limit: int | None = None, progress: Callable[[int], None] | None = None) -> DrainReport:
        """Process due items of the extraction queue with the LLM; failures back off and retry later.

        ``progress`` is called with the number of items processed so far after each one.
        """
        return self._drainer.drain(limit=limit, progress=progress)

    def wait(self, timeout: float | None = None) -> None:
        """Block until the background LLM worker and embedder (if any) are idle."""
        self._threads.wait(timeout)

    # -- the background embedder ---------------------------------------------------------------------

    def embed_pending(self, *, batch: int = 64, limit: int | None = None) -> EmbedReport:
        """Embed facts and episodes still without a vector, in batches
        (see :func:`factforge.storage.embeddings.embed_pending`).

        ``remember()`` leaves episode vectors to this, so it never waits for the model: with ``background``
        a thread calls it after each commit; a worker process can call it on a schedule."""
        if self._embedder is None:
            return EmbedReport()
        return embed_pending(self.store, self._embedder, batch=batch, limit=limit)

    def build_graphs(self, *, min_rows: int | None = None) -> list[GraphBuild]:
        """Give every agent with at least ``min_rows`` private facts or episodes with a vector, and every team
        with as many team ones, a vector graph of its own, so that its searches walk that instead of reading
        all of them (see :mod:`factforge.storage.graphs`); returns what was built. By default agents from
        ``FACTFORGE_AGENT_GRAPH_MIN_ROWS`` (else 4,000), teams from ``FACTFORGE_TEAM_GRAPH_MIN_ROWS`` (else
        1,000). ``factforge worker`` does this by itself for the owners whose rows it embeds."""
        if min_rows is not None:
            return self.store.build_graphs(min_rows=min_rows, team_min_rows=min_rows)
        # a setting of 0 stops the worker's builds, not this one
        return self.store.build_graphs(min_rows=self.settings.agent_graph_min_rows or DEFAULT_AGENT_GRAPH_MIN_ROWS,
                                       team_min_rows=self.settings.team_graph_min_rows or DEFAULT_TEAM_GRAPH_MIN_ROWS)

    def reset_embeddings(self) -> int:
        """Switch the stored vectors to this memory's embedder (see
        :func:`factforge.storage.embeddings.reset_embeddings`); :meth:`embed_pending` then re-embeds."""
        if self._embedder is None:
            raise ConfigError("no embedder configured (FACTFORGE_EMBEDDER=none)")
        return self.store.reset_embedding_column(self._embedder.dim, self._embedder.model)

    @cached_property
    def keys(self) -> KeyStore:
        """The API keys of this memory's database (``factforge keys``, the HTTP server's principals)."""
        return KeyStore(self.store.engine, cache_seconds=self.settings.api_key_cache_seconds)

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
        source's timestamp and session, ``when`` in words) and says which ``kind`` it is. A query that names a
        time ("what did I cook in March 2023?", "... last week?") puts first, among its best ``3 k``, what
        happened or was said then.
        """
        from .storage.search import search

        query = check_text("query", query, required=True) or ""
        period = asked_period(query, datetime.now(timezone.utc))
        hits = search(self.store, query, agent_id=agent_id, team_id=team_id, k=_looked_at(k, period),
                      embedder=self._embedder, mode=mode, kinds=kinds, **filters)
        if period is not None:  # what happened or was said then comes first
            hits = sorted(hits, key=lambda hit: not _within(hit, period))[:k]
        return [_dated(hit) for hit in hits]

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

    def queue_counts(self) -> dict[str, int]:
        """Extraction queue items by status: pending, processing, done, failed."""
        return self.store.queue_counts()

    def queue_waiting(self) -> list[dict[str, Any]]:
        """Pending items backing off after an error, grouped by the error (``error``, ``items``, ``next_try_at``)."""
        return self.store.queue_waiting()

    def retry_failed(self) -> int:
        """Put every failed queue item back in the queue; returns how many."""
        return self.store.retry_failed()

    def top_misses(self, n: int = 20) -> list[Miss]:
        """The informative messages no pattern answered, most frequent first (for rule writers)."""
        return self.store.top_misses(n)

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


def _extract_turn(store: Store, extractor: Extractor, user: str, assistant: str | None, ts: datetime | None,
                  session_id: str | None, agent_id: str, team_id: str | None) -> Extraction:
    """The extraction of one (redacted) turn; a bare reply ("yes") of a session reads the assistant message
    before it when the rules ask for it (patterns/turns.yaml)."""
    prior = None
    if session_id is not None and extractor.turns.reads_prior(user):
        prior = store.last_assistant_message(session_id, agent_id=agent_id, team_id=team_id)
    return extractor.extract_turn(user, assistant, timestamp=ts, prior_assistant=prior)


def _default_llm(settings: Settings, rules: RuleSet) -> Any:
    """Ollama as the settings say, or None where they turn the LLM off."""
    if not settings.llm_enabled:
        return None
    from .models.llm import OllamaLLM

    return OllamaLLM(settings, rules=rules)


def _default_embedder(settings: Settings) -> Any:
    """The settings' embedder behind a cache (queries asked again and facts said again are not embedded
    again, see CachedEmbedder); None, with a warning, where it cannot start."""
    from .models.embed import CachedEmbedder, make_embedder

    try:
        inner = make_embedder(settings)
        return CachedEmbedder(inner) if inner is not None else None
    except EmbedderError as exc:
        logger.warning("no embedder (%s); facts are stored without vectors, backfill later", exc)
        return None


def open_store(settings: Settings, *, check_embedder: bool = True, rules: RuleSet | None = None) -> Store:
    """The store, given what the rules decide for it: what a new fact supersedes (patterns/supersession.yaml)
    and the gazetteer's spelling of entity names ("postgres" -> "PostgreSQL", patterns/entities.yaml).
    ``rules``: the rule set to take them from (default: the settings' patterns folder's, loaded when the store
    first needs a decision)."""

    def current() -> RuleSet:
        return rules or default_rules(settings.patterns_dir)

    return Store.open(settings, check_embedder=check_embedder,
                      supersession=lambda fact, has_vector: current().supersession.decide(fact, has_vector),
                      canonical_name=lambda name: current().ner.canonical(name))


def _looked_at(k: Any, period: tuple[datetime, datetime] | None) -> Any:
    """How many hits a search ranks: ``k``, or for a question naming a time ``3 k`` (at least ``k + 20``, at
    most the search's ``MAX_K``), so what happened then can come first. A bad ``k`` goes through as given, to
    be refused by the search."""
    from .storage.search import MAX_K

    if period is None or isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        return k
    return min(max(3 * k, k + 20), MAX_K)


def _within(hit: SearchHit, period: tuple[datetime, datetime]) -> bool:
    """Whether the time ``hit`` speaks of (its validity), or the time it was said, falls in ``period``."""
    first, last = period
    if hit.valid_from is not None and hit.valid_from <= last and (hit.valid_to or hit.valid_from) >= first:
        return True
    return hit.source_ts is not None and first <= hit.source_ts <= last


def _dated(hit: SearchHit) -> SearchHit:
    """``hit`` with ``when``: the time its words speak of, against the day they were said (a fact's evidence
    sentence, an episode's text)."""
    words = hit.evidence or hit.content if hit.kind == "fact" else hit.content
    when = when_said(words, hit.source_ts) if hit.source_ts is not None else None
    return replace(hit, when=when) if when else hit


def turn_key(user: str, assistant: str | None, agent_id: str, team_id: str | None, session_id: str | None,
             timestamp: datetime | None, user_name: str | None = None, assistant_name: str | None = None) -> str:
    """The stable key of one conversation turn: a re-run finds the same key and skips the turn. Speaker
    names are part of it only when given, so keys of turns without names stay what they were."""
    names = (user_name or "", assistant_name or "") if user_name or assistant_name else ()
    return source_key("turn", agent_id, team_id, session_id, timestamp.isoformat() if timestamp else None, user,
                      assistant, *names)


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
