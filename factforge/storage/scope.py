"""Who may see a row, and the filters around it: the one owner of the visibility rule in SQL.

The rule (the security rule of factforge): an agent sees global rows, its team's team rows and its own private
rows; the analyst's view (no agent and no team) sees every row. Facts and episodes (turns with a visibility)
follow the same rule; every query that reads them builds its WHERE clause here, so the rule is written once.

"The same scope" - the key under which the same fact is one row (a private fact is one agent's in one team, a
team fact the team's, a global fact everybody's) - is written here too, for the write path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any

__all__ = ["rule_sql", "rule_cases", "visible", "source_readable", "own_session", "fact_filters", "episode_filters",
           "same_scope", "same_scope_as", "CONFLICT_TARGET", "scope_keys"]


def rule_sql(visibility: str, team: str, agent: str, *, scope_index: bool = False) -> str:
    """The visibility rule over three SQL expressions (the row's visibility, team and agent), against the
    caller's ``%(v_team)s`` and ``%(v_agent)s``.

    Two spellings of the one rule, for two kinds of query. By default a CASE: where the text or vector index
    found the rows, the planner filters those few instead of OR-ing bitmaps of every global and team fact
    (40 ms at 1M facts). With ``scope_index`` an OR of the three cases: where the scope itself is the main
    selection (a listing), the planner ORs bitmaps of ``facts_scope_idx`` (visibility, agent_id, team_id):
    at 200k facts a listing takes 18 ms so, 68 ms as a CASE (a sequential scan)."""
    if scope_index:
        return (f"({visibility} = 'global' OR ({visibility} = 'team' AND {team} = %(v_team)s)"
                f" OR ({visibility} = 'private' AND {agent} = %(v_agent)s))")
    return (f"(CASE {visibility} WHEN 'global' THEN true WHEN 'team' THEN {team} = %(v_team)s "
            f"WHEN 'private' THEN {agent} = %(v_agent)s ELSE false END)")


def rule_cases(alias: str) -> tuple[str, str, str]:
    """The visibility rule as three disjoint cases whose OR is :func:`rule_sql` for a caller: the global rows, the
    caller's team's team rows, the caller's own private rows (against ``%(v_team)s`` / ``%(v_agent)s``). A
    query that reads each case by its own index ORs them with UNION ALL: the vector search reads the global rows
    by the global graph and the caller's own by its owner's graph or btree (``search.vector_sql``)."""
    a = alias
    return (f"{a}.visibility = 'global'", f"{a}.visibility = 'team' AND {a}.team_id = %(v_team)s",
            f"{a}.visibility = 'private' AND {a}.agent_id = %(v_agent)s")


def visible(alias: str, agent_id: str | None, team_id: str | None, *, analyst: str = "TRUE",
            scope_index: bool = False) -> tuple[str, dict[str, Any]]:
    """SQL: row ``alias`` (a fact or an episode) is visible to the caller. The analyst's view (both None) sees
    every row: ``analyst`` is its clause (``TRUE`` for facts; for turns, the condition that makes one an
    episode). ``scope_index``: see :func:`rule_sql`."""
    if agent_id is None and team_id is None:
        return analyst, {}
    return (rule_sql(f"{alias}.visibility", f"{alias}.team_id", f"{alias}.agent_id", scope_index=scope_index),
            {"v_team": team_id, "v_agent": agent_id})


def source_readable(agent_id: str | None, team_id: str | None) -> str:
    """SQL: the caller may read the turn ``t`` behind the fact source ``s`` (``t`` LEFT JOINed, so possibly NULL):
    an episode by its own visibility, a turn that is none as its agent's own. The analyst (both None) reads all.
    Against ``%(v_team)s`` / ``%(v_agent)s``."""
    if agent_id is None and team_id is None:
        return "TRUE"
    return rule_sql("coalesce(t.visibility, 'private')", "t.team_id", "coalesce(t.agent_id, s.agent_id)")


def own_session(agent_id: str | None, team_id: str | None, column: str, alias: str = "f") -> str:
    """SQL: the session column ``column`` of fact ``alias`` as the caller may read it. The session a fact was
    first said in is that speaker's conversation: another agent's stays unnamed (NULL) even where the fact is
    shared; the analyst (both None) reads all. Against ``%(v_agent)s``."""
    if agent_id is None and team_id is None:
        return f"{alias}.{column}"
    return f"CASE WHEN {alias}.agent_id IS NOT DISTINCT FROM %(v_agent)s THEN {alias}.{column} END"


_ENTITY = "EXISTS (SELECT 1 FROM unnest({a}.entities) e WHERE lower(e) = lower(%(entity)s))"


def fact_filters(agent_id: str | None, team_id: str | None, *, include_history: bool = False,
                 as_of: datetime | None = None, categories: Iterable[str] | None = None,
                 session_id: str | None = None, since: datetime | None = None, until: datetime | None = None,
                 entity: str | None = None, method: str | None = None, scope_index: bool = False,
                 alias: str = "f", scope: bool = True) -> tuple[str, dict[str, Any]]:
    """The WHERE clause of a read of facts (listing or search): the caller's scope, then each filter given.

    ``as_of``: the facts current at that moment (a stated validity wins over when the fact was first heard of;
    the end is the stated one or the supersession, whichever came first). Else ``include_history`` keeps
    superseded facts. ``since``/``until``: facts seen (last) after / (first) before. ``scope_index``: see
    :func:`rule_sql` (True for a listing, False where a text or vector index finds the rows). ``scope=False``
    leaves a scoped caller's rule out (the parameters stay): only for a query each of whose parts states one
    of :func:`rule_cases` itself (the vector search's branches)."""
    a = alias
    where, params = visible(a, agent_id, team_id, scope_index=scope_index)
    clauses = [where] if scope or not params else []
    if as_of is not None:
        clauses.append(f"coalesce({a}.valid_from, {a}.first_seen_at) <= %(as_of)s "
                       f"AND (least({a}.valid_to, {a}.superseded_at) IS NULL "
                       f"OR least({a}.valid_to, {a}.superseded_at) > %(as_of)s)")
        params["as_of"] = as_of
    elif not include_history:
        clauses.append(f"{a}.superseded_at IS NULL")
    cats = list(categories or ())
    if cats:
        clauses.append(f"{a}.category = ANY(%(cats)s)")
        params["cats"] = cats
    if session_id is not None:
        # A fact's session is named only to the agent that said it there (own_session): a filter by another
        # agent's session would tell what was said in it, so for a caller it selects the caller's own facts.
        own = "" if agent_id is None and team_id is None else f"{a}.agent_id IS NOT DISTINCT FROM %(v_agent)s AND "
        clauses.append(f"{own}({a}.source_session = %(session)s OR {a}.source_activity_session = %(session)s)")
        params["session"] = session_id
    _period_and_entity(clauses, params, since, until, entity, a, since_col=f"{a}.last_seen_at",
                       until_col=f"{a}.first_seen_at")
    if method:
        clauses.append(f"{a}.extraction_method = %(method)s")
        params["method"] = method
    return " AND ".join(clauses) or "TRUE", params


def episode_filters(agent_id: str | None, team_id: str | None, *, since: datetime | None = None,
                    until: datetime | None = None, entity: str | None = None,
                    alias: str = "f", scope: bool = True) -> tuple[str, dict[str, Any]]:
    """Like :func:`fact_filters`, for episodes (turns with a visibility and words); ``tsv IS NOT NULL`` lets
    the planner use the partial text index. An episode's time is its message's, else when it was stored."""
    a = alias
    where, params = visible(a, agent_id, team_id, analyst=f"{a}.visibility IS NOT NULL")
    clauses = [where, f"{a}.tsv IS NOT NULL"] if scope or not params else [f"{a}.tsv IS NOT NULL"]
    when = f"coalesce({a}.message_ts, {a}.created_at)"
    _period_and_entity(clauses, params, since, until, entity, a, since_col=when, until_col=when)
    return " AND ".join(clauses), params


def _period_and_entity(clauses: list[str], params: dict[str, Any], since: datetime | None, until: datetime | None,
                       entity: str | None, alias: str, *, since_col: str, until_col: str) -> None:
    """The time and entity filters, the same for facts and episodes but for the columns that date them."""
    if since is not None:
        clauses.append(f"{since_col} >= %(since)s")
        params["since"] = since
    if until is not None:
        clauses.append(f"{until_col} <= %(until)s")
        params["until"] = until
    if entity is not None:
        clauses.append(_ENTITY.format(a=alias))
        params["entity"] = entity


# The key of "the same fact in the same scope" (migration 0003's partial unique indexes): a private fact is
# one agent's in one team, a team fact the team's whoever said it, a global fact everybody's.
CONFLICT_TARGET = {
    "private": "(content_hash, agent_id, coalesce(team_id, '')) WHERE superseded_at IS NULL AND visibility = 'private'",
    "team": "(content_hash, team_id) WHERE superseded_at IS NULL AND visibility = 'team'",
    "global": "(content_hash) WHERE superseded_at IS NULL AND visibility = 'global'",
}


def same_scope(alias: str, visibility: str, *, vis: str = "visibility", agent: str = "agent",
               team: str = "team") -> str:
    """SQL: row ``alias`` is in the scope of the given visibility, agent and team parameters."""
    if visibility == "private":
        return (f"{alias}.visibility = 'private' AND {alias}.agent_id = %({agent})s "
                f"AND {alias}.team_id IS NOT DISTINCT FROM %({team})s")
    if visibility == "team":
        return f"{alias}.visibility = 'team' AND {alias}.team_id = %({team})s"
    return f"{alias}.visibility = %({vis})s"


def same_scope_as(a: str, b: str) -> str:
    """SQL: row ``a`` is in the same scope as row ``b`` (the key of :data:`CONFLICT_TARGET`, row to row)."""
    return (f"{a}.visibility = {b}.visibility "
            f"AND ({b}.visibility = 'global' OR {a}.team_id IS NOT DISTINCT FROM {b}.team_id) "
            f"AND ({b}.visibility <> 'private' OR {a}.agent_id = {b}.agent_id)")


def scope_keys(agent_id: str | None, team_id: str | None) -> list[str] | None:
    """The scope keys of the rows a caller may see (the scoped text index of migration 0006: "g" global,
    "t" + md5(team), "p" + md5(agent)); None = every scope (the analyst's view)."""
    if agent_id is None and team_id is None:
        return None
    keys = ["g"]
    if team_id is not None:
        keys.append("t" + hashlib.md5(team_id.encode()).hexdigest())
    if agent_id is not None:
        keys.append("p" + hashlib.md5(agent_id.encode()).hexdigest())
    return keys
