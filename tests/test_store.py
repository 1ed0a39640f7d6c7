"""Storage against a real PostgreSQL + pgvector: idempotent writes, scopes, supersession, queue, BM25, RLS."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import psycopg
import pytest

from factforge.errors import ValidationError
from factforge.settings import Settings
from factforge.store import Provenance, Scope, Store, content_hash
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
    s = Store.open(Settings.from_env({"FACTFORGE_DATABASE_URL": db_url, "FACTFORGE_HOME": str(tmp_path)}))
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
    assert store.known_entities(1) == ["Clerk"]


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
    from factforge.search import search

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


def test_websearch_operators(store: Store, db_url: str) -> None:
    from factforge.search import search

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
    from factforge import db

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
        assert {"facts", "fact_sources", "entities", "relationships", "extraction_queue", "bm25_terms"} <= tables()
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
