"""Search against a brute-force BM25 oracle computed in Python from the stored tsvectors and statistics."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import psycopg
import pytest

from factforge.errors import ValidationError
from factforge.models.embed import LocalEmbedder
from factforge.storage.search import BM25_B, BM25_K1, MAX_K, search
from factforge.settings import Settings
from factforge.memory import open_store
from factforge.storage.store import Provenance, Scope, Store
from factforge.types import Explanation, Fact

WORDS = ["kafka", "redis", "postgres", "billing", "deploy", "queue", "cache", "metrics", "search", "mobile",
         "payments", "gateway", "cluster", "nightly", "backup", "grafana", "terraform", "alerts", "staging", "api"]
QUERIES = ["kafka billing", "redis cache for the api", "nightly backup of postgres", "terraform staging cluster",
           "grafana alerts", "mobile payments gateway queue", "deploy", "search metrics dashboard"]


def _fact(content: str) -> Fact:
    return Fact(content=content, category="technology", confidence=0.9, method="pattern",
                explanation=Explanation("pattern", "t", 0.9, 0.9), rule_id="t", subject="Team")


@pytest.fixture
def corpus(db_url: str, tmp_path: Path) -> Iterator[Store]:
    rng = random.Random(11)
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    texts = sorted({"Team uses " + " ".join(rng.sample(WORDS, rng.randint(1, 6))) for _ in range(400)})
    for i in range(0, len(texts), 50):
        store.save([_fact(t) for t in texts[i:i + 50]], Scope("a1", "t1", "team"), Provenance(f"k{i}"))
    # the best match for every query, in a scope the searcher may not see
    store.save([_fact("Team uses " + q) for q in QUERIES], Scope("other", "t2", "private"), Provenance("hidden"))
    yield store
    store.close()


def _oracle(db_url: str, query: str, k: int, websearch: bool = False) -> list[tuple[str, float]]:
    """The exact BM25 top ``k`` of a1/t1's current facts; ``websearch``: of those matching the query's operators."""
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        n_docs, total = conn.execute("SELECT n_docs, total_len FROM bm25_corpus WHERE id = 1").fetchone()
        df = dict(conn.execute("SELECT lexeme, df FROM bm25_terms").fetchall())
        terms = {r[0] for r in conn.execute("SELECT lexeme FROM unnest(to_tsvector('english', %s))", (query,))}
        rows = conn.execute(
            "SELECT f.id, u.lexeme, coalesce(array_length(u.positions, 1), 1), length(f.tsv) FROM facts f, "
            "unnest(f.tsv) u WHERE f.superseded_at IS NULL AND (f.visibility = 'global' OR "
            "(f.visibility = 'team' AND f.team_id = 't1') OR (f.visibility = 'private' AND f.agent_id = 'a1'))"
            + (" AND f.tsv @@ websearch_to_tsquery('english', %(q)s)" if websearch else ""), {"q": query}
        ).fetchall()
    avgdl = max(total / max(n_docs, 1), 1)
    scores: dict[str, float] = {}  # by id: the same words may be a fact of several scopes the caller sees
    for fid, lexeme, tf, dl in rows:
        if lexeme in terms:
            idf = math.log(1 + (n_docs - df.get(lexeme, 0) + 0.5) / (df.get(lexeme, 0) + 0.5))
            scores[str(fid)] = scores.get(str(fid), 0.0) + idf * tf * (BM25_K1 + 1) / (
                tf + BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl))
    return sorted(scores.items(), key=lambda kv: -kv[1])[:k]


@pytest.mark.parametrize("categories", [None, ["technology"]], ids=["fact_terms", "facts"])
@pytest.mark.parametrize("query", QUERIES)
def test_bm25_ranks_like_the_oracle_and_stays_scoped(corpus: Store, db_url: str, query: str,
                                                      categories: list[str] | None) -> None:
    # without filters candidates come from the narrow fact_terms; a category filter reads facts itself
    hits = search(corpus, query, agent_id="a1", team_id="t1", mode="bm25", k=10, categories=categories)
    expected = _oracle(db_url, query, 10)
    assert [round(h.bm25_score or 0, 6) for h in hits] == [round(s, 6) for _, s in expected]
    assert [h.bm25_rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(h.agent_id == "a1" and h.team_id == "t1" for h in hits)  # the hidden best matches never show


def test_hybrid_runs_both_paths_and_fuses_them(corpus: Store) -> None:
    embedder = LocalEmbedder()
    rows = corpus.facts_without_embedding(1000)
    corpus.set_embeddings([(fid, vec) for (fid, _), vec in zip(rows, embedder.embed([t for _, t in rows]))],
                          embedder.model)
    hits = search(corpus, "redis cache for the api", agent_id="a1", team_id="t1", embedder=embedder, k=10)
    assert len(hits) == 10
    assert any(h.vector_rank is not None and h.bm25_rank is not None for h in hits)
    for h in hits:  # the fused score is exactly the sum of the reciprocal ranks of the paths that found it
        parts = [1 / (60 + r) for r in (h.vector_rank, h.bm25_rank) if r is not None]
        assert h.fused_score == pytest.approx(sum(parts))
    assert [h.fused_score for h in hits] == sorted((h.fused_score for h in hits), reverse=True)


def test_fact_terms_follow_facts_through_supersession_merge_and_forgetting(corpus: Store, db_url: str) -> None:
    sql = ("SELECT f.id, f.tsv = t.tsv, f.visibility = t.visibility, f.agent_id IS NOT DISTINCT FROM t.agent_id, "
           "f.team_id IS NOT DISTINCT FROM t.team_id, f.superseded_at IS NOT DISTINCT FROM t.superseded_at "
           "FROM facts f FULL JOIN fact_terms t ON t.id = f.id")

    def in_step() -> bool:
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            rows = conn.execute(sql).fetchall()
        return bool(rows) and all(r[0] is not None and all(r[1:]) for r in rows)

    assert in_step()
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        conn.execute("UPDATE facts SET superseded_at = now() WHERE id IN (SELECT id FROM facts LIMIT 5)")
        conn.execute("UPDATE facts SET mention_count = mention_count + 1")  # no search column changes
    assert in_step()
    assert corpus.forget(text="kafka") > 0
    assert in_step()
    hits = search(corpus, "kafka", agent_id="a1", team_id="t1", mode="bm25", k=10, include_history=True)
    assert hits == []  # a forgotten fact never comes back, on either table


def _bitmap_scans_only(conn: psycopg.Connection[Any]) -> None:
    """Leave the planner bitmap scans only: a text match must then come from a text index, never from a table
    scan or a walk of the primary key filtering every row (chosen once in a CI run, on fresh statistics)."""
    for kind in ("seqscan", "indexscan", "indexonlyscan"):
        conn.execute(f"SET enable_{kind} = off")


def _drop_other_indexes(conn: psycopg.Connection[Any], table: str, keep: str) -> list[str]:
    """Drop every index of ``table`` but ``keep`` (and those behind constraints) in ``conn``'s open transaction,
    which the caller rolls back: a plan check then asks whether ``keep`` can answer, not which of two cheap
    paths the planner prefers. Returns the names dropped."""
    others = [r[0] for r in conn.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i WHERE i.indrelid = %s::regclass "
        "AND i.indexrelid::regclass::text <> %s "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)", (table, keep))]
    for index in others:
        conn.execute(f"DROP INDEX {index}")
    return others


def test_scoped_bm25_steps_are_answered_by_the_scoped_text_index(corpus: Store, db_url: str) -> None:
    """The step SQL must match migration 0006's index expression exactly, or every search scans the table."""
    from factforge.storage.scope import fact_filters
    from factforge.storage.search import bm25_query

    corpus.save([_fact("Team runs a zookeeper quorum")], Scope("a1", "t1", "team"), Provenance("zk"))
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        _bitmap_scans_only(conn)
        where, params = fact_filters("a1", "t1")
        query = "zookeeper quorum"  # rare words: the steps use the index (common ones scan the table)
        built = bm25_query(conn, where, {**params, "q": query, "n": 40}, query, "fact_terms")
        assert built is not None
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + built[0], built[1]).fetchall())
        assert "fact_terms_scoped_gin" in plan


@pytest.mark.parametrize("agent, team", [("ag'ent\\ü", "t'1 \"x\""), ("a" * 3000, "t" * 3000)])
def test_scope_keys_fit_any_id_and_any_word_length(db_url: str, tmp_path: Path, agent: str, team: str) -> None:
    """Scope keys are md5s and a lexeme over 1,000 bytes is keyed by its md5: quotes, backslashes, long ids
    and a 1,500-letter word are found in their own scope and in no other."""
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        long_word = "x" * 1500
        store.save([_fact(f"Team names the build {long_word} quietly")], Scope(agent, team, "private"),
                   Provenance("long-1"))
        store.save([_fact("Team keeps the o'reilly notes in the wiki")], Scope(agent, team, "team"),
                   Provenance("long-2"))
        for query, expected in ((long_word, long_word), ("o'reilly notes", "o'reilly")):
            mine = search(store, query, agent_id=agent, team_id=team, mode="bm25", k=5)
            assert [h for h in mine if expected in h.content], query
            other = search(store, query, agent_id="someone-else", team_id="another-team", mode="bm25", k=5)
            assert not [h for h in other if expected in h.content], query
    finally:
        store.close()


class _Fixed:
    model = "fixed"
    dim = 384

    def __init__(self, vec: list[float]) -> None:
        self.vec = vec

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vec for _ in texts]


def test_vector_search_scans_on_past_neighbours_the_caller_may_not_see(db_url: str, tmp_path: Path) -> None:
    """300 facts of another agent sit right at the query vector, 12 of the caller's far away: HNSW's first
    ef_search candidates are all invisible, and only an iterative index scan reaches the caller's facts.
    (The connections disable sequential scans and sorts: on a table this small the planner would sort.)"""
    import numpy as np

    rng = np.random.default_rng(5)
    no_seqscan = db_url + ("&" if "?" in db_url else "?") + "options=-c%20enable_seqscan%3Doff%20-c%20enable_sort%3Doff"
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": no_seqscan, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        query = rng.normal(size=384)
        query /= np.linalg.norm(query)
        store.save([_fact(f"Team uses hidden service {i}") for i in range(300)], Scope("other", "t9", "private"),
                   Provenance("near"))
        store.save([_fact(f"Team uses visible service {i}") for i in range(12)], Scope("a1", "t1", "private"),
                   Provenance("far"))
        vectors = []
        for fid, content in store.facts_without_embedding(1000):
            v = query + rng.normal(scale=0.05 if "hidden" in content else 1.0, size=384)
            vectors.append((fid, (v / np.linalg.norm(v)).tolist()))
        store.set_embeddings(vectors, "fixed")
        hits = search(store, "services", agent_id="a1", team_id="t1", mode="vector", k=10,
                      embedder=_Fixed(query.tolist()))
        assert len(hits) == 10 and all("visible" in h.content for h in hits)
    finally:
        store.close()


@pytest.mark.parametrize("query, must, must_not", [
    ('"redis cache"', ["redis cache"], []),
    ("redis -kafka", ["redis"], ["kafka"]),
    ("grafana or terraform", [], []),
])
def test_queries_with_operators_keep_their_websearch_meaning(corpus: Store, query: str, must: list[str],
                                                             must_not: list[str]) -> None:
    hits = search(corpus, query, agent_id="a1", team_id="t1", mode="bm25", k=50)
    assert hits
    for h in hits:
        assert all(m in h.content for m in must) and not any(m in h.content for m in must_not), h.content
        if " or " in query:
            assert "grafana" in h.content or "terraform" in h.content
    assert all(h.agent_id == "a1" for h in hits)


# --- issue 15: an excluded term excludes on every path; the vector half does not fill k with noise --------


@pytest.fixture
def team_chat(db_url: str, tmp_path: Path) -> Iterator[tuple[Store, LocalEmbedder]]:
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    store.save([_fact(t) for t in ("Team switched from Jenkins to GitHub Actions", "Team uses GitHub Actions",
                                   "Team uses PostgreSQL for the database", "Team uses Redis for caching",
                                   "User prefers dark mode over light mode", "Team uses Clerk")],
               Scope("a1", "t1", "team"), Provenance("chat"))
    embedder = LocalEmbedder()
    rows = store.facts_without_embedding(100)
    store.set_embeddings([(fid, vec) for (fid, _), vec in zip(rows, embedder.embed([t for _, t in rows]))],
                         embedder.model)
    yield store, embedder
    store.close()


@pytest.mark.parametrize("mode", ["hybrid", "vector"])
@pytest.mark.parametrize("query", ['"GitLab CI" -Jenkins', "CI pipeline -jenkins", 'GitLab -"from Jenkins"'])
def test_an_excluded_term_excludes_on_the_vector_path_too(team_chat: tuple[Store, LocalEmbedder], mode: str,
                                                          query: str) -> None:
    store, embedder = team_chat
    hits = search(store, query, agent_id="a1", team_id="t1", embedder=embedder, mode=mode, max_distance=None)
    assert hits and not [h.content for h in hits if "Jenkins" in h.content]
    assert "Team uses GitHub Actions" in [h.content for h in hits]  # the rest of the query still finds it


def test_the_vector_half_leaves_out_far_neighbours(team_chat: tuple[Store, LocalEmbedder]) -> None:
    store, embedder = team_chat
    everything = search(store, "dark theme", agent_id="a1", team_id="t1", embedder=embedder, mode="vector",
                        max_distance=None)
    assert len(everything) == 6  # without a cut-off, k is filled with whatever is nearest
    hits = search(store, "dark theme", agent_id="a1", team_id="t1", embedder=embedder, mode="vector")
    assert [h.content for h in hits] == ["User prefers dark mode over light mode"]
    assert all(h.vector_distance is not None and h.vector_distance <= 0.80 for h in hits)
    # a fact BM25 found too stays, however far its vector is
    both = search(store, "caching", agent_id="a1", team_id="t1", embedder=embedder)
    assert [h.content for h in both] == ["Team uses Redis for caching"]


# --- issue 19: the top k is the exact BM25 top k, however many facts hold the query's words ----------------


def test_bm25_is_exact_when_many_facts_hold_every_query_word(db_url: str, tmp_path: Path) -> None:
    """1,200 visible facts hold both query words (the old candidate caps scored an arbitrary 500 of them);
    the best ones are short or repeat a word, and sit anywhere in insertion order. Hidden facts that would
    win sit in other scopes."""
    rng = random.Random(19)
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        texts = sorted({"Team uses kafka for billing " + " ".join(rng.sample(WORDS[2:], rng.randint(0, 12)))
                        + (" kafka" * rng.choice([0] * 20 + [1, 2])) for _ in range(2000)})
        rng.shuffle(texts)
        for i in range(0, len(texts), 200):
            store.save([_fact(t) for t in texts[i:i + 200]], Scope("a1", "t1", "team"), Provenance(f"m{i}"))
        store.save([_fact("Team uses kafka kafka billing")], Scope("other", "t2", "team"), Provenance("hid"))
        store.save([_fact("Team uses kafka billing kafka")], Scope("a2", "t1", "private"), Provenance("hid2"))
        for query in ("kafka billing", "kafka", "billing cache nightly", "kafka billing redis terraform"):
            for n in (10, 40):
                hits = search(store, query, agent_id="a1", team_id="t1", mode="bm25", k=n)
                expected = _oracle(db_url, query, n)
                assert [round(h.bm25_score or 0, 6) for h in hits] == [round(s, 6) for _, s in expected], query
                assert all(h.team_id == "t1" and h.visibility == "team" for h in hits)
    finally:
        store.close()


@pytest.mark.parametrize("classes", [24, 1], ids=["walks-find-n", "walks-cut-short"])
def test_bm25_walks_of_common_lexemes_by_impact_class_stay_exact(db_url: str, tmp_path: Path, monkeypatch: Any,
                                                                 classes: int) -> None:
    """The worst shape at scale: one common query lexeme, most of its documents as short as its shortest (a tie
    at theta), some repeating it, spread over the caller's global, team and private rows and over scopes it
    may not see, some superseded; a lexeme in one visibility only; one no short document holds. Every step
    here walks its lexeme's impact classes (migration 0025) in order of their bound; a walk of one class stops
    before it finds n, and the classes it did not list must still be read where they may beat theta."""
    from factforge.storage import bm25
    from factforge.storage.scope import fact_filters

    monkeypatch.setattr(bm25, "SEED_DF", 5)
    monkeypatch.setattr(bm25, "CLASS_WALK", classes)
    rng = random.Random(34)
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    scopes = [Scope("a1", "t1", "private"), Scope("a1", "t1", "team"), Scope("g1", "t3", "global"),
              Scope("a2", "t1", "private"), Scope("a3", "t2", "team")]
    try:
        for i, scope in enumerate(scopes):
            texts = {"User uses kafka", "User uses kafka kafka"} if i in (2, 3) else set()
            while len(texts) < 150:
                words = rng.sample(WORDS[1:], rng.randint(0, 5 if rng.random() < 0.7 else 14))
                texts.add(" ".join(["User uses kafka"] + words + (["kafka"] * rng.choice([0] * 12 + [1, 2]))))
            if i == 0:
                texts |= {"User uses grafana " + " ".join(rng.sample(WORDS[2:15], 9)) for _ in range(30)}
            store.save([_fact(t) for t in sorted(texts)], scope, Provenance(f"w{i}"))
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            conn.execute("UPDATE facts SET superseded_at = now() WHERE content LIKE '%%redis%%' AND "
                         "length(content) < 40")
        queries = ("kafka", "where is the kafka based", "kafka billing", "redis kafka", "grafana kafka",
                   "grafana", "kafka -redis", "mobile payments gateway kafka", "kafka api or grafana",
                   'user uses grafana or "uses kafka"', "grafana or billing", "redis or kafka -grafana")
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            where, params = fact_filters("a1", "t1")
            built = bm25.bm25_query(conn, where, {**params, "q": "kafka", "n": 10}, "kafka", "fact_terms")
            assert built is not None
            assert "seed0" in built[0], built[0]
            assert "bm25_ct0" in built[1], sorted(built[1])  # the step walks
        for query in queries:
            for n in (10, 40):
                hits = search(store, query, agent_id="a1", team_id="t1", mode="bm25", k=n)
                expected = _oracle(db_url, query, n, websearch=any(op in query for op in (" or ", "-", '"')))
                assert [round(h.bm25_score or 0, 6) for h in hits] == [round(s, 6) for _, s in expected], query
                assert all(h.agent_id == "a1" or h.visibility != "private" for h in hits)
                assert all(h.team_id == "t1" or h.visibility == "global" for h in hits)
                assert all(h.superseded_at is None for h in hits)
    finally:
        store.close()


@pytest.mark.parametrize("table", ["fact_terms", "turns"])
def test_the_analysts_bm25_reads_the_scoped_index_too(corpus: Store, db_url: str, table: str) -> None:
    """Without scope keys every step asks the scoped index for the plain lexeme (it holds both forms)."""
    from factforge.storage.scope import episode_filters, fact_filters
    from factforge.storage.search import bm25_query

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        conn.execute("INSERT INTO turns (key, agent_id, user_message, visibility) "
                     "VALUES ('t-zk', 'a1', 'we run a zookeeper quorum', 'private')")
        _bitmap_scans_only(conn)
        gin = "fact_terms_scoped_gin" if table == "fact_terms" else "turns_scoped_tsv_gin"
        # What is checked is that the scoped index can answer the steps, not which of two cheap paths the
        # planner prefers over a few hundred rows (another index won once in a loaded full run): the table's
        # other indexes go, in this transaction, which is rolled back.
        _drop_other_indexes(conn, table, gin)
        if table == "turns":
            where, params = episode_filters(None, None)
        else:
            where, params = fact_filters(None, None)
        built = bm25_query(conn, where, {**params, "q": "zookeeper kafka", "n": 40}, "zookeeper kafka", table)
        assert built is not None
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + built[0], built[1]).fetchall())
        assert gin in plan
        assert "Seq Scan" not in plan
        conn.rollback()
    hits = search(corpus, "kafka billing", agent_id=None, team_id=None, mode="bm25", k=10)
    assert [round(h.bm25_score or 0, 6) for h in hits] == sorted((round(h.bm25_score or 0, 6) for h in hits),
                                                                  reverse=True) and hits


@pytest.mark.parametrize("table", ["fact_terms", "turns"])
def test_a_small_memorys_bm25_steps_use_the_scoped_index_not_a_table_scan(db_url: str, table: str) -> None:
    """On a few hundred rows a table scan looks cheap, but it evaluates ``factforge_scoped_tsv`` (an md5 and a
    string per lexeme, a new tsvector) on every row, once per query word: ~20x slower than the index, and the
    planner chose it until migration 0017 priced the function. Left to its own choice here (no setting, no
    index dropped), on fresh statistics, every step must read the scoped text index."""
    from factforge.storage.scope import episode_filters, fact_filters
    from factforge.storage.search import bm25_query

    words = ["review", "null", "check", "deploy", "friday", "cache", "database", "python", "editor", "coffee"]
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as conn:
        # The statistics of a new memory, taken while the table was empty; the rows below arrive in one transaction.
        # (Inserted one by one in autocommit, autovacuum could analyse the table half-way, at a few rows: the planner
        # then estimated one row and found a scan of it cheapest - a failure seen once under load.)
        conn.execute(f"ANALYZE {table}")
        # one user's memory: their own private rows, a few shared with the team
        rows = [(f"k{i}", "a1", "t1", " ".join(words[(i + j) % 10] for j in range(1 + i % 7)),
                 "team" if i % 5 == 0 else "private") for i in range(500)]
        if table == "turns":
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany("INSERT INTO turns (key, agent_id, team_id, user_message, visibility) "
                                "VALUES (%s, %s, %s, %s, %s)", rows)
            where, params = episode_filters("a1", "t1")
        else:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, "
                                "team_id, visibility, content_hash) VALUES ('User ' || %s, 'preference', 0.9, "
                                "'pattern', %s, %s, %s, md5(%s || %s))",
                                [(m, a, t, v, k, m) for k, a, t, m, v in rows])
            where, params = fact_filters("a1", "t1")
        query = "code review null checks"
        for analyzed in (False, True):  # before autovacuum's first look at the new rows, and after
            if analyzed:
                conn.execute(f"ANALYZE {table}")
            built = bm25_query(conn, where, {**params, "q": query, "n": 40}, query, table)
            assert built is not None
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + built[0], built[1]).fetchall())
            assert f"Seq Scan on {table}" not in plan, f"analyzed: {analyzed}"
            assert ("fact_terms_scoped_gin" if table == "fact_terms" else "turns_scoped_tsv_gin") in plan


def test_vector_search_is_exact_over_the_callers_own_rows_and_walks_the_global_graph(db_url: str,
                                                                                     tmp_path: Path) -> None:
    """Private rows: the agent's btree and an exact sort (never the private graph); the team's rows, without a
    team graph, exactly too; global rows: their own graph (migration 0023). The merged top k equals a
    brute-force ranking of everything the caller may see."""
    import numpy as np

    rng = np.random.default_rng(12)
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        for i, scope in enumerate([Scope("a1", "t1", "private"), Scope("a2", "t1", "private"), Scope("a1", "t1", "team"),
                                   Scope("a3", "t2", "team"), Scope("a3", "t2", "global")]):
            store.save([_fact(f"Team uses service {i}-{j}") for j in range(40)], scope, Provenance(f"v{i}"))
        rows = store.facts_without_embedding(1000)
        vecs = rng.normal(size=(len(rows), 384))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.set_embeddings([(fid, v.tolist()) for (fid, _), v in zip(rows, vecs)], "fixed")
        query = rng.normal(size=384)
        query /= np.linalg.norm(query)
        hits = search(store, "services", agent_id="a1", team_id="t1", mode="vector", k=20, embedder=_Fixed(query.tolist()))
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            exact = [r[0] for r in conn.execute(
                "SELECT content FROM facts WHERE visibility = 'global' OR (visibility = 'team' AND team_id = 't1') "
                "OR (visibility = 'private' AND agent_id = 'a1') ORDER BY embedding <=> %s::vector LIMIT 20",
                (str(query.tolist()),)).fetchall()]
            from factforge.storage.scope import fact_filters
            from factforge.storage.search import vector_sql

            where, params = fact_filters("a1", "t1")
            conn.execute("SET enable_seqscan = off")  # a table this small would be scanned and sorted
            conn.execute("SET enable_sort = off")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN " + vector_sql("facts", where, params, 384), {**params, "v": str(query.tolist()), "n": 20}))
        assert [h.content for h in hits] == exact
        assert "facts_embedding_global_hnsw" in plan
        assert "facts_embedding_private_hnsw" not in plan  # even when sorting costs the earth
        # the analyst's view reads every private row exactly (there is no private graph, migration 0013)
        everyone = search(store, "services", agent_id=None, team_id=None, mode="vector", k=30,
                          embedder=_Fixed(query.tolist()))
        with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
            exact_all = [r[0] for r in conn.execute("SELECT content FROM facts ORDER BY embedding <=> %s::vector "
                                                    "LIMIT 30", (str(query.tolist()),)).fetchall()]
        assert [h.content for h in everyone] == exact_all
    finally:
        store.close()


@pytest.mark.parametrize("table", ["facts", "turns"])
def test_the_callers_private_rows_are_read_from_their_index_alone(db_url: str, tmp_path: Path, table: str) -> None:
    """The exact private branch of the vector statement is an index-only scan of the agent's covering index,
    for facts (migration 0013) and episodes (0014): the rows' vectors and scope columns are in the index, and
    what is not (an episode's words) the index's condition states; the search still answers exactly."""
    import numpy as np

    from factforge.storage.scope import episode_filters, fact_filters
    from factforge.storage.search import vector_sql

    rng = np.random.default_rng(14)
    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    scopes = [("a1", "t1", "private"), ("a2", "t1", "private"), ("a1", "t1", "team"), ("a3", "t2", "global")]
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        if table == "facts":
            for i, scope in enumerate(scopes):
                store.save([_fact(f"Team uses service {i}-{j}") for j in range(30)], Scope(*scope), Provenance(f"p{i}"))
            rows = store.facts_without_embedding(1000)
            vecs = rng.normal(size=(len(rows), 384))
            vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
            store.set_embeddings([(fid, v.tolist()) for (fid, _), v in zip(rows, vecs)], "fixed")
        else:
            with psycopg.connect(conninfo) as conn:
                for i, (agent, team, vis) in enumerate(scopes):
                    for j in range(30):
                        v = rng.normal(size=384)
                        conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
                                     "VALUES (%s, %s, %s, %s, %s, %s::vector)",
                                     (f"k{i}-{j}", agent, team, f"we use service {i}-{j}", vis,
                                      str((v / np.linalg.norm(v)).tolist())))
        query = rng.normal(size=384)
        query /= np.linalg.norm(query)
        kind = "fact" if table == "facts" else "episode"
        hits = search(store, "services", agent_id="a1", team_id="t1", mode="vector", k=20, kinds=[kind],
                      embedder=_Fixed(query.tolist()), max_distance=None)
        words = "content" if table == "facts" else "user_message"
        with psycopg.connect(conninfo) as conn:
            exact = [r[0] for r in conn.execute(
                f"SELECT {words} FROM {table} WHERE visibility = 'global' OR (visibility = 'team' AND team_id = 't1') "
                "OR (visibility = 'private' AND agent_id = 'a1') ORDER BY embedding <=> %s::vector LIMIT 20",
                (str(query.tolist()),)).fetchall()]
        with psycopg.connect(conninfo) as conn:
            where, params = (fact_filters if table == "facts" else episode_filters)("a1", "t1")
            # What is checked is that the covering index can answer the private branch alone, not which of two
            # equally cheap paths the planner prefers (the agent's plain btree once won a tie in a loaded CI run,
            # when VACUUM could not mark the pages all-visible). So, in a transaction rolled back below, every
            # other index the table has of its own is dropped, and scans and sorts that need no index are off:
            # the planner builds one path per index, an index-only one when the index holds every column read.
            # the competing indexes exist, so dropping them is what makes the check exact
            assert _drop_other_indexes(conn, table, f"{table}_private_agent_idx")
            for off in ("seqscan", "bitmapscan", "sort"):
                conn.execute(f"SET LOCAL enable_{off} = off")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN " + vector_sql(table, where, params, 384), {**params, "v": str(query.tolist()), "n": 20}))
            conn.rollback()
        assert [h.content for h in hits] == exact
        assert f"Index Only Scan using {table}_private_agent_idx" in plan, plan
        # the most hits a search returns: more rows than pgvector's largest candidate list, which is not exceeded
        everything = search(store, "services", agent_id="a1", team_id="t1", mode="vector", k=MAX_K, kinds=[kind],
                            embedder=_Fixed(query.tolist()), max_distance=None)
        assert len(everything) == 90  # a1's private rows, t1's team rows and the global ones
    finally:
        store.close()


def _round_trips(store: Store, run: Any) -> tuple[int, list[str]]:
    """How many times ``run()`` waited for the server on ``store``'s pooled connections (libpq's protocol
    trace: each simple Query and each Sync of an extended-protocol statement is one round trip)."""
    import tempfile

    from sqlalchemy import event

    from psycopg.pq import Trace

    trace = tempfile.TemporaryFile("w+")
    traced: list[Any] = []

    def _on_checkout(dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        dbapi_conn.pgconn.trace(trace.fileno())
        dbapi_conn.pgconn.set_trace_flags(Trace.SUPPRESS_TIMESTAMPS | Trace.REGRESS_MODE)
        traced.append(dbapi_conn)

    event.listen(store.engine, "checkout", _on_checkout)
    try:
        run()
    finally:
        event.remove(store.engine, "checkout", _on_checkout)
        for conn in traced:
            conn.pgconn.untrace()
    trace.seek(0)
    sent = [line.split("\t") for line in trace.read().splitlines() if line.startswith("F")]
    return sum(1 for f in sent if len(f) > 2 and f[2] in ("Query", "Sync")), [f[2] for f in sent if len(f) > 2]


def test_a_search_waits_for_the_server_once_per_statement_and_leaves_no_setting_behind(db_url: str,
                                                                                      tmp_path: Path) -> None:
    """A vector search is two round trips (the neighbours, with their HNSW settings in the same message; the
    hits' rows), a keyword search three (the query's term statistics, BM25, the rows) over one kind or both: no
    BEGIN, no separate set_config, no ROLLBACK. The settings end with the statement: the pooled connection is as it was."""
    import numpy as np

    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        store.save([_fact(f"Team uses service {j} for billing") for j in range(30)], Scope("a1", "t1", "team"),
                   Provenance("rt"))
        rows = store.facts_without_embedding(100)
        rng = np.random.default_rng(3)
        vecs = rng.normal(size=(len(rows), 384))
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        store.set_embeddings([(fid, v.tolist()) for (fid, _), v in zip(rows, vecs)], "fixed")
        embedder = _Fixed(vecs[0].tolist())
        search(store, "billing", agent_id="a1", team_id="t1", mode="vector", kinds=["fact"], embedder=embedder)
        n, sent = _round_trips(store, lambda: search(store, "billing", agent_id="a1", team_id="t1", mode="vector",
                                                     kinds=["fact"], embedder=embedder))
        assert n == 2, sent
        n, sent = _round_trips(store, lambda: search(store, "billing", agent_id="a1", team_id="t1", mode="bm25",
                                                     kinds=["fact"]))
        assert n == 3, sent
        # facts and episodes: each statement of BM25 goes for both kinds at once (no episode holds the word, so
        # the episodes have no second statement), and both kinds' rows in one
        n, sent = _round_trips(store, lambda: search(store, "billing", agent_id="a1", team_id="t1", mode="bm25"))
        assert n == 3, sent
        raw = store.engine.raw_connection()
        try:
            conn = raw.driver_connection
            assert conn.autocommit is False
            assert conn.execute("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')"
                                ).fetchone() == ("40", "off")
        finally:
            raw.close()
    finally:
        store.close()


def test_the_default_candidate_list_grows_with_the_global_graph(db_url: str) -> None:
    """ef_search by default: for a team's graph 200 for a small global graph, one per 250 rows of the table's
    global graph from 50k on; for the global graph itself (built with a longer candidate list, migration 0024)
    120, one per 250 rows from 30k on; 1000 at most, whatever the private and team rows; never below the rows
    asked for; an explicit value is kept (capped at 1000). search() works the same numbers out from the sizes it
    read a moment ago."""
    import itertools

    from factforge.storage.search import _SIZES_SQL, _ef_search_value, ef_search_sql

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:

        def ef(table: str, ef_search: int | None, n: int, graph: str = "team") -> str:
            conn.execute(ef_search_sql(table, ef_search, n, graph))
            return str(conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()[0])

        assert [ef("facts", None, 10), ef("turns", None, 10), ef("facts", None, 900)] == ["200", "200", "900"]
        assert [ef("facts", None, 10, "global"), ef("turns", None, 10, "global")] == ["120", "120"]
        assert [ef("facts", 700, 10), ef("facts", 5000, 10), ef("facts", 40, 100)] == ["700", "1000", "100"]
        assert [ef("facts", 700, 10, "global"), ef("facts", 40, 100, "global")] == ["700", "100"]
        for rows, expected, walk in ((20_000, "200", "120"), (32_000, "200", "128"), (76_000, "304", "304"),
                                     (76_125, "304", "304"), (76_375, "306", "306"),  # (304.5 and 305.5: to even)
                                     (150_000, "600", "600"), (2_000_000, "1000", "1000")):
            conn.execute("UPDATE pg_class SET reltuples = %s WHERE oid = 'facts_embedding_global_hnsw'::regclass",
                         (rows,))
            conn.execute("UPDATE pg_class SET reltuples = 10000000 WHERE oid = 'turns'::regclass")
            assert (ef("facts", None, 10), ef("turns", None, 10)) == (expected, "200"), rows
            assert (ef("facts", None, 10, "global"), ef("turns", None, 10, "global")) == (walk, "120"), rows
            # as search() works them out from the sizes it read a moment ago (_global_sizes): the same numbers
            f_team, f_global, t_team, t_global = conn.execute(_SIZES_SQL).fetchone()
            sized = {"facts": {"team": f_team, "global": f_global}, "turns": {"team": t_team, "global": t_global}}
            for table, graph, n in itertools.product(("facts", "turns"), ("team", "global"), (10, 40, 900)):
                assert _ef_search_value(table, None, n, graph, sized[table]) == f"'{ef(table, None, n, graph)}'", (
                    rows, table, graph, n)
        conn.rollback()  # the row counts were make-believe
        with pytest.raises(ValidationError):
            ef_search_sql("api_keys", None, 10)


def test_bm25_reads_term_frequencies_from_ts_rank_exactly(db_url: str) -> None:
    """BM25 reads a lexeme's tf from ts_rank (bm25.TF_EXACT) instead of unnesting the tsvector: for tf 0 to 40,
    with and without weights and positions, the expression must say what the positions say (a PostgreSQL whose
    ts_rank computes otherwise fails here); past TF_EXACT it falls back to the positions."""
    from factforge.storage.bm25 import TF_EXACT, _tf

    docs = ["'other':1"] + [f"'kafka':{','.join(str(2 * p + 1) + w for p in range(tf))} 'other':2"
                            for tf in range(1, 41) for w in ("", "A")] + ["'kafka' 'other':1", "'kafka':16383 'x':1"]
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        rows = conn.execute(
            f"SELECT d, {_tf('d::tsvector', 0)}, (SELECT coalesce(array_length(x.positions, 1), 0) FROM "
            "unnest(d::tsvector) x WHERE x.lexeme = 'kafka') FROM unnest(%(docs)s::text[]) d",
            {"docs": docs, "bm25_l0": "'kafka'", "bm25_x0": "kafka"}).fetchall()
    assert len(rows) == len(docs) and TF_EXACT < 40
    for doc, tf, positions in rows:
        assert tf == (positions if positions is not None else 0) or (positions == 0 and tf == 1), doc


def test_the_bm25_statement_is_prepared_once_its_shape_recurs(corpus: Store, db_url: str) -> None:
    """Statistics travel as parameters: two queries of the same shape (table, filter, number of lexemes, seeded
    steps) send the same text, whatever their words and the corpus's numbers, so psycopg prepares it and
    PostgreSQL runs a cached plan instead of planning every search anew; the ranks stay exact."""
    from factforge.storage.bm25 import bm25_query, bm25_ranks
    from factforge.storage.scope import fact_filters

    where, params = fact_filters("a1", "t1")
    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as conn:
        texts = {bm25_query(conn, where, {**params, "q": q, "n": 10}, q, "fact_terms")[0]  # type: ignore[index]
                 for q in ("kafka billing", "redis cache", "grafana alerts", "deploy staging")}
        assert len(texts) == 1
        for q in ("kafka billing", "redis cache", "grafana alerts", "deploy staging") * 2:
            assert bm25_ranks(conn, where, params, q, 10, "fact_terms")
        plans = conn.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                             "WHERE statement LIKE 'WITH r0 AS MATERIALIZED%%'").fetchall()
        # prepared from its first run, and by its generic plan: never planned again
        assert plans and max(p[0] for p in plans) >= 8 and all(p[1] == 0 for p in plans)
        # the plan setting lasted for the statement's own implicit transaction only
        assert conn.execute("SHOW plan_cache_mode").fetchone()[0] == "auto"
    hits = search(corpus, "kafka billing", agent_id="a1", team_id="t1", mode="bm25", k=10)
    assert [round(h.bm25_score or 0, 6) for h in hits] == [round(s, 6) for _, s in _oracle(db_url, "kafka billing", 10)]


def test_the_hits_rows_are_looked_up_by_a_cached_generic_plan(db_url: str, tmp_path: Path) -> None:
    """The statement that reads the hits' rows (facts and episodes) and the one that reads their fact-episode links
    take their ids through an InitPlan: given a few ids as a plain parameter, every run's own plan looked cheaper
    than the generic one and PostgreSQL planned them anew on every search; now, as for the BM25 statement, a
    cached generic plan runs."""
    from factforge.memory import Memory

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                  "FACTFORGE_EMBEDDER": "none", "FACTFORGE_LLM": "off"})
    with Memory(settings=settings, llm=None, embedder=None, background=False) as m:
        for i, text in enumerate(["I use Neovim as my editor", "My editor at work is VS Code, sadly",
                                  "I switched my editor theme to solarized"]):
            m.remember(user=text, agent_id="dev", team_id="t", session_id=f"s{i}")
        for _ in range(12):
            hits = m.search("editor", agent_id="dev", team_id="t", k=5)
        assert {h.kind for h in hits} == {"fact", "episode"} and any(h.related for h in hits)  # links were read
        raw = m.store.engine.raw_connection()  # the connection the searches used (the pool is last in, first out)
        try:
            rows = raw.driver_connection.execute(
                "SELECT statement, generic_plans FROM pg_prepared_statements WHERE statement LIKE "
                "'%%FROM fact_sources s JOIN turns t%%' OR statement LIKE '%%f.content, f.category%%' "
                "OR statement LIKE '%%user_message AS content%%'").fetchall()
        finally:
            raw.close()
    # the facts' and the episodes' rows in one statement
    lookups = {("links" if "fact_sources s JOIN" in s else "rows" if "f.content" in s and "user_message AS content" in s
                else s): g for s, g in rows}
    assert set(lookups) == {"links", "rows"} and all(g > 0 for g in lookups.values()), lookups


def test_ids_order_by_their_number_as_by_their_text() -> None:
    """search() breaks ties between equal fused scores by the id's 128-bit number (at a third of the CPU of its
    text): the same order as the text's, fixed-width lowercase hex."""
    import uuid

    rng = random.Random(3)
    ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(2000)] + [uuid.UUID(int=0), uuid.UUID(int=2**128 - 1)]
    assert sorted(ids, key=lambda i: i.int) == sorted(ids, key=str)


def test_vector_statements_name_their_owners_as_literals_and_run_by_a_generic_plan(db_url: str,
                                                                                   tmp_path: Path) -> None:
    """The vector statements carry the caller's agent and team as quoted literals (quotes and backslashes in the
    ids included): a generic plan then walks the owner's graph as a custom one would, so it runs from the first
    search and the statement is not planned again (planning against every partial index of the table cost ~0.5
    ms a statement at 1M facts). The caller still sees only its own, its team's and the global rows."""
    import numpy as np

    rng = np.random.default_rng(11)
    agent, team = "ag'ent\\ü", "t'1 \"x\""
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        query = rng.normal(size=384)
        query /= np.linalg.norm(query)
        store.save([_fact(f"Team keeps private note {i}") for i in range(5)], Scope(agent, team, "private"),
                   Provenance("own"))
        store.save([_fact(f"Team keeps shared note {i}") for i in range(5)], Scope(agent, team, "team"),
                   Provenance("team"))
        store.save([_fact(f"Team keeps hidden note {i}") for i in range(5)], Scope("someone-else", team, "private"),
                   Provenance("other"))
        vectors = []
        for fid, _content in store.facts_without_embedding(100):
            v = query + rng.normal(scale=0.1, size=384)
            vectors.append((fid, (v / np.linalg.norm(v)).tolist()))
        store.set_embeddings(vectors, "fixed")
        for _ in range(3):
            hits = search(store, "notes", agent_id=agent, team_id=team, mode="vector", k=10, kinds=["fact"],
                          embedder=_Fixed(query.tolist()))
            assert len(hits) == 10 and not [h for h in hits if "hidden" in h.content]
        raw = store.engine.raw_connection()  # the connection the searches used (the pool is last in, first out)
        try:
            rows = raw.driver_connection.execute(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE '%%<=>%%'").fetchall()
            mode = raw.driver_connection.execute("SHOW plan_cache_mode").fetchone()
        finally:
            raw.close()
    finally:
        store.close()
    owners = {"f.agent_id = E'ag''ent\\\\ü'": "agent", "f.team_id = E't''1 \"x\"'": "team"}
    # one statement per candidate list: the agent's rows with the global ones (which name no owner; 120 each while
    # the global graph is small), the team's (200)
    assert len(rows) == 2 and sorted(tuple(owners[o] for o in owners if o in s) for s, _g, _c in rows) == [
        ("agent",), ("team",)], rows
    assert [s.count(" AS part") for s, _g, _c in sorted(rows, key=lambda r: "f.team_id = E'" in r[0])] == [2, 1]
    assert all("$2" not in s for s, _g, _c in rows)  # the query vector is the one parameter
    assert all(g == 3 and c == 0 for _s, g, c in rows), [(g, c) for _s, g, c in rows]
    assert mode is not None and mode[0] == "auto"  # set for the statements' transaction only


@pytest.mark.parametrize("agent", ["a\\", "a\\' OR true) x --", "a%\\'%", "%(v_team)s"])
def test_owner_literals_hold_whatever_the_servers_string_syntax(db_url: str, tmp_path: Path, agent: str) -> None:
    """The owners written into the vector statements stay one literal when the server reads backslashes as
    escapes in plain strings (standard_conforming_strings off, as some servers are set): an id that ends in a
    backslash, or a backslash before a quote, neither breaks the statement nor reaches another agent's rows."""
    import numpy as np

    rng = np.random.default_rng(12)
    escapes = db_url + ("&" if "?" in db_url else "?") + "options=-c%20standard_conforming_strings%3Doff"
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": escapes, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        query = rng.normal(size=384)
        query /= np.linalg.norm(query)
        store.save([_fact(f"Team keeps own note {i}") for i in range(3)], Scope(agent, "t1", "private"),
                   Provenance("own"))
        store.save([_fact(f"Team keeps hidden note {i}") for i in range(3)], Scope("a", "t1", "private"),
                   Provenance("other"))
        store.set_embeddings([(fid, (query + rng.normal(scale=0.1, size=384)).tolist())
                              for fid, _c in store.facts_without_embedding(100)], "fixed")
        hits = search(store, "notes", agent_id=agent, team_id="t1", mode="vector", k=10, kinds=["fact"],
                      embedder=_Fixed(query.tolist()))
        assert sorted(h.content for h in hits) == [f"Team keeps own note {i}" for i in range(3)]
    finally:
        store.close()


def test_every_kinds_term_statistics_come_in_one_statement(corpus: Store, db_url: str,
                                                           sent_sql: list[str]) -> None:
    """BM25's first statement reads the query's term statistics of facts and of episodes at once (one statement
    to bind and read, not one per kind); each kind's ranks are what its own statistics give."""
    sent = sent_sql
    hits = search(corpus, "kafka billing", agent_id="a1", team_id="t1", mode="bm25", k=10)
    stats = [s for s in sent if "_corpus c" in s]
    assert len(stats) == 1 and "FROM bm25_corpus c" in stats[0] and "FROM episode_bm25_corpus c" in stats[0]
    assert [round(h.bm25_score or 0, 6) for h in hits] == [round(s, 6) for _, s in _oracle(db_url, "kafka billing", 10)]


def test_the_scoped_index_keys_each_lexeme_by_its_impact_class(db_url: str) -> None:
    """factforge_scoped_tsv (migration 0025) keys each lexeme also as "<scope key> <lexeme> <t>.<d>": t its tf up
    to bm25.TF_CLASSES, d the document's length class as bm25.dl_class computes it, for lengths 1-300 (every
    class boundary up to 256) and tf 1-6, in every scope; a lexeme without positions counts once."""
    from factforge.storage.bm25 import TF_CLASSES, dl_class

    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(conninfo) as conn:
        for dl in list(range(1, 40)) + [47, 48, 63, 64, 65, 71, 72, 127, 128, 255, 256, 300]:
            for tf in (1, 2, 3, 4, 6):
                words = " ".join([f"w{i}x" for i in range(dl - 1)] + ["kafka"] * tf)
                for vis, team, agent, key in (("global", None, None, "g"), ("team", "t1", "a", None),
                                              ("private", "t1", "agent-7", None)):
                    row = conn.execute(
                        "SELECT length(to_tsvector('simple', %(w)s)), factforge_scoped_tsv(to_tsvector('simple', "
                        "%(w)s), %(v)s, %(t)s, %(a)s)::text, CASE %(v)s WHEN 'team' THEN 't' || md5(%(t)s) "
                        "WHEN 'private' THEN 'p' || md5(%(a)s) ELSE 'g' END",
                        {"w": words, "v": vis, "t": team, "a": agent}).fetchone()
                    assert row is not None and row[0] == dl
                    expected = f"'{row[2]} kafka {min(tf, TF_CLASSES)}.{dl_class(dl)}'"
                    assert expected in row[1], (dl, tf, vis)
                    assert f"'{row[2]} kafka'" in row[1] and "'kafka':" in row[1]  # the plain and scoped keys stay
        stripped = conn.execute("SELECT factforge_scoped_tsv(strip(to_tsvector('simple', 'kafka kafka b c')), "
                                "'global', NULL, NULL)::text").fetchone()
        assert stripped is not None and "'g kafka 1.3'" in stripped[0]


def test_a_busy_search_sends_one_statement_per_graph_for_both_kinds_and_finds_the_same(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While other searches run in the process, a hybrid search sends every statement on its own connection, and
    the statements with the same HNSW settings go as one statement after one settings statement: the agent's rows
    and the global rows of facts and episodes (120 candidates each while the global graphs are small), the team's
    of both (200): the same hits, in the same order, with the same ranks and distances as a search run alone (each
    kind's vectors then on a pooled connection of its own)."""
    from factforge.memory import Memory
    from factforge.storage import search as search_module

    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path),
                                  "FACTFORGE_LLM": "off"})
    embedder = LocalEmbedder()
    with Memory(settings=settings, llm=None, embedder=embedder, background=False) as m:
        for i, text in enumerate(["I use Neovim as my editor", "My editor at work is VS Code, sadly",
                                  "We deploy on Fridays, never on Mondays", "Our database is PostgreSQL 16"]):
            m.remember(user=text, agent_id="dev", team_id="t", session_id=f"s{i}")
        rows = m.store.facts_without_embedding(100)  # (episodes stay without vectors: their statements read none)
        m.store.set_embeddings([(fid, vec) for (fid, _), vec in zip(rows, embedder.embed([t for _, t in rows]))],
                               embedder.model)
        alone = [search(m.store, q, agent_id="dev", team_id="t", embedder=embedder) for q in ("editor", "deploy day")]
        sent: list[str] = []
        execute = psycopg.Connection.execute

        def recording(self: Any, query: Any, params: Any = None, **kw: Any) -> Any:
            sent.append(str(query))
            return execute(self, query, params, **kw)

        monkeypatch.setattr(search_module._IN_FLIGHT, "count", 3)
        monkeypatch.setattr(psycopg.Connection, "execute", recording)
        busy = [search(m.store, q, agent_id="dev", team_id="t", embedder=embedder) for q in ("editor", "deploy day")]
        raw = m.store.engine.raw_connection()  # the connection the busy searches used (the pool is last in, first out)
        try:
            bm25_plans = raw.driver_connection.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'WITH r0 AS MATERIALIZED%%'").fetchall()
        finally:
            raw.close()
    assert busy == alone and alone[0]
    # BM25's top-n statements go after the vector statements, whose settings force generic plans: no statement of
    # their own sets it, and they still run by their generic plans
    assert not [s for s in sent if "plan_cache_mode" in s and "hnsw" not in s]
    assert bm25_plans and all(g > 0 and c == 0 for g, c in bm25_plans), bm25_plans
    vectors = [s for s in sent if s.startswith("SELECT 0 AS part")]
    assert len(vectors) == 4 and all("FROM facts f" in s and "FROM turns f" in s for s in vectors)
    assert sorted(s.count(" AS part") for s in vectors) == [2, 2, 4, 4]  # the team's; the agent's and the global
    settings = [s for s in sent if s.startswith("SELECT set_config('hnsw.ef_search'")]
    assert sorted(s.split("'")[3] for s in settings) == ["120", "120", "200", "200"]


@pytest.mark.parametrize(("sql", "expected"), [
    ("SELECT %(a)s", ("SELECT $1", ("a",))),
    ("SELECT %(b)s + %(a)s * %(b)s", ("SELECT $1 + $2 * $1", ("b", "a"))),
    ("SELECT 'x%%y' LIKE %(p)s", ("SELECT 'x%y' LIKE $1", ("p",))),
    ("SELECT 1", ("SELECT 1", ())),
])
def test_bm25_statements_have_their_placeholders_numbered_as_psycopg_would(sql: str,
                                                                           expected: tuple[str, tuple[str, ...]]) -> None:
    from factforge.storage.bm25 import _numbered

    assert _numbered(sql) == expected


@pytest.mark.parametrize("sql", ["SELECT 5 % 2", "SELECT %(a)b", "SELECT %s"])
def test_a_stray_percent_sign_in_a_bm25_statement_is_an_error(sql: str) -> None:
    from factforge.storage.bm25 import _numbered

    with pytest.raises(ValueError, match="stray percent sign"):
        _numbered(sql)


def test_the_hits_rows_are_read_by_the_names_of_their_columns(db_url: str) -> None:
    """_rows pairs each value with a column name it knows (psycopg's description costs a Column object per column
    per search): the names are the statement's own, in order, for every kind of caller."""
    from factforge.storage.search import ROW_COLUMNS, _rows_sql

    with psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        for agent, team in (("a1", "t1"), ("a1", None), (None, None)):
            cur = conn.execute(_rows_sql(agent, team), {"ids": [], "episode_ids": [], "v_agent": agent,
                                                        "v_team": team})
            assert tuple(d.name for d in cur.description) == ROW_COLUMNS


def _copy_and_rows(conn: Any, table: str) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """``table``'s narrow copy of the private vectors (migration 0027), and the rows it should hold: the private rows
    with a vector under search's default filter."""
    from factforge.storage.search import PRIVATE_VECTORS_WHERE

    copy = {tuple(r) for r in conn.execute(f"SELECT id, agent_id, embedding::text FROM {table}_private_vectors")}
    rows = {tuple(r) for r in conn.execute(
        f"SELECT id, agent_id, embedding::text FROM {table} f WHERE f.visibility = 'private' "
        f"AND f.embedding IS NOT NULL AND {PRIVATE_VECTORS_WHERE[table]}")}
    return copy, rows


def test_the_private_vectors_copy_follows_every_write(db_url: str) -> None:
    """Inserts with and without a vector, a vector written later, changed, removed, a fact superseded and back, a
    row made a team row and private again, moved to another agent, an episode forgotten, deletes, TRUNCATE: after
    each, the copy holds exactly the private rows with a vector that search's default filter reads."""
    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    v1, v2 = str([0.5] * 384), str([0.125] * 384)
    fact = ("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, visibility, "
            "content_hash, embedding) VALUES (%s, 'other', 0.9, 'pattern', %s, 't', %s, %s, %s::vector)")
    turn = ("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
            "VALUES (%s, %s, 't', %s, %s, %s::vector)")
    steps = [
        (fact, ("f1", "a1", "private", "h1", v1)), (fact, ("f2", "a1", "private", "h2", None)),
        (fact, ("f3", "a2", "team", "h3", v1)), (fact, ("f4", "a2", "private", "h4", v2)),
        (turn, ("k1", "a1", "we use kafka", "private", v1)), (turn, ("k2", "a1", "we use redis", "private", None)),
        (turn, ("k3", "a1", "the team uses helm", "team", v2)), (turn, ("k4", "a1", None, None, v1)),
        ("UPDATE facts SET embedding = %s::vector WHERE content = 'f2'", (v2,)),
        ("UPDATE facts SET embedding = %s::vector WHERE content = 'f1'", (v2,)),
        ("UPDATE facts SET superseded_at = now() WHERE content = 'f1'", None),
        ("UPDATE facts SET last_seen_at = now() WHERE content = 'f4'", None),  # (no watched column)
        ("UPDATE facts SET superseded_at = NULL WHERE content = 'f1'", None),
        ("UPDATE facts SET visibility = 'team' WHERE content = 'f4'", None),
        ("UPDATE facts SET visibility = 'private' WHERE content = 'f4'", None),
        ("UPDATE facts SET agent_id = 'a3' WHERE content = 'f2'", None),
        ("UPDATE facts SET embedding = NULL WHERE content = 'f1'", None),
        ("UPDATE turns SET embedding = %s::vector WHERE key = 'k2'", (v2,)),
        ("UPDATE turns SET visibility = NULL, user_message = NULL, embedding = NULL WHERE key = 'k1'", None),
        ("DELETE FROM facts WHERE content = 'f4'", None), ("DELETE FROM turns WHERE key = 'k2'", None),
    ]
    with psycopg.connect(conninfo, autocommit=True) as conn:
        for n, (sql, params) in enumerate(steps):
            conn.execute(sql, params)
            for table in ("facts", "turns"):
                copy, rows = _copy_and_rows(conn, table)
                assert copy == rows, (n, sql, table)
        assert len(_copy_and_rows(conn, "facts")[0]) == 1 and len(_copy_and_rows(conn, "turns")[0]) == 0
        conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
                     "VALUES ('k5', 'a1', 't', 'we use nats', 'private', %s::vector)", (v1,))
        conn.execute("TRUNCATE facts, turns CASCADE")
        assert _copy_and_rows(conn, "facts") == (set(), set()) and _copy_and_rows(conn, "turns") == (set(), set())


def test_an_agents_rows_are_read_from_the_private_vectors_copy_with_the_same_hits(
        db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent without a graph of its own has its private facts and episodes read exactly from their narrow copy
    (migration 0027) under search's default filter, and from the tables themselves under any other (history): the
    same hits with the same ranks and distances either way, in every mode, alone and busy."""
    import numpy as np

    from factforge.storage import search as search_module

    rng = np.random.default_rng(27)
    conninfo = db_url.replace("postgresql+psycopg://", "postgresql://", 1)
    store = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))

    def unit() -> list[float]:
        v = rng.normal(size=384)
        return [float(x) for x in v / np.linalg.norm(v)]

    try:
        for i, scope in enumerate([Scope("a1", "t1", "private"), Scope("a2", "t1", "private"),
                                   Scope("a1", "t1", "team"), Scope("a3", "t1", "global")]):
            store.save([_fact(f"Team uses {WORDS[j % len(WORDS)]} service {i}-{j}") for j in range(30)], scope,
                       Provenance(f"c{i}"))
        rows = store.facts_without_embedding(1000)
        store.set_embeddings([(fid, unit()) for fid, _ in rows], "fixed")
        with psycopg.connect(conninfo) as conn:
            conn.execute("UPDATE facts SET superseded_at = now() WHERE content LIKE '%% 0-1_'")  # ten of a1's
            for j in range(60):
                conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
                             "VALUES (%s, %s, 't1', %s, 'private', %s::vector)",
                             (f"k{j}", "a1" if j % 3 else "a2", f"we use {WORDS[j % len(WORDS)]} {j}", str(unit())))
        query = unit()
        sent: list[str] = []
        execute = psycopg.Connection.execute

        def recording(self: Any, sql: Any, params: Any = None, **kw: Any) -> Any:
            sent.append(str(sql))
            return execute(self, sql, params, **kw)

        def run() -> list[Any]:
            search_module._statements_of.cache_clear()
            out = []
            for busy in (0, 3):
                monkeypatch.setattr(search_module._IN_FLIGHT, "count", busy)
                for kw in ({"mode": "vector"}, {"mode": "hybrid"}, {"mode": "vector", "include_history": True},
                           {"mode": "vector", "kinds": ["episode"], "k": 50}):
                    out.append(search(store, "kafka service", agent_id="a1", team_id="t1", k=kw.pop("k", 20),
                                      embedder=_Fixed(query), max_distance=None, **kw))
            return out

        monkeypatch.setattr(psycopg.Connection, "execute", recording)
        from_copy = run()
        copy_reads = [s for s in sent if "_private_vectors" in s]
        monkeypatch.setattr(search_module, "PRIVATE_VECTORS_WHERE", {})
        from_tables = run()
    finally:
        search_module._statements_of.cache_clear()
        store.close()
    assert from_copy == from_tables
    assert all(hits for hits in from_copy)
    assert any(h.kind == "episode" for h in from_copy[0]) and any(h.kind == "fact" for h in from_copy[0])
    assert {h.agent_id for hits in from_copy for h in hits if h.visibility == "private"} == {"a1"}
    assert any("FROM facts_private_vectors f" in s for s in copy_reads)
    assert any("FROM turns_private_vectors f" in s for s in copy_reads)
    # a search with history reads the facts table itself: a superseded fact is among its hits
    assert any(h.superseded_at is not None for h in from_copy[2])
