"""The write path of one call: what the rules extracted becomes a turn, facts, queued LLM work and a miss.

:meth:`Writer.write` takes a :class:`WriteRequest` and returns a :class:`WriteResult`, in one transaction
(inside a batch, a savepoint of it): a crash or a failure leaves none of it behind, so mention counts cannot
drift on a redo, and a conflict with a concurrent writer redoes it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import DatabaseError, EmbedderError
from .redaction import DROPPED
from .rules.extract import Extractor
from .rules.lifecycle import SupersessionRules
from .rules.names import name_speakers
from .settings import VISIBILITIES, Settings, within
from .storage.facts import MAX_TX_ATTEMPTS
from .storage.records import Provenance, Scope, StoredFact
from .storage.store import Store
from .types import Entity, Extraction, Fact, Relationship

logger = logging.getLogger("factforge.memory")

__all__ = ["WriteRequest", "WriteResult", "Writer"]

_PRIVATE_FIRST = VISIBILITIES  # ("private", "team", "global")


@dataclass(frozen=True, slots=True)
class WriteRequest:
    """One call's extraction and where it came from, to be stored.

    ``kind``: the session's kind ("conversation" or "activity"). ``payload``: the queue item's text fields
    (``user``, ``assistant``: redacted or dropped at the edge; speaker names). ``extra_*``: what inline tags
    supplied besides the extraction."""

    extraction: Extraction
    provenance: Provenance
    agent_id: str
    team_id: str | None
    visibility: str | None
    kind: str
    payload: Mapping[str, Any]
    max_visibility: str | None = None
    intent: str | None = None
    extra_facts: Sequence[Fact] = ()
    extra_entities: Sequence[Entity] = ()
    extra_relationships: Sequence[Relationship] = ()


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What one write did: the facts stored, whether LLM work was queued, whether the turn was seen before
    (then nothing was written), and the turn's episode visibility (None: the turn is no episode)."""

    facts: tuple[StoredFact, ...] = ()
    queued: bool = False
    duplicate: bool = False
    episode: str | None = None


class Writer:
    """Stores what the rules (and later the LLM) extracted: the write half of :class:`~factforge.memory.Memory`.

    ``embedder`` returns the current embedder (or None), so a memory's embedder can change after this is made.
    """

    def __init__(self, store: Store, settings: Settings, extractor: Extractor, supersession: SupersessionRules,
                 embedder: Callable[[], Any]) -> None:
        self.store = store
        self.settings = settings
        self.extractor = extractor
        self.supersession = supersession
        self._embedder = embedder

    def write(self, request: WriteRequest) -> WriteResult:
        """Store one call in one transaction, redone on a conflict with a concurrent writer."""
        for attempt in range(1, MAX_TX_ATTEMPTS + 1):
            try:
                with self.store.atomic():
                    return self._write(request)
            except DatabaseError as exc:
                if attempt == MAX_TX_ATTEMPTS or not self.store.retryable(exc):
                    raise
                logger.info("concurrent write conflict (%s); redoing the call (%d)", exc, attempt)
                time.sleep(0.01 * attempt)
        raise AssertionError("unreachable")

    def _write(self, req: WriteRequest) -> WriteResult:
        """The writes of one call, inside its transaction."""
        extraction, provenance = req.extraction, req.provenance
        episode = self.episode_visibility(extraction, provenance, req.visibility, req.team_id, req.max_visibility)
        user_name, assistant_name = req.payload.get("user_name"), req.payload.get("assistant_name")
        # The facts as they will be stored, known before the turn is recorded: the turn row gets its fact
        # count at once (store.save returns one stored fact or mention per fact), not in an UPDATE after.
        facts, entities = self._complete(list(extraction.facts) + list(req.extra_facts),
                                         list(extraction.entities) + list(req.extra_entities),
                                         user_name=user_name, assistant_name=assistant_name)
        queued = extraction.needs_llm
        # The turn, its LLM work and its miss in one statement; with no facts or entities to store after it, that
        # statement is the call's only one (the store may then send it without a BEGIN and a COMMIT).
        if not self._record_turn(req, episode, len(facts), self._queue_work(req) if queued else None,
                                 last=not facts and not entities):
            return WriteResult(duplicate=True)
        stored = self._store(
            facts,
            # The turn row holds the message (once); facts' sources reference it by source_key.
            dataclasses.replace(provenance, user_message=None, assistant_message=None),
            agent_id=req.agent_id,
            team_id=req.team_id,
            visibility=req.visibility,
            max_visibility=req.max_visibility,
            entities=entities,
            relationships=list(extraction.relationships) + list(req.extra_relationships),
        )
        return WriteResult(tuple(stored), queued, False, episode)

    def _record_turn(self, req: WriteRequest, episode: str | None, fact_count: int,
                     work: tuple[dict[str, Any], str | None] | None, *, last: bool) -> bool:
        """Take the turn's key (and open its session, queue its LLM ``work``), first in this transaction: a
        concurrent call with the same turn (two ingests of one file) waits for it here and then finds it taken,
        so nothing is counted twice; a crash rolls the key back with everything else, so a redo is exact.
        False: the turn was seen before. ``last``: no other statement follows in this call."""
        extraction, provenance = req.extraction, req.provenance
        user_name, assistant_name = req.payload.get("user_name"), req.payload.get("assistant_name")
        return self.store.record_turn(
            provenance.source_key,
            session_id=provenance.session_id,
            activity_session=provenance.activity_session,
            agent_id=req.agent_id,
            team_id=req.team_id,
            user_message=provenance.user_message,
            assistant_message=provenance.assistant_message,
            message_ts=provenance.message_ts,
            gate_reason=extraction.gate.reason,
            fact_count=fact_count,
            episode=episode,
            user_name=user_name,
            assistant_name=assistant_name,
            entities=[n for n in (user_name, *(e.name for e in extraction.entities)) if n],
            **_spoken_of(provenance.user_message if episode else None, provenance.message_ts),
            session_kind=req.kind,
            intent=req.intent,
            queue_item=work[0] if work else None,
            miss=work[1] if work else None,
            last=last,
        )

    def _queue_work(self, req: WriteRequest) -> tuple[dict[str, Any], str | None]:
        """The call's LLM queue item, and the words of its miss when no rule answered an informative message
        (None: no miss). Queued with the turn's key, before anything else can fail: the LLM works from the
        queue, never from memory only."""
        extraction, provenance = req.extraction, req.provenance
        payload = dict(req.payload)
        assistant_text = payload.get("assistant")
        if assistant_text and self.extractor.gate.is_injection(assistant_text):
            # Injected text never reaches the LLM prompt, whoever wrote it.
            payload = {**payload, "assistant": None}
        item = {
            **payload,  # user and assistant: redacted (or dropped) at the edge
            "agent_id": req.agent_id,
            "team_id": req.team_id,
            "session_id": provenance.session_id,
            "activity_session": provenance.activity_session,
            "timestamp": provenance.message_ts.isoformat() if provenance.message_ts else None,
            "visibility": req.visibility,
            "max_visibility": req.max_visibility,
        }
        if not extraction.facts and extraction.gate.passed:
            # The miss keeps the words for rule authors, unless drop mode dropped the message they came from.
            return item, DROPPED if provenance.user_message == DROPPED else extraction.text
        return item, None

    def save(
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
        max_visibility: str | None = None,
    ) -> list[StoredFact]:
        """Store facts (and the facts they imply) in the scopes their categories get, most private first, none
        wider than ``max_visibility``."""
        facts, entities = self._complete(facts, entities, user_name=user_name, assistant_name=assistant_name)
        return self._store(facts, provenance, agent_id=agent_id, team_id=team_id, visibility=visibility,
                           max_visibility=max_visibility, entities=entities, relationships=relationships)

    def _complete(self, facts: Sequence[Fact], entities: Sequence[Entity], *, user_name: str | None,
                  assistant_name: str | None) -> tuple[list[Fact], list[Entity]]:
        """The facts to store: with the facts the rules imply ("switched from JWT to Clerk" -> "Team uses
        Clerk") and in the speakers' names ("User went to a pottery class" -> "Maria went to ..."), after the
        rules so they keep one wording; the speakers become entities."""
        if not facts and not entities:
            return [], []
        facts = list(facts) + self.supersession.implied(facts)
        entities = list(entities)
        if user_name or assistant_name:
            facts = name_speakers(facts, user_subject=self.settings.user_subject, user_name=user_name,
                                  assistant_name=assistant_name)
            entities += [Entity(n, "person") for n in (user_name, assistant_name) if n]
        return facts, entities

    def _store(self, facts: list[Fact], provenance: Provenance, *, agent_id: str, team_id: str | None,
               visibility: str | None, max_visibility: str | None, entities: Sequence[Entity],
               relationships: Sequence[Relationship]) -> list[StoredFact]:
        """Store completed facts: one stored fact (or mention) per fact, in the order given by scope."""
        if not facts and not entities:
            return []
        vectors = self._vectors(facts)
        groups: dict[str, list[int]] = {}
        for i, fact in enumerate(facts):
            groups.setdefault(self.visibility_for(fact, visibility, team_id, max_visibility), []).append(i)
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
                embedding_model=getattr(self._embedder(), "model", None) if vectors is not None else None,
            )
            entities, relationships = (), ()  # upserted once per call, not once per scope
        return stored

    def _vectors(self, facts: Sequence[Fact]) -> list[list[float] | None] | None:
        """The facts' vectors, or None for a fact left to the background embedder. With ``FACTFORGE_EMBED_IN=worker``
        only a fact that a similarity rule compares as it is stored (``preference_changed``) is embedded here: the
        model is most of a remember's CPU, and a worker embeds the rest (merging paraphrases as it does)."""
        if self.settings.embed_in == "api":
            every = self._embed([f.content for f in facts])
            return None if every is None else [*every]
        now = [i for i, f in enumerate(facts) if self.supersession.needs_vector(f)]
        vectors = self._embed([facts[i].content for i in now])
        out: list[list[float] | None] = [None] * len(facts)
        for i, vector in zip(now, vectors or ()):
            out[i] = vector
        return out

    def _embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        embedder = self._embedder()
        if embedder is None or not texts:
            return None
        try:
            vectors: list[list[float]] = embedder.embed(list(texts))
            return vectors
        except EmbedderError as exc:
            logger.warning("embedding failed (%s); facts stored without vectors, run `factforge embed backfill`", exc)
            return None

    def episode_visibility(self, extraction: Extraction, provenance: Provenance, requested: str | None,
                           team_id: str | None, widest: str | None = None) -> str | None:
        """Who may search this turn as an episode; None if it is none (dropped by the gate, or by a secret).

        The user's own words are private unless settings widen that; a turn stored with an explicit
        visibility shares its episode as far as its facts; never further than ``widest``."""
        if not extraction.gate.passed or not provenance.user_message or provenance.user_message == DROPPED:
            return None
        return _narrowed(requested or self.settings.episode_visibility, widest, team_id)

    def visibility_for(self, fact: Fact, requested: str | None, team_id: str | None,
                       widest: str | None = None) -> str:
        return _narrowed(requested or self.settings.default_visibility.get(fact.category, "private"), widest,
                         team_id)


def _narrowed(visibility: str, widest: str | None, team_id: str | None) -> str:
    """``visibility`` held to ``widest``; a team scope without a team is the agent's own."""
    vis = within(visibility, widest)
    return "private" if vis == "team" and not team_id else vis


def _spoken_of(text: str | None, ts: datetime | None) -> dict[str, Any]:
    """The time an episode speaks of ("yesterday" said on 8 May: 7 May), resolved like a fact's validity."""
    from .rules.temporal import find_anchor

    anchor = find_anchor(text, ts) if text and ts is not None else None
    if anchor is None:
        return {}
    return {"valid_from": anchor.valid_from, "valid_to": anchor.valid_to}
