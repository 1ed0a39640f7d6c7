"""Embedders: the local ONNX model, the Ollama one through the fake server, backfill and reset."""

from __future__ import annotations

import math
from pathlib import Path

import psycopg
import pytest

from factforge.models.embed import CachedEmbedder, LocalEmbedder, OllamaEmbedder, make_embedder
from factforge.storage.embeddings import backfill, reset_embeddings
from factforge.errors import EmbedderError, EmbeddingMismatchError
from factforge.settings import Settings
from factforge.memory import open_store
from factforge.storage.store import Provenance, Scope, Store
from factforge.types import Explanation, Fact
from tests.fake_ollama import FakeOllama


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def test_local_embedder_is_normalised_and_semantic() -> None:
    e = LocalEmbedder()
    a, b, c = e.embed(["Team switched from JWT to Clerk", "The team moved its login to Clerk",
                       "User loves baking cookies"])
    assert len(a) == 384 and math.isclose(_cos(a, a), 1.0, rel_tol=1e-4)
    assert _cos(a, b) > _cos(a, c) + 0.3
    assert e.embed([]) == []


def test_concurrent_calls_share_runs_and_get_the_vectors_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls made while the runs allowed at once are busy wait and share one run: each still gets its texts'
    vectors, bit for bit those of a call alone, and a failed run fails every call that shared it."""
    import threading

    e = LocalEmbedder()
    texts = [["Team uses Clerk"], ["User prefers tabs over spaces in every project", "User's dog is Rex"], ["tea"],
             ["I deploy on Fridays and the pipeline takes forty minutes"], ["Team switched from JWT to Clerk"]]
    alone = [e.embed(t) for t in texts]
    runs: list[int] = []
    inner = e._run
    gate = threading.Event()

    def counted(batch: list[str]) -> list[list[float]]:
        runs.append(len(batch))
        gate.wait(5)  # the first run holds on until every other call waits for it
        return inner(batch)

    e._run = counted  # type: ignore[method-assign]
    monkeypatch.setattr("factforge.models.embed.SHARED_RUNS", 1)
    got: dict[int, list[list[float]]] = {}
    threads = [threading.Thread(target=lambda i=i: got.__setitem__(i, e.embed(texts[i]))) for i in range(len(texts))]
    for t in threads:
        t.start()
    while len(e._waiting) < len(texts) - 1:
        threading.Event().wait(0.01)
    gate.set()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(texts))] == alone
    assert len(runs) == 2 and sorted(runs)[0] <= 2  # the first call alone, then all the others in one run

    def broken(batch: list[str]) -> list[list[float]]:
        raise EmbedderError("local embedding failed: boom")

    e._run = broken  # type: ignore[method-assign]
    with pytest.raises(EmbedderError, match="boom"):
        e.embed(["x"])
    e._run = inner  # type: ignore[method-assign]
    assert e.embed(texts[0]) == alone[0]


def test_runs_at_once_never_lose_a_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """With two runs at once, a call another run has taken is waited for, never run again or left unanswered."""
    import threading
    import time

    e = LocalEmbedder()
    e.embed(["load the model"])
    monkeypatch.setattr("factforge.models.embed.SHARED_RUNS", 2)

    def fake(batch: list[str]) -> list[list[float]]:
        time.sleep(0.001)
        return [[float(len(t))] for t in batch]

    e._run = fake  # type: ignore[method-assign]
    wrong: list[str] = []

    def caller(c: int) -> None:
        for j in range(40):
            texts = ["x" * (c * 100 + j + k) for k in range(1 + j % 3)]
            try:
                if e.embed(texts) != [[float(len(t))] for t in texts]:
                    wrong.append(f"{c}/{j}")
            except Exception as exc:  # noqa: BLE001 - a thread's failure is reported by the assertion below
                wrong.append(f"{c}/{j}: {exc!r}")

    threads = [threading.Thread(target=caller, args=(c,)) for c in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == [] and e._running == 0 and e._waiting == []


def test_ollama_embedder_through_the_client(tmp_path: Path) -> None:
    with FakeOllama(embed_dim=768) as fake:
        s = Settings.from_env({"OLLAMA_HOST": fake.url, "FACTFORGE_EMBEDDER": "ollama",
                               "FACTFORGE_HOME": str(tmp_path)})
        e = make_embedder(s)
        assert isinstance(e, OllamaEmbedder) and e.dim == 768
        v = e.embed(["a", "b"])
        assert len(v) == 2 and len(v[0]) == 768
        down = OllamaEmbedder(s.with_(ollama_host="http://127.0.0.1:9"))
        with pytest.raises(EmbedderError, match="nomic-embed-text"):
            down.embed(["c"])
        wrong = OllamaEmbedder(s.with_(embed_dim=384))
        with pytest.raises(EmbeddingMismatchError):
            wrong.embed(["d"])


def test_backfill_then_reset_to_another_dimension(db_url: str, tmp_path: Path) -> None:
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)})
    store = open_store(settings)
    f = Fact("Team uses Redis", "technology", 0.9, "pattern", Explanation("pattern", "r", 0.9, 0.9))
    store.save([f], Scope("a", "t", "team"), Provenance("k"))
    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://")
    try:
        assert backfill(db_url, LocalEmbedder()) == 1
        with FakeOllama(embed_dim=768) as fake:
            big = OllamaEmbedder(settings.with_(ollama_host=fake.url, embed_model="nomic-embed-text", embed_dim=768))
            assert reset_embeddings(db_url, big) == 1
            assert backfill(db_url, big) == 1
        with psycopg.connect(conninfo) as conn:
            assert conn.execute("SELECT vector_dims(embedding), embedding_model FROM facts").fetchone() == (
                768, "nomic-embed-text")
            # the graph is remade for the new dimension, as search walks it (migration 0013's expression)
            assert [r[0] for r in conn.execute("SELECT indexdef FROM pg_indexes WHERE indexdef LIKE '%hnsw%' "
                                               "AND tablename = 'facts'")] == [
                "CREATE INDEX facts_embedding_global_hnsw ON public.facts USING hnsw "
                "(((embedding)::halfvec(768)) halfvec_cosine_ops) WITH (m='16', ef_construction='800') "
                "WHERE (visibility = 'global'::text)"]
            # the column was made anew: its vectors stay in their rows all the same (migration 0022)
            assert conn.execute("SELECT attstorage FROM pg_attribute WHERE attname = 'embedding' "
                                "AND attrelid IN ('facts'::regclass, 'turns'::regclass)").fetchall() == [("m",), ("m",)]
            # the private vectors' insert trigger names the column (migration 0028): made again for the new type
            assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname IN "
                                "('facts_private_vectors_ins', 'turns_private_vectors_ins')").fetchone() == (2,)
            # 768 numbers do not fit a btree entry beside the agent: the agent's index holds the agent only
            assert "INCLUDE" not in conn.execute("SELECT indexdef FROM pg_indexes "
                                                 "WHERE indexname = 'facts_private_agent_idx'").fetchone()[0]
    finally:
        # put the shared test schema back to 384 dimensions
        reset_embeddings(db_url, LocalEmbedder())
        store.close()
    with psycopg.connect(conninfo) as conn:
        assert conn.execute("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").fetchone() == ("384",)
        assert "INCLUDE (id, visibility, team_id, superseded_at, embedding)" in conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'facts_private_agent_idx'").fetchone()[0]


def test_same_dimension_other_model_is_refused_not_mixed(db_url: str, tmp_path: Path) -> None:
    # all-minilm (Ollama) and the local MiniLM both make 384 dimensions, but their vectors are not comparable
    other = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                               "FACTFORGE_EMBEDDER": "ollama", "FACTFORGE_EMBED_MODEL": "all-minilm",
                               "FACTFORGE_EMBED_DIM": "384"})
    with pytest.raises(EmbeddingMismatchError, match="embed reset") as info:
        Store.open(other)
    assert "downgrade" not in str(info.value)  # the advice keeps the facts
    Store.open(other, check_embedder=False).close()  # what `factforge embed reset` does


class _Counting:
    model, dim = "counting", 3

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.asked.append(list(texts))
        return [[float(len(t)), 0.5, -1.0] for t in texts]


def test_cached_embedder_embeds_each_text_once_and_forgets_the_least_recent() -> None:
    inner = _Counting()
    cached = CachedEmbedder(inner, size=2)
    assert cached.model == "counting" and cached.dim == 3
    assert cached.embed(["ab", "c"]) == [[2.0, 0.5, -1.0], [1.0, 0.5, -1.0]]
    assert cached.embed(["c", "xyz", "ab", "xyz"]) == [[1.0, 0.5, -1.0], [3.0, 0.5, -1.0], [2.0, 0.5, -1.0],
                                                       [3.0, 0.5, -1.0]]
    assert inner.asked == [["ab", "c"], ["xyz"]]  # misses only, each once, in one call
    # Kept: the two most recently used, 'ab' and 'xyz'; 'c' went and is embedded again.
    cached.embed(["ab", "xyz"])
    assert len(inner.asked) == 2
    cached.embed(["c"])
    assert inner.asked[-1] == ["c"] and len(inner.asked) == 3
    assert cached.embed([]) == []


def test_memory_embeds_a_repeated_query_once(db_url: str, tmp_path: Path) -> None:
    from factforge.memory import Memory

    s = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off"})
    with Memory(settings=s, llm=None, background=False) as m:
        m.remember(user="We switched from JWT to Clerk for authentication", agent_id="a")
        first = m.search("login provider", agent_id="a")
        misses = m._embedder.misses
        assert m.search("login provider", agent_id="a") == first
        assert m._embedder.misses == misses and m._embedder.hits >= 1


def test_embed_commands_backfill_and_reset_through_the_cli(db_url: str, tmp_path: Path) -> None:
    import os

    from tests.clirun import run_cli

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)})
    store = open_store(settings)
    f = Fact("Team uses Redis", "technology", 0.9, "pattern", Explanation("pattern", "r", 0.9, 0.9))
    store.save([f], Scope("a", "t", "team"), Provenance("k"))
    store.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FACTFORGE_", "OLLAMA_"))}
    env["FACTFORGE_HOME"] = str(tmp_path)

    def cli(*args: str, **extra: str) -> str:
        done = run_cli("--database-url", db_url, "embed", *args, environ={**env, **extra})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    try:
        assert cli("backfill") == "embedded 1 fact(s) and 0 episode(s) with all-MiniLM-L6-v2-int8"
        assert cli("backfill") == "embedded 0 fact(s) and 0 episode(s) with all-MiniLM-L6-v2-int8"
        with FakeOllama(embed_dim=768) as fake:
            # another model's vectors: only `reset` opens the database (it re-makes them)
            assert cli("reset", OLLAMA_HOST=fake.url, FACTFORGE_EMBEDDER="ollama", FACTFORGE_EMBED_MODEL=
                       "nomic-embed-text", FACTFORGE_EMBED_DIM="768") == \
                "embedded 1 fact(s) and 0 episode(s) with nomic-embed-text"
    finally:
        assert cli("reset") == "embedded 1 fact(s) and 0 episode(s) with all-MiniLM-L6-v2-int8"
