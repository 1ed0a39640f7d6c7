"""Pattern library: every rule's own examples, the seed-003 reference scenarios, loader errors, prefilter."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from factforge.errors import PatternError
from factforge.rules import patterns
from factforge.rules.patterns import EXAMPLE_REFERENCE, PatternLibrary
from factforge.rules.rulefile import default_patterns_dir
from factforge.settings import Settings
from factforge.types import Fact, Span

LIB = PatternLibrary.from_dir()
TS = datetime(2024, 6, 15, 12, 0, tzinfo=timezone.utc)

EXAMPLES = [
    pytest.param(rule.id, ex.text, ex.fact, id=f"{rule.id}:{n}")
    for rule in LIB.rules for n, ex in enumerate(rule.examples)
]
COUNTERS = [
    pytest.param(rule.id, text, id=f"{rule.id}:not{n}")
    for rule in LIB.rules for n, text in enumerate(rule.counter_examples)
]


@pytest.mark.parametrize(("rule_id", "text", "fact"), EXAMPLES)
def test_rule_example(rule_id: str, text: str, fact: str) -> None:
    # The rule alone produces the fact, and so does the full library (prefilter included) - possibly from
    # another rule saying the same thing with more detail (e.g. a temporal rule that also sets valid_from).
    assert fact in [f.content for f in LIB.match_rule(rule_id, text, timestamp=EXAMPLE_REFERENCE)]
    facts = LIB.match(text, timestamp=EXAMPLE_REFERENCE)
    assert fact in [f.content for f in facts], [(f.content, f.rule_id) for f in facts]
    assert_prefilter_agrees(text, facts)


@pytest.mark.parametrize(("rule_id", "text"), COUNTERS)
def test_rule_counter_example(rule_id: str, text: str) -> None:
    assert LIB.match_rule(rule_id, text, timestamp=EXAMPLE_REFERENCE) == []
    facts = LIB.match(text, timestamp=EXAMPLE_REFERENCE)
    assert all(f.rule_id != rule_id for f in facts)
    assert_prefilter_agrees(text, facts)


def test_library_size_and_check() -> None:
    assert len(LIB.rules) >= 60
    assert len({r.id for r in LIB.rules}) == len(LIB.rules)  # no rule loaded twice
    assert LIB.check() == []
    assert {r.category for r in LIB.rules} >= {
        "preference", "policy", "technology", "decision", "temporal", "identity", "instruction"}
    assert {r.language for r in LIB.rules} == {"en", "zh"}
    assert all(r.keywords and r.examples and r.counter_examples for r in LIB.rules)


def test_only_facts_files_are_loaded() -> None:
    assert {Path(r.source).name for r in LIB.rules}.isdisjoint({"gate.yaml", "injection.yaml", "secrets.yaml"})


# ------------------------------------------------------------------------------- reference scenarios


def test_scenario_jwt_to_clerk() -> None:
    text = "We switched from JWT to Clerk for authentication because of compliance requirements"
    facts = LIB.match(text, timestamp=TS)
    assert len(facts) == 1
    (f,) = facts
    assert f.content == "Team switched from JWT to Clerk"
    assert f.category == "technology"
    assert f.confidence == 0.9
    assert f.method == "pattern"
    assert f.entities == ("JWT", "Clerk")
    assert f.subject == "Team"
    assert f.relation == "switched_to"
    assert dict(f.slots) == {"old": "JWT", "new": "Clerk"}
    assert f.rule_id == "tech.switch"
    e = f.explanation
    assert (e.stage, e.rule_id, e.original_confidence, e.final_confidence, e.context_boost, e.note) == (
        "pattern", "tech.switch", 0.9, 0.9, 0.0, None)
    assert e.span == Span(0, len("We switched from JWT to Clerk"), "We switched from JWT to Clerk")
    assert f.valid_from is None and f.valid_to is None


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("We migrated from MySQL to Postgres.", "Team switched from MySQL to Postgres"),
        ("We moved off Jenkins onto GitHub Actions", "Team switched from Jenkins to GitHub Actions"),
        ("We replaced Redux with Zustand last sprint.", "Team switched from Redux to Zustand"),
        ("I switched from JWT to Clerk.", "User switched from JWT to Clerk"),
    ],
)
def test_switch_variants(text: str, content: str) -> None:
    assert [(f.content, f.category, f.relation) for f in LIB.match(text)] == [(content, "technology", "switched_to")]


def test_scenario_nativewind_workaround() -> None:
    (f,) = LIB.match("I found a workaround for NativeWind v4 by using className prop directly")
    assert f.content == "Found workaround for NativeWind v4 by using className prop directly"
    assert f.category == "decision"
    assert f.confidence == 0.85
    assert f.method == "pattern"
    assert f.entities == ("NativeWind v4", "className")
    assert f.rule_id == "decision.workaround"


def test_using_a_workaround_is_one_decision() -> None:
    # Not also "Team uses a workaround" / "Team uses workaround" from the technology rules.
    facts = LIB.match("We use a workaround for NativeWind v4 because the className prop breaks")
    assert [(f.content, f.category, f.entities) for f in facts] == [
        ("Team uses a workaround for NativeWind v4 because the className prop breaks", "decision", ("NativeWind v4",))]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("Always add null checks before accessing nested properties in PR reviews",
         "Team policy: always add null checks before accessing nested properties"),
        ("Please always check for null before dereferencing",
         "Team policy: always check for null before dereferencing"),
        ("We require null checks in every PR", "Team policy: require null checks in every PR"),
        ("You should add a null check before dereferencing user",
         "Team policy: add a null check before dereferencing user"),
    ],
)
def test_scenario_null_check_policy(text: str, content: str) -> None:
    (f,) = LIB.match(text)
    assert (f.content, f.category, f.confidence, f.method, f.subject) == (content, "policy", 0.85, "pattern", "Team")


@pytest.mark.parametrize(
    ("text", "content", "category"),
    [
        ("I prefer dark mode over light mode", "User prefers dark mode over light mode", "preference"),
        ("I like tabs", "User likes tabs", "preference"),
        ("I love hiking", "User loves hiking", "preference"),
        ("My favorite editor is Vim", "User's favorite editor is Vim", "preference"),
        ("I hate meetings", "User dislikes meetings", "preference"),
        ("I dislike Java", "User dislikes Java", "preference"),
        ("I use Vim.", "User uses Vim", "technology"),
        ("My name is Alice", "User's name is Alice", "identity"),
        ("I work at Acme", "User works at Acme", "identity"),
        ("I'm a data engineer", "User is a data engineer", "identity"),
        ("I live in Berlin", "User lives in Berlin", "identity"),
        ("I have two dogs", "User has two dogs", "identity"),
        ("Always respond in Spanish", "User instruction: respond in Spanish", "instruction"),
        ("Don't use emojis", "User instruction: don't use emojis", "instruction"),
        ("Call me Sam", "User wants to be called Sam", "instruction"),
        ("We decided to use Redis for caching", "Team decided to use Redis for caching", "decision"),
        ("Let's go with option B", "Team decided to go with option B", "decision"),
        ("We chose Postgres over MySQL because it scales",
         "Team chose Postgres over MySQL because it scales", "decision"),
        ("I love to bake cookies.", "User loves to bake cookies", "preference"),
        ("I have a dog named Max.", "User has a dog named Max", "identity"),
        ("My favorite color is blue.", "User's favorite color is blue", "preference"),
        ("I am a teacher.", "User is a teacher", "identity"),
        ("我喜欢喝咖啡", "User likes 喝咖啡", "preference"),
        ("我们从MySQL迁移到了PostgreSQL", "Team switched from MySQL to PostgreSQL", "technology"),
        ("我叫李明", "User's name is 李明", "identity"),
        ("我住在上海", "User lives in 上海", "identity"),
    ],
)
def test_required_outputs(text: str, content: str, category: str) -> None:
    facts = LIB.match(text)
    assert [(f.content, f.category) for f in facts] == [(content, category)]
    assert facts[0].confidence >= 0.85


@pytest.mark.parametrize(
    ("text", "content", "valid_from", "valid_to"),
    [
        ("I started at Acme last month", "User started at Acme", datetime(2024, 5, 1, tzinfo=timezone.utc), None),
        ("We deployed v2 yesterday", "Team deployed v2", datetime(2024, 6, 14, tzinfo=timezone.utc),
         datetime(2024, 6, 14, 23, 59, 59, tzinfo=timezone.utc)),
        ("Since March I've been using Neovim", "User has been using Neovim",
         datetime(2024, 3, 1, tzinfo=timezone.utc), None),
    ],
)
def test_temporal_facts(text: str, content: str, valid_from: datetime, valid_to: datetime | None) -> None:
    (f,) = LIB.match(text, timestamp=TS)
    assert (f.content, f.category, f.valid_from, f.valid_to) == (content, "temporal", valid_from, valid_to)


@pytest.mark.parametrize(
    ("text", "content", "entities"),
    [
        # the verb 用/使用/采用 is not part of the object; the Latin-script technology is an entity
        ("我喜欢用Vim", "User likes using Vim", ("Vim",)),
        ("我们决定使用Redis做缓存", "Team decided to use Redis for 缓存", ("Redis",)),
        ("我们决定用Redis做缓存。", "Team decided to use Redis for 缓存", ("Redis",)),
    ],
)
def test_chinese_use_verb_stays_out_of_the_object(text: str, content: str, entities: tuple[str, ...]) -> None:
    assert [(f.content, f.entities) for f in LIB.match(text)] == [(content, entities)]


def test_state_that_still_holds_is_not_past_tense() -> None:
    assert [(f.content, f.category) for f in LIB.match("I have been vegan since 2019")] == [
        ("User has been vegan since 2019", "identity")]
    assert [f.content for f in LIB.match("I was raised in Ohio.")] == ["User was raised in Ohio"]


def test_one_sentence_several_facts() -> None:
    facts = LIB.match("We use PostgreSQL for the database and Redis for caching")
    assert [f.content for f in facts] == ["Team uses PostgreSQL for the database", "Team uses Redis for caching"]
    assert [f.entities for f in facts] == [("PostgreSQL",), ("Redis",)]


@pytest.mark.parametrize(
    "text",
    [
        "Do you prefer tabs?",
        "Should we switch to Clerk?",
        "If we switched from JWT to Clerk, would login break?",
        "My friend likes jazz.",
        "I'd like to know how this works.",
        "I like that idea",
        "Thanks, that helps!",
        "Have you heard of Deno?",
        "你喜欢喝咖啡吗？",
    ],
)
def test_no_fact(text: str) -> None:
    assert LIB.match(text) == []


def test_subjects_follow_settings() -> None:
    settings = Settings(home=Path("."), user_subject="Ana", team_subject="Crew")
    assert [f.content for f in LIB.match("I like tabs. We use Go.", settings=settings)] == [
        "Ana likes tabs", "Crew uses Go"]


def test_context_boost_is_explained() -> None:
    (f,) = LIB.match("We use Redis as a cache in production.")
    assert f.confidence == 0.9
    assert f.explanation.original_confidence == 0.85 and f.explanation.context_boost == 0.05


def test_identical_content_returned_once() -> None:
    facts = LIB.match("I like tabs. Honestly, I like tabs!")
    assert [f.content for f in facts] == ["User likes tabs"]


def test_span_points_into_original_text() -> None:
    text = "Hello there. I’m a data engineer."  # curly apostrophe is handled
    (f,) = LIB.match(text)
    span = f.explanation.span
    assert span is not None and text[span.start:span.end] == span.text and span.text.startswith("I’m")


# --------------------------------------------------------------------- slot pronouns, lists, verb forms


@pytest.mark.parametrize(
    ("text", "contents"),
    [
        ("I hate my job.", ["User dislikes their job"]),
        ("I love to spend time with my family.", ["User loves to spend time with their family"]),
        ("My brother is older than me.", ["User's brother is older than them", "User has a brother"]),
        ("We love our CI.", ["Team loves their CI"]),
        # a capitalised pronoun inside a value is part of a title, not the speaker
        ("My favorite game is The Last of Us.", ["User's favorite game is The Last of Us"]),
        ("I love the song Stand By Me with my dad.", ["User loves the song Stand By Me with their dad"]),
        ("I like to play chess, read, and take bubble baths.",
         ["User likes to play chess", "User likes to read", "User likes to take bubble baths"]),
        ("I like to play the violin, the guitar, and eat chocolate bars.",
         ["User likes to play the violin", "User likes to play the guitar", "User likes to eat chocolate bars"]),
        ("I love pizza, mac and cheese, and tacos.",
         ["User loves pizza", "User loves mac and cheese", "User loves tacos"]),
        ("I like mac and cheese.", ["User likes mac and cheese"]),
        ("I like pizza, it is great.", ["User likes pizza"]),
        ("I have two dogs, a cat, and a parrot.", ["User has two dogs", "User has a cat", "User has a parrot"]),
    ],
)
def test_slots_in_third_person_and_lists_split(text: str, contents: list[str]) -> None:
    assert [f.content for f in LIB.match(text)] == contents


def test_list_items_carry_their_own_span() -> None:
    text = "I like to read, swim, and cook."
    spans = [f.explanation.span for f in LIB.match(text)]
    assert [s.text for s in spans if s is not None] == ["I like to read", "swim", "cook"]


def test_us_as_a_country_is_not_a_pronoun() -> None:
    assert [f.content for f in LIB.match("I hope to make it big here in the US.")] == [
        "User hopes to make it big here in the US"]


@pytest.mark.parametrize(
    ("word", "third", "base"),
    [
        ("play", "plays", "play"), ("watch", "watches", "watch"), ("try", "tries", "try"), ("go", "goes", "go"),
        ("have", "has", "have"), ("fix", "fixes", "fix"), ("apologizing", "apologizings", "apologize"),
        ("using", "usings", "use"), ("putting", "puttings", "put"), ("adding", "addings", "add"),
        ("asking", "askings", "ask"), ("getting", "gettings", "get"), ("writing", "writings", "write"),
        ("going", "goings", "go"), ("visiting", "visitings", "visit"), ("dancing", "dancings", "dance"),
        ("singing", "singings", "sing"), ("eating", "eatings", "eat"), ("including", "includings", "include"),
    ],
)
def test_template_verb_filters(word: str, third: str, base: str) -> None:
    from factforge.rules.patterns import _transform

    assert _transform(word + " more", "s") == third + " more"
    assert _transform(word + " more", "base") == base + " more"


@pytest.mark.parametrize(
    ("word", "past"),
    [
        ("losing", "lost"), ("Losing", "lost"), ("opening", "opened"), ("stopping", "stopped"), ("visiting", "visited"),
        ("marrying", "married"), ("baking", "baked"), ("running", "ran"), ("putting", "put"), ("planning", "planned"),
        ("hiking", "hiked"), ("adopting", "adopted"), ("writing", "wrote"), ("go", "went"), ("try", "tried"),
        ("play", "played"), ("stop", "stopped"), ("visit", "visited"), ("NASA", "NASA"),
    ],
)
def test_template_past_filter(word: str, past: str) -> None:
    from factforge.rules.patterns import _transform

    assert _transform(word + " my job", "past") == past + " my job"


@pytest.mark.parametrize(
    "text",
    ["I think so.", "I mean, sure.", "I know right?", "I guess.", "I hope you are well.", "I agree with you.",
     "If I play chess, I win.", "Do I play chess?", "My friend plays chess."],
)
def test_discourse_and_hypotheticals_give_no_activity(text: str) -> None:
    assert [f.content for f in LIB.match(text) if f.rule_id.startswith("activity.")] == []


# ----------------------------------------------------------------------------------------- prefilter


def assert_prefilter_agrees(text: str, facts: list[Fact]) -> None:
    """The keyword prefilter drops no fact: ``facts`` (what ``LIB.match`` found in ``text``) are what running
    every rule finds."""
    with_filter = [(f.content, f.rule_id, f.confidence) for f in facts]
    without = [(f.content, f.rule_id, f.confidence) for f in LIB.match_all_rules(text, timestamp=EXAMPLE_REFERENCE)]
    assert with_filter == without, text


def test_prefilter_agrees_with_running_every_rule() -> None:
    # Every rule's examples and counter-examples are checked by test_rule_example and test_rule_counter_example,
    # which already hold the prefiltered match (one match per text instead of two, and the work spread over the
    # suite's processes: as one test it took ~25 s of one process's CPU); these are the texts no rule carries.
    for text in ["", "ok", "We switched from JWT to Clerk. I love hiking! 我叫李明。"]:
        assert_prefilter_agrees(text, LIB.match(text, timestamp=EXAMPLE_REFERENCE))


# ------------------------------------------------------------------------------------------- loading

BROKEN = """\
kind: facts
language: en
rules:
  - id: bad.regex
    category: preference
    relation: likes
    confidence: 0.8
    keywords: [like]
    regex: 'I\\s+like\\s+(?P<obj>[a-z+'
    template: "User likes {obj}"
    examples: [{text: I like tea, fact: User likes tea}]
    counter_examples: [No.]
  - id: bad.template
    category: preference
    relation: likes
    confidence: 0.8
    keywords: [like]
    regex: 'I\\s+like\\s+(?P<obj>\\w+)'
    template: "User likes {thing}"
    examples: [{text: I like tea, fact: User likes tea}]
    counter_examples: [No.]
  - id: bad.category
    category: hobby
    relation: likes
    confidence: 1.5
    keywords: [like]
    regex: 'I\\s+like\\s+(?P<obj>\\w+)'
    template: "User likes {obj}"
    examples: [{text: I like tea, fact: User likes tea}]
    counter_examples: [No.]
  - id: bad.example
    category: preference
    relation: likes
    confidence: 0.8
    keywords: [like]
    regex: 'I\\s+like\\s+(?P<obj>\\w+)'
    template: "User likes {obj}"
    examples: [{text: I like tea, fact: User likes coffee}]
    counter_examples: [I like jazz]
  - id: bad.example
    category: preference
    relation: likes
    confidence: 0.8
    keywords: [love]
    regex: 'I\\s+love\\s+(?P<obj>\\w+)'
    template: "User loves {obj}"
    examples: [{text: I love tea, fact: User loves tea}]
    counter_examples: [No.]
"""


def test_broken_file_reports_every_problem_at_once(tmp_path: Path) -> None:
    shutil.copy(default_patterns_dir() / "preference.yaml", tmp_path / "preference.yaml")
    (tmp_path / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    (tmp_path / "gate.yaml").write_text("not: facts\n", encoding="utf-8")  # other modules' files are ignored
    with pytest.raises(PatternError) as info:
        PatternLibrary.from_dir(tmp_path)
    message = str(info.value)
    assert "broken.yaml" in message
    for expected in (
        "rule bad.regex: regex does not compile",
        "rule bad.template: template names {thing}",
        "rule bad.category: category: 'hobby' is not one of preference,",
        "rule bad.category: confidence: must be a number in 0..1 (got 1.5)",
        "rule bad.example: example 'I like tea': expected 'User likes coffee'",
        "rule bad.example: counter-example 'I like jazz' produces",
        "rule bad.example: duplicate id",
    ):
        assert expected in message, expected
    assert "preference.yaml" not in message
    assert "gate.yaml" not in message


def test_good_copy_loads_and_is_cached(tmp_path: Path) -> None:
    shutil.copy(default_patterns_dir() / "preference.yaml", tmp_path / "preference.yaml")
    lib = PatternLibrary.from_dir(tmp_path)
    assert lib is PatternLibrary.from_dir(tmp_path)
    assert {r.category for r in lib.rules} == {"preference"}
    assert [f.content for f in lib.match("I like tabs")] == ["User likes tabs"]


# Precision defects of issue 14: what each sentence must give (all facts, in order), an empty list for none.
@pytest.mark.parametrize(
    ("text", "contents"),
    [
        # casual "always" / "never" / "we need to" is no team policy without a work context
        ("Never give up!", []),
        ("Always happy to help!", []),
        ("We need to talk about the weekend plans lol", []),
        # a capitalised name is team context only when the gazetteer knows it as a technology (policy.yaml team_name)
        ("We moved to Seattle last year.", []),
        ("We enjoy 'Hollow Knight'.", []),
        ("We also like to go to Disney World.", []),
        ("We love Redis for caching.", ["Team loves Redis for caching"]),
        ("我们都喜欢用Go写后端。", ["Team likes using Go for 写后端"]),
        # a decision of "we" is the team's only in a work context too (Chinese work words have no word boundary)
        ("We decided to do doggy playdates with the neighbors.", []),
        ("We agreed to freeze the API.", ["Team agreed to freeze the API"]),
        ("我们决定推迟发布。", ["Team decided to 推迟发布"]),
        ("我们决定去海边度假。", []),
        ("Never had a chance to visit it.", []),
        ("Never push directly to main.", ["Team policy: never push directly to main"]),
        # spans: thousands separators, "a while", a trailing parenthesis, "btw"
        ("We need to budget $1,000 for the new server.", ["Team policy: budget $1,000 for the new server"]),
        ("I've been doing yoga for a while now.", ["User has been doing yoga for a while now"]),
        ("We use Redis for caching (see PR #412).", ["Team uses Redis for caching"]),
        ("I use Vim btw.", ["User uses Vim"]),
        # a blocker word in another clause does not suppress this clause's fact
        ("Sure, you could try that; I just moved to Boston.", ["User just moved to Boston"]),
        ("I'm a mom and I love baking.", ["User is a mom", "User loves baking"]),
        # a thing pointed at with this/that stays when it is named or described after
        ("We played this game Catan - it's a great strategy game.", ["User and others played this game Catan"]),
        ("I've never read that book.", []),
        # a preposition before a time that takes none belongs to the clause before it
        ("I adopted a dog from the shelter I volunteer at yesterday.",
         ["User adopted a dog from the shelter they volunteer at"]),
        ("I moved to Denver just last week.", ["User moved to Denver"]),
        ("My mom and I love baking.", ["User and their mom love baking"]),
        ("If I move to Boston, I will tell you.", []),
        # broken templates and unresolved references give no fact
        ("I dont know.", []),
        ("I used to like them.", []),
        ("I've always wanted to try that too.", []),
        ("We decided to go with 1.", []),
        # a fact cut before what it needs; a subordinate clause is no fact of its own
        ("I'm working on - super excited!", []),
        # a thing shown in the conversation, a perfect "had" without its object: no fact; a colon inside a name
        ("I picked this color because it's bright and bold.", []),
        ("It's a story I've had for ages but just got the guts to write it.", []),
        ("I usually play CS:GO with friends.", ["User usually plays CS:GO with friends"]),
        # ... but the whole sentence is one: what the user prepares now "for when" a life event comes
        ("I'm creating a library for when I have kids.", ["User is creating a library for when they have kids"]),
        ("I have zero family that I'm close to.", ["User has zero family that they're close to"]),
        ("I've been working on for a while.", []),
        ("It's helped me improve my strength.", []),
        ("I love escaping to that world.", []),
        # a title, place or person pointed at ("that book" of an earlier turn, "this little restaurant") the reader
        # never sees: no fact; a made thing, a time ("this month"), an emphatic "all these", a complement "that" stay
        ("I've never read that book.", []),
        # a preposition before a time that takes none belongs to the clause before it
        ("I adopted a dog from the shelter I volunteer at yesterday.",
         ["User adopted a dog from the shelter they volunteer at"]),
        ("I moved to Denver just last week.", ["User moved to Denver"]),
        ("I love going to this little Italian restaurant in town.", []),
        ("I met this amazing woman while volunteering.", []),
        ("I made this bowl in my class.", ["User made this bowl in their class"]),
        ("I'm going to a transgender conference this month.", ["User is going to a transgender conference this month"]),
        ("I started to learn all these marketing tools.", ["User started to learn all these marketing tools"]),
        ("I like to do things that scare me.", ["User likes to do things that scare them"]),
        ("I'm starting to realize that the show is really important.",
         ["User is starting to realize that the show is really important"]),
        # a second verb left in the first person by the subject swap: no fact; "to" + two verbs is fine
        ("I play guitar and sing.", []),
        ("I stay positive and find a way.", []),
        ("I like to cook and bake.", ["User likes to cook and bake"]),
        ("I love seeing the kids grow and learn.", ["User loves seeing the kids grow and learn"]),
        # "'cause" and "cuz" open a new clause like "because": the object ends before them
        ("I love camping trips with my fam, 'cause nature brings such peace.", ["User loves camping trips with their fam"]),
        ("I quit my job cuz my boss was awful.", ["User quit their job"]),
        ("I raised money for a good cause.", ["User raised money for a good cause"]),
        # a likeness to what the other said: similar to what? "the same place" still names one
        ("I loved doing something similar with my siblings when I was young.", ["User has siblings"]),
        ("I used to be the same way.", []),
        ("I've lived in the same place for most of my life.", ["User has lived in the same place for most of their life"]),
        # a fact cut at the comma between two adjectives, a summit with no name
        ("I love small, family-owned businesses.", []),
        ("We're having a small, intimate ceremony with our closest family.", []),
        ("I took a short trip to Rome to clear my mind a little.", ["User took a short trip to Rome to clear their mind a little"]),
        ("Reaching the top was amazing!", []),
        # a place only the conversation shows; a placeholder for a name
        ("I grew up here and I love the peace and quiet.", ["User loves the peace and quiet"]),
        ("I just moved here from Germany.", ["User just moved here from Germany"]),
        ("Hello! My name is User 1.", []),
        # only the parts of an unnamed film or country: of what? a named thing with an article stays
        ("I love the characters and the story.", []),
        ("I love the food. It's so good!", []),
        ("I love the beach.", ["User loves the beach"]),
        ("I love the characters especially.", []),
        # a second clause whose verb the object swallowed ("... and the cookie dough pieces are so good")
        ("I love the taste of chocolate and the cookie dough pieces are so good.", []),
        # a person or half a name is no technology
        ("I use Sarah for my hair appointments.", []),
        ("We use React Native for the app.", ["Team uses React Native for the app"]),
        # a favourite's kind ends at a dash; "last" belongs to the time ("last May"), not to the object; a cleft's
        # "what I love most" has its object before it; "myself" after a self-description is no part of it
        ("Sanderson is one of my favorite authors - his world-building is amazing.",
         ["Sanderson is one of User's favorite authors"]),
        ("I graduated from college last May.", ["User graduated from college last May", "User graduated from college"]),
        ("Writing screenplays is what I love most.", []),
        ("I'm more of a sci-fi fan myself.", ["User is more of a sci-fi fan"]),
    ],
)
def test_precision_defects(text: str, contents: list[str]) -> None:
    assert [f.content for f in LIB.match(text, timestamp=TS)] == contents


@pytest.mark.parametrize(
    ("text", "content", "valid_from"),
    [
        ("I'm going to visit Japan in May.", "User plans to visit Japan in May", datetime(2025, 5, 1, tzinfo=timezone.utc)),
        ("I'm going to visit Japan in August.", "User plans to visit Japan in August",
         datetime(2024, 8, 1, tzinfo=timezone.utc)),
        ("I visited Japan in May.", "User visited Japan", datetime(2024, 5, 1, tzinfo=timezone.utc)),
    ],
)
def test_plans_are_dated_in_the_future_events_in_the_past(text: str, content: str, valid_from: datetime) -> None:
    facts = [f for f in LIB.match(text, timestamp=TS) if f.content == content]
    assert facts and facts[0].valid_from == valid_from


def test_hedges_are_never_high() -> None:
    for text in ("I might get a cat.", "I'd love to learn piano.", "I'm thinking about moving to Denver."):
        facts = LIB.match(text, timestamp=TS)
        assert facts and all(f.confidence < 0.85 for f in facts), text


# ------------------------------------------------------------------- quoted titles and named things (issue 14)

@pytest.mark.parametrize(
    ("text", "content", "entities"),
    [
        ("'Clair de Lune' by Claude Debussy means so much to me.",
         '"Clair de Lune" by Claude Debussy means so much to User', ("Clair de Lune", "Claude Debussy")),
        ("Honestly, I love \u201cThe Hobbit\u201d by J.R.R. Tolkien.",
         'User loves "The Hobbit" by J.R.R. Tolkien', ("The Hobbit", "J.R.R. Tolkien")),
        ("I really enjoy 'Call Me Maybe'!", 'User enjoys "Call Me Maybe"', ("Call Me Maybe",)),
        ("My favorite movie is 'Arrival'.", 'User\'s favorite movie is "Arrival"', ("Arrival",)),
        ('"Hotel California" by Eagles is my favourite song.',
         'User\'s favorite song is "Hotel California" by Eagles', ("Hotel California", "Eagles")),
        ("I'm building a bot called Mr Roboto.", "User is building a bot called Mr Roboto", ("Mr Roboto",)),
        ("I have a parrot called Kiwi.", "User has a parrot called Kiwi", ("Kiwi",)),
        # a further list item does not inherit the first item's name (its own is not taken yet)
        ("I have a hamster named Biscuit, and a gecko named Ziggy.", "User has a gecko named Ziggy", ()),
        ("My favourite record is 'Abbey Road' by The Beatles.",
         'User\'s favorite record is "Abbey Road" by The Beatles', ("Abbey Road", "The Beatles")),
        ("We've got two cats named Salt and Pepper.", "User and others have two cats named Salt and Pepper",
         ("Salt", "Pepper")),
    ],
)
def test_titles_and_names_kept_whole(text: str, content: str, entities: tuple[str, ...]) -> None:
    facts = [f for f in LIB.match(text, timestamp=TS) if f.content == content]
    assert facts, [f.content for f in LIB.match(text, timestamp=TS)]
    assert facts[0].entities == entities
    assert facts[0].confidence >= 0.7


@pytest.mark.parametrize(
    "text",
    [
        "Have you listened to 'Clair de Lune'?",
        "Do you love \"The Hobbit\" too?",
        "Maybe I'd enjoy 'Arrival'.",
        "I might love \"The Hobbit\" if I read it.",
        "He said 'I'm done' and left.",
        "My boss told me 'take the day off'.",
    ],
)
def test_no_high_title_fact(text: str) -> None:
    facts = LIB.match(text, timestamp=TS)
    assert all(f.confidence < 0.85 for f in facts), [f.content for f in facts]
    # Only a hedge may carry the title, as a MEDIUM hint for the LLM ("User might love "The Hobbit"").
    assert not any('"' in f.content for f in facts if f.rule_id != "personal.hedge"), [f.content for f in facts]


@pytest.mark.parametrize(("raw", "clean"), [
    ("Queen's 'Bohemian Rhapsody'", "Queen's 'Bohemian Rhapsody'"),  # the closing quote of a title at the end stays
    ("the song 'Imagine'.", "the song 'Imagine'"),
    ("my friends' houses", "my friends' houses"),  # an apostrophe is no quote to balance
    ("'em.", "em"),
])
def test_clean_keeps_a_closing_title_quote(raw: str, clean: str) -> None:
    from factforge.rules.patterns import _clean

    assert _clean(raw) == clean


@hypothesis_settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from("ab \t\n\r\x0b\x0c\x1c\u00a0\u2003\u3000好"), max_size=30))
def test_squeeze_is_the_whitespace_substitution(value: str) -> None:
    """The shortcut that skips the substitution when there is nothing to squeeze (issue 14) changes nothing."""
    assert patterns._squeeze(value) == patterns._SPACES.sub(" ", value)
    # _clean skips the CJK-gap substitution on ASCII values: applied to what it returns, it finds nothing to remove.
    cleaned = patterns._clean(value)
    assert patterns._CJK_GAP.sub("", cleaned) == cleaned


def test_a_relative_time_that_owns_a_thing_leaves_the_thing() -> None:
    # "last night's game": cutting the time out of an event must not leave "in 's game"
    assert [f.content for f in LIB.match("I scored 40 points in last night's game.")] == [
        "User scored 40 points in the game"]
    assert [f.content for f in LIB.match("I watched yesterday's match with my dad.")][0] == (
        "User watched the match with their dad")
