"""API keys: a store may trust a key it found valid for ``cache_seconds``; a revoked key must never get through
once that time has passed since its revocation, and at once when revoked through the same store."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from factforge.errors import AuthError, ConfigError
from factforge.settings import Settings
from factforge.storage.keys import KeyStore


@pytest.fixture
def engine(db_url: str) -> Iterator[Any]:
    from sqlalchemy import create_engine

    engine = create_engine(db_url)
    try:
        yield engine
    finally:
        engine.dispose()


def counted(store: KeyStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []
    lookup = store._lookup

    def spy(key_hash: str) -> Any:
        asked.append(key_hash)
        return lookup(key_hash)

    monkeypatch.setattr(store, "_lookup", spy)
    return asked


@pytest.mark.parametrize("bound", [0.0, 0.3])
def test_a_key_revoked_elsewhere_is_refused_once_the_bound_has_passed(engine: Any, bound: float) -> None:
    server, admin = KeyStore(engine, cache_seconds=bound), KeyStore(engine)  # two processes, say
    info, key = admin.create(agent_id="a", team_id="t")
    assert server.verify(key).agent_id == "a"  # now trusted for `bound`
    admin.revoke(info.id)
    revoked = time.monotonic()
    refused_after_bound = 0
    while (started := time.monotonic()) < revoked + bound + 0.3:
        try:
            server.verify(key)
        except AuthError:
            refused_after_bound += started >= revoked + bound
            continue
        # served from the cache: only within the bound (checking again and again does not extend it)
        assert started < revoked + bound, f"a revoked key got through {started - revoked:.3f} s after revocation"
    assert refused_after_bound > 0


def test_a_key_revoked_through_the_same_store_is_refused_at_once(engine: Any) -> None:
    server = KeyStore(engine, cache_seconds=300)
    info, key = server.create(agent_id="a", team_id="t")
    server.verify(key)
    server.revoke(info.id)
    with pytest.raises(AuthError, match="invalid or revoked"):
        server.verify(key)


def test_only_valid_keys_are_kept(engine: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    server = KeyStore(engine, cache_seconds=300)
    _info, key = server.create(role="readonly", agent_id="a", team_id="t")
    asked = counted(server, monkeypatch)
    whos = [server.verify(key) for _ in range(5)]
    assert len(asked) == 1 and len(set(whos)) == 1 and whos[0].role == "readonly" and not whos[0].can_write
    for _ in range(2):
        with pytest.raises(AuthError):
            server.verify("ffk_not-a-key")
    assert len(asked) == 3  # an unknown key is asked about every time
    uncached = KeyStore(engine)  # the library's default: every call asks
    asked = counted(uncached, monkeypatch)
    uncached.verify(key)
    uncached.verify(key)
    assert len(asked) == 2


@pytest.mark.parametrize(("raw", "expected"), [(None, 1.0), ("0", 0.0), ("2.5", 2.5), ("-1", ConfigError),
                                               ("soon", ConfigError), ("301", ConfigError)])
def test_the_bound_comes_from_the_environment(raw: str | None, expected: Any) -> None:
    env = {} if raw is None else {"FACTFORGE_API_KEY_CACHE_SECONDS": raw}
    if expected is ConfigError:
        with pytest.raises(ConfigError, match="FACTFORGE_API_KEY_CACHE_SECONDS"):
            Settings.from_env(env)
    else:
        assert Settings.from_env(env).api_key_cache_seconds == expected
