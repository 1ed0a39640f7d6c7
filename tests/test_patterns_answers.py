"""Elliptical answers (patterns/turns.yaml `answers`): replies that fit no answer rule, or fit one but say nothing
worth keeping, give no fact; the rules' own examples are run by tests/test_extract.py."""

from __future__ import annotations

import pytest

from factforge.rules.extract import Extractor

EX = Extractor()


@pytest.mark.parametrize(("question", "reply"), [
    ("What do you do for fun?", "Nothing much."),
    ("What do you do for fun?", "Thanks, you too!"),
    ("How long have you been there?", "Two weeks."),
    ("How long have you been doing that for?", "Ten years."),
    ("How long have you been waiting?", "An hour."),
    ("How long have you been married?", "Too long, haha."),
    ("Where do you work?", "At home."),
    ("What do you do when you're bored?", "Sleep."),
])
def test_replies_that_state_nothing(question: str, reply: str) -> None:
    assert EX.extract_turn(reply, prior_assistant=question).facts == ()


@pytest.mark.parametrize(("question", "reply", "fact"), [
    # "What do you do for fun?" asks for a pastime, not a job: no "User is a hiking".
    ("What do you do for fun?", "Hiking.", "User likes hiking"),
    ("How long have you been playing the guitar for?", "Ten years.", "User has been playing the guitar for ten years"),
    ("Cool! How long have you been creating art?", "Since I was 17 or so.", "User has been creating art since they were 17"),
])
def test_the_pair_is_read_as_one_statement(question: str, reply: str, fact: str) -> None:
    got = EX.extract_turn(reply, prior_assistant=question).facts
    assert fact in [f.content for f in got]
    assert all("elliptical answer" in (f.explanation.note or "") for f in got)
