"""The edge of the write path: input limits, and secrets redacted (or dropped) before anything else sees them."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable

from .errors import InputError, ValidationError
from .rules.secrets import SecretScanner, has_placeholder
from .settings import VISIBILITIES, Settings, wider
from .types import Fact

__all__ = ["DROPPED", "Redactor"]

# What drop mode (FACTFORGE_SECRETS=drop) stores instead of a message that held a secret.
DROPPED = "[DROPPED: message contained a secret]"
# A speaker's name (user_name, assistant_name, an ingest line's speaker) is a name, not a message.
MAX_NAME_CHARS = 100


class Redactor:
    """Checks and redacts what callers hand to :class:`~factforge.memory.Memory`, per its settings."""

    def __init__(self, settings: Settings, secrets: SecretScanner) -> None:
        self.settings = settings
        self.secrets = secrets

    def check_size(self, name: str, text: str | None) -> str | None:
        """``text``, or an InputError when it is longer than ``max_input_chars``: every stage after this one
        is linear, but a 50 MB "message" is a mistake or an attack, and is refused before any work."""
        limit = self.settings.max_input_chars
        if text is not None and len(text) > limit:
            raise InputError(f"{name} is {len(text):,} characters; the limit is {limit:,} "
                             "(FACTFORGE_MAX_INPUT_CHARS)")
        return text

    @staticmethod
    def check_visibility(visibility: str | None, team_id: str | None, max_visibility: str | None = None) -> None:
        for name, value in (("visibility", visibility), ("max_visibility", max_visibility)):
            if value is not None and value not in VISIBILITIES:
                raise ValidationError(f"{name} {value!r} must be one of {', '.join(VISIBILITIES)}")
        if visibility is None:
            return
        if visibility == "team" and not team_id:
            raise ValidationError("visibility 'team' needs a team_id")
        if wider(visibility, max_visibility):
            raise ValidationError(f"visibility {visibility!r} is wider than max_visibility {max_visibility!r}")

    def redact_fact(self, fact: Fact) -> Fact | None:
        """A tag-supplied fact (from the already redacted reply) with no secret left in its content or entity
        names, or None in drop mode when it had one (secrets never become memory)."""
        red = self.secrets.redact(fact.content)
        names = tuple(n for n in fact.entities if not self.secret_name(n))
        if not red.count and not has_placeholder(fact.content) and names == fact.entities:
            return fact
        if self.settings.secrets_mode == "drop" and (red.count or has_placeholder(fact.content)):
            return None
        return dataclasses.replace(fact, content=red.text, entities=names)

    def check_name(self, field: str, name: str | None, is_injection: Callable[[str], str | None]) -> str | None:
        """A speaker's name as given, or an InputError. The name becomes the subject of facts ("Maria went to a
        pottery class"), an entity, a column of the turn and part of the LLM's prompt, and other agents of the team
        read it, so it must be a name: one line of at most ``MAX_NAME_CHARS`` characters, with no secret and no
        instruction the gatekeeper reads as an injection. Names are refused, not redacted: a name with a
        placeholder in it would put "[REDACTED]" into every fact about its speaker."""
        if name is None:
            return None
        if len(name) > MAX_NAME_CHARS:
            raise InputError(f"{field} is {len(name):,} characters; a name may have {MAX_NAME_CHARS}")
        if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in name):
            raise InputError(f"{field} must be one line with no control characters")
        if self.secret_name(name):
            raise InputError(f"{field} holds a secret (or a redaction placeholder); it would be stored in facts")
        rule = is_injection(name)
        if rule is not None:
            raise InputError(f"{field} reads as a prompt injection (gate rule {rule}); it would become memory")
        return name

    def secret_name(self, name: str) -> bool:
        """Whether an entity name is (or holds) a secret, redacted or not: it is never stored or sent."""
        return has_placeholder(name) or self.secrets.contains_secret(name)

    def scrub(self, text: str | None) -> tuple[str | None, str | None]:
        """(text to work on, text to store): both redacted; in drop mode the stored one says it was dropped."""
        if text is None:
            return None, None
        red = self.secrets.redact(text)
        if red.count and self.settings.secrets_mode == "drop":
            return red.text, DROPPED
        return red.text, red.text

    def redact(self, text: str | None) -> str | None:
        return self.scrub(text)[1]
