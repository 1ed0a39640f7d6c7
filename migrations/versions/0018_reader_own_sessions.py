"""The SQL reader role reads a session id only where its own agent wrote the row.

Revision ID: 0018
Revises: 0017

Until now ``factforge_reader`` read ``fact_sources.session_id``, ``facts.source_session`` and the turns' session
columns as stored: a teammate's private conversation's session id behind a team fact (or anybody's behind a
global fact) showed in ``fact_sources``, ``current_facts`` and, for shared episodes, in ``turns`` and
``episodes``. The library never names them (``scope.own_session``, ``sources()``); now the reader does not either.

Row-level security decides rows, not columns, and a column privilege holds for every row: so

* the reader keeps SELECT on every column of ``facts``, ``fact_sources`` and ``turns`` but the session columns,
  the turn keys (hashes of a turn's session among the rest) and the message copies older provenance rows kept:
  :data:`HIDDEN`. Its policies are unchanged, and so are the views that never named those columns
  (``team_patterns``, ``entity_facts``, ``recent_changes``: still ``security_invoker``, still counting every
  agent's sources);
* ``current_facts`` and ``episodes`` (same columns as before) and a new ``sources`` (``fact_sources``' columns,
  and ``episode_id``: the episode a source was said in, where the caller may read it - what a join on the
  keys gave) read with their owner's rights and show a hidden column only on the caller's own agent's rows,
  NULL on the others'. Reading with the owner's rights, they apply the reader's visibility rule themselves
  (:func:`_scope`, the policy of migrations 0002 and 0010; the test suite checks that each view shows exactly
  the rows the policies show). They are security barriers, so no condition of the caller (a failing cast,
  say) runs on a row before the scope has let it through; and a caller that row-level security does not
  apply to (the owner, the library, a superuser) sees every row and every session as before.

A column a later migration adds to those three tables is not the reader's until that migration grants it.
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

READER = "factforge_reader"

# The columns of other agents' conversations: sessions (chat and activity), the message copies of provenance
# rows stored before 0010, and the turn keys - a key is a hash of the turn's agent, team, session, time and
# words, so next to a shared episode's words it would confirm a guessed session id. Each is readable through
# the views, on the caller's own rows.
HIDDEN = {
    "facts": ("source_session", "source_activity_session", "source_user_message", "source_assistant_message"),
    "fact_sources": ("source_key", "session_id", "activity_session", "user_message", "assistant_message"),
    "turns": ("key", "session_id", "activity_session"),
}

_AGENT = "nullif(current_setting('factforge.agent_id', true), '')"
_TEAM = "nullif(current_setting('factforge.team_id', true), '')"


def _scope(a: str) -> str:
    """The reader policy of facts and turns (migrations 0002, 0010), over row ``a``."""
    return (f"({a}.visibility = 'global' OR ({a}.visibility = 'team' AND {a}.team_id = {_TEAM}) "
            f"OR ({a}.visibility = 'private' AND {a}.agent_id = {_AGENT}))")


def _unfiltered(table: str) -> str:
    """True for a caller row-level security does not apply to (the table's owner, a superuser): it reads every
    row as before. The table is named by oid (a regclass constant), so no temporary table of the caller's can
    stand in for it; evaluated once per query (an InitPlan)."""
    return f"NOT (SELECT row_security_active('{table}'::regclass))"


def _own(table: str, a: str, column: str, name: str | None = None) -> str:
    """Column ``column`` of row ``a`` where the caller's agent wrote the row (or it reads everything), else NULL."""
    return (f"CASE WHEN {_unfiltered(table)} OR {a}.agent_id = {_AGENT} THEN {a}.{column} END "
            f"AS {name or column}")


_CURRENT_FACTS = f"""
    CREATE VIEW current_facts WITH (security_barrier = true) AS
    SELECT f.id, f.content, f.category, f.confidence, f.extraction_method, f.rule_id, f.entities, f.subject,
           f.relation, f.slots, f.visibility, f.agent_id, f.team_id, {_own("facts", "f", "source_session")},
           {_own("facts", "f", "source_activity_session")}, f.mention_count, f.first_seen_at, f.last_seen_at,
           f.valid_from, f.valid_to, f.explanation
    FROM facts f WHERE f.superseded_at IS NULL AND ({_unfiltered("facts")} OR {_scope("f")})
"""

_SOURCES = f"""
    CREATE VIEW sources WITH (security_barrier = true) AS
    SELECT s.id, s.fact_id, {_own("fact_sources", "s", "source_key")}, {_own("fact_sources", "s", "session_id")},
           {_own("fact_sources", "s", "activity_session")}, s.agent_id, {_own("fact_sources", "s", "user_message")},
           {_own("fact_sources", "s", "assistant_message")}, s.message_ts, s.seen_at,
           (SELECT t.id FROM turns t WHERE t.key = s.source_key AND t.visibility IS NOT NULL
              AND ({_unfiltered("turns")} OR {_scope("t")})) AS episode_id
    FROM fact_sources s
    WHERE {_unfiltered("fact_sources")} OR EXISTS (SELECT 1 FROM facts f WHERE f.id = s.fact_id AND {_scope("f")})
"""

_EPISODES = f"""
    CREATE VIEW episodes WITH (security_barrier = true) AS
    SELECT t.id, {_own("turns", "t", "key", "source_key")}, {_own("turns", "t", "session_id")},
           {_own("turns", "t", "activity_session")}, t.agent_id, t.team_id, t.visibility, t.user_name,
           t.assistant_name, t.user_message AS content, t.entities, t.message_ts, t.valid_from, t.valid_to,
           t.created_at
    FROM turns t WHERE t.visibility IS NOT NULL AND ({_unfiltered("turns")} OR {_scope("t")})
"""

# The views as 0002 and 0010 made them, for the downgrade.
_OLD_CURRENT_FACTS = """
    CREATE VIEW current_facts WITH (security_invoker = true) AS
    SELECT id, content, category, confidence, extraction_method, rule_id, entities, subject, relation, slots,
           visibility, agent_id, team_id, source_session, source_activity_session, mention_count,
           first_seen_at, last_seen_at, valid_from, valid_to, explanation
    FROM facts WHERE superseded_at IS NULL
"""

_OLD_EPISODES = """
    CREATE VIEW episodes WITH (security_invoker = true) AS
    SELECT id, key AS source_key, session_id, activity_session, agent_id, team_id, visibility, user_name,
           assistant_name, user_message AS content, entities, message_ts, valid_from, valid_to, created_at
    FROM turns WHERE visibility IS NOT NULL
"""


def _for_reader(sql: str) -> None:
    """Run ``sql`` (which names the reader role) only if the role exists."""
    op.execute(f"DO $ff$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{READER}') THEN "
               f"EXECUTE $q${sql}$q$; END IF; END $ff$")


def _shown_columns(table: str) -> str:
    """The columns of ``table`` the reader reads directly: all but the hidden ones."""
    names = op.get_bind().exec_driver_sql(
        "SELECT quote_ident(attname) FROM pg_attribute WHERE attrelid = %(t)s::regclass AND attnum > 0 "
        "AND NOT attisdropped AND attname <> ALL(%(hidden)s) ORDER BY attnum",
        {"t": table, "hidden": list(HIDDEN[table])},
    ).scalars().all()
    return ", ".join(names)


def upgrade() -> None:
    for table in HIDDEN:
        _for_reader(f"REVOKE SELECT ON {table} FROM {READER}")
        _for_reader(f"GRANT SELECT ({_shown_columns(table)}) ON {table} TO {READER}")
    op.execute("DROP VIEW current_facts, episodes")
    for view in (_CURRENT_FACTS, _SOURCES, _EPISODES):
        op.execute(view)
    _for_reader(f"GRANT SELECT ON current_facts, sources, episodes TO {READER}")


def downgrade() -> None:
    op.execute("DROP VIEW current_facts, sources, episodes")
    op.execute(_OLD_CURRENT_FACTS)
    op.execute(_OLD_EPISODES)
    # Revoking the table privilege revokes its column privileges too.
    _for_reader(f"REVOKE SELECT ON {', '.join(HIDDEN)} FROM {READER}")
    _for_reader(f"GRANT SELECT ON {', '.join(HIDDEN)}, current_facts, episodes TO {READER}")
