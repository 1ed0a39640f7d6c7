"""A memory's background threads: the LLM worker (drains the extraction queue) and the embedder (vectors for
the rows stored without one). Each runs while there is work, one of each at a time; neither dies silently."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger("factforge.memory")

__all__ = ["Background", "EMBED_GATHER_S", "EMBED_GATHER_N"]

# How long the background embedder gathers episodes before a pass (how much later they become vector-findable),
# unless EMBED_GATHER_N are waiting by then. The local model's CPU per text falls with the batch: ~12 ms alone,
# 9 in a pair, 7 in four, 6.5 from eight on (16-token texts on this 2-core machine, loaded); under load a tenth
# of a second gathered two to six turns per process.
EMBED_GATHER_S = 0.5
EMBED_GATHER_N = 16


class Background:
    """Runs ``drain`` and ``embed`` in daemon threads when kicked; ``stopped`` says the owner is closing (the
    embedder then stops after its pass)."""

    def __init__(self, drain: Callable[[], object], embed: Callable[[], object], stopped: Callable[[], bool]) -> None:
        self._drain = drain
        self._embed = embed
        self._stopped = stopped
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()
        self._embed_thread: threading.Thread | None = None
        self._embed_again = threading.Event()
        self._kicks = 0  # episodes committed since the last pass began
        self._enough = threading.Event()  # EMBED_GATHER_N of them

    def kick_worker(self) -> None:
        with self._lock:
            self._worker = _running(self._worker, self._work, "factforge-llm")

    def _work(self) -> None:
        try:
            self._drain()
        except Exception:  # a background thread must not die silently: the queue keeps the work
            logger.exception("background LLM drain failed; the work stays queued")

    def kick_embedder(self) -> None:
        with self._lock:
            self._kicks += 1
            if self._kicks >= EMBED_GATHER_N:
                self._enough.set()
            self._embed_again.set()  # a running pass looks again before it stops
            self._embed_thread = _running(self._embed_thread, self._embed_loop, "factforge-embed")

    def _embed_loop(self) -> None:
        try:
            while self._embed_again.is_set() and not self._stopped():
                # Under load turns come faster than the model embeds them one by one: a moment's wait (cut short
                # once enough have come) lets one call take many.
                self._enough.wait(EMBED_GATHER_S)
                with self._lock:
                    self._kicks = 0
                    self._enough.clear()
                    self._embed_again.clear()
                self._embed()
        except Exception:  # the rows keep waiting without a vector: the next pass (or a backfill) embeds them
            logger.exception("background embedding failed; episodes stay BM25-only until the next pass")

    def wait(self, timeout: float | None = None) -> None:
        """Block until the LLM worker and the embedder (if any) are idle."""
        for worker in (self._worker, self._embed_thread):
            if worker is not None:
                worker.join(timeout)


def _running(thread: threading.Thread | None, target: Callable[[], None], name: str) -> threading.Thread:
    """``thread`` if it is still running, else a new daemon thread running ``target``, started."""
    if thread is not None and thread.is_alive():
        return thread
    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread
