"""What ``factforge serve`` and ``factforge mcp`` do, once: each call takes the caller's :class:`Principal` and
plain arguments, checks the scope, calls :class:`factforge.memory.Memory`, and answers JSON-ready values.

The scope of every call comes from the principal (the API key, or the MCP server's arguments), never from
the arguments: an ``agent_id``/``team_id`` argument that names another agent or team is refused.
Reads go to the read replica when ``FACTFORGE_READ_DATABASE_URL`` is set, writes to the primary.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from .errors import (AuthError, DatabaseError, FactforgeError, ForbiddenError, InputError, NotFoundError,
                     ValidationError)
from .jsonout import to_jsonable
from .settings import VISIBILITIES, wider
from .storage.keys import Principal
from .memory import Memory, RememberResult
from .storage.scope import visible

__all__ = ["Service", "remember_json", "error_code"]

# Library errors as HTTP statuses and stable codes (the MCP tools prefix their messages with the same codes).
_ERROR_CODES = (  # most specific first
    (AuthError, 401, "unauthorized"),
    (ForbiddenError, 403, "forbidden"),
    (NotFoundError, 404, "not_found"),
    (InputError, 400, "invalid_input"),
    (ValidationError, 400, "invalid_input"),
    (DatabaseError, 503, "database_error"),
)


def error_code(exc: FactforgeError) -> tuple[int, str]:
    """The HTTP status and stable code of a library error (500, ``internal_error`` for the unexpected)."""
    for cls, status, code in _ERROR_CODES:
        if isinstance(exc, cls):
            return status, code
    return 500, "internal_error"


def remember_json(result: RememberResult) -> dict[str, Any]:
    """A :class:`RememberResult` as the API answers it (the extraction's internals left out)."""
    return {
        "facts": to_jsonable(result.facts),
        "queued": result.queued,
        "duplicate": result.duplicate,
        "gate": to_jsonable(result.gate),
        "clean_reply": result.clean_reply,
        "inline_skipped": to_jsonable(result.inline_skipped),
    }


class Service:
    """The API's operations over one writing :class:`Memory` and, optionally, one reading from a replica."""

    def __init__(self, memory: Memory, reader: Memory | None = None) -> None:
        self.memory = memory
        self.reader = reader or memory
        self.keys = memory.keys
        # A hybrid search holds two pooled connections at once (its vector half runs on a second one). With
        # more searches in flight than half the pool, each would hold one and wait for another until the pool
        # times out; at most half the pool's connections' worth run at once, the rest wait here instead.
        pool = self.reader.store.engine.pool
        self._searches = threading.BoundedSemaphore(max(1, (pool.size() + getattr(pool, "_max_overflow", 0)) // 2))

    @classmethod
    def open(cls, settings: Any, *, llm: Any = "auto") -> Service:
        """The service for ``settings``: writes to its database, reads from ``read_database_url`` if set."""
        memory = Memory(settings=settings, llm=llm)
        reader = None
        if settings.read_database_url:
            reader = Memory(settings=settings.with_(database_url=settings.read_database_url), llm=None,
                            background=False)
        return cls(memory, reader)

    def close(self) -> None:
        if self.reader is not self.memory:
            self.reader.close()
        self.memory.close()

    # -- scope ---------------------------------------------------------------------------------------

    @staticmethod
    def _scope(who: Principal, args: Mapping[str, Any]) -> dict[str, str | None]:
        """The agent and team a call acts as: the principal's; naming another in the arguments is refused."""
        for field, own in (("agent_id", who.agent_id), ("team_id", who.team_id)):
            given = args.get(field)
            if given is not None and given != own and not who.all_scopes:
                raise ForbiddenError(f"{field} {given!r} is not this key's ({own!r}): the scope comes from the key")
        if who.all_scopes:
            return {"agent_id": None, "team_id": None}
        return {"agent_id": who.agent_id, "team_id": who.team_id}

    @staticmethod
    def _writer(who: Principal) -> None:
        if not who.can_write:
            raise ForbiddenError(f"a{'n' if who.role == 'analyst' else ''} {who.role} key cannot write")

    def _visible(self, who: Principal, fact_id: str, memory: Memory | None = None) -> UUID:
        """The fact's id if the principal may see the fact; else NotFoundError (its existence is not told).

        Asked of the replica for reads, of the primary (``memory``) before a write."""
        try:
            fid = UUID(str(fact_id))
        except ValueError:
            raise ValidationError(f"not a fact id: {fact_id!r}") from None
        scope = self._scope(who, {})
        where, params = visible("f", scope["agent_id"], scope["team_id"], scope_index=True)
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with (memory or self.reader).store.engine.connect() as conn:
                row = conn.exec_driver_sql(f"SELECT 1 FROM facts f WHERE f.id = %(id)s AND {where}",
                                           {**params, "id": fid}).first()
        except SQLAlchemyError as exc:
            raise (memory or self.reader).store._database_error(getattr(exc, "orig", None) or exc) from None
        if row is None:
            raise NotFoundError(f"no fact with id {fact_id}")
        return fid

    # -- operations ----------------------------------------------------------------------------------

    def remember(self, who: Principal, args: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`Memory.remember` with ``args``, as ``who``."""
        return self._write(who, args, self.memory.remember)

    def observe(self, who: Principal, args: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`Memory.observe` with ``args``, as ``who``."""
        return self._write(who, args, self.memory.observe)

    def _write(self, who: Principal, args: Mapping[str, Any], method: Callable[..., RememberResult]) -> dict[str, Any]:
        self._writer(who)
        kwargs = {k: v for k, v in args.items()
                  if k not in ("agent_id", "team_id", "max_visibility") and v is not None}
        scope = self._scope(who, args)
        asked = kwargs.get("visibility")
        if asked in VISIBILITIES and wider(asked, who.max_visibility):
            raise ForbiddenError(f"visibility {asked!r} is wider than this key may share ({who.max_visibility!r})")
        if who.max_visibility != "global":
            kwargs["max_visibility"] = who.max_visibility
        # One transaction, so one commit (one WAL flush) per request instead of one per statement group; one
        # call in it, so no savepoint around the call.
        with self.memory.store.unit_of_work(savepoints=False):
            result = method(**kwargs, **scope)
        return remember_json(result)

    def search(self, who: Principal, query: str, *, k: int = 10, mode: str = "hybrid",
               categories: list[str] | None = None, include_history: bool = False,
               args: Mapping[str, Any] | None = None, **filters: Any) -> dict[str, Any]:
        """:meth:`Memory.search` in the principal's view; ``filters``: since, until, entity, method."""
        scope = self._scope(who, args or {})
        with self._searches:
            hits = self.reader.search(query, **scope, k=k, mode=mode, categories=categories or None,
                                      include_history=include_history,
                                      **{key: v for key, v in filters.items() if v is not None})
        # The same serialisation as `factforge search --json`, so every field of a hit is in the answer.
        return {"hits": [to_jsonable(h) for h in hits]}

    def facts(self, who: Principal, *, args: Mapping[str, Any] | None = None, **filters: Any) -> dict[str, Any]:
        rows = self.reader.facts(**self._scope(who, args or {}),
                                 **{k: v for k, v in filters.items() if v is not None})
        return {"facts": to_jsonable(rows)}

    def sources(self, who: Principal, fact_id: str) -> dict[str, Any]:
        """Where a fact was said. An agent sees its own mentions only: another agent's message that stated a
        shared fact is that agent's conversation, not part of the fact."""
        fid = self._visible(who, fact_id)
        # Scoped: a message from another agent's private turn would show only its evidence sentence anyway.
        rows = (self.reader.store.sources(fid) if who.all_scopes else
                self.reader.store.sources(fid, agent_id=who.agent_id, team_id=who.team_id))
        mine = rows if who.all_scopes else [r for r in rows if r.get("agent_id") == who.agent_id]
        return {"sources": to_jsonable(mine), "other_mentions": len(rows) - len(mine)}

    def forget(self, who: Principal, *, fact_id: str | None = None, session_id: str | None = None,
               category: str | None = None, text: str | None = None, everything: bool = False,
               dry_run: bool = False, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Forget what this agent said: its mentions of the selected facts go, and a fact goes with its last
        mention (a fact another agent also said stays, with that agent's mention)."""
        self._writer(who)
        scope = self._scope(who, args or {})
        if fact_id is not None:
            fact_id = str(self._visible(who, fact_id, self.memory))
        if not (fact_id or session_id or category or text or everything):
            raise ValidationError("forget needs fact_id, session_id, category or text (or everything=true for "
                                  "all this agent said)")
        count = self.memory.forget(dry_run=dry_run, agent_id=scope["agent_id"], fact_id=fact_id,
                                   session_id=session_id, category=category, text=text)
        return {"deleted": 0 if dry_run else count, "would_delete": count if dry_run else None, "dry_run": dry_run}

    def stats(self, who: Principal) -> dict[str, Any]:
        if not who.all_scopes:
            raise ForbiddenError("stats cover every agent and team: they need an analyst key")
        stats: dict[str, Any] = to_jsonable(self.reader.stats())
        return stats

    @staticmethod
    def prompt() -> dict[str, str]:
        from .rules.inline import inline_prompt

        return {"prompt": inline_prompt()}
