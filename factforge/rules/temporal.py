"""Temporal normalisation: relative time expressions resolved against a message's timestamp.

:func:`resolve` turns "yesterday", "last Tuesday", "3 weeks ago", "last month", "since March", "in 2023",
"next Friday" or an ISO date into the absolute period it names, as ``(valid_from, valid_to)``:

- a day, month or year named by the expression gives its first and last instant (``valid_to`` is the last
  second of the period, inclusive): "last month" on 2024-06-15 is 2024-05-01 00:00 .. 2024-05-31 23:59:59;
- "since X" / "from X on" is open-ended: ``(start of X, None)``; "until X" is ``(None, end of X)``;
- anything not understood is ``(None, None)`` - never a guess.

Chinese relative expressions (昨天, 上个月, 三周前, 去年 ...) are mapped onto the English ones first.

Results carry the reference's timezone (UTC when the reference is naive). Calendar arithmetic for whole
months and years is done here because ``parsedatetime`` answers "last month" with a single day; day-level
expressions (weekdays, "N units ago", "tomorrow") go through ``parsedatetime``.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Any

import parsedatetime
import regex

from .schema import TimeWordsSpec, read_data
from ..types import Span

__all__ = ["Anchor", "find_anchor", "find_expressions", "resolve"]

Period = tuple[datetime | None, datetime | None]


def _time_words() -> dict[str, Any]:
    """data/time_words.yaml: the words of the time expressions (the grammar below combines them)."""
    return read_data(TimeWordsSpec, "time_words.yaml").model_dump()


_WORDS_DATA = _time_words()

MONTHS: dict[str, int] = {}
for _n, (_full, _abbr) in enumerate(zip(calendar.month_name[1:], calendar.month_abbr[1:], strict=True), 1):
    MONTHS[_full.lower()] = _n
    MONTHS[_abbr.lower()] = _n
MONTHS["sept"] = 9
_MONTH_RX = "|".join(sorted(MONTHS, key=len, reverse=True))
_UNIT_RX = r"(?:day|week|weekend|month|year|fortnight)s?"
_NUMBER_WORDS: dict[str, int] = _WORDS_DATA["number_words"]
_NUMBER_RX = r"(?:\d+|" + "|".join(w.replace(" ", r"\s+") for w in _NUMBER_WORDS) + ")"
_WEEKDAY_RX = "(?:" + "|".join(_WORDS_DATA["weekdays"]) + ")"
_WEEKDAY_SHORT: dict[str, str] = _WORDS_DATA["weekday_short"]
_SHORT_RX = "(?:" + "|".join(sorted(_WEEKDAY_SHORT, key=len, reverse=True)) + r")\.?"
_SEASON_RX = "|".join(_WORDS_DATA["seasons"])

# The expressions :func:`resolve` understands, for finding them in running text.
_CORE_FORMS = (
    rf"yesterday|today|tonight|tomorrow|the\s+day\s+before\s+yesterday|last\s+night"
    rf"|this\s+(?:morning|afternoon|evening)"
    rf"|(?:last|this|next|past)\s+(?:{_WEEKDAY_RX}|week|month|year|weekend|{_SEASON_RX})"
    rf"|(?:last|this|next|past|on)\s+{_SHORT_RX}"
    rf"|(?:on\s+)?{_WEEKDAY_RX}"
    rf"|{_NUMBER_RX}\s+{_UNIT_RX}\s+(?:ago|back)"
    rf"|(?:in\s+|early\s+|late\s+)?(?:{_MONTH_RX})(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?(?:,?\s+(?:19|20)\d\d)?\b"
    # an ISO date before a year, which is its first four digits ("since 2026-03-15" is no "since 2026")
    rf"|(?:on\s+)?\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]\d{{2}}:\d{{2}}(?::\d{{2}})?)?"
    rf"|(?:in\s+)?(?:19|20)\d\d\b"
)
_CORE = f"(?:{_CORE_FORMS})"


def _expression(single: str) -> regex.Pattern[str]:
    """A range of two :data:`_CORE` times, or ``single`` after an optional opening word ("since", "until"), in
    running text."""
    return regex.compile(
        rf"(?<![\p{{L}}\p{{N}}])(?:(?:from|between)\s+{_CORE}\s+(?:to|until|till|through|and)\s+{_CORE}"
        rf"|(?:(?:since|from|until|till|as\s+of|starting)\s+)?{single})(?![\p{{L}}\p{{N}}])",
        regex.IGNORECASE,
    )


EXPRESSION = _expression(_CORE)
# The forms an LLM's facts and the turns they come from write beside those (stop 40): a season with its year ("fall
# 2026", "the summer of 2019"), "in the fall", "in three weeks". Read by :func:`find_expressions` (the LLM fact check)
# only: the rule path's :func:`find_anchor` keeps :data:`EXPRESSION`, whose cost is per character of every message,
# and would not anchor a habit ("we go camping in the summer") or a loose plan ("in a few weeks") anyway.
WRITTEN_EXPRESSION = _expression(
    rf"(?:{_CORE_FORMS}"
    rf"|(?:in\s+)?(?:the\s+)?(?:{_SEASON_RX})\s+(?:of\s+)?(?:19|20)\d\d\b|in\s+the\s+(?:{_SEASON_RX})"
    rf"|in\s+{_NUMBER_RX}\s+{_UNIT_RX})"
)

_YEAR = regex.compile(r"(?:in\s+)?((?:19|20)\d\d)")
_MONTH = regex.compile(rf"(?:in\s+|early\s+|late\s+)?({_MONTH_RX})(?:,?\s+((?:19|20)\d\d))?")
_MONTH_DAY = regex.compile(rf"(?:on\s+)?({_MONTH_RX})\s+(\d{{1,2}})(?:,?\s+((?:19|20)\d\d))?")
_ISO = regex.compile(r"(?:on\s+)?(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2})?))?")
_RELATIVE_PERIOD = regex.compile(r"(last|this|next|past)\s+(week|month|year)")
_WEEKEND = regex.compile(r"(last|this|next|past)\s+weekend")
# How many weeks, months or years "last/past/this/next" moves from the present one.
_STEP = {"last": -1, "past": -1, "this": 0, "next": 1}
_WEEKDAY = regex.compile(rf"(?:(last|this|next|past|on)\s+)?({_WEEKDAY_RX})|(last|this|next|past|on)\s+({_SHORT_RX})")
_WEEKDAY_NUMBER = {name: n for n, name in enumerate(_WORDS_DATA["weekdays"])}
_SEASON = regex.compile(rf"(last|this|next|past)\s+({_SEASON_RX})")
# "fall 2026", "in the summer of 2019": that year's season; "in the fall": the coming one for a plan, else the one
# under way or the last (stop 40, the seasons an LLM writes out with their year as its prompt asks)
_SEASON_YEAR = regex.compile(rf"(?:in\s+)?(?:the\s+)?({_SEASON_RX})\s+(?:of\s+)?((?:19|20)\d\d)")
_SEASON_BARE = regex.compile(rf"in\s+the\s+({_SEASON_RX})")
_SEASON_START: dict[str, int] = _WORDS_DATA["season_start"]
# ("two weeks back" as people say it too, stop 41)
_AGO = regex.compile(rf"({_NUMBER_RX})\s+({_UNIT_RX})\s+(?:ago|back)")
# "in three weeks": the day that far ahead (a month or year ahead: that month, that year) (stop 40)
_AHEAD = regex.compile(rf"in\s+({_NUMBER_RX})\s+({_UNIT_RX})")
_OPEN = regex.compile(r"(since|from|as\s+of|starting|until|till)\s+(.+)")
_RANGE = regex.compile(rf"(?:from|between)\s+({_CORE})\s+(?:to|until|till|through|and)\s+({_CORE})")
# In running text (a fact's sentence, not a time slot a rule captured) some forms are too ambiguous to
# anchor a fact: a bare month ("I may", "we march"), a bare weekday ("Monday meetings"), a bare number
# that looks like a year ("2000 tests"). They count only with a preposition, a day or a year attached.
_AMBIGUOUS = regex.compile(rf"(?:(?:early|late)\s+)?(?:{_MONTH_RX})|{_WEEKDAY_RX}|(?:19|20)\d\d")
# Every expression find_anchor accepts holds one of these words or a year-like number: a cheap test that
# spares the full expression scan on the many sentences that hold no time at all.
_TRIGGERS = frozenset(_WORDS_DATA["relative"]) | frozenset(_WORDS_DATA["seasons"]) | \
    frozenset(_WORDS_DATA["weekdays"]) | frozenset(_WEEKDAY_SHORT) | frozenset(MONTHS)
_WORDS = regex.compile(r"[a-z]+")
# Where a sentence ends: a capital after it starts a sentence ("Hi! Yesterday I ..."), it is no title.
_SENTENCE_END = regex.compile(r"[.!?\n]+[\s\"')\]]*|\s+[-\u2013\u2014]\s+")
_YEARISH = regex.compile(r"(?:19|20)\d\d|[\u4e00-\u9fff]")
# Expressions whose meaning does not depend on when they were said: they name a year or an ISO date.
_ABSOLUTE = regex.compile(r"(?:19|20)\d\d")

# Chinese: fixed words and "N <unit> 前" ("三周前" = three weeks ago), with Chinese or Arabic numerals.
_ZH_FIXED: dict[str, str] = _WORDS_DATA["zh"]["fixed"]
_ZH_DIGITS: dict[str, int] = _WORDS_DATA["zh"]["digits"]
_ZH_UNITS: dict[str, str] = _WORDS_DATA["zh"]["units"]
_ZH_NUMBER = r"(?:\d+|[零一二两三四五六七八九十]{1,3}|几)"
_ZH_AGO = regex.compile(rf"({_ZH_NUMBER})\s*({'|'.join(sorted(_ZH_UNITS, key=len, reverse=True))})(?:以)?前")
ZH_EXPRESSION = regex.compile(
    rf"(?:{'|'.join(sorted(_ZH_FIXED, key=len, reverse=True))}|{_ZH_AGO.pattern})"
)


def _zh_number(text: str) -> int | None:
    """一 .. 九十九 and Arabic digits; "几" (a few) counts as 3, like "a few"."""
    if text.isdigit():
        return int(text)
    if text == "几":
        return 3
    if "十" in text:
        tens, _, ones = text.partition("十")
        value = (_ZH_DIGITS.get(tens, 0) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
        return value if all(c in _ZH_DIGITS for c in tens + ones) else None
    return _ZH_DIGITS.get(text) if len(text) == 1 else None


def _from_chinese(expression: str) -> str | None:
    """The English form of a Chinese relative expression, or None when it is not one."""
    e = expression.strip(" 。，,.!！?？")
    if e in _ZH_FIXED:
        return _ZH_FIXED[e]
    m = _ZH_AGO.fullmatch(e)
    if m is None:
        return None
    n = _zh_number(m.group(1))
    return None if n is None else f"{n} {_ZH_UNITS[m.group(2)]}s ago"


# The neighbouring days, by how far they lie from the reference day.
_NEXT_DAYS = {"yesterday": -1, "tomorrow": 1}


@lru_cache(maxsize=1)
def _calendar() -> parsedatetime.Calendar:
    return parsedatetime.Calendar(version=parsedatetime.VERSION_CONTEXT_STYLE)


def _day(d: date, tz: tzinfo) -> tuple[datetime, datetime]:
    return datetime.combine(d, time.min, tz), datetime.combine(d, time(23, 59, 59), tz)


def _month(year: int, month: int, tz: tzinfo) -> tuple[datetime, datetime]:
    last = calendar.monthrange(year, month)[1]
    return datetime(year, month, 1, tzinfo=tz), datetime(year, month, last, 23, 59, 59, tzinfo=tz)


def _year(year: int, tz: tzinfo) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=tz), datetime(year, 12, 31, 23, 59, 59, tzinfo=tz)


def _season(which: str, first_month: int, today: date, tz: tzinfo) -> tuple[datetime, datetime]:
    """Three months from ``first_month``: "last" the latest one over before today, "next" the first to start
    after it, "this" the one of today's season year (the one under way, if it is)."""
    starts = [_shift_months(today.year, first_month, 12 * k) for k in (-2, -1, 0, 1)]
    spans = [(_month(y, m, tz)[0], _month(*_shift_months(y, m, 2), tz)[1]) for y, m in starts]
    now = datetime.combine(today, time.min, tz)
    if which in ("last", "past"):
        return [s for s in spans if s[1] < now][-1]
    if which == "next":
        return next(s for s in spans if s[0] > now)
    return next((s for s in spans if s[0] <= now <= s[1]), next(s for s in spans if s[0] > now))


def _shift_months(year: int, month: int, delta: int) -> tuple[int, int]:
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1


def _period(e: str, ref: datetime, future: bool = False) -> tuple[datetime, datetime] | None:
    """The closed period a (normalised, lower-case) expression names, or None.

    ``future``: the expression is about a plan, so a month without a year is the next such month.
    """
    tz = ref.tzinfo or timezone.utc
    today = ref.date()
    if e in ("today", "tonight") or e.startswith("this ") and e[5:] in ("morning", "afternoon", "evening"):
        return _day(today, tz)
    if e == "last night":
        return _day(today - timedelta(days=1), tz)
    if e == "the day before yesterday":
        return _day(today - timedelta(days=2), tz)
    if e in _NEXT_DAYS:  # what parsedatetime answers (checked in tests/test_temporal.py), without its ~1 ms parse
        return _day(today + timedelta(days=_NEXT_DAYS[e]), tz)
    if m := _ISO.fullmatch(e):
        try:
            return _day(date.fromisoformat(m.group(1)), tz)
        except ValueError:
            return None
    if m := _YEAR.fullmatch(e):
        return _year(int(m.group(1)), tz)
    if m := _MONTH.fullmatch(e):
        month = MONTHS[m.group(1)]
        # Without a year: the most recent such month not after the reference (facts are mostly about the past),
        # or for a plan the next one not before it.
        if m.group(2):
            year = int(m.group(2))
        elif future:
            year = today.year if month >= today.month else today.year + 1
        else:
            year = today.year if month <= today.month else today.year - 1
        return _month(year, month, tz)
    if m := _MONTH_DAY.fullmatch(e):
        return _month_day(m, today, future, tz)
    if m := _RELATIVE_PERIOD.fullmatch(e):
        step = _STEP[m.group(1)]
        if m.group(2) == "year":
            return _year(today.year + step, tz)
        if m.group(2) == "month":
            return _month(*_shift_months(today.year, today.month, step), tz)
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return _day(monday, tz)[0], _day(monday + timedelta(days=6), tz)[1]
    if m := _WEEKEND.fullmatch(e):
        # The Saturday and Sunday of the week named: last weekend is the one before this week's.
        step = _STEP[m.group(1)]
        saturday = today - timedelta(days=today.weekday()) + timedelta(days=5, weeks=step)
        return _day(saturday, tz)[0], _day(saturday + timedelta(days=1), tz)[1]
    if m := _SEASON.fullmatch(e):
        return _season(m.group(1), _SEASON_START[m.group(2)], today, tz)
    if m := _SEASON_YEAR.fullmatch(e):
        first = _month(int(m.group(2)), _SEASON_START[m.group(1)], tz)[0]
        return first, _month(*_shift_months(int(m.group(2)), _SEASON_START[m.group(1)], 2), tz)[1]
    if m := _SEASON_BARE.fullmatch(e):
        under_way = _season("this", _SEASON_START[m.group(1)], today, tz)
        if future or under_way[0] <= datetime.combine(today, time.min, tz):
            return under_way
        return _season("last", _SEASON_START[m.group(1)], today, tz)
    if m := _WEEKDAY.fullmatch(e):
        return _day(_weekday(today, _WEEKDAY_NUMBER[_weekday_name(m)], m.group(1) or m.group(3), future), tz)
    if m := _AGO.fullmatch(e):
        return _ago(m, today, tz)
    if m := _AHEAD.fullmatch(e):
        n, unit = _count(m)
        if unit == "month":
            return _month(*_shift_months(today.year, today.month, n), tz)
        if unit == "year":
            return _year(today.year + n, tz)
        return _day(today + timedelta(days=n * _UNIT_DAYS[unit]), tz)
    # Day-level expressions ("yesterday", "last Tuesday", "next Friday", "on Monday"): parsedatetime.
    naive = ref.replace(tzinfo=None)
    parsed, ctx = _calendar().parseDT(e, sourceTime=naive)
    if not ctx.hasDate:
        return None
    return _day(parsed.date(), tz)


def _month_day(m: regex.Match[str], today: date, future: bool, tz: tzinfo) -> tuple[datetime, datetime] | None:
    """"July 4" / "July 4, 2022": without a year the most recent such day, or for a plan the coming one."""
    month, day = MONTHS[m.group(1)], int(m.group(2))
    years = [int(m.group(3))] if m.group(3) else \
        ([today.year, today.year + 1] if future else [today.year, today.year - 1])
    for year in years:
        if day <= calendar.monthrange(year, month)[1] and (
                m.group(3) or (date(year, month, day) >= today if future else date(year, month, day) <= today)):
            return _day(date(year, month, day), tz)
    return None


def _ago(m: regex.Match[str], today: date, tz: tzinfo) -> tuple[datetime, datetime]:
    """"3 days ago", "two weekends ago", "a few years ago": the day (or weekend) that far back."""
    n, unit = _count(m)
    if unit == "month":
        y, mo = _shift_months(today.year, today.month, -n)
        return _day(date(y, mo, min(today.day, calendar.monthrange(y, mo)[1])), tz)
    if unit == "year":
        y = today.year - n
        return _day(date(y, today.month, min(today.day, calendar.monthrange(y, today.month)[1])), tz)
    if unit == "weekend":  # the Saturday and Sunday n weekends back
        saturday = today - timedelta(days=(today.weekday() - 5) % 7 or 7) - timedelta(weeks=n - 1)
        return _day(saturday, tz)[0], _day(saturday + timedelta(days=1), tz)[1]
    return _day(today - timedelta(days=n * _UNIT_DAYS[unit]), tz)


# Days in a unit of :data:`_UNIT_RX` counted by "3 weeks ago" / "in three weeks" (a month and a year go by the
# calendar).
_UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "fortnight": 14}


def _count(m: regex.Match[str]) -> tuple[int, str]:
    """How many of which unit an :data:`_AGO` or :data:`_AHEAD` match counts ("two weekends" -> (2, "weekend"))."""
    n = int(m.group(1)) if m.group(1).isdigit() else _NUMBER_WORDS[_SPACES.sub(" ", m.group(1))]
    return n, m.group(2).rstrip("s")


def _weekday_name(m: regex.Match[str]) -> str:
    """The full weekday name a :data:`_WEEKDAY` match names ("fri." -> "friday")."""
    return m.group(2) or _WEEKDAY_SHORT[m.group(4).rstrip(".")]


def _weekday(today: date, weekday: int, qualifier: str | None, future: bool) -> date:
    """The day a weekday names: "last Friday" the one before today, "next Friday" the one after; a plain
    "Friday" / "on Friday" / "this Friday" the most recent one (today included), or for a plan the coming one."""
    back = (today.weekday() - weekday) % 7
    if qualifier in ("last", "past"):
        return today - timedelta(days=back or 7)
    if qualifier == "next" or future:
        return today + timedelta(days=(weekday - today.weekday()) % 7 or (7 if qualifier == "next" else 0))
    return today - timedelta(days=back)


# Compiled once (``regex.sub(pattern_text, ...)`` looks the pattern up in the module's cache on every call).
_SPACES = regex.compile(r"\s+")
_ORDINAL = regex.compile(r"(\d)(?:st|nd|rd|th)\b")
_MONTH_OR_WEEKDAY = regex.compile(rf"(?:{_MONTH_RX}|{_WEEKDAY_RX})\b")


def _normalise(expression: str) -> str:
    e = _SPACES.sub(" ", expression.strip().lower())
    e = e.strip(" .,;:!?")
    e = _ORDINAL.sub(r"\1", e)
    return e


def resolve(expression: str, reference: datetime, *, future: bool = False) -> Period:
    """``(valid_from, valid_to)`` of ``expression`` relative to ``reference``; ``(None, None)`` if unknown."""
    ref = reference if reference.tzinfo is not None else reference.replace(tzinfo=timezone.utc)
    english = _from_chinese(expression)
    if english == "2 years ago":  # 前年 names the whole year before last, not one day
        return _year(ref.year - 2, ref.tzinfo or timezone.utc)
    e = _normalise(english if english is not None else expression)
    if not e or WRITTEN_EXPRESSION.fullmatch(e) is None:
        return None, None
    if m := _RANGE.fullmatch(e):
        first, last = _period(m.group(1), ref, future), _period(m.group(2), ref, future)
        if first is None or last is None or last[1] < first[0]:
            return None, None
        return first[0], last[1]
    if m := _OPEN.fullmatch(e):
        period = _period(m.group(2), ref, future)
        if period is None:
            return None, None
        if m.group(1) in ("until", "till"):
            return None, period[1]
        return period[0], None
    period = _period(e, ref, future)
    return period if period is not None else (None, None)


def find_expressions(text: str) -> list[Span]:
    """Every time expression :func:`resolve` understands, with its character offsets in ``text`` (also the forms of
    :data:`WRITTEN_EXPRESSION` that the rule path does not read)."""
    found = [Span(m.start(), m.end(), m.group()) for m in WRITTEN_EXPRESSION.finditer(text)]
    if any("\u4e00" <= c <= "\u9fff" for c in text):
        found += [Span(m.start(), m.end(), m.group()) for m in ZH_EXPRESSION.finditer(text)]
        found.sort(key=lambda s: s.start)
    return found


@dataclass(frozen=True, slots=True)
class Anchor:
    """A time expression in a sentence and the validity it gives a fact stated in that sentence.

    A point or period ("last month", "3 weeks ago", "in 2023") says when the fact began to hold, so only
    ``valid_from`` is set; "until X" sets only ``valid_to``; an explicit range ("from 2019 to 2021") both.
    ``relative`` is true when the words mean something else on another day, so they must not be frozen into
    a fact's text ("moved to Berlin 3 weeks ago" is wrong a month later).
    """

    span: Span
    valid_from: datetime | None
    valid_to: datetime | None
    relative: bool


def find_anchor(
    text: str, reference: datetime, start: int = 0, end: int | None = None, *, future: bool = False
) -> Anchor | None:
    """The first time expression in ``text[start:end]`` that resolves, as an :class:`Anchor`; else None.

    Bare months, weekdays and years are skipped (see ``_AMBIGUOUS``), and so is a capitalised expression in
    mid-sentence ("I watch Last Week Tonight"): it is a title, not a time.
    """
    end = len(text) if end is None else end
    piece = text[start:end]
    if _YEARISH.search(piece) is None and _TRIGGERS.isdisjoint(_WORDS.findall(piece.lower())):
        return None
    spans = [Span(m.start(), m.end(), m.group()) for m in EXPRESSION.finditer(text, start, end)]
    if any("\u4e00" <= c <= "\u9fff" for c in text[start:end]):
        spans += [Span(m.start(), m.end(), m.group()) for m in ZH_EXPRESSION.finditer(text, start, end)]
        spans.sort(key=lambda s: s.start)
    for span in spans:
        words = _normalise(span.text)
        if _AMBIGUOUS.fullmatch(words):
            continue
        if span.text[:1].isupper() and _SENTENCE_END.split(text[start:span.start])[-1].strip(" \t\n\"'(") and \
                _MONTH_OR_WEEKDAY.match(words) is None:
            continue
        valid_from, valid_to = resolve(span.text, reference, future=future)
        if valid_from is None and valid_to is None:
            continue
        closed = valid_from is None or _RANGE.fullmatch(words) is not None
        parts = m.groups() if (m := _RANGE.fullmatch(words)) else (words,)
        return Anchor(span, valid_from, valid_to if closed else None,
                      relative=any(_ABSOLUTE.search(p) is None for p in parts))
    return None


def _said(day: date) -> str:
    return f"{day.day} {day:%B} {day.year}"


def describe(expression: str, said_at: datetime) -> str | None:
    """The time ``expression`` names, in words a reader can check: as a date where the words name a day
    ("yesterday" said on 8 May 2023: "7 May 2023"), a month or a year ("last month": "April 2023"), and
    relative to the day it was said where the words are that vague ("last week": "the week before 8 May
    2023", "last Friday": "the Friday before 8 May 2023", "two weeks ago": "two weeks before 8 May 2023").
    None if it does not resolve."""
    e = _normalise(_from_chinese(expression) or expression)
    if (m := _RANGE.fullmatch(e)) is not None:
        first, last = describe(m.group(1), said_at), describe(m.group(2), said_at)
        return f"from {first} to {last}" if first and last else None
    if (m := _OPEN.fullmatch(e)) is not None:
        rest = describe(m.group(2), said_at)
        return f"{'until' if m.group(1) in ('until', 'till') else 'since'} {rest}" if rest else None
    valid_from, valid_to = resolve(e, said_at)
    if valid_from is None or valid_to is None:
        return None
    said, start = said_at.date(), valid_from.date()
    side = "before" if start < said else "after" if start > said else "of"
    if m := _WEEKEND.fullmatch(e):
        inside = m.group(1) == "this" or valid_from.date() <= said <= valid_to.date()
        return f"the weekend {'of' if inside else side} {_said(said)}"
    if m := _RELATIVE_PERIOD.fullmatch(e):
        if m.group(2) == "week":
            return f"the week {'of' if m.group(1) == 'this' else side} {_said(said)}"
    if (m := _SEASON.fullmatch(e)) is not None:  # "last summer": the season (the speaker's word) and its year
        return f"{m.group(2)} {start.year}" + (f"-{valid_to.year % 100:02d}" if valid_to.year != start.year else "")
    if (m := _WEEKDAY.fullmatch(e)) is not None and side != "of":
        return f"the {_weekday_name(m).capitalize()} {side} {_said(said)}"
    if (m := _AGO.fullmatch(e)) is not None:  # "3 months ago" names a month at most, "a few years ago" a year
        unit = m.group(2).rstrip("s")
        if unit in ("week", "weekend", "fortnight"):
            return f"{m.group(1)} {m.group(2)} before {_said(said)}"
        if unit != "day":
            return f"{start:%B} {start.year}" if unit == "month" else str(start.year)
    days = (valid_to - valid_from).days
    if days < 1:
        return _said(start)
    if days < 32:
        return f"{start:%B} {start.year}"
    return str(start.year)


def when_said(text: str, said_at: datetime, most: int = 3) -> str | None:
    """The times ``text`` speaks of (the first ``most``), each described (:func:`describe`) relative to
    ``said_at``, joined by "; "; None if it names none."""
    told: list[str] = []
    start = 0
    while len(told) < most and (anchor := find_anchor(text, said_at, start)) is not None:
        words = describe(anchor.span.text, said_at)
        if words and words not in told:
            told.append(words)
        start = anchor.span.end
    return "; ".join(told) or None


def asked_period(question: str, now: datetime) -> tuple[datetime, datetime] | None:
    """The closed period a question asks about ("what did I cook in March 2023?", "... last week?"), or None
    where it names none, or names only an open end ("since 2016")."""
    anchor = find_anchor(question, now)
    if anchor is None:
        return None
    valid_from, valid_to = resolve(anchor.span.text, now)
    return (valid_from, valid_to) if valid_from is not None and valid_to is not None else None
