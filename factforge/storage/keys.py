"""API keys for ``factforge serve``: created once, stored as a SHA-256 hash, each bound to a scope.

A :class:`Principal` is what a key stands for. ``agent`` keys read and write as their agent and team,
``readonly`` keys only read that view, and ``analyst`` keys read every agent's and team's facts and write
nothing. Callers never name their scope in a request: it comes from the key. An agent key's ``max_visibility``
is the widest scope its writes may reach (``global`` unless the key was made narrower).

A :class:`KeyStore` may trust a key it found valid for ``cache_seconds`` instead of asking the database on every
request (``Memory.keys``, so ``factforge serve``: ``FACTFORGE_API_KEY_CACHE_SECONDS``, 1 s by default): a key
revoked elsewhere stops working within that time of its revocation, one revoked through the same store at once.
Unknown and revoked keys are never kept.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import AuthError, DatabaseError, NotFoundError, ValidationError
from ..inputs import check_text
from ..settings import VISIBILITIES

__all__ = ["ROLES", "Principal", "KeyInfo", "KeyStore", "hash_key"]

ROLES = ("agent", "readonly", "analyst")
KEY_PREFIX = "ffk_"
# How often a key's last_used_at is written: on every request it would be a write per read.
_TOUCH_EVERY_S = 60.0


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request acts as: an agent (and team), read-only or not, or an analyst seeing every scope."""

    role: str
    agent_id: str | None
    team_id: str | None
    key_id: int | None = None
    max_visibility: str = "global"

    @property
    def can_write(self) -> bool:
        return self.role == "agent"

    @property
    def all_scopes(self) -> bool:
        return self.role == "analyst"


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """One stored key, without its secret: what `factforge keys list` shows."""

    id: int
    prefix: str
    role: str
    agent_id: str | None
    team_id: str | None
    name: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    max_visibility: str = "global"


def hash_key(key: str) -> str:
    """The stored form of a key. Keys are 256 random bits, so one SHA-256 leaves nothing to guess."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyStore:
    """The ``api_keys`` table, over a :class:`factforge.store.Store`'s engine (always the primary)."""

    def __init__(self, engine: Any, *, cache_seconds: float = 0.0) -> None:
        self._engine = engine
        self._touched: dict[int, float] = {}
        self._lock = threading.Lock()
        self.cache_seconds = cache_seconds
        # key hash -> (its principal, its id, when the database was asked (monotonic)): valid keys only
        self._valid: dict[str, tuple[Principal, int, float]] = {}
        self._revoked_here: set[int] = set()  # never served from the cache again, whatever a racing lookup put there

    def _rows(self, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        from sqlalchemy.exc import SQLAlchemyError

        try:
            # One statement, autocommit: one round trip instead of BEGIN, statement, COMMIT.
            with self._engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
                return [dict(r) for r in conn.exec_driver_sql(sql, params).mappings()]
        except SQLAlchemyError as exc:
            raise _database_error(exc) from None

    def create(self, *, role: str = "agent", agent_id: str | None = None, team_id: str | None = None,
               name: str | None = None, max_visibility: str = "global") -> tuple[KeyInfo, str]:
        """A new key: its stored description and the plain key (shown once, never stored). ``max_visibility``: the
        widest scope the key's writes may reach."""
        if role not in ROLES:
            raise ValidationError(f"role {role!r} must be one of {', '.join(ROLES)}")
        if max_visibility not in VISIBILITIES:
            raise ValidationError(f"max_visibility {max_visibility!r} must be one of {', '.join(VISIBILITIES)}")
        if max_visibility == "team" and not team_id:
            raise ValidationError("max_visibility 'team' needs a team: give the key a team, or 'private'")
        agent_id = check_text("agent_id", agent_id, required=role != "analyst")
        team_id = check_text("team_id", team_id)
        name = check_text("name", name)
        if role == "analyst" and (agent_id or team_id):
            raise ValidationError("an analyst key sees every scope: give it no agent or team")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        # An agent's private memory is keyed by its agent id alone (the library's rule), so one agent id with keys
        # in two teams - two tenants who both named an agent "assistant" - would read each other's private facts.
        # Refused: every key of an agent (revoked ones too: their facts stay) names the same team.
        rows = self._rows(
            "INSERT INTO api_keys (key_hash, prefix, role, agent_id, team_id, name, max_visibility) "
            "SELECT %(h)s, %(p)s, %(r)s, %(a)s, %(t)s, %(n)s, %(v)s WHERE NOT EXISTS (SELECT FROM api_keys "
            "WHERE agent_id = %(a)s AND team_id IS DISTINCT FROM %(t)s) RETURNING *",
            {"h": hash_key(key), "p": key[: len(KEY_PREFIX) + 6], "r": role, "a": agent_id, "t": team_id, "n": name,
             "v": max_visibility},
        )
        if not rows:
            teams = sorted({str(r["team_id"]) for r in self._rows(
                "SELECT team_id FROM api_keys WHERE agent_id = %(a)s", {"a": agent_id})})
            suggestion = f"{agent_id}@{team_id or 'none'}"
            raise ValidationError(
                f"agent {agent_id!r} already has keys in team {', '.join(teams)}: an agent's private memory is "
                "keyed by its agent id alone, so the same id in another team would share it; give this agent "
                f"another id (e.g. {suggestion!r})")
        return _info(rows[0]), key

    def list(self, *, include_revoked: bool = False) -> list[KeyInfo]:
        where = "" if include_revoked else "WHERE revoked_at IS NULL"
        return [_info(r) for r in self._rows(f"SELECT * FROM api_keys {where} ORDER BY id", {})]

    def revoke(self, key_id: int) -> KeyInfo:
        """Revoke a key by id; it stops working at once for this store, and within their ``cache_seconds`` for
        the stores of other processes (each request looks the key up unless it was found valid that recently)."""
        rows = self._rows("UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = %(id)s "
                          "RETURNING *", {"id": int(key_id)})
        if not rows:
            raise NotFoundError(f"no API key with id {key_id}")
        self._revoked_here.add(int(key_id))
        return _info(rows[0])

    def verify(self, key: str | None) -> Principal:
        """The principal of a presented key; :class:`AuthError` when it is missing, unknown or revoked."""
        if not key:
            raise AuthError("missing API key: send 'Authorization: Bearer <key>'")
        key_hash = hash_key(key)
        cached = self._valid.get(key_hash)
        # Measured from before the lookup that found the key valid, so a revocation committed after that lookup
        # read the row is seen at most cache_seconds after it.
        asked = time.monotonic()
        if cached is not None and asked - cached[2] < self.cache_seconds and cached[1] not in self._revoked_here:
            self._touch(cached[1])
            return cached[0]
        row = self._lookup(key_hash)
        if row is None or row[4] is not None:
            self._valid.pop(key_hash, None)
            raise AuthError("invalid or revoked API key")
        key_id, role, agent_id, team_id, _revoked, max_visibility = row
        who = Principal(role, agent_id, team_id, key_id, max_visibility)
        if self.cache_seconds > 0:
            self._valid[key_hash] = (who, key_id, asked)
        self._touch(key_id)
        return who

    def _lookup(self, key_hash: str) -> tuple[Any, ...] | None:
        """The key's row, on a pooled psycopg connection in autocommit: one round trip and little Python around
        it (every request checks its key; through SQLAlchemy's connection this took 0.23 ms of CPU)."""
        import psycopg
        from sqlalchemy.exc import SQLAlchemyError

        from .pooling import autocommit_connection

        try:
            with autocommit_connection(self._engine) as conn:
                row: tuple[Any, ...] | None = conn.execute(
                    "SELECT id, role, agent_id, team_id, revoked_at, max_visibility FROM api_keys WHERE key_hash = %s",
                    (key_hash,)).fetchone()
                return row
        except (psycopg.Error, SQLAlchemyError) as exc:  # the statement's, or the pool's (a failed connect)
            raise _database_error(exc) from None

    def _touch(self, key_id: int) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._touched.get(key_id, -_TOUCH_EVERY_S) < _TOUCH_EVERY_S:
                return
            self._touched[key_id] = now
        self._rows("UPDATE api_keys SET last_used_at = now() WHERE id = %(id)s RETURNING id", {"id": key_id})


def _database_error(exc: BaseException) -> DatabaseError:
    """A failed key statement as one line (SQLAlchemy's errors carry the driver's in ``orig``)."""
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return DatabaseError(f"database error: {first[0] if first else type(exc).__name__}")


def _info(row: dict[str, Any]) -> KeyInfo:
    return KeyInfo(row["id"], row["prefix"], row["role"], row["agent_id"], row["team_id"], row["name"],
                   row["created_at"], row["last_used_at"], row["revoked_at"], row["max_visibility"])
