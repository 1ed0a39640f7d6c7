"""The readings of a text that the injection rules look at, besides the text itself.

An injection written with Cyrillic look-alikes ("Іgnоrе"), fullwidth letters, zero-width characters between
words, leetspeak ("1gn0r3"), base64 or rot13 is still read by a model as the plain sentence; the rules must
read it that way too. :class:`Normaliser` turns one text into its distinct readings: NFKC with the
zero-width characters removed (and, separately, turned into spaces), look-alikes folded to Latin, leetspeak
folded, base64 runs decoded, and rot13 applied when the text asks for it. The tables (look-alikes, leet
digits, zero-width characters, rot13 hints) are data: the ``normalise`` section of ``patterns/injection.yaml``.

Plain ASCII chat without digits inside words or base64-looking runs has one reading, itself: the common
path costs a few ``str`` scans.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

import regex

from .schema import NormaliseSpec

__all__ = ["Normaliser"]

_BASE64_RUN = regex.compile(r"[A-Za-z0-9+/]{16,}={0,2}")
_MIXED_TOKEN = regex.compile(r"\b(?=\w*\d)(?=\w*[^\W\d_])\w+\b|[@$]")
_LEET_TOKEN = regex.compile(r"[\w@$!]+")
# Plain ASCII chat is the common case: there a mixed token needs an ASCII digit or one of "@$", which the stdlib
# engine finds several times faster than _MIXED_TOKEN's scan. _BASE64_RUN names ASCII characters only, so the
# stdlib engine finds the same runs in any text, faster.
_ASCII_DIGIT_OR_SIGN = re.compile(r"[0-9@$]")
_BASE64_RUN_FAST = re.compile(_BASE64_RUN.pattern)


@dataclass(frozen=True, slots=True)
class Normaliser:
    """Turns a text into the readings the injection rules check (see the module docstring)."""

    zero_width: frozenset[str] = frozenset()
    confusables: Mapping[int, str] | None = None  # str.translate table: look-alike -> Latin letter
    leet: Mapping[int, str] | None = None  # str.translate table: digit or symbol -> letter
    rot13_hints: tuple[str, ...] = ()
    base64_min_chars: int = 16
    # Readings beyond the text itself are built from at most this many characters (a long message is still
    # judged segment by segment by the pipeline; this bounds the extra work per call).
    max_chars: int = 20_000
    # Whether a rot13 hint occurs in the lower-cased text, as one search (derived from ``rot13_hints``): a generator
    # over the hints costs more than the rest of a plain message's readings.
    rot13_search: re.Pattern[str] | None = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.rot13_hints:
            object.__setattr__(self, "rot13_search", re.compile("|".join(re.escape(h) for h in self.rot13_hints)))

    def readings(self, text: str) -> list[str]:
        """``text`` and its other readings, each once, the text itself first."""
        out = [text]
        sample = text[: self.max_chars]

        def add(reading: str) -> None:
            if reading and reading not in out:
                out.append(reading)

        base = sample
        if not sample.isascii():
            base = unicodedata.normalize("NFKC", sample)
            if self.zero_width and any(ch in self.zero_width for ch in base):
                spaced = self._zero_width_as_spaces(base)
                add(spaced)
                if self.confusables:
                    add(spaced.translate(self.confusables))
                base = "".join(ch for ch in base if ch not in self.zero_width)
            add(base)
            if self.confusables:
                folded = base.translate(self.confusables)
                add(folded)
                base = folded
        if self.leet and (not base.isascii() or _ASCII_DIGIT_OR_SIGN.search(base)) and _MIXED_TOKEN.search(base):
            leet = self.leet
            # Once the text writes words in leetspeak, short all-digit tokens are words too ("15" = "is").
            add(_LEET_TOKEN.sub(lambda m: m.group(0).translate(leet)
                                if not m.group(0).isdigit() or all(ord(c) in leet for c in m.group(0)) else m.group(0),
                                base))
        low = base.lower()
        if self.rot13_search is not None and self.rot13_search.search(low) is not None:
            add(codecs.encode(base, "rot13"))
        if len(base) >= self.base64_min_chars:
            decoded = [_b64(m.group(0)) for m in _BASE64_RUN_FAST.finditer(base)
                       if len(m.group(0)) >= self.base64_min_chars]
            words = [d for d in decoded if d]
            if words:
                add(" ".join(words))
        return out

    def _zero_width_as_spaces(self, text: str) -> str:
        """Zero-width characters read as spaces where they stand between words (written instead of spaces),
        dropped between single letters (one inside every gap of a word: "w\u200bo\u200br\u200bd")."""
        pieces = regex.split("[" + regex.escape("".join(sorted(self.zero_width))) + "]+", text)
        out = [pieces[0]]
        for prev, piece in zip(pieces, pieces[1:]):
            single = len(prev.rsplit(None, 1)[-1] if prev.strip() else "") <= 1 and \
                len(piece.split(None, 1)[0] if piece.strip() else "") <= 1
            out.append(piece if single else " " + piece)
        return "".join(out)

    @classmethod
    def from_spec(cls, spec: NormaliseSpec | None) -> Normaliser:
        """The ``normalise`` section of injection.yaml (checked); a missing section means no extra readings."""
        if spec is None:
            return cls()
        tables = [{ord(ch): target for target, sources in table.items() for ch in sources} or None
                  for table in (spec.confusables, spec.leet)]
        return cls(frozenset(spec.zero_width), tables[0], tables[1], tuple(h.lower() for h in spec.rot13_hints),
                   spec.base64_min_chars, spec.max_chars)


def _b64(run: str) -> str | None:
    """The run decoded, if it is base64 of printable UTF-8 text (not of binary, not an ordinary word)."""
    padded = run + "=" * (-len(run) % 4)
    try:
        data = base64.b64decode(padded, validate=True)
        text = data.decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    printable = sum(ch.isprintable() or ch in "\n\t" for ch in text)
    return text if text and printable == len(text) and any(ch == " " for ch in text) else None
