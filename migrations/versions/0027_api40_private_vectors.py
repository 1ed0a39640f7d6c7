"""An agent's private vectors in narrow tables of their own: ``facts_private_vectors``, ``turns_private_vectors``.

Revision ID: 0027
Revises: 0026

An agent below the graph threshold (``factforge.storage.graphs``) has its private rows read exactly by every search
of its own: each row's distance to the query, then the nearest. Read from ``facts`` and ``turns`` that scan deformed
every wide row up to its filter columns (a turn's ``tsv`` is its 21st column, a fact's ``superseded_at`` its 29th):
``perf`` on the backends under ``bench_api.py``'s search load put 25% of PostgreSQL's CPU in
``tts_buffer_heap_getsomeattrs`` and 18% in the distances. The covering index of migrations 0013/0014 would answer
it too, but only index-only once VACUUM has marked the pages all-visible, which a memory being written to (and the
embed worker's vector updates) keeps from happening; the planner rightly prefers the sequential scan.

Each table here holds, per private row the default search reads exactly (a fact not superseded, an episode: a turn
with words), its id, its agent and its vector - nothing else, so a row is its vector and a scan reads nothing it
does not use. Triggers keep them: a row is (re)written when it is inserted with a vector or an update changes its
vector, agent, visibility or what makes it current (a fact's ``superseded_at``, a turn's ``tsv``), removed when it
leaves (an update or a delete), and a TRUNCATE empties them. An ALTER of the vector column's type fires no trigger:
``factforge.storage.embeddings.reset_embedding_column`` empties them itself.

The vectors are the rows' own (the same numbers, so the same distances and the same hits). At 2,790 episodes and
928 facts of one agent (``bench_api.py``'s memory) the two exact reads took 1.95-2.1 ms of backend CPU per search
(one statement, its generic plan), 1.25 ms from these tables; every write of a private row's vector costs a
narrow insert (and a delete when it changes). The readers' role is granted nothing here (the rows of every agent,
without row-level security).
"""

from __future__ import annotations

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# table -> what besides being private with a vector keeps a row in its side table (search's default filter)
_CURRENT = {"facts": "superseded_at IS NULL", "turns": "tsv IS NOT NULL"}
# the columns whose change can move a row in or out, or change what the side table holds of it (an update
# that changes none of them leaves the side table alone)
_WATCHED = {"facts": ("id", "agent_id", "visibility", "superseded_at", "embedding"),
            "turns": ("id", "agent_id", "visibility", "tsv", "embedding")}


def _kept(row: str, table: str) -> str:
    return (f"{row}.visibility = 'private' AND {row}.embedding IS NOT NULL AND {row}.agent_id IS NOT NULL "
            f"AND {row}.{_CURRENT[table]}")


def upgrade() -> None:
    for table in ("facts", "turns"):
        side = f"{table}_private_vectors"
        op.execute(f"CREATE TABLE {side} (id uuid PRIMARY KEY, agent_id text NOT NULL, embedding vector NOT NULL)")
        # a vector is read in its row (pgvector's types are STORAGE EXTERNAL: a long one would go to TOAST)
        op.execute(f"ALTER TABLE {side} ALTER COLUMN embedding SET STORAGE MAIN")
        op.execute(f"CREATE INDEX {side}_agent_idx ON {side} (agent_id)")
        op.execute(f"INSERT INTO {side} (id, agent_id, embedding) SELECT id, agent_id, embedding FROM {table} f "
                   f"WHERE {_kept('f', table)} ORDER BY agent_id")
        changed = " OR ".join(f"OLD.{c} IS DISTINCT FROM NEW.{c}" for c in _WATCHED[table])
        op.execute(f"""
            CREATE FUNCTION {side}_sync() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND NOT ({changed}) THEN
                    RETURN NULL;
                END IF;
                IF TG_OP <> 'INSERT' THEN
                    DELETE FROM {side} WHERE id = OLD.id;
                END IF;
                IF TG_OP <> 'DELETE' AND {_kept('NEW', table)} THEN
                    INSERT INTO {side} (id, agent_id, embedding) VALUES (NEW.id, NEW.agent_id, NEW.embedding);
                END IF;
                RETURN NULL;
            END $$""")
        # The triggers' own conditions name no other column than visibility: a column a trigger's definition
        # names cannot change its type (``factforge embed reset`` remakes the vector column), so the rest is
        # decided in the function.
        op.execute(f"CREATE TRIGGER {side}_ins AFTER INSERT ON {table} FOR EACH ROW "
                   f"WHEN (NEW.visibility = 'private') EXECUTE FUNCTION {side}_sync()")
        op.execute(f"CREATE TRIGGER {side}_upd AFTER UPDATE ON {table} FOR EACH ROW "
                   f"WHEN (OLD.visibility = 'private' OR NEW.visibility = 'private') EXECUTE FUNCTION {side}_sync()")
        op.execute(f"CREATE TRIGGER {side}_del AFTER DELETE ON {table} FOR EACH ROW "
                   f"WHEN (OLD.visibility = 'private') EXECUTE FUNCTION {side}_sync()")
        op.execute(f"""
            CREATE FUNCTION {side}_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                TRUNCATE {side};
                RETURN NULL;
            END $$""")
        op.execute(f"CREATE TRIGGER {side}_truncate AFTER TRUNCATE ON {table} "
                   f"FOR EACH STATEMENT EXECUTE FUNCTION {side}_truncate()")
        op.execute(f"ANALYZE {side}")


def downgrade() -> None:
    for table in ("facts", "turns"):
        side = f"{table}_private_vectors"
        for trigger in ("ins", "upd", "del", "truncate"):
            op.execute(f"DROP TRIGGER IF EXISTS {side}_{trigger} ON {table}")
        op.execute(f"DROP FUNCTION IF EXISTS {side}_sync()")
        op.execute(f"DROP FUNCTION IF EXISTS {side}_truncate()")
        op.execute(f"DROP TABLE IF EXISTS {side}")
