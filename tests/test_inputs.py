"""Caller input is checked once at the edge: clear InputErrors, never a crash."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factforge.errors import InputError
from factforge.inputs import check_text, check_timestamp, iter_json_lines, source_key


@pytest.mark.parametrize(
    ("value", "required", "message"),
    [
        (None, True, "is required"),
        (42, False, "must be a string"),
        ("a\x00b", False, "NUL"),
        ("\ud800 lone", False, "not valid Unicode"),
        ("   ", True, "must not be empty"),
    ],
)
def test_bad_text_is_a_clear_error(value: object, required: bool, message: str) -> None:
    with pytest.raises(InputError, match=message):
        check_text("user", value, required=required)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("2026-11-02T10:15:00Z", datetime(2026, 11, 2, 10, 15, tzinfo=timezone.utc)),
        ("2026-11-02", datetime(2026, 11, 2, tzinfo=timezone.utc)),
        (datetime(2026, 1, 1, 12), datetime(2026, 1, 1, 12, tzinfo=timezone.utc)),
        (None, None),
    ],
)
def test_timestamps(value: object, expected: datetime | None) -> None:
    assert check_timestamp(value) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", 12345])
def test_bad_timestamps(value: object) -> None:
    with pytest.raises(InputError):
        check_timestamp(value)  # type: ignore[arg-type]


def test_json_lines_report_bad_lines_and_go_on() -> None:
    lines = ['{"user": "a"}', "", "{broken", "[1, 2]", '{"user": "b"}']
    out = list(iter_json_lines(lines))
    assert [no for no, _ in out] == [1, 3, 4, 5]
    assert out[0][1] == {"user": "a"} and out[3][1] == {"user": "b"}
    assert isinstance(out[1][1], InputError) and "line 3: not JSON" in str(out[1][1])
    assert isinstance(out[2][1], InputError) and "expected a JSON object, got list" in str(out[2][1])


def test_source_key_is_stable_and_separates_fields() -> None:
    assert source_key("a", "b") == source_key("a", "b")
    assert source_key("ab", "") != source_key("a", "b")
    assert source_key(None) == source_key("")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(), max_size=5))
def test_any_lines_give_objects_or_errors(lines: list[str]) -> None:
    for _, item in iter_json_lines(lines):
        assert isinstance(item, (dict, InputError))


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "surrogateescape"))))
def test_any_string_is_accepted_or_a_clear_error(value: str) -> None:
    try:
        assert check_text("user", value) == value
    except InputError as exc:
        assert str(exc).startswith("user ")


def test_a_json_error_ending_in_at_reads_once() -> None:
    ((_, error),) = list(iter_json_lines(['{"user": "unterminated']))
    assert str(error) == "line 1: not JSON (Unterminated string starting at column 10)"
