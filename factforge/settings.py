"""Settings from environment variables, validated once into a frozen dataclass."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from .errors import ConfigError

VISIBILITIES = ("private", "team", "global")  # narrowest first


def wider(visibility: str, widest: str | None) -> bool:
    """Whether ``visibility`` shares further than ``widest`` allows (None: no limit)."""
    return widest is not None and VISIBILITIES.index(visibility) > VISIBILITIES.index(widest)


def within(visibility: str, widest: str | None) -> str:
    """``visibility``, or ``widest`` when that is narrower (None: no limit)."""
    return widest if widest is not None and wider(visibility, widest) else visibility
EMBEDDERS = ("local", "ollama", "none")
# Where stored facts and episodes get their vectors: "api" in the writing process (facts as they are stored,
# episodes in a background thread), "worker" in `factforge worker` processes (the writer embeds nothing a worker
# can do later: see Settings.embed_in).
EMBED_IN = ("api", "worker")
LLM_SWITCH: Mapping[str, bool] = {"on": True, "1": True, "true": True, "yes": True,
                                  "off": False, "0": False, "false": False, "no": False}
LOCAL_EMBED_MODEL = "all-MiniLM-L6-v2-int8"
LOCAL_EMBED_DIM = 384
# Dimensions of common Ollama embedding models; others need FACTFORGE_EMBED_DIM.
OLLAMA_EMBED_DIMS: Mapping[str, int] = {
    "nomic-embed-text": 768, "mxbai-embed-large": 1024, "all-minilm": 384, "snowflake-arctic-embed": 1024,
    "bge-m3": 1024,
}

# Default visibility by category: personal facts stay private, team knowledge is shared with the team.
DEFAULT_VISIBILITY: Mapping[str, str] = {
    "preference": "private",
    "identity": "private",
    "instruction": "private",
    "temporal": "private",
    "other": "private",
    "policy": "team",
    "decision": "team",
    "technology": "team",
}


def bundled_dir(name: str) -> Path:
    """A folder shipped with factforge (``patterns``, ``migrations``, ``examples``; ``.`` for the root).

    An installed wheel carries them inside the package (``factforge/_bundled``, mapped in pyproject.toml); a
    checkout (editable install, tests) has them at the top of the repository.
    """
    package = Path(__file__).resolve().parent
    packaged = package / "_bundled" / name
    return packaged if packaged.exists() else package.parent / name


def _default_home() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("factforge", appauthor=False))



def _visibilities(env: Mapping[str, str]) -> dict[str, str]:
    """The default visibility per category, with FACTFORGE_VISIBILITY's "category=visibility,..." applied."""
    visibility = dict(DEFAULT_VISIBILITY)
    for pair in filter(None, (p.strip() for p in env.get("FACTFORGE_VISIBILITY", "").split(","))):
        category, _, vis = pair.partition("=")
        if vis not in VISIBILITIES:
            raise ConfigError(f"FACTFORGE_VISIBILITY entry {pair!r}: visibility must be one of {VISIBILITIES}")
        visibility[category.strip()] = vis
    return visibility


def _embed_dim(env: Mapping[str, str], embedder: str, embed_model: str) -> int:
    """FACTFORGE_EMBED_DIM, else the known dimension of the Ollama model, else the local model's."""
    if env.get("FACTFORGE_EMBED_DIM"):
        return _int(env, "FACTFORGE_EMBED_DIM", 384, 1, 16000)
    if embedder == "ollama":
        known = OLLAMA_EMBED_DIMS.get(embed_model.split(":")[0])
        if known is None:
            raise ConfigError(f"unknown dimension for embedding model {embed_model!r}: set FACTFORGE_EMBED_DIM")
        return known
    return LOCAL_EMBED_DIM


def _database_url(env: Mapping[str, str], name: str) -> str | None:
    url = env.get(name) or None
    if url is not None and not url.startswith(("postgresql", "postgres://")):
        raise ConfigError(f"{name} must be a postgresql:// URL")
    return url

def _float(env: Mapping[str, str], name: str, default: float, lo: float, hi: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is outside {lo}..{hi}")
    return value


def _int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a whole number") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is outside {lo}..{hi}")
    return value


# An agent gets a vector graph of its own (factforge.storage.graphs) from this many private rows with a
# vector, per table. At 1M facts + 1M episodes, the private reads of one agent with 11.4k facts / 18.2k
# episodes cost a search 10.5 / 15.6 ms exactly (p50, the whole vector statement) and 2.3 / 2.5 ms by its
# graph at ef_search 100, 4.5 / 5.8 ms at 400, with the same top 10 (60 queries). An exact read of 4,000 rows
# costs ~3 ms; a smaller graph saves little and costs a build and an HNSW insert per new vector.
DEFAULT_AGENT_GRAPH_MIN_ROWS = 4000
# A team gets one from this many team rows with a vector (migration 0023 reads them exactly up to there). Unlike
# an agent's, a team's graph adds no HNSW insert per vector: its rows were in the shared graph before 0023, and a
# team without a graph is read through a btree without vectors (a table page per row), so the bar is lower.
DEFAULT_TEAM_GRAPH_MIN_ROWS = 1000


def masked_password(netloc: str) -> str:
    """A URL's ``user:password@host`` as ``user:***@host``, for messages (unchanged without a password)."""
    userinfo, at, host = netloc.rpartition("@")
    return f"{userinfo.split(':', 1)[0]}:***@{host}" if at and ":" in userinfo else netloc


@dataclass(frozen=True, slots=True)
class Settings:
    """All of factforge's configuration. Build with :meth:`from_env` or :func:`dataclasses.replace`."""

    database_url: str | None = None
    home: Path = field(default_factory=_default_home)
    ollama_host: str = "http://127.0.0.1:11434"
    llm_model: str = "llama3.2"
    llm_timeout: float = 60.0
    llm_enabled: bool = True
    # Embed new episodes in a thread of this process after each commit; off: `factforge worker` does it.
    background_embed: bool = True
    # "worker": this process leaves the vectors of what it stores to `factforge worker` processes (episodes, and
    # facts but those a similarity rule must compare at once); BM25 finds them meanwhile, and a worker giving a
    # fact its vector merges it into an older paraphrase as the writer would have (facts.merge_paraphrases).
    embed_in: str = "api"
    embedder: str = "local"
    embed_model: str = "nomic-embed-text"
    embed_dim: int = 384
    high_confidence: float = 0.85
    medium_confidence: float = 0.6
    user_subject: str = "User"
    team_subject: str = "Team"
    max_message_chars: int = 2000
    queue_max_attempts: int = 5
    # How long a worker's claim on a queue item lasts (None: long enough for one LLM call and its retries).
    queue_claim_seconds: float | None = None
    # Longest text one message (user, assistant, activity) may be; longer input is refused with an InputError.
    max_input_chars: int = 1_000_000
    # Longest text sent to the LLM per field; longer text is cut (the rules have already read all of it).
    llm_max_chars: int = 12_000
    # Search and listings of `factforge serve` go here (a streaming replica); writes go to database_url.
    read_database_url: str | None = None
    # Pooled connections kept open per database (4 more are opened under load and closed after use).
    db_pool_size: int = 4
    # How long an API key found valid is trusted without asking the database again (0: every request asks);
    # a key revoked in another process stops working within this time.
    api_key_cache_seconds: float = 1.0
    dedup_similarity: float = 0.94
    secrets_mode: str = "redact"
    patterns_dir: Path | None = None
    idle_stop: float = 1800.0  # seconds without a client before the embedded server stops (0: never)
    default_visibility: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_VISIBILITY))
    # Episodes (stored turns) are the user's own words: private unless widened (FACTFORGE_EPISODE_VISIBILITY).
    episode_visibility: str = "private"
    # `factforge worker` gives an agent a graph of its own from this many private vectors (0: never).
    agent_graph_min_rows: int = DEFAULT_AGENT_GRAPH_MIN_ROWS
    # ... and a team one from this many team vectors (0: never).
    team_graph_min_rows: int = DEFAULT_TEAM_GRAPH_MIN_ROWS

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and validate every ``FACTFORGE_*`` variable (and ``OLLAMA_HOST``)."""
        env = os.environ if env is None else env
        home_raw = env.get("FACTFORGE_HOME")
        home = Path(home_raw).expanduser() if home_raw else _default_home()
        embedder = env.get("FACTFORGE_EMBEDDER", "local")
        if embedder not in EMBEDDERS:
            raise ConfigError(f"FACTFORGE_EMBEDDER={embedder!r} must be one of {', '.join(EMBEDDERS)}")
        embed_in = (env.get("FACTFORGE_EMBED_IN") or "api").strip().lower()
        if embed_in not in EMBED_IN:
            raise ConfigError(f"FACTFORGE_EMBED_IN={embed_in!r} must be one of {', '.join(EMBED_IN)}")
        secrets_mode = env.get("FACTFORGE_SECRETS", "redact")
        if secrets_mode not in ("redact", "drop"):
            raise ConfigError(f"FACTFORGE_SECRETS={secrets_mode!r} must be 'redact' or 'drop'")
        high = _float(env, "FACTFORGE_HIGH_CONFIDENCE", 0.85, 0.0, 1.0)
        medium = _float(env, "FACTFORGE_MEDIUM_CONFIDENCE", 0.6, 0.0, 1.0)
        if medium > high:
            raise ConfigError(f"FACTFORGE_MEDIUM_CONFIDENCE={medium} is above FACTFORGE_HIGH_CONFIDENCE={high}")
        visibility = _visibilities(env)
        embed_model = env.get("FACTFORGE_EMBED_MODEL") or "nomic-embed-text"
        embed_dim = _embed_dim(env, embedder, embed_model)
        patterns_raw = env.get("FACTFORGE_PATTERNS_DIR")
        url = _database_url(env, "FACTFORGE_DATABASE_URL")
        read_url = _database_url(env, "FACTFORGE_READ_DATABASE_URL")
        return cls(
            database_url=url,
            read_database_url=read_url,
            home=home,
            ollama_host=env.get("OLLAMA_HOST") or "http://127.0.0.1:11434",
            llm_model=env.get("FACTFORGE_LLM_MODEL") or "llama3.2",
            llm_timeout=_float(env, "FACTFORGE_LLM_TIMEOUT", 60.0, 0.1, 3600.0),
            llm_enabled=_switch(env, "FACTFORGE_LLM"),
            background_embed=_switch(env, "FACTFORGE_BACKGROUND_EMBED"),
            embed_in=embed_in,
            embedder=embedder,
            embed_model=embed_model,
            embed_dim=embed_dim,
            high_confidence=high,
            medium_confidence=medium,
            user_subject=env.get("FACTFORGE_USER_SUBJECT") or "User",
            team_subject=env.get("FACTFORGE_TEAM_SUBJECT") or "Team",
            max_message_chars=_int(env, "FACTFORGE_MAX_MESSAGE_CHARS", 2000, 100, 10_000_000),
            queue_max_attempts=_int(env, "FACTFORGE_QUEUE_MAX_ATTEMPTS", 5, 1, 1000),
            db_pool_size=_int(env, "FACTFORGE_DB_POOL_SIZE", 4, 1, 1000),
            api_key_cache_seconds=_float(env, "FACTFORGE_API_KEY_CACHE_SECONDS", 1.0, 0.0, 300.0),
            queue_claim_seconds=(_float(env, "FACTFORGE_QUEUE_CLAIM_SECONDS", 150.0, 1.0, 86400.0)
                                 if env.get("FACTFORGE_QUEUE_CLAIM_SECONDS") else None),
            max_input_chars=_int(env, "FACTFORGE_MAX_INPUT_CHARS", 1_000_000, 1000, 100_000_000),
            llm_max_chars=_int(env, "FACTFORGE_LLM_MAX_CHARS", 12_000, 500, 10_000_000),
            dedup_similarity=_float(env, "FACTFORGE_DEDUP_SIMILARITY", 0.94, 0.5, 1.0),
            secrets_mode=secrets_mode,
            patterns_dir=Path(patterns_raw) if patterns_raw else None,
            idle_stop=_float(env, "FACTFORGE_IDLE_STOP", 1800.0, 0.0, 10_000_000.0),
            default_visibility=visibility,
            episode_visibility=_visibility(env, "FACTFORGE_EPISODE_VISIBILITY", "private"),
            agent_graph_min_rows=_int(env, "FACTFORGE_AGENT_GRAPH_MIN_ROWS", DEFAULT_AGENT_GRAPH_MIN_ROWS, 0,
                                      1_000_000_000),
            team_graph_min_rows=_int(env, "FACTFORGE_TEAM_GRAPH_MIN_ROWS", DEFAULT_TEAM_GRAPH_MIN_ROWS, 0,
                                     1_000_000_000),
        )

    @property
    def claim_seconds(self) -> float:
        """How long a queue claim lasts: FACTFORGE_QUEUE_CLAIM_SECONDS, else two LLM timeouts and 30 s."""
        return self.queue_claim_seconds if self.queue_claim_seconds is not None else 2 * self.llm_timeout + 30

    @property
    def ollama_shown(self) -> str:
        """``ollama_host`` as messages show it: a password in it (a proxy's basic auth) masked. Messages of failed
        LLM calls are stored with the queue item and the call, and printed by `factforge llm drain` and stats."""
        scheme, sep, rest = self.ollama_host.partition("://")
        if not sep:
            scheme, rest = "", scheme
        netloc, slash, path = rest.partition("/")
        return f"{scheme}{sep}{masked_password(netloc)}{slash}{path}"

    def with_(self, **changes: object) -> Settings:
        """A copy with some fields changed."""
        return replace(self, **changes)  # type: ignore[arg-type]


def _switch(env: Mapping[str, str], name: str, default: str = "on") -> bool:
    raw = env.get(name, default).strip().lower()
    if raw not in LLM_SWITCH:
        raise ConfigError(f"{name}={env[name]!r} must be on or off")
    return LLM_SWITCH[raw]


def _visibility(env: Mapping[str, str], name: str, default: str) -> str:
    value = (env.get(name) or default).strip().lower()
    if value not in VISIBILITIES:
        raise ConfigError(f"{name} must be one of {', '.join(VISIBILITIES)}, got {value!r}")
    return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment once."""
    return Settings.from_env()
