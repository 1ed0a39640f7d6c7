"""``factforge worker``: drains the LLM queue and embeds facts stored without a vector, until told to stop.

Any number of workers on any number of machines share one database: a worker claims one queue item at a
time (``FOR UPDATE SKIP LOCKED``), and stores its facts and marks it done in one transaction. A worker that
dies holding an item (killed, machine lost) leaves it claimed; after ``FACTFORGE_QUEUE_CLAIM_SECONDS``
seconds another worker takes it. SIGTERM (and SIGINT) lets the item in hand finish, then the worker exits.
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from typing import Any

from .errors import DatabaseError, EmbedderError, FactforgeError
from .memory import Memory
from .storage.embeddings import EmbedReport

__all__ = ["WorkerReport", "run_worker", "stop_on_signals"]

logger = logging.getLogger("factforge.worker")


@dataclass
class WorkerReport:
    """What a worker did before it stopped."""

    items: int = 0
    facts: int = 0
    failed: int = 0
    retried: int = 0
    embedded: int = 0
    graphs: int = 0  # agent and team graphs built (factforge.storage.graphs)


def run_worker(memory: Memory, stop: threading.Event, *, idle_poll_s: float = 1.0, embed: bool = True,
               max_items: int | None = None) -> WorkerReport:
    """Work until ``stop`` is set (or ``max_items`` queue items are done); returns what was done.

    One queue item per :meth:`Memory.drain` call, so a stop request waits for one item at most. When the
    queue has nothing due, facts without a vector are embedded
    (:func:`factforge.storage.embeddings.embed_pending`), then the worker sleeps ``idle_poll_s``.
    """
    report = WorkerReport()
    # Every rule loaded and every regex compiled before the first claim (RuleSet.warm, seconds on a busy machine),
    # so no claim's clock runs while they compile and a live worker never loses an item to the others.
    memory.extractor.rules.warm()
    embedder = memory._embedder if embed else None
    while not stop.is_set() and (max_items is None or report.items < max_items):
        try:
            done = memory.drain(limit=1)
        except (DatabaseError, EmbedderError) as exc:  # the database restarting, a failover: wait, go on
            logger.warning("worker: %s; retrying in %.0fs", exc, idle_poll_s)
            stop.wait(idle_poll_s)
            continue
        report.items += done.processed
        report.facts += done.stored_facts
        report.failed += done.failed
        report.retried += done.retried_later
        if done.processed and not done.retried_later:
            continue  # more may be due: no sleep between items
        if embedder is not None:
            embedded = _backfill(memory, embedder)
            report.embedded += embedded.total
            report.graphs += _graphs(memory, embedded.private_agents, embedded.team_owners)
            if embedded.total >= _EMBED_PASS:
                continue  # a full pass: more rows wait (API processes with FACTFORGE_EMBED_IN=worker under load)
        stop.wait(idle_poll_s)
    return report


_EMBED_PASS = 512  # rows per idle pass, so a long backlog does not keep the queue waiting


def _backfill(memory: Memory, embedder: Any) -> EmbedReport:
    from .storage import embeddings

    try:
        # Facts and episodes stored without a vector (episodes always are: remember() leaves them to this).
        return embeddings.embed_pending(memory.store, embedder, limit=_EMBED_PASS)
    except FactforgeError as exc:
        logger.warning("worker: embedding backfill failed (%s); next time", exc)
        return EmbedReport()


def _graphs(memory: Memory, agents: frozenset[tuple[str, str]],
            teams: frozenset[tuple[str, str]] = frozenset()) -> int:
    """Graphs of their own for the agents and teams whose rows were just embedded, once they have enough
    (``FACTFORGE_AGENT_GRAPH_MIN_ROWS``, ``FACTFORGE_TEAM_GRAPH_MIN_ROWS``; 0: never); returns how many were
    built."""
    settings = memory.settings
    agents = agents if settings.agent_graph_min_rows > 0 else frozenset()
    teams = teams if settings.team_graph_min_rows > 0 else frozenset()
    if not agents and not teams:
        return 0
    try:
        built = memory.store.build_graphs(min_rows=settings.agent_graph_min_rows,
                                          team_min_rows=settings.team_graph_min_rows, agents=agents, teams=teams)
    except FactforgeError as exc:
        logger.warning("worker: building vector graphs failed (%s); next time", exc)
        return 0
    for b in built:
        logger.info("worker: built the vector graph of %s %r in %s (%d rows, %.1fs)", b.kind, b.owner, b.table,
                    b.rows, b.seconds)
    return len(built)


def stop_on_signals(stop: threading.Event) -> None:
    """Set ``stop`` on SIGTERM or SIGINT (the item in hand is finished first)."""

    def handler(signum: int, _frame: Any) -> None:
        logger.warning("worker: %s received, finishing the item in hand", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)

