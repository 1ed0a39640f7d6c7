"""The edge of the write path: input limits, and secrets redacted (or dropped) before anything else sees them."""

from __future__ import annotations

import dataclasses

from .errors import InputError, ValidationError
from .rules.secrets import SecretScanner, has_placeholder
from .settings import VISIBILITIES, Settings
from .types import Fact

__all__ = ["DROPPED", "Redactor"]

# What drop mode (FACTFORGE_SECRETS=drop) stores instead of a message that held a secret.
DROPPED = "[DROPPED: message contained a secret]"


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
    def check_visibility(visibility: str | None, team_id: str | None) -> None:
        if visibility is None:
            return
        if visibility not in VISIBILITIES:
            raise ValidationError(f"visibility {visibility!r} must be one of {', '.join(VISIBILITIES)}")
        if visibility == "team" and not team_id:
            raise ValidationError("visibility 'team' needs a team_id")

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
