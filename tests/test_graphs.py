"""Agent and team graphs: an HNSW index over one agent's private rows or one team's team rows, built for owners
with many, walked by their searches while it is valid, never by anyone else's; without one (or with a broken
one) the exact read runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from factforge.memory import Memory, open_store
from factforge.settings import LOCAL_EMBED_MODEL, Settings
from factforge.storage.db import conninfo
from factforge.storage.graphs import agent_graph_name, drop_graphs, graph_candidates, team_graph_name
from factforge.storage.scope import episode_filters, fact_filters
from factforge.storage.search import graph_sql, search
from factforge.storage.store import Provenance, Scope, Store
from factforge.types import Explanation, Fact

DIM = 384
ODD = "o'dd\\agent " + "x" * 3000  # quotes, a backslash and a length no index name could hold


def _fact(content: str) -> Fact:
    return Fact(content=content, category="technology", confidence=0.9, method="pattern",
                explanation=Explanation("pattern", "t", 0.9, 0.9), rule_id="t", subject="Team")


class _Fixed:
    model = "fixed"
    dim = DIM

    def __init__(self, vec: list[float]) -> None:
        self.vec = vec

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.vec for _ in texts]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _add_rows(store: Store, db_url: str, seed: int, facts: Iterable[tuple[int, Scope]], episodes: Scope, key: str,
              text: str) -> None:
    """40 facts per ``(group, scope)`` of ``facts`` and 40 episodes in ``episodes``' scope (keys ``key``0..39,
    words ``text`` 0..39), each with a random unit vector drawn from ``seed``: the facts' first."""
    rng = np.random.default_rng(seed)
    for i, scope in facts:
        store.save([_fact(f"Team uses service {i}-{j}") for j in range(40)], scope, Provenance(f"g{i}"))
    rows = store.facts_without_embedding(1000)
    store.set_embeddings([(fid, v.tolist()) for (fid, _), v in zip(rows, _unit(rng, len(rows)))], "fixed")
    with psycopg.connect(conninfo(db_url)) as conn:
        for j, v in enumerate(_unit(rng, 40)):
            conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
                         "VALUES (%s, %s, %s, %s, %s, %s::vector)",
                         (f"{key}{j}", episodes.agent_id, episodes.team_id, f"{text} {j}", episodes.visibility,
                          str(v.tolist())))


@pytest.fixture
def store(db_url: str, tmp_path: Path) -> Iterator[Store]:
    """40 private facts each of a1, a2 and ODD, 40 of a1's team and 40 private episodes of a1, all with vectors."""
    s = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    _add_rows(s, db_url, 19, enumerate([Scope("a1", "t1", "private"), Scope("a2", "t1", "private"),
                                        Scope(ODD, "t1", "private"), Scope("a1", "t1", "team")]),
              Scope("a1", "t1", "private"), "e", "we run job")
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _no_graphs_after(db_url: str) -> Iterator[None]:
    yield
    with psycopg.connect(conninfo(db_url)) as conn:  # indexes outlive the next test's TRUNCATE
        for table in ("facts", "turns"):
            drop_graphs(conn.execute, table)


def _graphs(db_url: str) -> dict[str, bool]:
    with psycopg.connect(conninfo(db_url)) as conn:
        return dict(conn.execute("SELECT c.relname, i.indisvalid FROM pg_index i "
                                 "JOIN pg_class c ON c.oid = i.indexrelid "
                                 "WHERE c.relname LIKE '%\\_agent\\_%\\_hnsw' "
                                 "OR c.relname LIKE '%\\_team\\_%\\_hnsw'").fetchall())


def _exact(db_url: str, query: np.ndarray, agent: str, k: int) -> list[str]:
    with psycopg.connect(conninfo(db_url)) as conn:
        return [r[0] for r in conn.execute(
            "SELECT content FROM facts WHERE visibility = 'global' OR (visibility = 'team' AND team_id = 't1') "
            "OR (visibility = 'private' AND agent_id = %s) ORDER BY embedding <=> %s::vector LIMIT %s",
            (agent, str(query.tolist()), k)).fetchall()]


def _plan(db_url: str, table: str, agent: str, query: np.ndarray, kind: str = "agent", team: str = "t1") -> str:
    where, params = (fact_filters if table == "facts" else episode_filters)(agent, team)
    with psycopg.connect(conninfo(db_url), cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute("SET enable_sort = off")  # forty rows would be sorted: the graph must be usable
        conn.execute("SET hnsw.ef_search = 200")
        return "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF) " + graph_sql(table, kind, where, params, DIM),
            {**params, "v": str(query.tolist()), "n": 10}))


def test_agents_over_the_threshold_get_a_graph_each_once(store: Store, db_url: str) -> None:
    assert store.build_graphs(min_rows=41) == []  # nobody has 41 private vectors in one table
    assert store.stats()["agent_graphs"] == {"facts": 0, "turns": 0}
    built = store.build_graphs(min_rows=40)
    assert store.stats()["agent_graphs"] == {"facts": 3, "turns": 1}  # factforge stats shows them
    assert sorted((b.table, b.owner, b.rows) for b in built) == [
        ("facts", "a1", 40), ("facts", "a2", 40), ("facts", ODD, 40), ("turns", "a1", 40)]
    assert _graphs(db_url) == {b.index: True for b in built}
    assert {b.index for b in built} == {agent_graph_name(b.table, b.owner) for b in built}
    assert store.build_graphs(min_rows=1) == []  # made once; the team's rows are no agent's own
    with psycopg.connect(conninfo(db_url)) as conn:
        assert graph_candidates(conn, "facts", 1) == [] and graph_candidates(conn, "turns", 1, ["a1", "a2"]) == []
        # the ODD agent's graph holds its rows and no one else's: the condition names it exactly
        assert conn.execute("SELECT count(*) FROM facts WHERE visibility = 'private' AND agent_id = %s",
                            (ODD,)).fetchone() == (40,)


@pytest.mark.parametrize("agent", ["a1", ODD])
def test_an_agents_search_walks_its_own_graph_and_answers_as_the_exact_read(store: Store, db_url: str,
                                                                            agent: str) -> None:
    rng = np.random.default_rng(7)
    queries = _unit(rng, 5)
    before = [[h.content for h in search(store, "s", agent_id=agent, team_id="t1", mode="vector", k=10, kinds=["fact"],
                                         embedder=_Fixed(q.tolist()), max_distance=None)] for q in queries]
    plan = _plan(db_url, "facts", agent, queries[0])  # no graph yet: the exact read runs, the graph's never
    assert "on facts f (never executed)" in plan and "on facts f_1 (actual" in plan, plan
    assert "Scan using facts_agent" not in plan, plan
    store.build_graphs(min_rows=40)
    plan = _plan(db_url, "facts", agent, queries[0])
    assert f"Index Scan using {agent_graph_name('facts', agent)} on facts f (actual" in plan, plan
    assert "on facts f_1 (never executed)" in plan, plan
    for q, old in zip(queries, before):
        hits = search(store, "s", agent_id=agent, team_id="t1", mode="vector", k=10, kinds=["fact"],
                      embedder=_Fixed(q.tolist()), max_distance=None)
        assert [h.content for h in hits] == old == _exact(db_url, q, agent, 10)
        # never another agent's private rows (a2's are 1-*, ODD's 2-*, a1's 0-*)
        own = "0-" if agent == "a1" else "2-"
        assert all(h.content.split()[-1].startswith((own, "3-")) for h in hits)
    # episodes too: a1's 40 private episodes, walked by their graph
    plan = _plan(db_url, "turns", "a1", queries[1])
    assert f"Index Scan using {agent_graph_name('turns', 'a1')}" in plan, plan
    hits = search(store, "s", agent_id="a1", team_id="t1", mode="vector", k=5, kinds=["episode"],
                  embedder=_Fixed(queries[1].tolist()), max_distance=None)
    with psycopg.connect(conninfo(db_url)) as conn:
        exact = [r[0] for r in conn.execute("SELECT user_message FROM turns ORDER BY embedding <=> %s::vector LIMIT 5",
                                            (str(queries[1].tolist()),))]
    assert [h.content for h in hits] == exact


@pytest.mark.parametrize("graphs", [False, True])
def test_a_busy_process_reads_both_kinds_neighbours_on_one_connection_and_finds_the_same(
        store: Store, db_url: str, monkeypatch: pytest.MonkeyPatch, sent_sql: list[str], graphs: bool) -> None:
    """While no other search runs in the process, a hybrid search reads each kind's neighbours on a connection
    of its own (three in all); while others run, both kinds' on its own connection with BM25's first statements
    (one in all), each settings statement sent once for both kinds: the same statements, the same hits."""
    from sqlalchemy import event

    from factforge.storage import search as search_module

    if graphs:
        store.build_graphs(min_rows=40)
        assert len(_graphs(db_url)) == 4
    rng = np.random.default_rng(5)
    checkouts: list[Any] = []

    def run(q: np.ndarray) -> tuple[list[Any], int, list[str]]:
        checkouts.clear()
        sent_sql.clear()
        hits = search(store, "service job", agent_id="a1", team_id="t1", k=20, embedder=_Fixed(q.tolist()),
                      max_distance=None)
        return hits, len(checkouts), sorted(s for s in sent_sql if "set_config('hnsw.ef_search'" in s)

    event.listen(store.engine, "checkout", lambda *_: checkouts.append(1))
    for q in _unit(rng, 3):
        idle, idle_connections, idle_settings = run(q)
        monkeypatch.setattr(search_module._IN_FLIGHT, "count", 3)  # three other searches running
        busy, busy_connections, busy_settings = run(q)
        monkeypatch.setattr(search_module._IN_FLIGHT, "count", 0)
        assert len(idle) == 20 and busy == idle
        assert (idle_connections, busy_connections) == (3, 1)
        # per kind, the agent graph's settings (ef_search 120, the global graph's too while it is small) and the
        # team graph's (200)
        own = [s for s in idle_settings if "'120'" in s]
        assert len(idle_settings) == 4 and len(own) == 2 and own[0] == own[1]
        assert busy_settings == sorted(set(idle_settings)) and len(busy_settings) == 2


@pytest.mark.parametrize("graphs", [False, True])
def test_the_vector_branches_state_their_own_part_of_the_scope_and_nothing_more(
        store: Store, db_url: str, sent_sql: list[str], graphs: bool) -> None:
    """A scoped caller's vector statements read its private rows, its team's and the global ones each by its own
    condition, without the visibility rule's CASE on every row (BM25's statements keep it); nobody else's
    private rows come back, from the exact read or from a graph."""
    if graphs:
        store.build_graphs(min_rows=40)
    sent = sent_sql
    rng = np.random.default_rng(9)
    for q in _unit(rng, 3):
        sent.clear()
        hits = search(store, "service job", agent_id="a1", team_id="t1", k=40, embedder=_Fixed(q.tolist()),
                      max_distance=None)
        vectors = [s for s in sent if "<=>" in s]
        bm25 = [s for s in sent if "::tsquery" in s and "_corpus c" not in s]  # top-n, not the term statistics
        # per kind: the agent's rows with the global ones (160 candidates each for k=40), the team's (200)
        assert len(vectors) == 4 and sorted(s.count(" AS part") for s in vectors) == [1, 1, 2, 2] and bm25
        assert all("CASE f.visibility" not in s for s in vectors) and all("CASE f.visibility" in s for s in bm25)
        assert {h.agent_id for h in hits if h.visibility == "private"} == {"a1"}
        facts = search(store, "s", agent_id="a1", team_id="t1", mode="vector", k=200, kinds=["fact"],
                       embedder=_Fixed(q.tolist()), max_distance=None)
        # every fact a1 may see - its own 40 (0-*) and its team's 40 (3-*) - and no other agent's (1-*, 2-*)
        assert sorted(h.content.split()[-1][:2] for h in facts) == ["0-"] * 40 + ["3-"] * 40


def test_an_invalid_graph_is_not_walked_and_the_next_build_makes_it_again(store: Store, db_url: str) -> None:
    """A concurrent build that failed half-way leaves an invalid index: searches read exactly meanwhile."""
    store.build_graphs(min_rows=40)
    name = agent_graph_name("facts", "a1")
    with psycopg.connect(conninfo(db_url)) as conn:
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", (name,))
    query = _unit(np.random.default_rng(3), 1)[0]
    plan = _plan(db_url, "facts", "a1", query)
    assert "on facts f (never executed)" in plan and "on facts f_1 (actual" in plan, plan
    hits = search(store, "s", agent_id="a1", team_id="t1", mode="vector", k=10, kinds=["fact"],
                  embedder=_Fixed(query.tolist()), max_distance=None)
    assert [h.content for h in hits] == _exact(db_url, query, "a1", 10)
    built = store.build_graphs(min_rows=40)
    assert [(b.table, b.owner) for b in built] == [("facts", "a1")] and _graphs(db_url)[name] is True


def test_a_new_embedding_dimension_drops_the_agent_graphs(store: Store, db_url: str) -> None:
    store.build_graphs(min_rows=40)
    assert len(_graphs(db_url)) == 4
    store.reset_embedding_column(DIM + 16, "wider")  # the graphs index the old dimension's half vectors
    try:
        assert _graphs(db_url) == {}
    finally:
        store.reset_embedding_column(DIM, LOCAL_EMBED_MODEL)  # as the session's schema was made


@pytest.mark.slow
def test_the_worker_builds_graphs_for_the_agents_whose_rows_it_embedded(db_url: str, tmp_path: Path) -> None:
    from factforge.worker import WorkerReport, run_worker

    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off",
           "FACTFORGE_AGENT_GRAPH_MIN_ROWS": "6"}
    settings = Settings.from_env(env)
    with Memory(settings=settings, llm=None, embedder=None, background=False) as memory:  # vectors come later
        for i in range(6):
            memory.remember(user=f"The nightly import number {i} of the billing ledger took forty minutes",
                            agent_id="ops", team_id="t")
        memory.remember(user="The weekly report of the billing ledger took an hour", agent_id="few", team_id="t")
    reports: list[WorkerReport] = []
    stop = threading.Event()
    name = agent_graph_name("turns", "ops")
    with Memory(settings=settings, llm=None, background=False) as memory:
        thread = threading.Thread(target=lambda: reports.append(run_worker(memory, stop, idle_poll_s=0.05)))
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while _graphs(db_url).get(name) is not True and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            thread.join(timeout=30)
    assert _graphs(db_url).get(name) is True
    assert agent_graph_name("turns", "few") not in _graphs(db_url)  # one episode: no graph
    assert reports[0].graphs >= 1


def test_cli_embed_graphs(store: Store, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from factforge.cli import main

    assert main(["--database-url", db_url, "embed", "graphs", "--min-rows", "40"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "built 5 graph(s)"  # a1, a2 and ODD in facts, a1 in episodes, team t1 in facts
    assert any(line.startswith("facts: agent 'a1': 40 rows") for line in out)
    assert any(line.startswith("facts: team 't1': 40 rows") for line in out)
    assert main(["--database-url", db_url, "embed", "graphs", "--min-rows", "40"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "built 0 graph(s)"
    assert main(["--database-url", db_url, "embed", "backfill", "--min-rows", "3"]) == 1
    assert "--min-rows is for `embed graphs`" in capsys.readouterr().err


def test_no_graphs_when_the_threshold_is_zero_and_a_bad_threshold_is_refused(store: Store, db_url: str,
                                                                              tmp_path: Path) -> None:
    from factforge.errors import ConfigError
    from factforge.worker import _graphs as worker_graphs

    env = {"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path), "FACTFORGE_LLM": "off"}
    with Memory(settings=Settings.from_env({**env, "FACTFORGE_AGENT_GRAPH_MIN_ROWS": "0"}), llm=None,
                embedder=None, background=False) as memory:
        assert worker_graphs(memory, frozenset({("facts", "a1")})) == 0  # 0: the worker never builds
        assert _graphs(db_url) == {}
        assert [b.owner for b in memory.build_graphs(min_rows=40) if b.table == "turns"] == ["a1"]  # asked: yes
    with pytest.raises(ConfigError, match="FACTFORGE_AGENT_GRAPH_MIN_ROWS=-1 is outside"):
        Settings.from_env({**env, "FACTFORGE_AGENT_GRAPH_MIN_ROWS": "-1"})


def test_a_narrowing_filter_reads_the_agents_rows_exactly(store: Store, db_url: str) -> None:
    """A category, date, entity or method filter may match few of an agent's rows: a graph walk could stop
    before it meets them, so such a search reads the agent's rows exactly, graph or not."""
    from factforge.storage.search import _kinds, vector_statements

    def sent(kind: Any, **options: Any) -> str:
        return "; ".join(f"{settings}; {query}" for settings, query in
                         vector_statements("facts", kind.where, kind.params, DIM, 10, None, **options))

    store.build_graphs(min_rows=40)
    plain, = _kinds(["fact"], "a1", "t1", [], False, None, None, None, None)
    narrow, = _kinds(["fact"], "a1", "t1", ["technology"], False, None, None, None, None)
    episodes, = _kinds(["episode"], "a1", "t1", [], False, None, None, "Kafka", None)
    assert (plain.narrowed, narrow.narrowed, episodes.narrowed) == (False, True, True)
    graph = agent_graph_name("facts", "a1")
    assert graph in sent(plain)
    assert "_agent_" not in sent(narrow, own_graph=False)
    query = _unit(np.random.default_rng(5), 1)[0]
    hits = search(store, "s", agent_id="a1", team_id="t1", mode="vector", k=10, kinds=["fact"],
                  categories=["technology"], embedder=_Fixed(query.tolist()), max_distance=None)
    assert [h.content for h in hits] == _exact(db_url, query, "a1", 10)


def _exact_for(db_url: str, query: np.ndarray, agent: str, team: str, k: int) -> list[str]:
    with psycopg.connect(conninfo(db_url)) as conn:
        return [r[0] for r in conn.execute(
            "SELECT content FROM facts WHERE visibility = 'global' OR (visibility = 'team' AND team_id = %s) "
            "OR (visibility = 'private' AND agent_id = %s) ORDER BY embedding <=> %s::vector LIMIT %s",
            (team, agent, str(query.tolist()), k)).fetchall()]


@pytest.fixture
def teams(store: Store, db_url: str) -> Store:
    """The store above, plus 40 team facts of t2 (by a3), 40 global facts and 40 team episodes of t2, all with
    vectors."""
    _add_rows(store, db_url, 23, [(4, Scope("a3", "t2", "team")), (5, Scope("a3", "t2", "global"))],
              Scope("a3", "t2", "team"), "t", "the team runs job")
    return store


def test_teams_over_the_threshold_get_a_graph_each_and_a_caller_walks_its_own_teams_only(teams: Store,
                                                                                         db_url: str) -> None:
    """t1 (a1, a2, ODD) and t2 (a3) get a graph each of their team facts; a search walks its own team's graph,
    never the other team's, and answers as the exact read of everything the caller may see."""
    assert teams.build_graphs(min_rows=1000, team_min_rows=41) == []
    built = teams.build_graphs(min_rows=1000, team_min_rows=40)
    assert sorted((b.table, b.kind, b.owner, b.rows) for b in built) == [
        ("facts", "team", "t1", 40), ("facts", "team", "t2", 40), ("turns", "team", "t2", 40)]
    assert teams.stats()["team_graphs"] == {"facts": 2, "turns": 1}
    assert teams.stats()["agent_graphs"] == {"facts": 0, "turns": 0}
    with psycopg.connect(conninfo(db_url)) as conn:
        assert graph_candidates(conn, "facts", 1, kind="team") == []
    queries = _unit(np.random.default_rng(8), 4)
    for agent, team, other in (("a1", "t1", "t2"), ("a3", "t2", "t1")):
        plan = _plan(db_url, "facts", agent, queries[0], "team", team)
        assert f"Index Scan using {team_graph_name('facts', team)} on facts f (actual" in plan, plan
        assert team_graph_name("facts", other) not in plan, plan
        for q in queries:
            hits = search(teams, "s", agent_id=agent, team_id=team, mode="vector", k=20, kinds=["fact"],
                          embedder=_Fixed(q.tolist()), max_distance=None)
            assert [h.content for h in hits] == _exact_for(db_url, q, agent, team, 20)
            # never the other team's rows: t1's team facts are 3-*, t2's 4-*, global ones 5-*
            assert not any(h.content.split()[-1].startswith("4-" if team == "t1" else "3-") for h in hits)
            assert all(h.team_id == team for h in hits if h.visibility == "team")
    # episodes too: t2's team episodes by their graph, never by a caller of t1
    plan = _plan(db_url, "turns", "a3", queries[1], "team", "t2")
    assert f"Index Scan using {team_graph_name('turns', 't2')}" in plan, plan
    for agent, team, seen in (("a3", "t2", 40), ("a1", "t1", 40)):  # a1 sees its own 40 private episodes
        hits = search(teams, "s", agent_id=agent, team_id=team, mode="vector", k=100, kinds=["episode"],
                      embedder=_Fixed(queries[1].tolist()), max_distance=None)
        assert len(hits) == seen and all(h.team_id == team for h in hits)
        assert all(h.visibility == ("team" if team == "t2" else "private") for h in hits)
    # a caller without a team walks no team graph and sees no team rows
    hits = search(teams, "s", agent_id="a1", team_id=None, mode="vector", k=100, kinds=["fact"],
                  embedder=_Fixed(queries[0].tolist()), max_distance=None)
    assert {h.visibility for h in hits} == {"private", "global"} and len(hits) == 80


def test_an_invalid_team_graph_is_not_walked_and_the_next_build_makes_it_again(teams: Store, db_url: str) -> None:
    teams.build_graphs(min_rows=1000, team_min_rows=40)
    name = team_graph_name("facts", "t1")
    with psycopg.connect(conninfo(db_url)) as conn:
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", (name,))
    query = _unit(np.random.default_rng(4), 1)[0]
    plan = _plan(db_url, "facts", "a1", query, "team", "t1")
    assert "on facts f (never executed)" in plan and "on facts f_1 (actual" in plan, plan
    hits = search(teams, "s", agent_id="a1", team_id="t1", mode="vector", k=10, kinds=["fact"],
                  embedder=_Fixed(query.tolist()), max_distance=None)
    assert [h.content for h in hits] == _exact_for(db_url, query, "a1", "t1", 10)
    built = teams.build_graphs(min_rows=1000, team_min_rows=40)
    assert [(b.table, b.kind, b.owner) for b in built] == [("facts", "team", "t1")] and _graphs(db_url)[name] is True


def test_embedding_tells_whose_team_rows_got_vectors(db_url: str, tmp_path: Path) -> None:
    """The worker builds graphs for the owners whose rows it embedded: the team rows' teams are reported."""
    s = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    try:
        s.save([_fact("Team uses Kafka for billing")], Scope("a1", "t1", "team"), Provenance("k1"))
        s.save([_fact("Team uses Redis for caching")], Scope("a1", "t1", "private"), Provenance("k2"))
        s.save([_fact("Team uses Vault for secrets")], Scope("a3", "t2", "global"), Provenance("k3"))
        from factforge.storage.embeddings import embed_pending

        report = embed_pending(s, _Fixed(_unit(np.random.default_rng(1), 1)[0].tolist()))
        assert (report.facts, report.team_owners, report.private_agents) == (
            3, frozenset({("facts", "t1")}), frozenset({("facts", "a1")}))
    finally:
        s.close()
