from __future__ import annotations

import pytest

from factforge.errors import ConfigError
from factforge.settings import Settings


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FACTFORGE_EMBEDDER": "gpu"}, "FACTFORGE_EMBEDDER"),
        ({"FACTFORGE_HIGH_CONFIDENCE": "abc"}, "not a number"),
        ({"FACTFORGE_HIGH_CONFIDENCE": "1.5"}, "outside"),
        ({"FACTFORGE_HIGH_CONFIDENCE": "0.5", "FACTFORGE_MEDIUM_CONFIDENCE": "0.7"}, "above"),
        ({"FACTFORGE_DATABASE_URL": "mysql://x"}, "postgresql"),
        ({"FACTFORGE_VISIBILITY": "preference=public"}, "visibility"),
        ({"FACTFORGE_EMBEDDER": "ollama", "FACTFORGE_EMBED_MODEL": "mystery"}, "FACTFORGE_EMBED_DIM"),
        ({"FACTFORGE_BACKGROUND_EMBED": "later"}, "FACTFORGE_BACKGROUND_EMBED"),
        ({"FACTFORGE_EMBED_IN": "gpu"}, "FACTFORGE_EMBED_IN"),
    ],
)
def test_bad_settings_are_one_clear_error(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Settings.from_env(env)


def test_defaults_and_overrides() -> None:
    s = Settings.from_env({})
    assert s.background_embed and not Settings.from_env({"FACTFORGE_BACKGROUND_EMBED": "off"}).background_embed
    assert s.embed_in == "api" and Settings.from_env({"FACTFORGE_EMBED_IN": "Worker"}).embed_in == "worker"
    assert (s.llm_model, s.embed_model, s.embedder, s.embed_dim) == ("llama3.2", "nomic-embed-text", "local", 384)
    s = Settings.from_env(
        {"FACTFORGE_EMBEDDER": "ollama", "FACTFORGE_VISIBILITY": "preference=team", "OLLAMA_HOST": "http://h:1"}
    )
    assert s.embed_dim == 768
    assert s.default_visibility["preference"] == "team"
    assert s.ollama_host == "http://h:1"
