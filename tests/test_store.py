"""Storage against a real PostgreSQL + pgvector: idempotent writes, scopes, supersession, queue, BM25, RLS."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
import pytest

from factforge.errors import ValidationError
from factforge.settings import Settings
from factforge.memory import open_store
from factforge.storage.store import Provenance, Scope, Store, content_hash
from factforge.types import Entity, Explanation, Fact, Relationship

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def fact(content: str, category: str = "technology", *, subject: str | None = "Team", relation: str | None = None,
         slots: dict[str, str] | None = None, entities: tuple[str, ...] = (), conf: float = 0.9) -> Fact:
    return Fact(content=content, category=category, confidence=conf, method="pattern",  # type: ignore[arg-type]
                explanation=Explanation("pattern", "test_rule", conf, conf), entities=entities, rule_id="test_rule",
                subject=subject, relation=relation, slots=slots or {})


def prov(key: str, ts: datetime = T0, session: str | None = None) -> Provenance:
    return Provenance(source_key=key, session_id=session, user_message=f"msg {key}", message_ts=ts)


@pytest.fixture
def store(db_url: str, tmp_path) -> Store:
    s = open_store(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
    yield s
    s.close()


def raw(db_url: str) -> psycopg.Connection:
    return psycopg.connect(db_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)


TEAM = Scope("a1", "t1", "team")


def test_same_fact_twice_is_one_row_with_two_sources(store: Store) -> None:
    first = store.save([fact("Team uses Redis for caching")], TEAM, prov("k1"))
    again = store.save([fact("team uses Redis for caching.")], TEAM, prov("k2"))
    assert first[0].action == "new" and again[0].action == "mention"
    assert first[0].id == again[0].id and again[0].mention_count == 2
    assert [s["source_key"] for s in store.sources(first[0].id)] == ["k1", "k2"]
    # the same source again (a retried queue item) is not a new mention
    third = store.save([fact("Team uses Redis for caching")], TEAM, prov("k2"))
    assert third[0].mention_count == 2


def test_scopes_are_separate_rows_and_visibility_is_enforced(store: Store) -> None:
    store.save([fact("User likes tea", "preference", subject="User")], Scope("a1", "t1", "private"), prov("p1"))
    store.save([fact("User likes tea", "preference", subject="User")], Scope("a2", "t1", "private"), prov("p2"))
    store.save([fact("Team uses Go")], Scope("a2", "t1", "team"), prov("p3"))
    store.save([fact("Team uses Rust")], Scope("a3", "t2", "team"), prov("p4"))
    store.save([fact("Python 3.13 is released", "other", subject=None)], Scope("a3", None, "global"), prov("p5"))
    seen = sorted((f.content, f.agent_id) for f in store.facts(agent_id="a1", team_id="t1"))
    assert seen == [("Python 3.13 is released", "a3"), ("Team uses Go", "a2"), ("User likes tea", "a1")]
    assert len(store.facts()) == 5  # the analyst's view
    with pytest.raises(ValidationError):
        Scope(None, None, "private")
    with pytest.raises(ValidationError):
        Scope("a1", None, "team")


def test_switch_supersedes_old_tool_and_keeps_history(store: Store) -> None:
    old = store.save([fact("Team uses JWT for auth", relation="uses", slots={"tech": "JWT"})], TEAM, prov("o1"))
    other = store.save([fact("Team uses Redis", relation="uses", slots={"tech": "Redis"})], TEAM, prov("o2"))
    later = T0 + timedelta(days=3)
    new = store.save([fact("Team switched from JWT to Clerk", relation="switched_to",
                           slots={"old": "JWT", "new": "Clerk"})], TEAM, prov("n1", later))
    assert new[0].supersedes == (old[0].id,)
    current = {f.content for f in store.facts(agent_id="a1", team_id="t1")}
    assert current == {"Team uses Redis", "Team switched from JWT to Clerk"}
    history = {f.content: f for f in store.facts(agent_id="a1", team_id="t1", include_history=True)}
    assert history["Team uses JWT for auth"].superseded_by == new[0].id
    assert history["Team uses JWT for auth"].superseded_at == later
    before = {f.content for f in store.facts(agent_id="a1", team_id="t1", as_of=T0 + timedelta(days=1))}
    assert before == {"Team uses JWT for auth", "Team uses Redis"}
    assert other[0].id not in new[0].supersedes


def test_single_valued_attribute_is_replaced_only_in_the_same_private_scope(store: Store) -> None:
    mine = Scope("a1", "t1", "private")
    a = store.save([fact("User lives in Berlin", "identity", subject="User", relation="lives_in",
                         slots={"place": "Berlin"})], mine, prov("l1"))
    store.save([fact("User lives in Oslo", "identity", subject="User", relation="lives_in",
                     slots={"place": "Oslo"})], Scope("a2", "t1", "private"), prov("l2"))
    b = store.save([fact("User lives in Paris", "identity", subject="User", relation="lives_in",
                         slots={"place": "Paris"})], mine, prov("l3", T0 + timedelta(hours=1)))
    assert b[0].supersedes == (a[0].id,)
    assert {f.content for f in store.facts(agent_id="a2")} == {"User lives in Oslo"}


def test_paraphrase_by_vector_is_a_mention_but_reordered_words_are_not(store: Store) -> None:
    v = [1.0] + [0.0] * 383
    near = [0.999, 0.02] + [0.0] * 382
    s1 = store.save([fact("User enjoys hiking", "preference", subject="User")], TEAM, prov("v1"), embeddings=[v],
                    embedding_model="m")
    s2 = store.save([fact("User likes hiking", "preference", subject="User")], TEAM, prov("v2"), embeddings=[near],
                    embedding_model="m")
    assert s2[0].action == "paraphrase" and s2[0].id == s1[0].id and s2[0].mention_count == 2
    r1 = store.save([fact("User prefers tea over coffee", "preference", subject="User")], TEAM, prov("v3"),
                    embeddings=[[0.0, 1.0] + [0.0] * 382], embedding_model="m")
    r2 = store.save([fact("User prefers coffee over tea", "preference", subject="User")], TEAM, prov("v4"),
                    embeddings=[[0.0, 1.0] + [0.0] * 382], embedding_model="m")
    assert r2[0].action == "new" and r2[0].id != r1[0].id


def test_entities_and_relationships_are_upserted_with_counts(store: Store, db_url: str) -> None:
    ents = [Entity("Clerk", "technology"), Entity("JWT", "technology")]
    rel = [Relationship("Clerk", "JWT", "replaced")]
    store.save([fact("Team switched from JWT to Clerk", entities=("JWT", "Clerk"))], TEAM, prov("e1"),
               entities=ents, relationships=rel)
    store.save([fact("Team likes Clerk", entities=("Clerk",))], TEAM, prov("e2"), entities=ents[:1],
               relationships=rel)
    with raw(db_url) as conn:
        counts = dict(conn.execute("SELECT name, mention_count FROM entities").fetchall())
        links = conn.execute("SELECT count(*) FROM fact_entities").fetchone()[0]
        rel_count = conn.execute("SELECT mention_count FROM relationships WHERE label = 'replaced'").fetchone()[0]
    assert counts == {"Clerk": 2, "JWT": 1}
    assert links == 3 and rel_count == 2
    assert store.known_entities(1, agent_id="a1", team_id="t1") == ["Clerk"]


def test_known_entities_are_only_those_the_caller_may_see(store: Store) -> None:
    for content, ent, scope in (("Team uses Rust", "Rust", Scope("a3", "t2", "team")),
                                ("Team uses Go", "Go", Scope("a2", "t1", "team")),
                                ("User likes Vim", "Vim", Scope("a1", "t1", "private")),
                                ("User likes Emacs", "Emacs", Scope("a2", "t1", "private")),
                                ("Python is popular", "Python", Scope(None, None, "global"))):
        store.save([fact(content, entities=(ent,))], scope, prov(content), entities=[Entity(ent, "technology")])
    assert sorted(store.known_entities(20, agent_id="a1", team_id="t1")) == ["Go", "Python", "Vim"]
    assert store.known_entities(20) == ["Python"]  # no scope: nothing private or team-only


def test_forget_dry_run_then_real(store: Store) -> None:
    store.upsert_session("sess", agent_id="a1")
    store.save([fact("Team uses Go")], TEAM, prov("f1", session="sess"))
    store.save([fact("Team uses Zig")], TEAM, prov("f2"))
    store.record_turn("f1", session_id="sess", agent_id="a1", user_message="We use Go")
    assert store.forget(dry_run=True, session_id="sess") == 1
    assert len(store.facts()) == 2
    assert store.forget(session_id="sess") == 1
    assert [f.content for f in store.facts()] == ["Team uses Zig"]
    assert not store.turn_seen("f1")  # the session's messages are gone too
    assert store.forget(text="zig") == 1
    with pytest.raises(ValidationError):
        store.forget()


def test_record_turn_opens_its_session_in_the_same_statement(store: Store) -> None:
    def session(sid: str) -> dict[str, Any]:
        (row,) = store._all("SELECT kind, agent_id, team_id, intent, turn_count FROM sessions WHERE id = %(s)s",
                            {"s": sid})
        return row

    assert store.record_turn("o1", session_id="new", agent_id="a1", team_id="t1", session_kind="activity",
                             intent="fix the build")
    assert session("new") == {"kind": "activity", "agent_id": "a1", "team_id": "t1", "intent": "fix the build",
                              "turn_count": 1}
    assert not store.record_turn("o1", session_id="new", agent_id="a1", team_id="t1", session_kind="activity")
    assert session("new")["turn_count"] == 1  # a turn seen before is not counted again
    # another agent using the same id counts its turn but never rewrites the owner's intent
    assert store.record_turn("o2", session_id="new", agent_id="a2", team_id="t1", session_kind="activity",
                             intent="something else")
    assert session("new") == {"kind": "activity", "agent_id": "a1", "team_id": "t1", "intent": "fix the build",
                              "turn_count": 2}
    assert store.record_turn("o3", session_id="new", agent_id="a1", team_id="t1", session_kind="activity",
                             intent="ship it")
    assert session("new")["intent"] == "ship it" and session("new")["turn_count"] == 3


def test_enqueue_unanswered_queues_once_and_counts_the_miss(store: Store) -> None:
    assert store.enqueue_unanswered("u1", {"user": "my sister moved to Lisbon"}, "my sister moved to Lisbon",
                                    session_id="s1", agent_id="a1")
    assert not store.enqueue_unanswered("u1", {"user": "my sister moved to Lisbon"}, "My sister moved to Lisbon",
                                        session_id="s2", agent_id="a2")  # queued once per source; counted twice
    (item,) = store.claim_due(5)
    assert (item.source_key, item.payload["user"]) == ("u1", "my sister moved to Lisbon")
    (miss,) = store._all("SELECT count, session_ids, agent_ids FROM pattern_misses")
    assert miss == {"count": 2, "session_ids": ["s1", "s2"], "agent_ids": ["a1", "a2"]}


def test_queue_backoff_failure_and_release(store: Store) -> None:
    assert store.enqueue("q1", {"user": "hello there"})
    assert not store.enqueue("q1", {"user": "hello there"})  # once per source
    (item,) = store.claim_due(5)
    assert item.attempts == 1 and store.claim_due(5) == []
    assert store.fail(item.id, "bad json", max_attempts=2) == "pending"
    assert store.claim_due(5) == []  # backing off
    store._all("UPDATE extraction_queue SET next_try_at = now() RETURNING id")
    (item,) = store.claim_due(1)
    store.release(item.id, "connection refused", retry_in_s=0)
    (item,) = store.claim_due(1)
    assert item.attempts == 2  # the release did not count
    assert store.fail(item.id, "bad json again", max_attempts=2) == "failed"
    assert store.queue_counts()["failed"] == 1
    assert store.retry_failed() == 1 and store.queue_counts()["pending"] == 1


def test_abandoned_processing_item_is_reclaimed(store: Store) -> None:
    store.enqueue("q2", {"user": "x"})
    (item,) = store.claim_due(1)
    assert store.claim_due(1, stale_after_s=3600) == []
    (again,) = store.claim_due(1, stale_after_s=0)
    assert again.id == item.id


def test_bm25_uses_idf_and_length_and_stays_scoped(store: Store, db_url: str) -> None:
    from factforge.storage.search import search

    common = [f"Team uses service number {i} for deployment" for i in range(20)]
    store.save([fact(c) for c in common], TEAM, prov("b1"))
    store.save([fact("Team uses Kafka for deployment events")], TEAM, prov("b2"))
    store.save([fact("Team uses Kafka")], Scope("zz", "other-team", "team"), prov("b3"))
    hits = search(db_url, "kafka deployment", agent_id="a1", team_id="t1", mode="bm25", k=5)
    assert hits[0].content == "Team uses Kafka for deployment events"
    assert hits[0].bm25_rank == 1 and hits[0].vector_rank is None
    assert all(h.team_id == "t1" for h in hits)
    with raw(db_url) as conn:
        n_docs, = conn.execute("SELECT n_docs FROM bm25_corpus").fetchone()
        df, = conn.execute("SELECT df FROM bm25_terms WHERE lexeme = 'kafka'").fetchone()
    assert n_docs == 22 and df == 2
    store.forget(text="Kafka")
    with raw(db_url) as conn:
        assert conn.execute("SELECT df FROM bm25_terms WHERE lexeme = 'kafka'").fetchone()[0] == 0


def test_bm25_ranks_say_the_corpus_size_they_scored_with(store: Store, db_url: str) -> None:
    """Search weighs the kinds' rank lists by the corpus sizes the BM25 statements read: they are the
    statistics' sizes, also for a query with no indexable word or no word any document holds."""
    from factforge.storage.bm25 import bm25_ranks_sized
    from factforge.storage.scope import fact_filters

    store.save([fact(f"Team uses service number {i} for deployment") for i in range(7)], TEAM, prov("c1"))
    where, params = fact_filters("a1", "t1")
    with raw(db_url) as conn:
        ranks, size = bm25_ranks_sized(conn, where, params, "deployment service", 5, "fact_terms")
        assert len(ranks) == 5 and size == 7 == conn.execute("SELECT n_docs FROM bm25_corpus").fetchone()[0]
        assert bm25_ranks_sized(conn, where, params, "the of and", 5, "fact_terms") == ({}, 7)
        assert bm25_ranks_sized(conn, where, params, "zeppelin", 5, "fact_terms") == ({}, 7)
        assert bm25_ranks_sized(conn, "true", {}, "zeppelin", 5, "turns") == ({}, 0)


def _insert_fact(conn: psycopg.Connection, content: str, agent: str) -> None:
    import uuid

    conn.execute("INSERT INTO facts (id, content, category, confidence, extraction_method, agent_id, content_hash) "
                 "VALUES (%s, %s, 'technology', 0.9, 'pattern', %s, %s)", (uuid.uuid4(), content, agent, content))


def _insert_episode(conn: psycopg.Connection, text: str, agent: str) -> None:
    conn.execute("INSERT INTO turns (key, agent_id, user_message, visibility) VALUES (%s, %s, %s, 'private')",
                 (f"k-{agent}-{text}", agent, text))


@pytest.mark.parametrize("insert", [_insert_fact, _insert_episode], ids=["facts", "episodes"])
def test_writers_of_the_same_words_do_not_wait_for_each_other(db_url: str, insert: Any) -> None:
    """The statistics triggers append deltas: a transaction holding new documents open does not make
    another writer of the same lexemes wait (they used to queue on each lexeme's row until commit)."""
    family = "bm25" if insert is _insert_fact else "episode_bm25"
    with raw(db_url) as a, raw(db_url) as b:
        a.execute("BEGIN")
        insert(a, "The team deploys Kafka every night", "agent-a")
        b.execute("SET lock_timeout = '2s'")
        b.execute("BEGIN")
        insert(b, "The team runs Kafka on Mondays", "agent-b")  # waited (and timed out) before 0016
        b.execute("COMMIT")
        assert b.execute(f"SELECT df FROM {family}_terms WHERE lexeme = 'kafka'").fetchone() == (1,)
        a.execute("COMMIT")
        assert b.execute(f"SELECT df FROM {family}_terms WHERE lexeme = 'kafka'").fetchone() == (2,)
        assert b.execute(f"SELECT n_docs FROM {family}_corpus").fetchone() == (2,)


def test_statistics_folds_keep_the_totals(store: Store, db_url: str) -> None:
    """Every FOLD_EVERY-th statement moves the deltas into the base; totals never change by it, and after
    deletes they equal a recount of the table."""
    texts = [f"Team uses service number {i} for deployment" for i in range(70)]
    for i, t in enumerate(texts):  # one statement each: at least two folds
        store.save([fact(t)], TEAM, prov(f"f{i}"))
    store.forget(text="number 3")  # 11 facts: 3, 30-39
    with raw(db_url) as conn:
        deltas, = conn.execute("SELECT count(*) FROM bm25_terms_delta").fetchone()
        base, = conn.execute("SELECT count(*) FROM bm25_terms_base").fetchone()
        assert base > 0 and deltas < 32 * 8  # folded: no more than a fold's worth of statements left
        recount = dict(conn.execute("SELECT u.lexeme, count(*) FROM facts f, unnest(f.tsv) u GROUP BY 1").fetchall())
        stats = dict(conn.execute("SELECT lexeme, df FROM bm25_terms WHERE df > 0").fetchall())
        assert stats == recount and stats["deploy"] == 59
        assert conn.execute("SELECT n_docs, total_len FROM bm25_corpus").fetchone() == \
            conn.execute("SELECT count(*), sum(length(tsv)) FROM facts").fetchone()
        conn.execute("SELECT factforge_bm25_fold()")
        assert conn.execute("SELECT count(*) FROM bm25_terms_delta").fetchone() == (0,)
        assert dict(conn.execute("SELECT lexeme, df FROM bm25_terms WHERE df > 0").fetchall()) == recount


def test_websearch_operators(store: Store, db_url: str) -> None:
    from factforge.storage.search import search

    store.save([fact("Team uses Redis for caching"), fact("Team uses Redis for queues")], TEAM, prov("w1"))
    hits = search(db_url, "redis -queues", agent_id="a1", team_id="t1", mode="bm25")
    assert [h.content for h in hits] == ["Team uses Redis for caching"]


def test_row_level_security_matches_the_search_scope(store: Store, db_url: str) -> None:
    store.save([fact("User likes tea", "preference", subject="User")], Scope("a1", "t1", "private"), prov("r1"))
    store.save([fact("User likes jazz", "preference", subject="User")], Scope("a2", "t1", "private"), prov("r2"))
    store.save([fact("Team uses Go")], Scope("a2", "t1", "team"), prov("r3"))
    store.save([fact("Team uses Rust")], Scope("a3", "t2", "team"), prov("r4"))
    with raw(db_url) as conn:
        conn.execute("SET ROLE factforge_reader")
        conn.execute("SET factforge.agent_id = 'a1'")
        conn.execute("SET factforge.team_id = 't1'")
        rows = sorted(r[0] for r in conn.execute("SELECT content FROM facts"))
        view = sorted(r[0] for r in conn.execute("SELECT content FROM team_patterns"))
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM facts")
    expected = sorted(f.content for f in store.facts(agent_id="a1", team_id="t1"))
    assert rows == expected == ["Team uses Go", "User likes tea"]
    assert view == ["Team uses Go"]


def test_content_hash_normalises_case_space_and_final_punctuation() -> None:
    assert content_hash("Team uses  Redis.") == content_hash("team uses redis")
    assert content_hash("Team uses Redis") != content_hash("Team uses Redis 7")


def test_migrations_up_down_up_on_a_fresh_database(db_url: str, tmp_path) -> None:
    from factforge.storage import db

    with raw(db_url) as conn:
        conn.execute("DROP DATABASE IF EXISTS ff_migrations")
        conn.execute("CREATE DATABASE ff_migrations")
    from sqlalchemy.engine import make_url

    url = make_url(db_url).set(database="ff_migrations").render_as_string(hide_password=False)
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": str(tmp_path)})

    def tables() -> set[str]:
        with raw(url) as conn:
            return {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}

    try:
        assert db.current_revision(url) is None
        db.upgrade(url, settings)
        head = db.current_revision(url)
        assert {"facts", "fact_sources", "entities", "relationships", "extraction_queue", "bm25_terms_base",
                "bm25_terms_delta"} <= tables()
        db.downgrade(url, "base")
        assert tables() == {"alembic_version"} and db.current_revision(url) is None
        db.upgrade(url, settings)
        assert db.current_revision(url) == head
        with raw(url) as conn:
            assert conn.execute("SELECT value FROM factforge_meta WHERE key = 'embed_dim'").fetchone() == ("384",)
    finally:
        with raw(db_url) as conn:
            conn.execute("DROP DATABASE IF EXISTS ff_migrations WITH (FORCE)")


def test_fact_with_embedding_round_trips_and_its_tsvector_is_searchable(store: Store, db_url: str) -> None:
    vec = [0.0] * 384
    vec[7] = 1.0
    (saved,) = store.save([fact("Team deploys with ArgoCD", entities=("ArgoCD",))], TEAM, prov("t1"),
                          embeddings=[vec], embedding_model="test-model")
    with raw(db_url) as conn:
        row = conn.execute(
            "SELECT embedding::text, embedding_model, tsv::text, tsv @@ websearch_to_tsquery('english', 'deploying') "
            "FROM facts WHERE id = %s", (saved.id,)).fetchone()
    assert row[0].startswith("[0,0,0,0,0,0,0,1") and row[1] == "test-model"
    assert "'argocd'" in row[2] and "'deploy'" in row[2] and row[3] is True


def test_constraint_errors_surface_as_factforge_errors(store: Store) -> None:
    from factforge.errors import DatabaseError, FactforgeError

    # a label the relationships CHECK refuses: the database says no, the caller gets a DatabaseError
    with pytest.raises(DatabaseError, match="check constraint|violates"):
        store.save([fact("Team uses Go")], TEAM, prov("c1"), relationships=[Relationship("Go", "Rust", "Not Snake")])
    assert issubclass(DatabaseError, FactforgeError)
    assert store.facts() == []  # the transaction was rolled back as a whole


def test_migration_0003_merges_per_agent_team_rows_and_downgrades(db_url: str, tmp_path) -> None:
    from sqlalchemy.engine import make_url

    from factforge.storage import db

    with raw(db_url) as conn:
        conn.execute("DROP DATABASE IF EXISTS ff_merge")
        conn.execute("CREATE DATABASE ff_merge")
    url = make_url(db_url).set(database="ff_merge").render_as_string(hide_password=False)
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": str(tmp_path)})
    try:
        db.upgrade(url, settings, "0002")
        with raw(url) as conn:
            ids = []
            for agent in ("a1", "a2"):
                ids.append(conn.execute(
                    "INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                    "visibility, content_hash) VALUES ('Team uses Go', 'technology', 0.9, 'pattern', %s, 't1', "
                    "'team', %s) RETURNING id", (agent, content_hash("Team uses Go"))).fetchone()[0])
                conn.execute("INSERT INTO fact_sources (fact_id, source_key, agent_id) VALUES (%s, %s, %s)",
                             (ids[-1], f"k-{agent}", agent))
        db.upgrade(url, settings)
        with raw(url) as conn:
            rows = conn.execute("SELECT id, mention_count FROM facts").fetchall()
            sources = sorted(r[0] for r in conn.execute("SELECT agent_id FROM fact_sources"))
        assert rows == [(ids[0], 2)] and sources == ["a1", "a2"]
        db.downgrade(url, "0002")
        db.upgrade(url, settings)
    finally:
        with raw(db_url) as conn:
            conn.execute("DROP DATABASE IF EXISTS ff_merge WITH (FORCE)")


def test_llm_calls_and_their_rejections_are_summed_in_stats(store: Store) -> None:
    assert store.stats()["llm_rejections"] == {}
    store.record_llm_call("m", False, 80, 4, 12.0, "unparseable reply: invalid JSON")
    store.record_llm_call("m", True, 100, 20, 30.0, None, rejections={"ungrounded": 2, "duplicate": 1})
    store.record_llm_call("m", True, 50, 10, 10.0, None, rejections={"ungrounded": 1, "too_short": 0})
    s = store.stats()
    assert (s["llm_calls"], s["llm_errors"], s["llm_prompt_tokens"], s["llm_output_tokens"]) == (3, 1, 230, 34)
    assert s["llm_rejections"] == {"duplicate": 1, "ungrounded": 3}
    assert s["llm_median_ms"] == 20.0  # of the calls that worked


def test_migration_0004_adds_and_drops_llm_call_rejections(db_url: str, tmp_path) -> None:
    from sqlalchemy.engine import make_url

    from factforge.storage import db

    with raw(db_url) as conn:
        conn.execute("DROP DATABASE IF EXISTS ff_rejections")
        conn.execute("CREATE DATABASE ff_rejections")
    url = make_url(db_url).set(database="ff_rejections").render_as_string(hide_password=False)
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": str(tmp_path)})

    def columns() -> set[str]:
        with raw(url) as conn:
            return {r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'llm_calls'")}

    try:
        db.upgrade(url, settings, "0003")
        with raw(url) as conn:
            conn.execute("INSERT INTO llm_calls (model, ok, prompt_tokens) VALUES ('m', true, 5)")
        assert "rejections" not in columns()
        db.upgrade(url, settings)
        with raw(url) as conn:
            assert conn.execute("SELECT rejections FROM llm_calls").fetchall() == [({},)]
            with pytest.raises(psycopg.errors.CheckViolation):
                conn.execute("INSERT INTO llm_calls (model, ok, rejections) VALUES ('m', true, '[1]')")
        db.downgrade(url, "0003")
        assert "rejections" not in columns() and db.current_revision(url) == "0003"
        db.upgrade(url, settings)
        assert "rejections" in columns()
    finally:
        with raw(db_url) as conn:
            conn.execute("DROP DATABASE IF EXISTS ff_rejections WITH (FORCE)")


def test_forget_a_session_keeps_a_team_fact_another_session_also_said(store: Store) -> None:
    for agent, session in (("a1", "s1"), ("a2", "s2")):
        store.upsert_session(session, agent_id=agent, team_id="t1")
        store.save([fact("Team uses Go")], Scope(agent, "t1", "team"),
                   Provenance(f"k-{session}", session, f"said in {session}", message_ts=T0))
    assert store.forget(dry_run=True, session_id="s1") == 0
    assert store.forget(session_id="s1") == 0
    (kept,) = store.facts()
    assert kept.mention_count == 1 and kept.source_session == "s2" and kept.agent_id == "a2"
    assert [s["session_id"] for s in store.sources(kept.id)] == ["s2"]
    assert store.get(kept.id).source_session == "s2"
    assert store._all("SELECT source_user_message FROM facts") == [{"source_user_message": "said in s2"}]
    assert store.forget(agent_id="a2") == 1 and store.facts() == []


def test_forget_collects_entities_relationships_misses_and_queue(store: Store, db_url: str) -> None:
    store.upsert_session("s3", agent_id="a1")
    ents = [Entity("Clerk", "technology"), Entity("JWT", "technology")]
    store.save([fact("Team switched from JWT to Clerk", entities=("JWT", "Clerk"))], TEAM, prov("e1", session="s3"),
               entities=ents, relationships=[Relationship("Clerk", "JWT", "replaced")])
    store.save([fact("Team uses Go", entities=("Go",))], TEAM, prov("e2", session="s4"), entities=[Entity("Go", "technology")])
    store.record_turn("e1", session_id="s3", agent_id="a1", user_message="hmm what about that thing")
    store.record_miss("hmm what about that thing")  # recorded without provenance: matched by text
    store.record_miss("another message", session_id="s3", agent_id="a1")
    store.record_miss("someone else's message", session_id="s4", agent_id="a9")
    store.enqueue("e1", {"user": "x", "session_id": "s3"})
    assert store.forget(session_id="s3") == 1
    with raw(db_url) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM entities")] == ["Go"]
        assert conn.execute("SELECT count(*) FROM relationships").fetchone() == (0,)
        assert [r[0] for r in conn.execute("SELECT text FROM pattern_misses")] == ["someone else's message"]
        assert conn.execute("SELECT count(*) FROM extraction_queue").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM sessions WHERE id = 's3'").fetchone() == (0,)


def test_forget_by_text_drops_queued_work_of_its_sources(store: Store) -> None:
    store.save([fact("Team uses Zig")], TEAM, prov("z1"))
    store.save([fact("Team uses Odin")], TEAM, prov("z2"))
    store.enqueue("z1", {"user": "We use Zig"})
    store.enqueue("z2", {"user": "We use Odin"})
    assert store.forget(text="zig") == 1
    assert [i.source_key for i in store.claim_due(5)] == ["z2"]


def test_forgetting_a_superseding_fact_makes_the_old_one_current_again(store: Store) -> None:
    (old,) = store.save([fact("Team uses JWT for auth", relation="uses", slots={"tech": "JWT"})], TEAM, prov("o1"))
    (new,) = store.save([fact("Team switched from JWT to Clerk", relation="switched_to",
                              slots={"old": "JWT", "new": "Clerk"})], TEAM, prov("n1", T0 + timedelta(days=1)))
    assert new.supersedes == (old.id,)
    assert store.forget(fact_id=str(new.id)) == 1
    back = store.get(old.id)
    assert back.superseded_at is None and back.superseded_by is None and back.valid_to is None
    assert [f.content for f in store.facts()] == ["Team uses JWT for auth"]


@pytest.mark.parametrize("order", [("postgres", "PostgreSQL"), ("PostgreSQL", "postgres")])
def test_another_spelling_of_a_known_name_is_an_alias(store: Store, db_url: str, order: tuple[str, str]) -> None:
    for i, name in enumerate(order):
        store.save([fact(f"Team runs {name} number {i}", entities=(name,))], TEAM, prov(f"pg{i}"),
                   entities=[Entity(name, "technology")])
    with raw(db_url) as conn:
        rows = conn.execute("SELECT name, aliases, mention_count FROM entities").fetchall()
        links = conn.execute("SELECT count(DISTINCT entity_id), count(*) FROM fact_entities").fetchone()
    assert rows == [("PostgreSQL", ["postgres"], 2)]
    assert links == (1, 2)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Provenance("k", user_message="hi\x00there"), "user_message contains a NUL byte"),
    (lambda: Provenance("k", assistant_message="ok \udc80"), "assistant_message contains a lone surrogate"),
    (lambda: Provenance("k", session_id="s\x00"), "session_id contains a NUL"),
    (lambda: Provenance("k\ud800"), "source_key contains a lone surrogate"),
    (lambda: Provenance("k", activity_session="\x00"), "activity_session"),
    (lambda: Scope("a\x00", "t1", "team"), "agent_id contains a NUL"),
    (lambda: Scope("a1", "t\udfff", "team"), "team_id contains a lone surrogate"),
    (lambda: Fact("Team uses \ud83d", "technology", 0.5, "pattern", Explanation("pattern", "r", 0.5, 0.5)), None),
])
def test_unstorable_text_is_a_validation_error_before_sql(store: Store, make, match: str | None) -> None:
    if match is not None:
        with pytest.raises(ValidationError, match=match):
            make()
    else:
        with pytest.raises(ValidationError, match="lone surrogate"):
            store.save([make()], TEAM, prov("u1"))
    with pytest.raises(ValidationError, match="NUL"):
        store.upsert_session("s\x00")
    with pytest.raises(ValidationError, match="NUL"):
        store.record_turn("k", user_message="\x00")
    assert store.facts() == []


def test_as_of_uses_the_stated_validity(store: Store) -> None:
    import dataclasses

    since = dataclasses.replace(fact("Team uses Nomad", relation="uses", slots={"tech": "Nomad"}),
                                valid_from=T0 - timedelta(days=30))
    until = dataclasses.replace(fact("Team freezes deploys", "decision"), valid_to=T0 + timedelta(days=2))
    store.save([since, until], TEAM, prov("v1"))  # first heard of at T0
    at = {d: {f.content for f in store.facts(as_of=T0 + timedelta(days=d))} for d in (-40, -10, 1, 3)}
    assert at[-40] == set()
    assert at[-10] == {"Team uses Nomad"}  # before first_seen_at, but valid since a month before
    assert at[1] == {"Team uses Nomad", "Team freezes deploys"}
    assert at[3] == {"Team uses Nomad"}  # the freeze ended
    store.save([fact("Team switched from Nomad to Kubernetes", relation="switched_to",
                     slots={"old": "Nomad", "new": "Kubernetes"})], TEAM, prov("v2", T0 + timedelta(days=5)))
    assert "Team uses Nomad" not in {f.content for f in store.facts(as_of=T0 + timedelta(days=6))}
    assert "Team uses Nomad" in {f.content for f in store.facts(as_of=T0 + timedelta(days=4))}


def test_forget_finds_mentions_of_an_unregistered_session(store: Store) -> None:
    store.save([fact("Team uses Elm")], TEAM, prov("x1", session="never-registered"))
    store.save([fact("Team uses Elm")], Scope("a2", "t1", "team"), prov("x2", session="other"))
    assert store.forget(session_id="never-registered") == 0
    (kept,) = store.facts()
    assert kept.mention_count == 1 and [s["source_key"] for s in store.sources(kept.id)] == ["x2"]
    assert store.forget(session_id="other") == 1


def test_items_that_errored_are_claimed_after_fresh_ones(store: Store) -> None:
    store.enqueue("old", {"user": "x"})
    (item,) = store.claim_due(1)
    store.fail(item.id, "model crashed", max_attempts=5)
    store.enqueue("new", {"user": "y"})
    store._all("UPDATE extraction_queue SET next_try_at = now() RETURNING id")
    assert [i.source_key for i in store.claim_due(5)] == ["new", "old"]
