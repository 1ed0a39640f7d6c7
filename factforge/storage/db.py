"""Database location, connections and schema migrations (alembic, run programmatically)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import DatabaseError, EmbeddingMismatchError, SchemaError
from ..settings import Settings, bundled_dir, masked_password

logger = logging.getLogger("factforge.db")


def sqlalchemy_url(url: str) -> str:
    """Any ``postgres://``/``postgresql://`` URL as a SQLAlchemy URL with the psycopg 3 driver."""
    for prefix in ("postgresql+psycopg://", "postgresql+psycopg2://", "postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    raise DatabaseError(f"not a PostgreSQL URL: {url!r}")


def conninfo(url: str) -> str:
    """The libpq form of a URL (what psycopg.connect and psql take); an empty password is left out."""
    rest = sqlalchemy_url(url).split("://", 1)[1]
    userinfo, at, host = rest.partition("@")
    if at and "/" not in userinfo and userinfo.endswith(":"):  # the embedded server's "postgres:@/..."
        rest = userinfo[:-1] + "@" + host
    return "postgresql://" + rest


def database_url(settings: Settings) -> str:
    """The configured database, or the embedded server (started on first use)."""
    if settings.database_url:
        return sqlalchemy_url(settings.database_url)
    from .embedded import ensure_server

    return ensure_server(settings.home, idle_stop=settings.idle_stop)


def safe_url(url: str) -> str:
    """The libpq form of ``url`` with any password masked, for messages."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(sqlalchemy_url(url))
        return urlunsplit(("postgresql", masked_password(parts.netloc), parts.path, parts.query, ""))
    except (ValueError, DatabaseError):
        return "<url>"


def describe_connect_error(exc: Exception, url: str) -> str:
    """A one-line, actionable description of a failed connection (never the password)."""
    msg = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    first = msg[0] if msg else type(exc).__name__
    return f"cannot connect to PostgreSQL at {safe_url(url)}: {first}"


# A migration file's own revision and the one it follows, as alembic's template writes them.
_REVISION_LINE = re.compile(r"""^(revision|down_revision)\s*(?::[^=]*)?=\s*(?:None|["']([^"']+)["'])\s*$""",
                            re.MULTILINE)


@lru_cache(maxsize=1)
def _script_head() -> str:
    """The head revision of the bundled migrations, which every command that opens the database compares with the
    database's: from the files (:func:`head_of_files`), which spares the command importing alembic (~0.3 s), else
    from alembic."""
    return head_of_files(bundled_dir("migrations") / "versions") or _alembic_head()


def head_of_files(versions: Path) -> str | None:
    """The one head of the migration files in ``versions`` read from their ``revision`` / ``down_revision``
    lines; None (alembic must decide) unless every file has both lines and they form one chain's revisions."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for path in sorted(versions.glob("*.py")):
        if path.name.startswith((".", "__")):
            continue  # an editor's lock file (".#0017_x.py"), a package's __init__.py: no migration
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        found = {m.group(1): m.group(2) for m in _REVISION_LINE.finditer(text)}
        if not found.get("revision") or "down_revision" not in found:
            return None
        revisions.add(found["revision"])
        if found["down_revision"]:
            followed.add(found["down_revision"])
    heads = revisions - followed
    return heads.pop() if len(heads) == 1 and followed <= revisions else None


def _alembic_head() -> str:
    from alembic.script import ScriptDirectory

    return str(ScriptDirectory.from_config(alembic_config()).get_current_head())


def alembic_config(url: str | None = None, settings: Settings | None = None) -> Any:
    """An alembic Config for the bundled migrations (works from any working directory)."""
    from alembic.config import Config

    cfg = Config(str(bundled_dir("alembic.ini")))
    cfg.set_main_option("script_location", str(bundled_dir("migrations")))
    if url is not None:
        cfg.attributes["url"] = sqlalchemy_url(url)
    if settings is not None:
        cfg.attributes["embed_dim"] = settings.embed_dim
        cfg.attributes["embed_model"] = _schema_embed_model(settings)
    return cfg


def _schema_embed_model(settings: Settings) -> str:
    from ..settings import LOCAL_EMBED_MODEL

    return LOCAL_EMBED_MODEL if settings.embedder == "local" else settings.embed_model


def current_revision(url: str) -> str | None:
    """The schema revision of the database, or None when it has never been migrated."""
    import psycopg

    try:
        with psycopg.connect(conninfo(url), connect_timeout=10) as conn:
            exists = conn.execute("SELECT to_regclass('public.alembic_version') IS NOT NULL").fetchone()
            if not exists or not exists[0]:
                return None
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
            return row[0] if row else None
    except psycopg.Error as exc:
        raise DatabaseError(describe_connect_error(exc, url)) from None


# Key of the session-level advisory lock held while migrating: processes starting together on an empty
# database would otherwise each run the first migration, and all but one fail on "already exists".
MIGRATION_LOCK = 0x66_66_6D_67  # "ffmg"


@contextmanager
def _migration_lock(url: str) -> Iterator[None]:
    import psycopg

    try:
        conn = psycopg.connect(conninfo(url), autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise DatabaseError(describe_connect_error(exc, url)) from None
    with conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))


def upgrade(url: str, settings: Settings, revision: str = "head") -> tuple[str | None, str | None]:
    """Migrate the schema to ``revision`` (idempotent, safe with other processes migrating at once).

    Returns the revisions before and after.
    """
    with _migration_lock(url):
        before = current_revision(url)
        _alembic_upgrade(url, settings, revision)
        return before, current_revision(url)


def _alembic_upgrade(url: str, settings: Settings, revision: str) -> None:
    from alembic import command

    try:
        command.upgrade(alembic_config(url, settings), revision)
    except Exception as exc:  # noqa: BLE001 - alembic/SQLAlchemy/psycopg errors become one clear error
        text = str(getattr(exc, "orig", None) or exc)
        if 'extension "vector" is not available' in text or "could not open extension control file" in text:
            raise DatabaseError("the database has no pgvector extension: install pgvector on the server "
                                "(or leave FACTFORGE_DATABASE_URL unset to use the embedded server)") from None
        if "connect" in text.lower() and "failed" in text.lower():
            raise DatabaseError(describe_connect_error(exc, url)) from None
        raise SchemaError(f"schema migration failed: {text.strip().splitlines()[0] if text.strip() else exc!r}") from None


def downgrade(url: str, revision: str) -> None:
    """Migrate the schema down to ``revision`` ('base' removes everything factforge created)."""
    from alembic import command

    try:
        with _migration_lock(url):
            command.downgrade(alembic_config(url), revision)
    except Exception as exc:  # noqa: BLE001
        raise SchemaError(f"schema downgrade failed: {str(getattr(exc, 'orig', None) or exc).strip()}") from None


def ensure_schema(url: str, settings: Settings, *, check_embedder: bool = True) -> None:
    """Migrate a new or older database to head, then check it matches the configured embedder."""
    if current_revision(url) != _script_head():
        upgrade(url, settings)  # under the migration lock: another process may be migrating right now
    import psycopg

    with psycopg.connect(conninfo(url), connect_timeout=10) as conn:
        meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM factforge_meta").fetchall())
    if "embed_dim" not in meta:
        raise SchemaError("factforge_meta is empty: the schema was not created by factforge")
    dim, model = int(meta["embed_dim"]), meta.get("embed_model")
    wanted = _schema_embed_model(settings)
    if check_embedder and settings.embedder != "none" and (dim != settings.embed_dim or model != wanted):
        # Vectors of two models are not comparable, even at the same dimension: never mix them silently.
        raise EmbeddingMismatchError(
            f"the database stores embeddings of {model} ({dim} dimensions) but the configured embedder is "
            f"{wanted} ({settings.embed_dim}): set FACTFORGE_EMBEDDER/FACTFORGE_EMBED_MODEL back, or switch the "
            "stored facts to the new model with `factforge embed reset` then `factforge embed backfill` "
            "(facts are kept; only their vectors are re-made)"
        )
