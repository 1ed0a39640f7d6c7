"""Alembic environment: runs from `alembic upgrade head` and from factforge's own `db upgrade`.

Programmatic callers pass the connection (or URL) and the embedding dimension in ``config.attributes``;
the command line falls back to factforge's settings, starting the embedded server if no URL is set.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, pool

config = context.config


def _url() -> str:
    url = config.attributes.get("url")
    if url:
        return str(url)
    from factforge.storage.db import database_url
    from factforge.settings import get_settings

    return database_url(get_settings())


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(_url(), poolclass=pool.NullPool)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=None, transaction_per_migration=True)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("factforge migrations run online only: they read the configured embedding dimension")
run_migrations_online()
