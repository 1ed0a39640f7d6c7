"""Temporal normalisation against a fixed reference (Saturday 2024-06-15 12:00 UTC)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from factforge.rules.temporal import find_anchor, find_expressions, resolve, when_said

REF = datetime(2024, 6, 15, 12, 0, tzinfo=timezone.utc)
UTC = timezone.utc


def day(y: int, m: int, d: int, end: bool = False, tz: timezone = UTC) -> datetime:
    return datetime(y, m, d, 23, 59, 59, tzinfo=tz) if end else datetime(y, m, d, tzinfo=tz)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("yesterday", (day(2024, 6, 14), day(2024, 6, 14, True))),
        ("today", (day(2024, 6, 15), day(2024, 6, 15, True))),
        ("last Tuesday", (day(2024, 6, 11), day(2024, 6, 11, True))),
        ("3 weeks ago", (day(2024, 5, 25), day(2024, 5, 25, True))),
        ("two days ago", (day(2024, 6, 13), day(2024, 6, 13, True))),
        ("last month", (day(2024, 5, 1), day(2024, 5, 31, True))),
        ("last week", (day(2024, 6, 3), day(2024, 6, 9, True))),
        ("last year", (day(2023, 1, 1), day(2023, 12, 31, True))),
        ("since March", (day(2024, 3, 1), None)),
        ("since September", (day(2023, 9, 1), None)),  # the most recent September not after the reference
        ("since 2020", (day(2020, 1, 1), None)),
        ("until May 2024", (None, day(2024, 5, 31, True))),
        ("in 2023", (day(2023, 1, 1), day(2023, 12, 31, True))),
        ("next Friday", (day(2024, 6, 21), day(2024, 6, 21, True))),
        ("2023-04-05", (day(2023, 4, 5), day(2023, 4, 5, True))),
        ("on 2023-04-05", (day(2023, 4, 5), day(2023, 4, 5, True))),
        ("  Last Month. ", (day(2024, 5, 1), day(2024, 5, 31, True))),
        ("hello world", (None, None)),
        ("recently", (None, None)),
        ("", (None, None)),
        ("2023-02-30", (None, None)),
        ("昨天", (day(2024, 6, 14), day(2024, 6, 14, True))),
        ("上个月", (day(2024, 5, 1), day(2024, 5, 31, True))),
        ("三周前", (day(2024, 5, 25), day(2024, 5, 25, True))),
        ("3天前", (day(2024, 6, 12), day(2024, 6, 12, True))),
        ("两个月前", (day(2024, 4, 15), day(2024, 4, 15, True))),
        ("十二年前", (day(2012, 6, 15), day(2012, 6, 15, True))),
        ("去年", (day(2023, 1, 1), day(2023, 12, 31, True))),
        ("前年", (day(2022, 1, 1), day(2022, 12, 31, True))),
        ("上周", (day(2024, 6, 3), day(2024, 6, 9, True))),
        ("很久以前", (None, None)),
        # stop 40: what an LLM's facts write out, and the source times they come from
        ("since 2024-06-09", (day(2024, 6, 9), None)),
        ("in fall 2024", (day(2024, 9, 1), day(2024, 11, 30, True))),
        ("the summer of 2019", (day(2019, 6, 1), day(2019, 8, 31, True))),
        ("in the fall", (day(2023, 9, 1), day(2023, 11, 30, True))),
        ("in three weeks", (day(2024, 7, 6), day(2024, 7, 6, True))),
        ("in a month", (day(2024, 7, 1), day(2024, 7, 31, True))),
    ],
)
def test_resolve(expression: str, expected: tuple[datetime | None, datetime | None]) -> None:
    assert resolve(expression, REF) == expected


def test_naive_reference_is_utc() -> None:
    assert resolve("yesterday", REF.replace(tzinfo=None)) == (day(2024, 6, 14), day(2024, 6, 14, True))


def test_results_keep_the_reference_timezone() -> None:
    tz = timezone(timedelta(hours=8))
    start, end = resolve("yesterday", datetime(2024, 6, 15, 1, 0, tzinfo=tz))
    assert start == day(2024, 6, 14, tz=tz) and end == day(2024, 6, 14, True, tz=tz)
    assert start is not None and start.utcoffset() == timedelta(hours=8)


def test_month_boundaries() -> None:
    assert resolve("last month", datetime(2024, 3, 31, tzinfo=UTC)) == (day(2024, 2, 1), day(2024, 2, 29, True))
    assert resolve("last month", datetime(2024, 1, 10, tzinfo=UTC)) == (day(2023, 12, 1), day(2023, 12, 31, True))


def test_find_expressions() -> None:
    text = "Since March I've used Neovim; we deployed v2 yesterday and fixed it 3 weeks ago."
    found = [(s.text, text[s.start:s.end]) for s in find_expressions(text)]
    assert [t for t, _ in found] == ["Since March", "yesterday", "3 weeks ago"]
    assert all(t == sliced for t, sliced in found)
    assert find_expressions("nothing temporal here") == []


def test_find_chinese_expressions() -> None:
    text = "我们昨天部署了v2，三周前修好了它。去年我搬到了上海。"
    assert [s.text for s in find_expressions(text)] == ["昨天", "三周前", "去年"]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("from 2019 to 2021", (day(2019, 1, 1), day(2021, 12, 31, True))),
        ("between March and May", (day(2024, 3, 1), day(2024, 5, 31, True))),
        ("from March 2022 until last month", (day(2022, 3, 1), day(2024, 5, 31, True))),
        ("from 2021 to 2019", (None, None)),  # backwards: not a range
    ],
)
def test_resolve_closed_ranges(expression: str, expected: tuple[datetime | None, datetime | None]) -> None:
    assert resolve(expression, REF) == expected


@pytest.mark.parametrize(
    ("text", "phrase", "valid_from", "valid_to", "relative"),
    [
        ("We switched from JWT to Clerk last month", "last month", day(2024, 5, 1), None, True),
        ("Since March I prefer tabs", "Since March", day(2024, 3, 1), None, True),
        ("Yesterday we decided to use Redis", "Yesterday", day(2024, 6, 14), None, True),
        ("I moved to Berlin 3 weeks ago", "3 weeks ago", day(2024, 5, 25), None, True),
        ("In 2023 we migrated to Postgres", "In 2023", day(2023, 1, 1), None, False),
        ("I prefer tabs until May 2024", "until May 2024", None, day(2024, 5, 31, True), False),
        ("I used Java from 2015 to 2019", "from 2015 to 2019", day(2015, 1, 1), day(2019, 12, 31, True), False),
        ("我们上个月换了数据库", "上个月", day(2024, 5, 1), None, True),
    ],
)
def test_find_anchor(text: str, phrase: str, valid_from: datetime | None, valid_to: datetime | None,
                     relative: bool) -> None:
    anchor = find_anchor(text, REF)
    assert anchor is not None
    assert (anchor.span.text, anchor.valid_from, anchor.valid_to, anchor.relative) == (
        phrase, valid_from, valid_to, relative)
    assert text[anchor.span.start:anchor.span.end] == phrase


@pytest.mark.parametrize(
    "text",
    [
        "I may switch to Rust",          # "may" is a verb here, not the month
        "Monday meetings are the worst",  # a bare weekday
        "we ran 2000 tests",             # a bare number that looks like a year
        "I watch Last Week Tonight",     # a title in mid-sentence
        "I prefer tabs",
        "we go camping in the summer",   # often a habit: read by the LLM fact check only (stop 40)
        "we'll know more in two weeks",
    ],
)
def test_find_anchor_skips_ambiguous_words(text: str) -> None:
    assert find_anchor(text, REF) is None


def test_find_anchor_stays_inside_its_bounds() -> None:
    text = "Yesterday was busy. I prefer tabs."
    assert find_anchor(text, REF, 20, len(text)) is None
    anchor = find_anchor(text, REF, 0, 19)
    assert anchor is not None and anchor.span.text == "Yesterday"


# REF is Saturday 15 June 2024.
@pytest.mark.parametrize(
    ("expression", "expected", "future"),
    [
        ("last weekend", (day(2024, 6, 8), day(2024, 6, 9, True)), False),  # said on a Saturday: the one before
        ("this weekend", (day(2024, 6, 15), day(2024, 6, 16, True)), False),
        ("next weekend", (day(2024, 6, 22), day(2024, 6, 23, True)), False),
        ("on Friday", (day(2024, 6, 14), day(2024, 6, 14, True)), False),  # told afterwards: the one just past
        ("on Friday", (day(2024, 6, 21), day(2024, 6, 21, True)), True),  # a plan: the coming one
        ("Saturday", (day(2024, 6, 15), day(2024, 6, 15, True)), False),  # today
        ("last Saturday", (day(2024, 6, 8), day(2024, 6, 8, True)), False),
        ("next Saturday", (day(2024, 6, 22), day(2024, 6, 22, True)), False),
        ("July 4", (day(2023, 7, 4), day(2023, 7, 4, True)), False),  # no year: the most recent one
        ("July 4th", (day(2024, 7, 4), day(2024, 7, 4, True)), True),
        ("June 1, 2022", (day(2022, 6, 1), day(2022, 6, 1, True)), False),
        ("February 30", (None, None), False),
        ("last Fri", (day(2024, 6, 14), day(2024, 6, 14, True)), False),  # short names after last/next/on
        ("next tues", (day(2024, 6, 18), day(2024, 6, 18, True)), False),
        ("last night", (day(2024, 6, 14), day(2024, 6, 14, True)), False),
        ("this morning", (day(2024, 6, 15), day(2024, 6, 15, True)), False),
        ("two weekends ago", (day(2024, 6, 1), day(2024, 6, 2, True)), False),
    ],
)
def test_weekends_weekdays_and_days_of_a_month_resolve_the_way_the_tense_reads(
        expression: str, expected: tuple[datetime | None, datetime | None], future: bool) -> None:
    assert resolve(expression, REF, future=future) == expected


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("I went to a support group yesterday.", "14 June 2024"),
        ("We moved to Lisbon 3 days ago", "12 June 2024"),
        ("I ran a charity race last weekend", "the weekend before 15 June 2024"),
        ("We're hiking this weekend", "the weekend of 15 June 2024"),
        ("I painted it last week", "the week before 15 June 2024"),
        ("I painted it this week", "the week of 15 June 2024"),
        ("The exam is next week", "the week after 15 June 2024"),
        ("I adopted a cat last Tuesday", "the Tuesday before 15 June 2024"),
        ("I joined two weeks ago", "two weeks before 15 June 2024"),
        ("I started last month", "May 2024"),
        ("We met 3 months ago", "March 2024"),
        ("I quit a few years ago", "2021"),
        ("I graduated last year", "2023"),
        ("We went to Maine last summer", "summer 2023"),
        ("I started running last fall", "fall 2023"),
        ("It snowed a lot last winter", "winter 2023-24"),
        ("I moved here in March", "March 2024"),
        ("I've lived here since 2016", "since 2016"),
        ("I worked there from 2019 to 2021", "from 2019 to 2021"),
        ("I love painting", None),
        ("Hi Anna! Yesterday I baked bread", "14 June 2024"),  # a capital after a sentence's end is no title
        ("So glad. Last Friday I went to a council meeting", "the Friday before 15 June 2024"),
        ("I watch Last Week Tonight", None),  # a capital in mid-sentence is a title
        ("We went camping two weekends ago", "two weekends before 15 June 2024"),
        ("Started therapy a couple months back", "April 2024"),  # "back" as "ago", "a couple" without "of" (stop 41)
        ("I joined a new group last Tues", "the Tuesday before 15 June 2024"),
        ("I sat in the sun all day", None),  # a short weekday name needs last/next/on before it
        ("On Friday I got the news. Next month I leave for Ireland", "the Friday before 15 June 2024; July 2024"),
    ],
)
def test_when_said_describes_the_time_a_sentence_speaks_of(sentence: str, expected: str | None) -> None:
    assert when_said(sentence, REF) == expected


# Weekends and seasons (issue 14), against Wednesday 2024-06-12 and Saturday 2024-06-15.
@pytest.mark.parametrize(
    ("expression", "day", "start", "end"),
    [
        ("last weekend", 12, "2024-06-08", "2024-06-09"),
        ("last weekend", 15, "2024-06-08", "2024-06-09"),
        ("this weekend", 12, "2024-06-15", "2024-06-16"),
        ("next weekend", 12, "2024-06-22", "2024-06-23"),
        ("last spring", 12, "2024-03-01", "2024-05-31"),
        ("last summer", 12, "2023-06-01", "2023-08-31"),
        ("this summer", 15, "2024-06-01", "2024-08-31"),
        ("next summer", 15, "2025-06-01", "2025-08-31"),
        ("last winter", 15, "2023-12-01", "2024-02-29"),
        ("next autumn", 15, "2024-09-01", "2024-11-30"),
    ],
)
def test_weekends_and_seasons(expression: str, day: int, start: str, end: str) -> None:
    valid_from, valid_to = resolve(expression, datetime(2024, 6, day, 12, tzinfo=timezone.utc))
    assert valid_from is not None and valid_to is not None
    assert (valid_from.date().isoformat(), valid_to.date().isoformat()) == (start, end)


@pytest.mark.parametrize("word", ["yesterday", "tomorrow"])
def test_neighbouring_days_are_the_days_parsedatetime_names(word: str) -> None:
    """_period answers "yesterday"/"tomorrow" itself (parsedatetime takes ~1 ms a call); the same day, at any
    hour, across month, year and leap-day boundaries."""
    from factforge.rules.temporal import _NEXT_DAYS, _calendar

    reference = datetime(2023, 12, 30, 0, 0, 0)
    while reference < datetime(2024, 3, 3):
        parsed, context = _calendar().parseDT(word, sourceTime=reference)
        assert context.hasDate
        expected = parsed.date()
        assert reference.date() + timedelta(days=_NEXT_DAYS[word]) == expected
        got = resolve(word, reference.replace(tzinfo=timezone.utc))[0]
        assert got is not None and got.date() == expected
        reference += timedelta(hours=5, minutes=17, seconds=3)
