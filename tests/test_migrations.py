"""Migrations run by a database owner who may not create roles (a managed PostgreSQL's usual account)."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from factforge.storage import db
from factforge.storage.search import search
from factforge.settings import Settings, bundled_dir


@pytest.fixture(scope="module")
def fresh_cluster() -> Iterator[str]:
    """A cluster of its own: the shared test cluster already has the reader role."""
    from tests.servers import wheel_server

    tmp = Path(tempfile.mkdtemp(prefix="ffm"))
    server = wheel_server(tmp / "pg")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def test_owner_without_createrole_migrates_up_and_down(fresh_cluster: str, tmp_path: Path) -> None:
    with psycopg.connect(fresh_cluster, autocommit=True) as admin:
        admin.execute("CREATE ROLE ffowner LOGIN NOCREATEROLE")
        admin.execute("CREATE DATABASE ffo OWNER ffowner")
    base, query = fresh_cluster.split("?", 1)
    with psycopg.connect(f"{base.rsplit('/', 1)[0]}/ffo?{query}", autocommit=True) as admin:
        admin.execute("CREATE EXTENSION vector")  # what a managed service's admin console does
    url = "postgresql+psycopg://ffowner@/ffo?" + query
    settings = Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": str(tmp_path)})
    db.upgrade(url, settings)
    assert db.current_revision(url) == db._script_head()
    with psycopg.connect(db.conninfo(url)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("ffowner",)
        assert conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = 'factforge_reader'").fetchone() == (0,)
        # row-level security is on even without the role: other roles see nothing until it is granted
        assert conn.execute("SELECT relrowsecurity FROM pg_class WHERE relname = 'facts'").fetchone() == (True,)
        assert conn.execute("SELECT count(*) FROM pg_policies WHERE tablename = 'facts'").fetchone() == (0,)
    db.downgrade(url, "base")
    assert db.current_revision(url) is None
    db.upgrade(url, settings)
    assert db.current_revision(url) == db._script_head()


def _graphs(url: str) -> dict[str, str]:
    with psycopg.connect(db.conninfo(url)) as conn:
        return dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE indexdef LIKE '%USING hnsw%'"
                                 ).fetchall())


def _new_database(cluster: str, name: str, home: Path) -> tuple[str, Settings]:
    """A new empty database ``name`` in the test cluster: its SQLAlchemy URL and settings for it."""
    with psycopg.connect(cluster, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    base, query = cluster.split("?", 1)
    url = "postgresql+psycopg://" + f"{base.rsplit('/', 1)[0]}/{name}?{query}".split("://", 1)[1]
    return url, Settings.from_env({"FACTFORGE_DATABASE_URL": url, "FACTFORGE_HOME": str(home)})


def _private_index(url: str, table: str = "facts") -> str:
    with psycopg.connect(db.conninfo(url)) as conn:
        return str(conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                (f"{table}_private_agent_idx",)).fetchone()[0])


def test_0013_keeps_one_half_precision_graph_of_shared_rows_and_goes_back(fresh_cluster: str, tmp_path: Path) -> None:
    """Head: per table one HNSW graph, over ``embedding::halfvec(dim)`` of the shared rows (what search walks),
    and the agent's private facts with their vectors (an index-only exact read); back at 0012: the
    full-precision shared and private graphs, the agent's btree alone; and up again."""
    url, settings = _new_database(fresh_cluster, "ffhalf", tmp_path)
    db.upgrade(url, settings, "0021")  # 0023 replaces the shared graphs
    head = _graphs(url)
    assert sorted(head) == ["facts_embedding_shared_hnsw", "turns_embedding_shared_hnsw"]
    for table in ("facts", "turns"):
        graph = head[f"{table}_embedding_shared_hnsw"]
        assert f"((embedding)::halfvec({settings.embed_dim})) halfvec_cosine_ops" in graph
        assert "WHERE (visibility <> 'private'::text)" in graph
    assert "INCLUDE (id, visibility, team_id, superseded_at, embedding)" in _private_index(url)
    db.downgrade(url, "0013")
    db.downgrade(url, "0012")
    assert "INCLUDE" not in _private_index(url)
    back = _graphs(url)
    assert sorted(back) == ["facts_embedding_private_hnsw", "facts_embedding_shared_hnsw",
                            "turns_embedding_private_hnsw", "turns_embedding_shared_hnsw"]
    assert all("(embedding vector_cosine_ops)" in d for d in back.values())
    db.upgrade(url, settings, "0021")
    assert _graphs(url) == head


def test_0014_covers_the_agents_private_episodes_and_goes_back(fresh_cluster: str, tmp_path: Path) -> None:
    """Head: the agent's private episodes with their vectors and scope columns, under the episodes' condition
    (an index-only exact read, like the facts'); back at 0013: the agent's btree alone, as 0012 made it; and up
    again, with the episodes stored meanwhile in the index."""
    url, settings = _new_database(fresh_cluster, "ffcover", tmp_path)
    db.upgrade(url, settings)
    head = _private_index(url, "turns")
    assert head.endswith("USING btree (agent_id) INCLUDE (id, visibility, team_id, embedding) "
                         "WHERE ((visibility = 'private'::text) AND (tsv IS NOT NULL))")
    db.downgrade(url, "0013")
    assert db.current_revision(url) == "0013"
    assert _private_index(url, "turns").endswith("USING btree (agent_id) WHERE (visibility = 'private'::text)")
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
                     "VALUES ('k', 'a', 't', 'we use Redis', 'private', %s::vector)", (str([0.1] * settings.embed_dim),))
    db.upgrade(url, settings)
    assert _private_index(url, "turns") == head
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("SET enable_seqscan = off")
        assert conn.execute("SELECT count(*) FROM turns WHERE visibility = 'private' AND tsv IS NOT NULL "
                            "AND agent_id = 'a'").fetchone() == (1,)


def test_0015_builds_the_shared_graphs_with_a_longer_candidate_list_and_goes_back(fresh_cluster: str,
                                                                                  tmp_path: Path) -> None:
    """At 0021: both shared graphs with ef_construction 128; back at 0014:
    pgvector's defaults, the same expression and rows; and up again."""
    url, settings = _new_database(fresh_cluster, "ffefc", tmp_path)
    db.upgrade(url, settings, "0021")  # 0023 replaces the shared graphs
    head = _graphs(url)
    for table in ("facts", "turns"):
        assert "WITH (m='16', ef_construction='128')" in head[f"{table}_embedding_shared_hnsw"]
    db.downgrade(url, "0014")
    back = _graphs(url)
    assert sorted(back) == sorted(head)
    for name, ddl in back.items():
        assert "WITH" not in ddl and ddl.replace(" WHERE", " WITH (m='16', ef_construction='128') WHERE") == head[name]
    db.upgrade(url, settings, "0021")
    assert _graphs(url) == head


def _insert_rows(url: str, table: str, visibility: str, team: str, n: int, dim: int) -> None:
    """``n`` rows of ``team`` at ``visibility`` in ``table``, each with a vector of its own."""
    columns, values = (("content, content_hash, category, confidence, extraction_method",
                        "'Team uses service ' || i || %(t)s, md5(i || %(t)s || %(v)s), 'technology', 0.9, 'pattern'")
                       if table == "facts" else
                       ("key, user_message", "md5(i || %(t)s || %(v)s), 'we use service ' || i || %(t)s"))
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute(
            f"INSERT INTO {table} ({columns}, agent_id, team_id, visibility, embedding) "
            f"SELECT {values}, 'a', %(t)s, %(v)s, "
            f"(SELECT array_agg(sin(i * 7 + j))::real[] FROM generate_series(1, {dim}) j)::vector "
            "FROM generate_series(1, %(n)s) i", {"t": team, "v": visibility, "n": n})


def test_0023_walks_the_global_rows_alone_and_gives_large_teams_graphs_and_goes_back(fresh_cluster: str,
                                                                                     tmp_path: Path) -> None:
    """0023: per table the graph of the global rows (no longer every team's), a graph of its own for each team
    with at least DEFAULT_TEAM_GRAPH_MIN_ROWS team rows with a vector when the upgrade ran, none for a smaller
    team, and facts' team btree; back at 0022: 0015's shared graphs and nothing of 0023's; and up again. 0024
    (head): the global graphs built with ef_construction 800, the teams' as they were; back at 0023, 400."""
    from factforge.settings import DEFAULT_TEAM_GRAPH_MIN_ROWS
    from factforge.storage.graphs import team_graph_name

    url, settings = _new_database(fresh_cluster, "ffteams", tmp_path)
    db.upgrade(url, settings, "0022")
    shared = _graphs(url)
    for table in ("facts", "turns"):
        _insert_rows(url, table, "team", "big", DEFAULT_TEAM_GRAPH_MIN_ROWS, settings.embed_dim)
        _insert_rows(url, table, "team", "small", DEFAULT_TEAM_GRAPH_MIN_ROWS - 1, settings.embed_dim)
        _insert_rows(url, table, "global", "big", 3, settings.embed_dim)
    db.upgrade(url, settings, "0023")
    head = _graphs(url)
    assert sorted(head) == sorted(["facts_embedding_global_hnsw", "turns_embedding_global_hnsw",
                                   team_graph_name("facts", "big"), team_graph_name("turns", "big")])
    for table in ("facts", "turns"):
        assert head[f"{table}_embedding_global_hnsw"].endswith(
            f"USING hnsw (((embedding)::halfvec({settings.embed_dim})) halfvec_cosine_ops) "
            "WITH (m='16', ef_construction='400') WHERE (visibility = 'global'::text)")
        assert "WITH (m='16', ef_construction='400') WHERE ((visibility = 'team'::text)" in head[
            team_graph_name(table, "big")]
        assert "(team_id = 'big'::text))" in head[team_graph_name(table, "big")]
    with psycopg.connect(db.conninfo(url)) as conn:
        assert conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'facts_team_idx'").fetchone()[0].endswith(
            "USING btree (team_id) WHERE (visibility = 'team'::text)")
    db.downgrade(url, "0022")
    assert _graphs(url) == shared
    with psycopg.connect(db.conninfo(url)) as conn:
        assert conn.execute("SELECT to_regclass('facts_team_idx')").fetchone() == (None,)
    db.upgrade(url, settings, "0023")
    assert _graphs(url) == head
    db.upgrade(url, settings)
    rebuilt = _graphs(url)
    for table in ("facts", "turns"):
        name = f"{table}_embedding_global_hnsw"
        assert rebuilt[name] == head[name].replace("ef_construction='400'", "ef_construction='800'") != head[name]
    teams = {k: v for k, v in head.items() if "global" not in k}
    assert {k: v for k, v in rebuilt.items() if "global" not in k} == teams
    db.downgrade(url, "0023")
    assert _graphs(url) == head


def test_the_head_read_from_the_files_is_alembics_and_anything_unusual_is_left_to_alembic(tmp_path: Path) -> None:
    assert db._script_head() == db._alembic_head() == db.head_of_files(bundled_dir("migrations") / "versions")

    def chain(*pairs: tuple[str, str | None]) -> Path:
        folder = tmp_path / f"v{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        for rev, down in pairs:
            (folder / f"{rev}_x.py").write_text(f'revision = "{rev}"\ndown_revision = {down and repr(down)}\n')
        return folder

    assert db.head_of_files(chain(("a", None), ("b", "a"), ("c", "b"))) == "c"
    assert db.head_of_files(chain(("a", None), ("b", "a"), ("c", "a"))) is None  # two heads
    assert db.head_of_files(chain(("b", "a"),)) is None  # follows a revision that is not there
    odd = chain(("a", None))
    (odd / "b_x.py").write_text('revision = "b"\ndown_revision = ("a",)\n')  # a merge point: alembic's call
    assert db.head_of_files(odd) is None
    usual = chain(("a", None), ("b", "a"))
    (usual / "__init__.py").write_text("")
    (usual / ".#b_x.py").symlink_to(usual / "gone")  # an editor's lock file, a dangling link
    assert db.head_of_files(usual) == "b"
    (usual / "c_x.py").write_bytes(b"revision = \"c\"\xff\n")
    assert db.head_of_files(usual) is None  # unreadable: alembic decides


def _reader_state(url: str) -> dict[str, object]:
    """What the reader role may read: table and column grants, and how the views read (owner's or caller's rights)."""
    with psycopg.connect(db.conninfo(url)) as conn:
        return {
            "tables": sorted(conn.execute(
                "SELECT table_name, privilege_type FROM information_schema.role_table_grants "
                "WHERE grantee = 'factforge_reader' AND table_catalog = current_database()").fetchall()),
            # grants of single columns (information_schema lists a table grant's columns too)
            "columns": sorted(conn.execute(
                "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                "WHERE EXISTS (SELECT 1 FROM aclexplode(a.attacl) x "
                "WHERE x.grantee = 'factforge_reader'::regrole)").fetchall()),
            "views": sorted(conn.execute(
                "SELECT relname, reloptions FROM pg_class WHERE relkind = 'v' "
                "AND relname IN ('current_facts', 'episodes', 'sources')").fetchall()),
        }


def _reader_reads(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("SET ROLE factforge_reader")
        conn.execute("SET factforge.agent_id = 'a'")
        conn.execute("SET factforge.team_id = 't1'")
        return conn.execute(sql).fetchall()


def test_0018_hides_other_agents_sessions_from_the_reader_and_goes_back(pg_server_url: str, tmp_path: Path) -> None:
    """Head: the reader reads the raw tables without their session columns, and the views show only its own
    agent's sessions; back at 0017: table-wide grants and the caller's-rights views as 0002/0010 made them
    (another agent's session readable again, no column grant left over); and up again to the same grants."""
    from factforge.memory import Memory

    url, settings = _new_database(db.conninfo(pg_server_url), "ffsessions", tmp_path)
    try:
        db.upgrade(url, settings)
        with Memory(settings=settings, llm=None, embedder=None, background=False) as memory:
            memory.remember(user="We decided to use Redis for caching.", agent_id="b", team_id="t1", session_id="sb")
            memory.remember(user="We decided to use Redis for caching.", agent_id="a", team_id="t1", session_id="sa")
        head = _reader_state(url)
        assert [name for name, _ in head["views"]] == ["current_facts", "episodes", "sources"]
        assert all(options == ["security_barrier=true"] for _, options in head["views"])
        assert ("fact_sources", "session_id") not in head["columns"] and ("fact_sources", "agent_id") in head["columns"]
        assert sorted(_reader_reads(url, "SELECT agent_id, session_id FROM sources")) == [("a", "sa"), ("b", None)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            _reader_reads(url, "SELECT session_id FROM fact_sources")

        db.downgrade(url, "0017")
        back = _reader_state(url)
        assert back["columns"] == []
        assert {("facts", "SELECT"), ("fact_sources", "SELECT"), ("turns", "SELECT"), ("current_facts", "SELECT"),
                ("episodes", "SELECT")} <= set(back["tables"])
        assert back["views"] == [("current_facts", ["security_invoker=true"]), ("episodes", ["security_invoker=true"])]
        assert sorted(_reader_reads(url, "SELECT agent_id, session_id FROM fact_sources")) == [("a", "sa"), ("b", "sb")]
        assert sorted(_reader_reads(url, "SELECT source_session FROM current_facts")) == [("sb",)]

        db.upgrade(url, settings)
        assert _reader_state(url) == head
    finally:
        with psycopg.connect(db.conninfo(pg_server_url), autocommit=True) as admin:
            admin.execute("DROP DATABASE IF EXISTS ffsessions WITH (FORCE)")


# Documents for factforge_scoped_tsv: a fact's and an episode's words, none, positions and weights, a lexeme with a
# line break, one over 1,000 bytes, and lexemes over 1,000 bytes together; each in every scope (and none).
_SCOPED_DOCS = (
    "to_tsvector('english', 'User prefers PostgreSQL over MySQL for billing work')",
    "to_tsvector('english', 'By the way, we migrated the search service from Elasticsearch to OpenSearch "
    "since last week - https://example.org/a/b?c=1 and mail ops@example.org')",
    "''::tsvector", "'a:1A b:2,3B c'::tsvector", "E'''a\\nb'' c d'::tsvector",
    "('''' || repeat('x', 1500) || ''' short')::tsvector",
    "array_to_tsvector(ARRAY(SELECT 'w' || i || repeat('y', 40) FROM generate_series(1, 40) i))",
    "NULL::tsvector",
)
_SCOPES = (("'global'", "NULL", "NULL"), ("'team'", "'t1'", "'a'"), ("'team'", "NULL", "NULL"),
           ("'private'", "'t1'", "'agent-7'"), ("'private'", "NULL", "NULL"), ("NULL", "NULL", "NULL"))


def _scoped_tsv(url: str) -> tuple[tuple[object, ...], list[object]]:
    """factforge_scoped_tsv's declaration (language, volatility, parallel safety, cost) and its value for every
    document in every scope."""
    with psycopg.connect(db.conninfo(url)) as conn:
        declared = conn.execute(
            "SELECT l.lanname, p.provolatile, p.proparallel, p.procost, p.proisstrict FROM pg_proc p "
            "JOIN pg_language l ON l.oid = p.prolang WHERE p.proname = 'factforge_scoped_tsv'").fetchone()
        values = [conn.execute(f"SELECT factforge_scoped_tsv({doc}, {vis}, {team}, {agent})::text").fetchone()[0]
                  for doc in _SCOPED_DOCS for vis, team, agent in _SCOPES]
    return declared, values


def test_0021_computes_the_same_scoped_tsvector_without_a_subquery_and_goes_back(fresh_cluster: str,
                                                                                 tmp_path: Path) -> None:
    """Head: factforge_scoped_tsv in PL/pgSQL (no executor per row), declared as before (IMMUTABLE, PARALLEL
    SAFE, COST 1000), with 0006's SQL body's value for every document and scope; a fact stored before the
    upgrade is found through the scoped index after it; back at 0020 the SQL body; and up again."""
    url, settings = _new_database(fresh_cluster, "ffscoped", tmp_path)
    db.upgrade(url, settings, "0024")  # 0025 adds keys (its own test below)
    head_declared, head_values = _scoped_tsv(url)
    assert head_declared == ("plpgsql", "i", "s", 1000.0, False)
    db.downgrade(url, "0020")
    back_declared, back_values = _scoped_tsv(url)
    assert back_declared == ("sql", "i", "s", 1000.0, False)
    assert head_values == back_values
    assert head_values[0] is not None and head_values[-1] is None
    with psycopg.connect(db.conninfo(url)) as conn:  # a fact indexed by the SQL body
        conn.execute("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                     "visibility, content_hash) VALUES ('User prefers Redis', 'preference', 0.9, 'pattern', 'a', "
                     "'t1', 'team', 'h')")
    db.upgrade(url, settings, "0024")
    assert _scoped_tsv(url) == (head_declared, head_values)
    _scoped_gin_finds_one(url, "redi")


def _scoped_gin_finds_one(url: str, key: str) -> None:
    """Team t1's scoped key ``key`` ("redi", "redi 2.3") is read through fact_terms_scoped_gin and finds one row."""
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("SET enable_seqscan = off")
        literal = conn.execute("SELECT quote_literal('t' || md5('t1') || ' ' || %s)", (key,)).fetchone()[0]
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT id FROM fact_terms WHERE factforge_scoped_tsv(tsv, visibility, team_id, agent_id) "
            "@@ %s::tsquery", (literal,)).fetchall())
        assert "fact_terms_scoped_gin" in plan
        assert conn.execute("SELECT count(*) FROM fact_terms WHERE factforge_scoped_tsv(tsv, visibility, team_id, "
                            "agent_id) @@ %s::tsquery", (literal,)).fetchone() == (1,)


def test_0025_keys_each_lexeme_by_its_impact_class_too_and_goes_back(fresh_cluster: str, tmp_path: Path) -> None:
    """Head: factforge_scoped_tsv gives 0024's tsvector plus, for each keyed lexeme, the same key with its impact
    class ("<key> <lexeme> <tf>.<length class>"), declared as before; a fact stored before the upgrade is found by
    its class key after it (the indexes are rebuilt); back at 0024 the old values, and up again."""
    url, settings = _new_database(fresh_cluster, "ffclasses", tmp_path)
    db.upgrade(url, settings, "0024")
    old_declared, old_values = _scoped_tsv(url)
    with psycopg.connect(db.conninfo(url)) as conn:  # indexed by 0024's body
        conn.execute("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                     "visibility, content_hash) VALUES ('User prefers Redis, Redis', 'preference', 0.9, 'pattern', "
                     "'a', 't1', 'team', 'h')")
    db.upgrade(url, settings)
    head_declared, head_values = _scoped_tsv(url)
    assert head_declared == old_declared == ("plpgsql", "i", "s", 1000.0, False)
    classed = 0
    for old, new in zip(old_values, head_values):
        if old is None or new is None:
            assert old is None and new is None
            continue
        old_keys = set(re.findall(r"'((?:[^']|'')*)'", str(old)))
        new_keys = set(re.findall(r"'((?:[^']|'')*)'", str(new)))
        added = new_keys - old_keys
        assert old_keys <= new_keys and {k.rsplit(" ", 1)[0] for k in added} <= old_keys
        assert all(re.fullmatch(r"[1-4]\.[0-9]+", k.rsplit(" ", 1)[1]) for k in added)
        assert len(added) == len([k for k in old_keys if " " in k])  # one class key per keyed lexeme
        classed += len(added)
    assert classed
    _scoped_gin_finds_one(url, "redi 2.3")
    db.downgrade(url, "0024")
    assert _scoped_tsv(url) == (old_declared, old_values)
    db.upgrade(url, settings)
    assert _scoped_tsv(url) == (head_declared, head_values)


def _length_indexes(url: str) -> dict[str, str]:
    """The length btrees of migration 0019 that exist: name -> definition."""
    with psycopg.connect(db.conninfo(url)) as conn:
        return dict(conn.execute("SELECT indexname, indexdef FROM pg_indexes "
                                 "WHERE indexname ~ '_dl_(global|team|private)_idx$'").fetchall())


def test_0026_drops_the_facts_length_indexes_keeps_the_episodes_and_goes_back(fresh_cluster: str,
                                                                             tmp_path: Path) -> None:
    """At 0025 both tables have 0019's three length btrees; the head has only the episodes' (turns) ones, and a
    bm25 search still finds a stored fact; back at 0025 the facts' three are as they were."""
    url, settings = _new_database(fresh_cluster, "ffdlidx", tmp_path)
    db.upgrade(url, settings, "0025")
    before = _length_indexes(url)
    assert sorted(before) == sorted(f"{t}_dl_{v}_idx" for t in ("fact_terms", "turns")
                                    for v in ("global", "team", "private"))
    db.upgrade(url, settings)
    head = _length_indexes(url)
    assert head == {k: v for k, v in before.items() if k.startswith("turns_")}
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                     "visibility, content_hash) VALUES ('User prefers Redis', 'preference', 0.9, 'pattern', "
                     "'a', 't1', 'team', 'h')")
    hits = search(url, "redis", agent_id="a", team_id="t1", mode="bm25")
    assert [h.content for h in hits] == ["User prefers Redis"]
    db.downgrade(url, "0025")
    assert _length_indexes(url) == before


def _vectors_inline(url: str) -> tuple[dict[str, str], list[bool]]:
    """Each table's storage of its vectors, and for each fact (in content order) whether its vector is in its row."""
    with psycopg.connect(db.conninfo(url)) as conn:
        storage = dict(conn.execute("SELECT attrelid::regclass::text, attstorage FROM pg_attribute "
                                    "WHERE attname = 'embedding' AND attrelid IN ('facts'::regclass, 'turns'::regclass)"
                                    ).fetchall())
        inline = [r[0] for r in conn.execute("SELECT pg_column_toast_chunk_id(embedding) IS NULL FROM facts "
                                             "ORDER BY content").fetchall()]
    return storage, inline


def _insert_wide_fact(url: str, dim: int, content: str) -> None:
    """A fact over 2 KB: its vector, and ~1,500 bytes of text that does not compress (hex digits)."""
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                     "visibility, content_hash, embedding) VALUES (%s || (SELECT string_agg(md5(%s || i), '') "
                     "FROM generate_series(1, 47) i), 'other', 0.9, 'pattern', 'a', 't', 'private', %s, %s::vector)",
                     (content, content, content, str([0.1] * dim)))


def test_0022_keeps_the_vectors_in_their_rows_and_goes_back(fresh_cluster: str, tmp_path: Path) -> None:
    """Head: facts' and episodes' vectors are STORAGE MAIN, so a wide fact's vector stays in its row (its other
    text goes to TOAST); back at 0021: pgvector's EXTERNAL, a wide fact's vector out of line; and up again,
    where the fact written meanwhile keeps its vector where it was until rewritten (VACUUM FULL)."""
    url, settings = _new_database(fresh_cluster, "ffinline", tmp_path)
    db.upgrade(url, settings)
    _insert_wide_fact(url, settings.embed_dim, "a")
    assert _vectors_inline(url) == ({"facts": "m", "turns": "m"}, [True])
    db.downgrade(url, "0021")
    _insert_wide_fact(url, settings.embed_dim, "b")
    assert _vectors_inline(url) == ({"facts": "e", "turns": "e"}, [True, False])
    db.upgrade(url, settings)
    assert _vectors_inline(url) == ({"facts": "m", "turns": "m"}, [True, False])
    with psycopg.connect(db.conninfo(url), autocommit=True) as conn:
        conn.execute("VACUUM FULL facts")
    assert _vectors_inline(url)[1] == [True, True]


def _private_copy(url: str, table: str) -> set[tuple[str, str, str]] | None:
    """The rows of ``table``'s narrow copy of the private vectors (migration 0027), or None without one."""
    with psycopg.connect(db.conninfo(url)) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f"{table}_private_vectors",)).fetchone()[0] is None:
            return None
        return {(str(i), a, e) for i, a, e in conn.execute(
            f"SELECT id, agent_id, embedding::text FROM {table}_private_vectors").fetchall()}


def test_0027_copies_the_private_vectors_and_goes_back(fresh_cluster: str, tmp_path: Path) -> None:
    """At 0026 a private fact with a vector, one without, a team fact and an agent's episode are stored; the
    upgrade copies the private fact's and the episode's vectors (and nothing else), the triggers then follow an
    embedding written later, and the downgrade drops the copies and their triggers."""
    url, settings = _new_database(fresh_cluster, "ffprivvec", tmp_path)
    db.upgrade(url, settings, "0026")
    vec = str([0.25] * settings.embed_dim)
    with psycopg.connect(db.conninfo(url)) as conn:
        for content, vis, embedding in (("a", "private", vec), ("b", "private", None), ("c", "team", vec)):
            conn.execute("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                         "visibility, content_hash, embedding) VALUES (%s, 'other', 0.9, 'pattern', 'ag', 't', %s, %s, "
                         "%s::vector)", (content, vis, content, embedding))
        conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility, embedding) "
                     "VALUES ('k1', 'ag', 't', 'we use kafka', 'private', %s::vector)", (vec,))
        fact_a = str(conn.execute("SELECT id FROM facts WHERE content = 'a'").fetchone()[0])
        turn = str(conn.execute("SELECT id FROM turns").fetchone()[0])
    assert _private_copy(url, "facts") is None
    db.upgrade(url, settings)
    vec_text = "[" + ",".join(["0.25"] * settings.embed_dim) + "]"
    assert _private_copy(url, "facts") == {(fact_a, "ag", vec_text)}
    assert _private_copy(url, "turns") == {(turn, "ag", vec_text)}
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("UPDATE facts SET embedding = %s::vector WHERE content = 'b'", (vec,))
        fact_b = str(conn.execute("SELECT id FROM facts WHERE content = 'b'").fetchone()[0])
    assert _private_copy(url, "facts") == {(fact_a, "ag", vec_text), (fact_b, "ag", vec_text)}
    db.downgrade(url, "0026")
    assert _private_copy(url, "facts") is None and _private_copy(url, "turns") is None
    with psycopg.connect(db.conninfo(url)) as conn:  # no trigger left behind to write into a table that is gone
        conn.execute("UPDATE facts SET embedding = NULL")
        conn.execute("DELETE FROM turns")


def test_0028_private_rows_inserted_without_a_vector_fire_no_trigger(fresh_cluster: str, tmp_path: Path) -> None:
    """After 0028 the insert trigger's WHEN names the vector: a private fact inserted with one is copied, one
    without fires nothing (and is copied when the embed worker gives it a vector); the downgrade restores 0027's."""
    url, settings = _new_database(fresh_cluster, "ffprivwhen", tmp_path)
    db.upgrade(url, settings, "0027")

    def when() -> list[str]:
        with psycopg.connect(db.conninfo(url)) as conn:
            return sorted(conn.execute("SELECT pg_get_triggerdef(oid) FROM pg_trigger "
                                       "WHERE tgname LIKE '%private_vectors_ins'").fetchone())

    assert "embedding IS NOT NULL" not in when()[0]
    db.upgrade(url, settings)
    assert "(new.embedding IS NOT NULL)" in when()[0]
    vec = str([0.5] * settings.embed_dim)
    with psycopg.connect(db.conninfo(url)) as conn:
        for content, embedding in (("a", vec), ("b", None)):
            conn.execute("INSERT INTO facts (content, category, confidence, extraction_method, agent_id, team_id, "
                         "visibility, content_hash, embedding) VALUES (%s, 'other', 0.9, 'pattern', 'ag', 't', "
                         "'private', %s, %s::vector)", (content, content, embedding))
        conn.execute("INSERT INTO turns (key, agent_id, team_id, user_message, visibility) "
                     "VALUES ('k1', 'ag', 't', 'we use kafka', 'private')")
        ids = {c: str(i) for c, i in conn.execute("SELECT content, id FROM facts").fetchall()}
    vec_text = "[" + ",".join(["0.5"] * settings.embed_dim) + "]"
    assert _private_copy(url, "facts") == {(ids["a"], "ag", vec_text)}
    assert _private_copy(url, "turns") == set()
    with psycopg.connect(db.conninfo(url)) as conn:
        conn.execute("UPDATE facts SET embedding = %s::vector WHERE content = 'b'", (vec,))
        conn.execute("UPDATE turns SET embedding = %s::vector", (vec,))
        turn = str(conn.execute("SELECT id FROM turns").fetchone()[0])
    assert _private_copy(url, "facts") == {(ids["a"], "ag", vec_text), (ids["b"], "ag", vec_text)}
    assert _private_copy(url, "turns") == {(turn, "ag", vec_text)}
    db.downgrade(url, "0027")
    assert "embedding IS NOT NULL" not in when()[0]
