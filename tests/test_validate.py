"""Grounding of LLM facts in their source (factforge/models/validate.py, data/fact_checks.yaml): what a model
invents is rejected with a reason that names it, what the turn says passes (issue 14)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from factforge.errors import PatternError
from factforge.models import validate
from factforge.models.validate import REJECTION_REASONS, validate_items
from factforge.rules import schema
from factforge.settings import Settings

SETTINGS = Settings(home=Path("/nonexistent"))


def _check(turn: str, content: str, category: str = "other") -> tuple[bool, list[tuple[str, str, str]]]:
    explain: list[tuple[str, str, str]] = []
    facts, _, _, rejections = validate_items({"facts": [{"content": content, "category": category,
                                                         "confidence": 0.9}]},
                                             turn, settings=SETTINGS, explain=explain)
    assert sum(rejections.values()) == len(explain)  # every rejection is explained
    return bool(facts), explain


# (turn, fact, reason, a word the explanation must name) - each a way a model invents.
INVENTED = [
    # another object of the same kind: one word of the fact is not in the turn (half of the words let it pass)
    ("I work at a bakery downtown, early shifts mostly.", "User works at a bank", "ungrounded", "bank"),
    ("I play the flute in a brass band.", "User plays the trumpet", "ungrounded", "trumpet"),
    ("We deploy the API with Helm on Kubernetes.", "Team deploys the API with Terraform", "ungrounded", "terraform"),
    # an added detail
    ("My grandpa taught me to fish when I was little.", "User fishes every weekend", "ungrounded", "weekend"),
    # kinds of one thing do not ground each other; a broader word does not ground a narrower one
    ("Our dog Max is 3 and still acts like a puppy.", "User has a cat named Max", "ungrounded", "cat"),
    ("We have two pets at home.", "User has two dogs", "ungrounded", "dog"),
    ("I'm a mom of three.", "User is a dad", "ungrounded", "dad"),
    # a wrong number, in digits or words
    ("I was a teacher for 20 years before I retired.", "User taught for 10 years", "ungrounded", "10"),
    ("We are a team of five.", "User's team has six people", "ungrounded", "6"),
    # the opposite: a negated clause, or a "no more" word
    ("I don't own a car, I bike everywhere.", "User owns a car", "negation", "own a car"),
    ("We never use an ORM in this codebase.", "Team uses an ORM", "negation", "never"),
    ("I quit smoking last year and feel so much better.", "User started smoking last year", "negation", "quit"),
    # someone else's fact given to the user
    ("My sister is vegan so Thanksgiving is always interesting.", "User is vegan", "other_subject", "sister"),
    ("My brother works as a nurse in Leeds.", "User works as a nurse", "other_subject", "brother"),
    ("She plays tennis every Sunday.", "User plays tennis every Sunday", "other_subject", "she"),
    # a liking turned around, or given to what the turn likes less
    ("I prefer tea over coffee, coffee makes me jittery.", "User prefers coffee", "ungrounded", "coffee"),
    ("I have a vacuum cleaner.", "User loves the vacuum cleaner", "ungrounded", "liking"),
]

# (turn, fact) - what a faithful model writes, in its own words.
TRUE = [
    ("I work at a bakery downtown, early shifts mostly.", "User works at a bakery"),
    ("We adopted a rescue greyhound last month.", "User has a dog"),  # a broader word, one way
    ("We adopted a rescue greyhound last month.", "User has a pet"),
    ("I'm a mom of three and I work part time as a nurse.", "User is a mother of three children"),
    ("My wife and I just got back from Rome.", "User is married"),
    ("I don't own a car, I bike everywhere.", "User doesn't own a car"),
    ("I don't own a car, I bike everywhere.", "User cycles everywhere"),
    ("I quit smoking last year and feel so much better.", "User no longer smokes"),
    ("I quit smoking last year and feel so much better.", "User used to smoke"),
    ("I can't stand horror movies, they give me nightmares.", "User dislikes horror films"),
    ("My sister is vegan so Thanksgiving is always interesting.", "User's sister is vegan"),
    ("My sister is vegan so Thanksgiving is always interesting.", "User has a sister"),
    ("My partner and I are saving for a house.", "User is saving for a house"),  # the speaker joins
    ("My grandpa taught me to fish when I was little.", "User can fish"),  # the speaker appears after
    ("I prefer tea over coffee, coffee makes me jittery.", "User prefers tea to coffee"),
    ("Just got back from Lisbon, the conference was great.", "User enjoyed the conference"),  # praise
    ("Running every morning keeps me sane.", "User runs daily"),  # a phrase of the source
    ("Our dog Max is 3 and still acts like a puppy.", "User's dog Max is 3 years old"),
    ("I've been learning Korean, mostly with an app.", "User studies Korean"),
    ("I taught for 20 years before I retired.", "User was a teacher for twenty years"),
    ("I'm a nurse at the county hospital.", "User works as a nurse"),  # a light phrase
    ("I just moved to Boston.", "User recently moved to Boston"),
    ("I'm going to visit Japan in May.", "User is planning to visit Japan"),
    ("We are a team of five.", "User's team has five people"),
    ("They moved the standup to 10am.", "Team moved the standup to 10am"),  # "they" may be the team  # a number and a light word: the number decides
]


@pytest.mark.parametrize(("turn", "content", "reason", "named"), INVENTED, ids=[c for _, c, _, _ in INVENTED])
def test_invented_fact_is_rejected_naming_what_is_unsupported(turn: str, content: str, reason: str,
                                                              named: str) -> None:
    kept, explain = _check(turn, content)
    assert not kept
    ((_, why, what),) = explain
    assert why == reason and why in REJECTION_REASONS
    assert named in what.casefold(), what


@pytest.mark.parametrize(("turn", "content"), TRUE, ids=[c for _, c in TRUE])
def test_faithful_fact_passes(turn: str, content: str) -> None:
    kept, explain = _check(turn, content)
    assert kept, explain


def test_a_dislike_is_no_negation_and_a_negation_no_dislike() -> None:
    # "can't stand" is a dislike, so the fact that says "dislikes" agrees with it; "loves" does not
    assert _check("I can't stand horror movies.", "User dislikes horror movies")[0]
    kept, explain = _check("I can't stand horror movies.", "User loves horror movies")
    assert not kept and explain[0][1] == "ungrounded"


def test_a_clause_of_its_own_keeps_a_negation_to_itself() -> None:
    turn = "I never drink coffee, just green tea in the afternoon."
    assert _check(turn, "User drinks green tea")[0]
    assert not _check(turn, "User drinks coffee")[0]


def test_so_ends_a_clause_only_before_a_new_subject() -> None:
    # "so I'm" starts a clause of its own; "not so sure" keeps its negation with what it negates
    assert _check("I'm not so sure about Rust yet.", "User is not sure about Rust")[0]
    kept, explain = _check("My mom has diabetes so I'm careful about sugar.", "User has diabetes")
    assert not kept and explain[0][1] == "other_subject"
    assert _check("My mom has diabetes so I'm careful about sugar.", "User is careful about sugar")[0]


def test_cjk_facts_keep_their_own_share() -> None:
    # a CJK fact shares fewer bigrams with its source than a Latin fact shares words; its Latin names still count
    assert _check("我们团队决定从MySQL迁移到PostgreSQL。", "团队决定迁移到PostgreSQL", "technology")[0]
    assert not _check("我们团队决定从MySQL迁移到PostgreSQL。", "团队决定迁移到Oracle", "technology")[0]


@pytest.mark.parametrize("share", [0, 1.5, -0.2])
def test_min_share_outside_zero_to_one_is_a_data_error(share: float) -> None:
    with pytest.raises(ValueError):
        schema.GroundingSpec.model_validate({"min_share": share, "polarity": {"positive": ["like"],
                                                                              "negative": ["hate"]}})


def test_broader_words_ground_one_way_only() -> None:
    checks = validate._fact_checks()
    source = validate._Source("a greyhound", frozenset())
    assert source.has_term("dog", checks.related) and source.has_term("pet", checks.related)
    assert not validate._Source("a pet", frozenset()).has_term("dog", checks.related)
    assert not validate._Source("a cat", frozenset()).has_term("dog", checks.related)
    assert not validate._Source("my mom", frozenset()).has_term("dad", checks.related)



@pytest.mark.parametrize(
    ("turn", "content", "kept"),
    [
        ("Got my driver's license yesterday!", "User got a driver's license on 2025-01-08", True),
        ("Got my driver's license yesterday!", "User got a driver's license on January 8, 2025", True),
        ("Got my driver's license yesterday!", "User got a driver's license on 2025-01-03", False),
        ("I quit smoking last year.", "User quit smoking in 2024", True),
        ("I quit smoking last year.", "User quit smoking in 2023", False),
        # stop 40: a weekday or month without a year is the last one or the coming one, an open time names its start,
        # an ISO date after "since" is no year, a season is written with its year
        ("Staging will be down Thursday for the upgrade.", "Staging will be down on January 9, 2025", True),
        ("Staging will be down Thursday for the upgrade.", "Staging will be down on January 10, 2025", False),
        ("Starting Monday, every PR needs a review.", "Every PR needs a review starting January 13, 2025", True),
        ("My niece's birthday is in May.", "User's niece's birthday is in May 2025", True),
        ("The job has been failing since Sunday.", "The job has been failing since 2025-01-05", True),
        ("The job has been failing since Sunday.", "The job has been failing since January 5, 2025", True),
        ("The job has been failing since Sunday.", "The job has been failing since 2025-01-04", False),
        ("We're moving to Ohio in the fall.", "User is moving to Ohio in fall 2025", True),
        ("We're moving to Ohio in the fall.", "User is moving to Ohio in spring 2025", False),
        ("My daughter's wedding is in three weeks.", "User's daughter's wedding is on January 30, 2025", True),
        ("My daughter's wedding is in three weeks.", "User's daughter's wedding is on February 6, 2025", False),
    ],
)
def test_a_date_written_from_the_message_time_is_grounded(turn: str, content: str, kept: bool) -> None:
    # The prompt has the model turn "yesterday" into a date (extract.txt); the source has no such numbers.
    said_at = datetime(2025, 1, 9, 15, tzinfo=timezone.utc)
    facts, _, _, _ = validate_items({"facts": [{"content": content, "category": "temporal", "confidence": 0.9}]},
                                    turn, settings=SETTINGS, timestamp=said_at)
    assert bool(facts) == kept


# Issue 14, second round: what a paraphrase means, beyond its words. Turns written for these tests (not taken from
# bench/validate_fresh.py), each (turn, fact, kept, reason of a rejection or "").
MEANING = [
    # lemmas and derivations join words the light stemmer cannot
    ("My uncle taught me chess when I was seven.", "User was taught chess by their uncle", True, ""),
    ("My cousin rowed at the Olympics last summer.", "User's cousin is an Olympian", True, ""),
    ("I bake at a bakery downtown.", "User is a baker", True, ""),
    ("My cousin is an Olympian, she rows.", "User's cousin competed in the Olympic games", False, "ungrounded"),
    ("I workout every morning before breakfast.", "User works out every morning", True, ""),
    ("My cat passed away last spring.", "User's cat died last spring", True, ""),
    # a gazetteer grounds the broader place, one way
    ("We spent our honeymoon in Florence.", "User honeymooned in Italy", True, ""),
    ("We spent our honeymoon in Florence.", "User honeymooned in Europe", True, ""),
    ("We spent our honeymoon in Italy.", "User honeymooned in Florence", False, "ungrounded"),
    ("We spent our honeymoon in Florence.", "User honeymooned in Spain", False, "ungrounded"),
    # what ended: a past fact stands on it, a present one does not
    ("I used to ride motorbikes before the kids came.", "User rode motorbikes", True, ""),
    ("I used to ride motorbikes before the kids came.", "User rides motorbikes", False, "negation"),
    ("I used to ride motorbikes before the kids came.", "User started riding motorbikes", False, "negation"),
    ("I played the trumpet for ten years in school.", "User used to play the trumpet", True, ""),
    ("I play the trumpet in a jazz band.", "User no longer plays the trumpet", False, "negation"),
    ("I signed up for a yoga class last week.", "User quit their yoga class", False, "negation"),
    ("I was a nurse for years, then I quit to raise my kids.", "User is a nurse", False, "negation"),
    ("I was a nurse for years, then I quit to raise my kids.", "User raises their kids", True, ""),
    # a wish is not a fact
    ("I've always wanted a boat, but they cost too much.", "User has a boat", False, "ungrounded"),
    ("I've always wanted a boat, but they cost too much.", "User wants a boat", True, ""),
    # a negated liking, a negated prefix, a negated part
    ("I'm not really happy at my new school.", "User is unhappy at their new school", True, ""),
    ("I'm not really happy at my new school.", "User likes their new school", False, "ungrounded"),
    ("I skipped the reunion this year.", "User went to the reunion", False, "negation"),
    ("I skipped the reunion this year.", "User didn't go to the reunion", True, ""),
    ("I drive for a delivery app. It's not my dream career.", "User's dream career is delivery driving", False,
     "negation"),
    # someone else's things and deeds
    ("I'm babysitting my neighbor's twins tonight, his wife is away.", "User has twins", False, "other_subject"),
    ("My brother beat me at chess again.", "User beat their brother at chess", False, "other_subject"),
    ("My brother beat me at chess again.", "User's brother beat them at chess", True, ""),
    ("My husband and I run a food truck.", "User runs a food truck", True, ""),
    # a visit is no home
    ("Just back from two weeks in Lisbon!", "User lives in Lisbon", False, "ungrounded"),
    ("We moved to Lisbon in the spring.", "User lives in Lisbon", True, ""),
    # stop 29: a noun-phrase opening with a verb of its own is a clause, not a fragment; a participle that names is
    # none (turns written for these tests, not taken from bench/validate_blind.py)
    ("The build server compiles every branch nightly.", "The build server compiles every branch", True, ""),
    ("Our standup moved to 10am after the reorg.", "The standup moved to 10am", True, ""),
    ("We got a puppy, a beagle named Rolo.", "a beagle named Rolo", False, "too_short"),
    ("We got a puppy, a beagle named Rolo.", "the new puppy", False, "too_short"),
    ("We got a puppy, a beagle called Rolo Jones.", "a beagle called Rolo Jones", False, "too_short"),
    # a light past form is a verb all the same ("happened" says nothing the source must, but it makes a clause)
    ("The outage during the launch took the site down for an hour.", "The outage happened during the launch", True,
     ""),
    # the other one named by a broader word is still the speaker's relative; their deed is not the speaker's
    ("My son broke his arm at soccer practice.", "User has a child", True, ""),
    ("My husband is a firefighter in Tulsa.", "User is married", True, ""),
    ("My son broke his arm at soccer practice.", "User broke their arm", False, "other_subject"),
    # general verbs carry no claim of their own beside their object; the object still must be the turn's
    ("Two weeks in Crete last summer, best trip ever.", "User spent two weeks in Crete", True, ""),
    ("Back from the book fair in Leipzig, my feet hurt.", "User attended the book fair in Leipzig", True, ""),
    ("I took a cooking class in Rome.", "User took a painting class", False, "ungrounded"),
    # everyday synonyms and the short words of technical chat (data/fact_checks.yaml related)
    ("My little brother is scared of thunderstorms, he hides under the bed.", "User's brother is afraid of thunderstorms",
     True, ""),
    ("We deploy the repo to prod twice a week.", "Team deploys the repository to production twice a week", True, ""),
    ("We deploy the repo to prod twice a week.", "Team deploys the repository to staging twice a week", False,
     "ungrounded"),
    # a shared beginning grounds a long word ("migration" by "migrating"), not a word for a person
    ("Grandpa turns 80 next week, big party at the lake.", "User's grandmother turns 80", False, "ungrounded"),
    ("Grandpa turns 80 next week, big party at the lake.", "User's grandfather turns 80", True, ""),
    # a change goes one way: every word of the reversed one is in the turn, only the order tells
    ("We migrated the wiki from Confluence to Notion in May.", "Team migrated the wiki from Notion to Confluence",
     False, "ungrounded"),
    ("We migrated the wiki from Confluence to Notion in May.", "Team migrated from Confluence to Notion", True, ""),
    ("Ops replaced Nagios with Prometheus last year.", "Team replaced Prometheus with Nagios", False, "ungrounded"),
    ("Ops replaced Nagios with Prometheus last year.", "Team uses Prometheus instead of Nagios", True, ""),
    ("Ops replaced Nagios with Prometheus last year.", "Team uses Nagios instead of Prometheus", False, "ungrounded"),
    ("I switched to oat milk from cow's milk.", "User switched from oat milk to cow's milk", False, "ungrounded"),
    # praise grounds a liking: "good", "worth it"
    ("The climb was brutal but the view was worth it.", "User enjoyed the view", True, ""),
    ("I tutor kids on Saturdays, it feels good to help.", "User enjoys tutoring kids", True, ""),
]


def test_a_transition_without_its_groups_is_a_data_error() -> None:
    with pytest.raises(PatternError, match="needs the groups 'old' and 'new'"):
        validate._transitions([r"\bfrom\s+(?P<old>\w+)\s+to\s+\w+"])
    with pytest.raises(PatternError, match="does not compile"):
        validate._transitions([r"from (?P<old>\w+ to (?P<new>\w+)"])


def test_a_destination_without_its_group_is_a_data_error() -> None:
    with pytest.raises(PatternError, match="needs the group 'new'"):
        validate._compile_destinations([r"\bmoved\s+to\s+\w+"])


def test_an_age_frame_without_its_decade_is_a_data_error() -> None:
    with pytest.raises(PatternError, match="needs a group named 'decade'"):
        validate._age_frame(r"\bin\s+their\s+(\w+ies)\b")
    assert validate._age_frame(r"\bin\s+their\s+(?P<decade>\w+ies)\b").search("User is in their thirties")


def test_senses_and_places_are_checked_data() -> None:
    senses, places = validate._senses(), validate.read_data(validate._PlacesSpec, "places.yaml")
    assert senses.ended.search("I used to smoke") and not senses.ended.search("I quit to travel")
    assert "Lisbon" in places.places["Portugal"]
    with pytest.raises(ValueError):
        validate._SensesSpec.model_validate({"ended": ["quit"], "wishes": ["want"]})  # an unknown key is named


# Stop 36: shapes of bench/validate_blind.py / validate_blind2.py failures, in turns written for these tests (not
# taken from the case sets), each (turn, fact, kept, reason of a rejection or "").
SHAPES = [
    # a fact without a content word (a number word, a short name) still meets the clause checks
    ("My cousin just had triplets, we're all in shock.", "User had triplets", False, "other_subject"),
    ("I don't own a PC, only a tablet.", "User owns a PC", False, "negation"),
    ("I own a PC and a tablet.", "User owns a PC", True, ""),
    # "retired" ends what it is said of ("a retired pilot"), and is a state of its own ("User is retired")
    ("I'm a retired pilot, these days I mostly garden.", "User is a pilot", False, "negation"),
    ("I'm a retired pilot, these days I mostly garden.", "User used to be a pilot", True, ""),
    ("I'm retired and play golf most mornings.", "User is retired", True, ""),
    ("I'm retired and play golf most mornings.", "User plays golf", True, ""),
    # a liking is grounded by being into a thing, collecting it, giving one's time to it, and "rather" likes the
    # thing before "than" over what follows it
    ("I got really into pottery last winter.", "User enjoys pottery", True, ""),
    ("I collect old maps, mostly of Scotland.", "User likes old maps", True, ""),
    ("These days I spend most of my time sailing.", "User likes sailing", True, ""),
    ("I'd rather read at home than go clubbing.", "User likes reading", True, ""),
    ("I'd rather read at home than go clubbing.", "User loves clubbing", False, "ungrounded"),
    ("I got a new blender last winter.", "User enjoys the blender", False, "ungrounded"),
    # someone else after a verb is an object, not the clause's subject: the speaker does it
    ("Planning to ask my landlord for a parking spot.", "User plans to ask for a parking spot", True, ""),
    ("My boss wants a weekly report.", "User wants a weekly report", False, "other_subject"),
    ("Thinking about asking my boss for a weekly report.", "User is thinking about asking for a weekly report", True,
     ""),
    # what is still to be done is no deed in the past tense, unless the fact is a plan too
    ("I'm about to email the dean about it.", "User emailed the dean", False, "ungrounded"),
    ("We need to add an index to the orders table.", "Team added an index to the orders table", False, "ungrounded"),
    ("We need to add an index to the orders table.", "Team needs to add an index to the orders table", True, ""),
    ("I'll paint the fence this weekend.", "User painted the fence", False, "ungrounded"),
    ("I'll paint the fence this weekend.", "User will paint the fence this weekend", True, ""),
    ("I painted the fence and will stain it next.", "User painted the fence", True, ""),
    # everyday synonyms and broader words (data/fact_checks.yaml related / broader)
    ("We rent a tiny flat near the station.", "User rents a small apartment", True, ""),
    ("I play tennis twice a week.", "User plays a sport", True, ""),
    ("I play tennis twice a week.", "User plays golf", False, "ungrounded"),
    ("I'm learning Portuguese on my commute.", "User is learning a language", True, ""),
    # a relative clause is about the one it follows
    ("I have an aunt who runs a bakery in Lyon.", "User runs a bakery", False, "other_subject"),
    ("I have an aunt who runs a bakery in Lyon.", "User's aunt runs a bakery in Lyon", True, ""),
    ("My grandpa was the one who taught me to swim.", "User can swim", True, ""),
    # a named doer must be in the clause that says the deed (or a pronoun that may stand for it there)
    ("Priya will run the retro this week, Omar is out sick.", "Omar will run the retro", False, "other_subject"),
    ("Priya will run the retro this week, Omar is out sick.", "Priya will run the retro this week", True, ""),
    ("We hired Omar in May, he's joining the data team.", "Omar is joining the data team", True, ""),
    ("We're staying on Node 18 for now; 20 breaks our build.", "Node 20 breaks Team's build", True, ""),
    # a liking of what every clause naming it dislikes, a dislike of what they all like
    ("Big Lakers fan, but I can't stand the Celtics.", "User is a Celtics fan", False, "ungrounded"),
    ("Big Lakers fan, but I can't stand the Celtics.", "User dislikes the Lakers", False, "ungrounded"),
    ("Big Lakers fan, but I can't stand the Celtics.", "User dislikes the Celtics", True, ""),
    # a name said only negated is negated
    ("Alerts go to Slack now, not email.", "Team's alerts go to Slack", True, ""),
    ("Alerts go to Slack now, not Discord.", "Team's alerts go to Discord", False, "negation"),
    # "haven't ... since" says it ended then, not that it never was; the old side of a change ended
    ("I haven't skied since college, my knees won't let me.", "User skied in college", True, ""),
    ("I haven't skied since college, my knees won't let me.", "User used to ski", True, ""),
    ("I haven't skied since college, my knees won't let me.", "User skis", False, "negation"),
    ("We moved the wiki from Confluence to Notion last year.", "Team used to use Confluence", True, ""),
    ("We moved the wiki from Confluence to Notion last year.", "Team used to use Notion", False, "negation"),
    # the speaker's own thing in someone else's clause, the speaker's deed on someone else's thing
    ("My roommate's been watering my plants while I travel.", "User has plants", True, ""),
    ("My roommate's been watering my plants while I travel.", "User waters plants", False, "other_subject"),
    ("I drive my sister's car to work most days.", "User drives a car to work", True, ""),
    ("I drive my sister's car to work most days.", "User has a car", False, "other_subject"),
    ("We moved to Leeds for my wife's job.", "User moved for their own job", False, "other_subject"),
    # light words: a problem, a role, a place, times carry no claim beside the words they frame
    ("My laptop keeps overheating, the fan is shot.", "User's laptop has an overheating problem", True, ""),
    ("I'm head chef now at the new bistro.", "User's new role is head chef", True, ""),
    ("Two tries but I finally passed the bar.", "User took the bar two times", True, ""),
    ("Two tries but I finally passed the bar.", "User took the bar three times", False, "ungrounded"),
    # talking with someone is an event of the world; talking to the assistant is about this chat
    ("Ran into my old coach Rita, we talked for an hour.", "User talked with Rita for an hour", True, ""),
    # a hedge negates nothing of what follows it
    ("I'm not sure why baking bread calms me down so much.", "Baking bread calms User down", True, ""),
    ("I'm not sure why baking bread calms me down so much.", "User does not bake bread", False, "negation"),
    # "least favorite" is a dislike
    ("My least favorite chore is ironing shirts.", "User dislikes ironing shirts", True, ""),
    ("My least favorite chore is ironing shirts.", "User loves ironing shirts", False, "ungrounded"),
    # a hyphenated compound is its joined word too; "part of" is joining
    ("I'm now part of the search-and-rescue team up north.", "User joined the search-and-rescue team", True, ""),
    ("Guess what, I'm a part-timer at the library now.", "User is a parttimer at the library", True, ""),
    # what a verb opens is the speaker's deed, even on someone else's things
    ("Busy week - coaching kids on their free throws at the gym.", "User coaches kids on free throws", True, ""),
    # more ways to say a change: "off X to Y", "picked Y over X", "drop X and move to Y"
    ("The app is moving off Heroku to Fly this month.", "The app is moving from Fly to Heroku", False, "ungrounded"),
    ("The app is moving off Heroku to Fly this month.", "The app is moving from Heroku to Fly", True, ""),
    ("We picked Svelte over Vue for the dashboard.", "Team chose Vue over Svelte", False, "ungrounded"),
    ("We picked Svelte over Vue for the dashboard.", "Team chose Svelte over Vue", True, ""),
    ("We'll drop Travis and move builds to Buildkite.", "Team will move builds from Buildkite to Travis", False,
     "ungrounded"),
    # a word of letters and digits is said as written (spaces between its runs allowed)
    ("The p95 latency of checkout is 300 ms.", "Checkout's p99 latency is 300 ms", False, "ungrounded"),
    ("The p95 latency of checkout is 300 ms.", "Checkout's p95 latency is 300ms", True, ""),
    ("Standup moved to 10 am on Mondays.", "Standup is at 10am on Mondays", True, ""),
    # a good feeling is grounded like a liking, by the source's liking or praise (data/fact_checks.yaml feelings),
    # and stays a word of its own for the negation check
    ("Can't wait for the new season of Severance!", "User is excited about the new season of Severance", True, ""),
    ("Honestly dreading the new season of Severance.", "User is excited about the new season of Severance", False,
     "ungrounded"),
    ("I'm always happy to talk about gardening.", "User is interested in gardening", True, ""),
    ("I'm not really happy with my new phone.", "User is happy with their new phone", False, "negation"),
    # feelings of one kind, events by what they are, a child's parent, the stop-37 equivalents
    ("My landlord keeps ignoring my emails, so annoying.", "User is frustrated with their landlord", True, ""),
    ("My landlord fixed the sink in a day, so nice.", "User is frustrated with their landlord", False, "ungrounded"),
    ("My daughter turns 5 on Sunday.", "User's daughter's birthday is on Sunday", True, ""),
    ("My sister is getting married in June.", "User's sister's wedding is in June", True, ""),
    ("Totally stressed with finals this week.", "User is a student", True, ""),
    ("My son starts first grade next week.", "User is a parent", True, ""),
    ("The baby is due in March!", "User is expecting a baby in March", True, ""),
    ("I think I might sell my bike.", "User is considering selling their bike", True, ""),
    ("I found the new office way too loud.", "User found the new office too loud", True, ""),
    ("Wow, my sleep is so much better now that I drink decaf.", "User's sleep has improved", True, ""),
    ("We're putting together a bake sale for the school.", "User is organizing a bake sale", True, ""),
    ("Spent the weekend chilling with my cats.", "User relaxed with their cats", True, ""),
    ("We ripped out the old heater last month.", "User removed the old heater", True, ""),
    ("Never been a big fan of jazz, to be honest.", "User is not a big fan of jazz", True, ""),
    ("Reading Dune right now, can't put it down.", "User enjoys reading Dune", True, ""),
    ("We moved everything to k8s last quarter.", "Team moved everything to Kubernetes", True, ""),
    # "bc" ends a clause like "because"
    ("My husband cooks every night bc I can't cook.", "User has a husband", True, ""),
    # the speaker named by what they are before "who"; someone else named by the fact through the clause's name
    ("I'm a paramedic who works weekends.", "User works weekends", True, ""),
    ("I'm dating a guy who works weekends.", "User works weekends", False, "other_subject"),
    ("My best friend Ana is moving to Oslo and I'm heartbroken.", "User is sad that Ana is moving", True, ""),
    ("My best friend Ana is moving to Oslo and I'm heartbroken.", "User is moving to Oslo", False, "other_subject"),
    # a word said only in a short aside that opens with a negation is negated
    ("The flaky test is the S3 one, not the db one.", "The database test is flaky", False, "negation"),
    ("The flaky test is the S3 one, not the db one.", "The S3 test is flaky", True, ""),
    # owning needs the speaker's having in the sentence that names the thing (data/fact_senses.yaml owning / owned_by)
    ("I love riding horses on weekends.", "User owns horses", False, "ungrounded"),
    ("Vans are so roomy, honestly.", "User owns a van", False, "ungrounded"),
    ("We adopted two horses last spring.", "User owns horses", True, ""),
    ("Honestly thinking of selling the old van.", "User owns a van", True, ""),
    ("I have a pug, a beagle, and a husky mix.", "User owns a beagle", True, ""),
    # a hyphen-joined "owned" is someone else's owning; "my" owns only the thing it names (stop 38)
    ("My favorite pizza place is a small, family-owned pizza shop in my hometown.", "User owns a pizza shop", False,
     "ungrounded"),
    ("We eat at this little family-owned Italian place.", "User's family owns an Italian place", False, "ungrounded"),
    ("I love walking my golden retriever.", "User owns a golden retriever", True, ""),
    ("Both of our cars are old.", "User owns cars", True, ""),
    # a wish or a "would be" still to be done grounds no done deed; "I'd love" is a wish (stop 38)
    ("It would be awesome to go to a pottery class with you sometime.", "User went to a pottery class", False,
     "ungrounded"),
    ("It would be awesome to go to a pottery class with you sometime.", "User would like to go to a pottery class",
     True, ""),
    ("I'd love to lend a hand with helping out at future events.", "User helped out at the event", False,
     "ungrounded"),
    # the clause with the fact's name (or a pointer to it) is the one that says it
    ("I've been to a few countries in Europe, but I'd love to go to Mexico someday.", "User has been to Mexico", False,
     "ungrounded"),
    ("I've always wanted to learn Spanish. It's such a useful language!", "User thinks Spanish is useful", True, ""),
    # "lately- I took" ends a clause at the dash; "my dad" in an ended clause is still the speaker's dad
    ("Just wanted to tell you what's new lately- I took a writing class.", "User took a writing class", True, ""),
    ("I used to go riding with my dad when I was a kid.", "User has a father", True, ""),
    # the two sides of one deed (fact_senses.yaml converses); a plan to become one is not being one
    ("I play several instruments, and I also teach piano lessons.", "User takes piano lessons", False, "ungrounded"),
    ("I play several instruments, and I also teach piano lessons.", "User teaches piano", True, ""),
    ("I've been teaching myself to knit from YouTube videos.", "User is learning to knit", True, ""),
    ("I've been teaching myself to knit from YouTube videos.", "User teaches knitting", False, "ungrounded"),
    ("I'm planning to go back to school to become a computer programmer.", "User is a computer programmer", False,
     "ungrounded"),
    ("I'm planning to go back to school to become a computer programmer.", "User plans to become a programmer", True,
     ""),
    # a clause that only appraises ("sounds fun") says no deed; a lost job ended; weekdays written short
    ("Oh, kayaking sounds fun! I've always wanted to try it.", "User kayaks", False, "ungrounded"),
    ("Oh, kayaking sounds fun! I've always wanted to try it.", "User thinks kayaking sounds fun", True, ""),
    ("I lost my job at the bank last month.", "User used to work at a bank", True, ""),
    ("I lost my job at the bank last month.", "User works at a bank", False, "negation"),
    ("Got laid off from the warehouse job on Friday.", "User quit their warehouse job", False, "ungrounded"),
    ("Got laid off from the warehouse job on Friday.", "User was laid off", True, ""),
    ("Last Fri I took my kids to a pottery workshop.", "User went to a pottery workshop last Friday", True, ""),
    # starting is not stopping; "might" is still to be done; a names-only clause is about the one before; what the
    # user's someone is needs a stretch of the source about them
    ("I've started journaling every night before bed.", "User stopped journaling", False, "ungrounded"),
    ("I think I might go back to school for nursing?", "User is a nurse", False, "ungrounded"),
    ("My son got into his first-choice college, Michigan!", "User got into Michigan", False, "other_subject"),
    ("I'm a firefighter. My wife is a doctor.", "User's wife is a firefighter", False, "ungrounded"),
    ("I'm a firefighter. My wife is a doctor.", "User's wife is a doctor", True, ""),
    ("We adopted a greyhound, her name is Pepper. Super shy but so sweet.", "User's dog is shy", True, ""),
    # a place of the user by a word too; a participle a comma joins has the subject before it; a role only someone's
    ("I grew up on a dairy farm, but now I live in a tiny apartment in Brooklyn.", "User lives on a farm", False,
     "ungrounded"),
    ("I grew up on a dairy farm, but now I live in a tiny apartment in Brooklyn.", "User lives in an apartment", True,
     ""),
    ("We planted tomatoes and basil this spring, first time growing anything.", "User grows basil", True, ""),
    ("She had a tough time, going through a divorce, and ending up homeless.", "User went through a divorce", False,
     "other_subject"),
    ("She had a tough time, going through a divorce, and ending up homeless.", "User is homeless", False,
     "other_subject"),
    ("I visited a veteran's hospital last week.", "User is a veteran", False, "ungrounded"),
    ("I visited a veteran's hospital last week.", "User visited a veteran's hospital", True, ""),
    # "to become", "excited to", "keen on" are not yet; a lost pronoun may start a stretch about them; playing is
    # doing, watching or a favorite is not playing
    ("I'm in college to become a nurse.", "User is a nurse", False, "ungrounded"),
    ("I'm in college to become a nurse.", "User is a student", True, ""),
    ("I'm really excited to watch this new show called \"Severance\".", "User has watched Severance", False,
     "ungrounded"),
    ("I'm really excited to watch this new show called \"Severance\".", "User is excited to watch Severance", True,
     ""),
    ("I'm keen on counseling or working in mental health.", "User works in mental health", False, "ungrounded"),
    ("I'm keen on counseling or working in mental health.", "User is interested in counseling", True, ""),
    ("I'm from Colorado, so I grew up hiking a lot.", "User grew up in Colorado", True, ""),
    ("Basketball is my passion, I practice and train every day.", "User plays basketball", True, ""),
    ("My favorite band is Radiohead, seen them live four times.", "User plays in a band", False, "ungrounded"),
    ("I love watching tennis on TV.", "User plays tennis", False, "ungrounded"),
    # everyday entailments as data: a workout is exercise, twins are children, a birthday is turning an age, a
    # homeowner owns a home
    ("I go to the gym every morning at six.", "User works out at 6 am", True, ""),
    ("We're expecting twins in October!", "User is expecting two babies", True, ""),
    ("We just celebrated my son's 8th birthday.", "User's son turned 8", True, ""),
    ("We just celebrated my son's 8th birthday.", "User's son turned 9", False, "ungrounded"),
    ("I was able to buy a house a few years ago.", "User is a homeowner", True, ""),
    ("I rent a tiny studio in Brooklyn.", "User is a homeowner", False, "ungrounded"),
    ("we finally closed on the house!!!", "User bought a house", True, ""),
    ("Haven't had a drink since New Year's. Six months sober today!", "User doesn't drink alcohol", True, ""),
    ("Die-hard Packers fan since I was a kid.", "User has been a Packers fan since childhood", True, ""),
    ("My husband and I spent our 15th anniversary in Santorini.", "User celebrated their 15th wedding anniversary",
     True, ""),
    # a clause with both sides of a deed: the side nearest before the fact's thing is the one said of it
    ("I sold my old guitar and bought a keyboard instead.", "User bought a guitar", False, "ungrounded"),
    ("I sold my old guitar and bought a keyboard instead.", "User sold their keyboard", False, "ungrounded"),
    ("I sold my old guitar and bought a keyboard instead.", "User bought a keyboard", True, ""),
    ("I sold my old guitar and bought a keyboard instead.", "User sold their guitar", True, ""),
    # "except" ends the negated clause before it
    ("Still don't know anyone here except our neighbor Rosa.", "User's neighbor is named Rosa", True, ""),
    ("Still don't know anyone here except our neighbor Rosa.", "User knows anyone here", False, "negation"),
    # a fact read once more in other words (fact_senses.yaml restate)
    ("I'm a vegetarian and I teach yoga three times a week.", "User doesn't eat meat", True, ""),
    ("My sister is vegan so Thanksgiving is always interesting.", "User's sister doesn't eat meat", True, ""),
    ("My sister is vegan so Thanksgiving is always interesting.", "User doesn't eat meat", False, "ungrounded"),
    ("I eat meat every day.", "User doesn't eat meat", False, "negation"),
    # a boyfriend or a wife is a partner, none of them another (fact_checks.yaml broader: partner)
    ("My girlfriend and I adopted a kitten.", "User has a partner", True, ""),
    ("My wife and I just left for Rome.", "User has a partner", True, ""),
    ("My girlfriend and I adopted a kitten.", "User has a boyfriend", False, "ungrounded"),
    ("My partner and I just got back from Lisbon.", "User has a girlfriend", False, "ungrounded"),
    # where the user lives, grew up or was born is the name of the clause that says so (fact_senses.yaml placed)
    ("I was born in Lagos, but these days I live in Leeds.", "User lives in Lagos", False, "ungrounded"),
    ("I was born in Lagos, but these days I live in Leeds.", "User lives in Leeds", True, ""),
    ("I was born in Lagos, but these days I live in Leeds.", "User was born in Lagos", True, ""),
    ("I grew up in Osaka, Japan.", "User grew up in Japan", True, ""),
    ("My favorite band is Muse, I've seen them live twice.", "User has seen Muse live twice", True, ""),
    # "my brother" says the speaker has one, whatever the clause does with him; without "my" a wish or a negation is
    # no having
    ("I'll ask my sister if she wants to join us.", "User has a sister", True, ""),
    ("I don't get along with my brother.", "User has a brother", True, ""),
    ("I don't have a brother.", "User has a brother", False, "negation"),
    ("I've always wanted a dog.", "User has a dog", False, "ungrounded"),
    # giving a workshop is doing it
    ("Been doing pottery workshops lately.", "User gives pottery workshops", True, ""),
    ("I reccomend the first book, honestly.", "User recommends the first book", True, ""),
    # someone else's role is not what the user is
    ("My boss Dana wants the report by Friday.", "User is the boss", False, "other_subject"),
    ("My boss Dana wants the report by Friday.", "User has a boss", True, ""),
    # "every morning" grounds "daily", but in a fact it is itself, not "daily" (fact_checks.yaml broader: daily)
    ("I swim every morning before work.", "User swims every evening", False, "ungrounded"),
    ("I swim every morning before work.", "User swims daily", True, ""),
    ("I swim every morning before work.", "User swims every morning", True, ""),
    # shifts are work; a retirement says the work was, not that it is
    ("Picked up some night shifts at the bakery.", "User works night shifts at the bakery", True, ""),
    ("I retired from the post office last spring.", "User worked at the post office", True, ""),
    ("I retired from the post office last spring.", "User works at the post office", False, "negation"),
    # "Mom of three here" is the speaker saying what they are; "my mom of all people" is someone else
    ("Proud mom of three girls here, and a nurse.", "User has three daughters", True, ""),
    ("My mom has three daughters and a cat.", "User has three daughters", False, "other_subject"),
    # everyday words of pets, partners and kin; a relative's relative; in-laws; an age by its decade (stop 39)
    ("Took my pooch to the vet this morning.", "User has a dog", True, ""),
    ("Our kitty knocked my phone off the counter.", "User has a cat", True, ""),
    ("Our kitty knocked my phone off the counter.", "User has a dog", False, "ungrounded"),
    ("My hubby does all the cooking, I just do the dishes.", "User is married", True, ""),
    ("My hubby does all the cooking, I just do the dishes.", "User does all the cooking", False, "other_subject"),
    ("My mom's mom was a seamstress.", "User's grandmother was a seamstress", True, ""),
    ("My mom's mom was a seamstress.", "User has a grandmother", True, ""),
    ("My wife's mom is staying with us for the holidays.", "User has a mother-in-law", True, ""),
    ("My wife's mom is staying with us for the holidays.", "User's sister-in-law is staying with them", False,
     "ungrounded"),
    ("My sister and her husband are expecting a baby.", "User has a brother-in-law", True, ""),
    ("Our oldest just left for college in Boston.", "User has kids", True, ""),
    ("I'm 34 and just went back to college.", "User is in their thirties", True, ""),
    ("I'm 34 and just went back to college.", "User is in their forties", False, "ungrounded"),
    ("My mom is 62 and still runs marathons.", "User is 62", False, "other_subject"),
    ("My mom is 62 and still runs marathons.", "User is in their sixties", False, "ungrounded"),
    # before is not after; a decade is ten years; "X-free" avoids X; teeth out are teeth removed
    ("I swim laps twice a week before work.", "User swims after work", False, "ungrounded"),
    ("I swim laps twice a week before work.", "User swims before work", True, ""),
    ("I've been vegetarian for a decade.", "User has been vegetarian for ten years", True, ""),
    ("I've been vegetarian for a decade.", "User has been vegetarian for five years", False, "ungrounded"),
    ("Can't eat gluten, I have celiac.", "User is gluten-free", True, ""),
    ("Got my wisdom teeth out yesterday.", "User had their wisdom teeth removed yesterday", True, ""),
    # a job by its role; kinds of food
    ("I'm a nurse at the children's hospital.", "User works at a hospital", True, ""),
    ("I'm a nurse at the children's hospital.", "User works at a school", False, "ungrounded"),
    ("I grow strawberries and blueberries on my balcony.", "User grows fruit", True, ""),
    ("I grow strawberries and blueberries on my balcony.", "User grows vegetables", False, "ungrounded"),
    ("I bake sourdough every Sunday.", "User bakes bread weekly", True, ""),
    # someone else's mother is not the user's; "with my kids" is an object, not whom the clause is about; "no-" in a
    # compound negates nothing; losing one's dog is its death
    ("My wife's mom is staying with us for the holidays.", "User's mother is staying with them", False, "ungrounded"),
    ("My wife's mom is staying with us for the holidays.", "User's wife's mother is staying with them", True, ""),
    ("I speak Tagalog with my parents but English with my kids.", "User speaks English", True, ""),
    ("My kids speak English.", "User speaks English", False, "other_subject"),
    ("I'm doing a 30-day no-spend challenge, day 12 today.", "User is doing a no-spend challenge", True, ""),
    ("We lost our dog in March.", "User's dog died in March", True, ""),
    ("My BFF is moving to London next month.", "User has a best friend", True, ""),
    # the times of a day and a week; parents; lessons are learning, not teaching; an owner owns
    ("I fix bikes at a little shop on Saturdays.", "User fixes bikes on weekends", True, ""),
    ("I fix bikes at a little shop on Saturdays.", "User fixes bikes on weekdays", False, "ungrounded"),
    ("My parents still live in the house I grew up in.", "User's mom lives in their childhood home", True, ""),
    ("I've been taking piano lessons since March.", "User is learning piano", True, ""),
    ("I teach piano lessons on weekends.", "User is learning piano", False, "ungrounded"),
    ("We adopted a beagle last spring.", "User is a dog owner", True, ""),
    ("We adopted a beagle last spring.", "User is a cat owner", False, "ungrounded"),
    # an ex-partner is ended, not the rest of the clause
    ("My ex-husband has the kids every other weekend.", "User is divorced", True, ""),
    ("My ex-husband has the kids every other weekend.", "User has a husband", False, "negation"),
    ("My ex-wife lives in Denver.", "User is married", False, "negation"),
    ("My ex-husband has the kids every other weekend.", "User has the kids every other weekend", False,
     "other_subject"),
    ("My ex picks up the kids on Fridays.", "User picks up the kids on Fridays", False, "other_subject"),
    # times said by their kind: recently, soon, a season by its months
    ("Last week I finally went to the dentist.", "User recently went to the dentist", True, ""),
    ("Last year I finally went to the dentist.", "User recently went to the dentist", False, "ungrounded"),
    ("I'm flying to Denver tomorrow for work.", "User is going to Denver soon", True, ""),
    ("We drove up to Maine in July.", "User went to Maine in the summer", True, ""),
    ("We drove up to Maine in July.", "User went to Maine in the winter", False, "ungrounded"),
    ("I left my job in March to travel.", "User quit their job", True, ""),
    # a negated or disliking fact says no more than the source's own words: no dog is not no pets
    ("I don't have a dog.", "User doesn't have pets", False, "ungrounded"),
    ("I don't have a dog.", "User doesn't have a dog", True, ""),
    ("I don't drink beer, it makes me sleepy.", "User doesn't drink alcohol", False, "ungrounded"),
    ("I hate running, my knees hurt after a mile.", "User dislikes exercise", False, "ungrounded"),
    ("I hate running, my knees hurt after a mile.", "User hates running", True, ""),
    ("I love running, I do a mile every morning.", "User likes exercise", True, ""),
    # a lab is a dog; losing one ends it, and getting a new one is another deed
    ("We lost our old lab in March, the house is too quiet.", "User had a dog", True, ""),
    ("We lost our old lab in March, the house is too quiet.", "User has a dog", False, "negation"),
    ("We lost our old lab in March, the house is too quiet.", "User got a new dog in March", False, "negation"),
    # the state an ended word says is what a fact of that state says
    ("I retired last year after 30 years at the plant.", "User is retired", True, ""),
    ("I'm a retired mailman with three grandkids.", "User is retired", True, ""),
    ("I'm a retired mailman with three grandkids.", "User is a mailman", False, "negation"),
    # an age written joined, an only child, the youngest of several, "at least"
    ("I have two kids, ages 4 and 7.", "User has a 4-year-old", True, ""),
    ("I have two kids, ages 4 and 7.", "User has a 5-year-old", False, "ungrounded"),
    ("I'm an only child, so holidays are quiet.", "User has no siblings", True, ""),
    ("I'm the youngest of three.", "User is the youngest child", True, ""),
    ("I'm the youngest of three.", "User is the oldest child", False, "ungrounded"),
    ("My two boys both play soccer.", "User has at least two children", True, ""),
    # a cop is a police officer, chemistry a science, software work tech; Thursdays weekly; pregnant is expecting
    ("My mom is a teacher and my dad is a cop.", "User's father is a police officer", True, ""),
    ("I teach high school chemistry.", "User teaches science", True, ""),
    ("I teach high school chemistry.", "User teaches physics", False, "ungrounded"),
    ("I'm a software engineer at a small startup.", "User works in tech", True, ""),
    ("I play in a rec soccer league on Thursdays.", "User plays soccer weekly", True, ""),
    ("I have a dentist appointment on Monday.", "User goes to the dentist weekly", False, "ungrounded"),
    ("I'm pregnant with our first!", "User is expecting a baby", True, ""),
    ("I'm not pregnant, just tired.", "User is expecting a baby", False, "ungrounded"),
    ("I got my flu shot yesterday.", "User is sick", False, "ungrounded"),
    ("Gave up sugar a month ago and I already feel better.", "User no longer eats sugar", True, ""),
    ("Been job hunting for three months, nothing yet.", "User is looking for a job", True, ""),
    # stop 40: "fewer" is no "few"; a first time is not many times
    ("I've been to a few different countries, I want to see more.", "User wants to visit more countries", True, ""),
    ("I'm trying to eat fewer carbs.", "User is trying to eat more carbs", False, "ungrounded"),
    ("Finally finished my first marathon on Sunday!", "User has run many marathons", False, "ungrounded"),
    ("Finally finished my first marathon on Sunday!", "User completed their first marathon", True, ""),
    ("Made ravioli from scratch for the first time.", "User has made ravioli several times", False, "ungrounded"),
    # stop 40: a job by what one is, a soft death, smoking by cigarettes, speaking by fluency, being taught as learning,
    # a switch of tools as a move; and what they must not ground
    ("I'm a welder at the shipyard, been doing it since I was 19.", "User works at a shipyard", True, ""),
    ("I'm a stenographer, mostly criminal trials.", "User has a job", True, ""),
    ("I'm volunteering at the food bank on Thursdays.", "User works at the food bank", False, "ungrounded"),
    ("The machine in the lobby is broken again.", "User has a job", False, "ungrounded"),
    ("My cat had to be put down on Monday, she was 17.", "User's cat died", True, ""),
    ("I haven't had a cigarette in 100 days!", "User hasn't smoked in 100 days", True, ""),
    ("I'm fluent in Spanish and I get by in Portuguese.", "User speaks Spanish", True, ""),
    ("I'm fluent in Spanish and I get by in Portuguese.", "User speaks French", False, "ungrounded"),
    ("I'm a big Liverpool fan, never miss a match.", "User supports Liverpool", True, ""),
    ("My grandma taught me to sew when I was eight.", "User learned to sew", True, ""),
    ("My grandma taught me to sew when I was eight.", "User taught their grandma to sew", False, "other_subject"),
    ("I'm switching the team's docs from Confluence to Notion.", "User is moving the team's docs to Notion", True, ""),
    ("Been job hunting for three months, nothing yet.", "User is unemployed", True, ""),
    ("I'm 28 and just bought my first condo.", "User bought a house", False, "ungrounded"),
    ("My landlord is raising the rent again.", "User rents their home", True, ""),
    ("Got my wisdom teeth out yesterday and my face is so swollen.", "User had dental surgery", True, ""),
    ("I need to get my wisdom teeth out soon.", "User had dental surgery", False, "ungrounded"),
    ("Prod was down for 40 minutes because the TLS cert expired.", "The outage was caused by an expired certificate",
     True, ""),
    ("We drove down to Florida for spring break.", "User took a road trip to Florida", True, ""),
    ("We have a dozen hens and sell the eggs on Saturdays.", "User has chickens", True, ""),
    ("Half my team is out with the flu this week.", "User has the flu", False, "other_subject"),
    ("We cut the Docker image from 1.2GB to 180MB.", "Team reduced the Docker image to 180MB", True, ""),
    ("The doctor said my blood pressure is too high, so I'm cutting back on salt.", "User has low blood pressure",
     False, "ungrounded"),
    ("I go hiking most weekends.", "User goes hiking regularly", True, ""),
    ("I'm going to Japan in May.", "User is planning a trip to Japan", True, ""),
    ("I'm going to Japan in May.", "User traveled to Japan", False, "ungrounded"),
    ("I'm heading to Japan next week.", "User went on a trip to Japan", False, "ungrounded"),
    ("I'm going to learn Japanese.", "User is planning a trip to Japan", False, "ungrounded"),
    ("Sushi is my absolute favorite.", "User's favorite food is sushi", True, ""),
    ("I gave up my car last year and bike everywhere now.", "User bikes everywhere", True, ""),
    ("I quit coffee and drink tea now.", "User drinks coffee", False, "negation"),
    ("I quit smoking and drinking last year.", "User drinks", False, "negation"),
    ("I live by myself in Boston.", "User lives alone", True, ""),
    ("I've been a nurse for ten years.", "User has 10 years of experience as a nurse", True, ""),
    ("I've been a nurse for ten years.", "User has 12 years of experience as a nurse", False, "ungrounded"),
    ("I can't sleep lately.", "User has trouble sleeping", True, ""),
    ("I sleep like a baby.", "User has trouble sleeping", False, "ungrounded"),
    ("I work as a software tester.", "User works as a software developer", False, "ungrounded"),
    ("Our first granddaughter was born on Saturday!", "User is a grandparent", True, ""),
    ("We moved CI from Jenkins to GitHub Actions.", "Team moved CI to Jenkins", False, "ungrounded"),
    ("We moved CI from Jenkins to GitHub Actions.", "Team moved CI to GitHub Actions", True, ""),
    ("p99 dropped from 240ms to 180ms after the upgrade.", "p99 latency decreased to 240ms", False, "ungrounded"),
    ("p99 dropped from 240ms to 180ms after the upgrade.", "p99 latency decreased to 180ms", True, ""),
    ("I prefer tea over coffee, coffee makes me jittery.", "User prefers tea to coffee", True, ""),
    ("We ship every Tuesday.", "Team deploys every Tuesday", True, ""),
    ("Priya owns the billing service.", "Priya maintains the billing service", True, ""),
    ("The billing service is a Go app.", "The billing service is written in Rust", False, "ungrounded"),
    ("p95 publish latency went from 40ms to 12ms.", "p95 publish latency decreased to 12ms", True, ""),
    ("p95 publish latency went from 40ms to 12ms.", "p95 publish latency increased to 12ms", False, "ungrounded"),
    ("We cut the Docker image from 1.2GB to 180MB.", "The Docker image increased", False, "ungrounded"),
    # a phrase of stop 40 that says a word one way only stands for nothing in a fact
    ("They encourage me when I'm down too.", "User gets encouragement when they are down", True, ""),
    ("My car broke down last Fri on my way to work.", "User's car broke down on the way to work", True, ""),
    ("Baby number three is on the way.", "User is expecting a baby", True, ""),
    # who visits whom (stop 40)
    ("I'm flying out to see my parents in Ohio.", "User's parents are visiting them", False, "ungrounded"),
    ("I'm flying out to see my parents in Ohio.", "User is visiting their parents", True, ""),
    ("My parents are visiting us next week.", "User's parents are visiting them", True, ""),
    ("My parents are visiting us next week.", "User is visiting their parents", False, "ungrounded"),
]


@pytest.mark.parametrize(("turn", "content", "kept", "reason"), MEANING + SHAPES,
                         ids=[c for _, c, _, _ in MEANING + SHAPES])
def test_a_fact_must_mean_what_its_source_says(turn: str, content: str, kept: bool, reason: str) -> None:
    passed, explain = _check(turn, content)
    assert passed == kept, explain
    if not kept:
        assert explain[0][1] == reason, explain


def test_talking_with_someone_is_no_talk_about_this_chat() -> None:
    trivial = validate._trivial_rx()
    assert trivial.search("User talked about their weekend") and trivial.search("User talked to the assistant")
    assert not trivial.search("User talked with Rita for an hour") and not trivial.search("User talks to their mom daily")


# A fact told as something said is checked and stored without its frame (stop 40b): (turn, told, stored).
REPORTED = [
    ("I have a dog named Rex.", "User mentioned that they have a dog", "User has a dog"),
    ("I'm a nurse at the children's hospital.", "User said they are a nurse", "User is a nurse"),
    ("My sister is vegan.", "User shared that their sister is vegan", "User's sister is vegan"),
    ("I love hiking in the mountains.", "The user expressed that they love hiking", "User loves hiking"),
    ("We've been living in Portland for six years.", "User mentioned that they've been living in Portland",
     "User has been living in Portland"),
    ("I still have my old car.", "User noted that they still have their old car", "User still has their old car"),
    ("I watch way too much TV.", "User revealed that they watch too much TV", "User watches too much TV"),
    ("I have a dog named Rex.", "The user mentioned having a dog", "User has a dog"),
    ("We use Postgres for everything.", "Team mentioned that they use Postgres", "Team uses Postgres"),
]


@pytest.mark.parametrize(("turn", "told", "stored"), REPORTED, ids=[t for _, t, _ in REPORTED])
def test_a_reported_fact_is_stored_without_its_frame(turn: str, told: str, stored: str) -> None:
    facts, _, _, rejections = validate_items({"facts": [{"content": told, "category": "other", "confidence": 0.9}]},
                                             turn, settings=SETTINGS)
    assert [f.content for f in facts] == [stored], rejections
    assert repr(told) in facts[0].explanation.note  # the explanation keeps the wording the model used


@pytest.mark.parametrize(("turn", "told", "reason"), [
    ("I have a dog named Rex.", "User mentioned that they have a cat", "ungrounded"),
    ("My sister is vegan.", "User shared that they are vegan", "other_subject"),
    ("I love hiking in the mountains.", "The user expressed that they hate hiking", "ungrounded"),
    ("I don't own a car.", "User said they own a car", "negation"),
    # not rewritten cleanly: checked as written, about the conversation
    ("I have a dog.", "User said he has a dog", "trivial"),
    ("I'd love a dog someday.", "User mentioned that they'd like a dog", "trivial"),
])
def test_a_reported_invention_is_still_rejected(turn: str, told: str, reason: str) -> None:
    passed, explain = _check(turn, told)
    assert not passed and explain[0][1] == reason, explain
    assert explain[0][0] == told


def test_the_frame_rewrite_agrees_the_verb() -> None:
    subjects = ("User", "Team")
    assert validate._unreported("User said they carry a knife", subjects) == "User carries a knife"
    assert validate._unreported("User said they watch anime", subjects) == "User watches anime"
    assert validate._unreported("User said they were a teacher", subjects) == "User was a teacher"
    assert validate._unreported("User said they don't eat meat", subjects) == "User doesn't eat meat"
    assert validate._unreported("User said they moved to Ohio", subjects) == "User moved to Ohio"
    assert validate._unreported("User said they can swim", subjects) == "User can swim"
    assert validate._unreported("User has a dog", subjects) is None
    assert validate._unreported("User mentioned a dog", subjects) is None


# What ended is not current, and ends only what it names (stop 40b).
@pytest.mark.parametrize(("turn", "content", "kept"), [
    ("I gave up my car when I moved downtown, I walk everywhere now.", "User has a car", False),
    ("I gave up my car when I moved downtown, I walk everywhere now.", "User had a car", True),
    ("I gave up my car when I moved downtown, I walk everywhere now.", "User walks everywhere", True),
    ("I got rid of my TV last year and honestly I read way more now.", "User has a TV", False),
    ("I got rid of my TV last year and honestly I read way more now.", "User reads more", True),
    ("I sold my motorcycle last spring.", "User has a motorcycle", False),
    ("I sold my motorcycle last spring.", "User sold their motorcycle", True),
    ("I've been so much calmer since I finished grad school.", "User is in grad school", False),
    ("I've been so much calmer since I finished grad school.", "User finished grad school", True),
    ("I've been so much calmer since I finished grad school.", "User feels calmer", True),
    ("Since I finished college I've been working at my uncle's restaurant.", "User works at their uncle's restaurant",
     True),
])
def test_an_ended_thing_is_not_current(turn: str, content: str, kept: bool) -> None:
    passed, explain = _check(turn, content)
    assert passed == kept, explain


# A field studied is no job held, a compound role not its first word's role (stop 40b).
@pytest.mark.parametrize(("turn", "content", "kept"), [
    ("I study nursing at the community college.", "User is a nurse", False),
    ("I study nursing at the community college.", "User studies nursing", True),
    ("I study nursing at the community college.", "User is a nursing student", True),
    ("Majoring in accounting, graduating in May hopefully.", "User is an accountant", False),
    ("I'm a vet tech at a clinic downtown.", "User is a veterinarian", False),
    ("I'm a vet tech at a clinic downtown.", "User is a vet tech", True),
    ("I'm a pharmacy tech, the pay isn't great.", "User is a pharmacist", False),
    ("I'm a law student, second year.", "User is a lawyer", False),
    ("I'm a law student, second year.", "User is a law student", True),
    ("I'm a nurse practitioner, been doing it for ten years.", "User is a nurse", True),
    ("I'm a nurse and I study at night for my masters.", "User is a nurse", True),
])
def test_a_role_studied_or_compounded_is_not_held(turn: str, content: str, kept: bool) -> None:
    passed, explain = _check(turn, content)
    assert passed == kept, explain
    if not kept:
        assert explain[0][1] == "ungrounded", explain


def test_a_degree_finished_is_still_had() -> None:
    assert _check("Since I finished my degree I've been job hunting nonstop.", "User has a degree")[0]
    assert not _check("I've been so much calmer since I finished grad school.", "User is a grad student")[0]


# Stop 41: British and everyday words, numbers with a scale, a plan's date told with its year, not having said as not
# owning, "so no ..." as a clause of its own, he / she as male / female; and what stays out.
@pytest.mark.parametrize(("turn", "content", "kept"), [
    ("my nan's 96 and still does the crossword every morning", "User's grandmother is 96", True),
    ("my nan's 96 and still does the crossword every morning", "User does the crossword every morning", False),
    ("I'm a postie, start at 5 so I'm in bed by 9", "User is a mail carrier", True),
    ("I'm a postie, start at 5 so I'm in bed by 9", "User is a courier", False),
    ("I don't really watch telly anymore, mostly youtube", "User doesn't watch much TV", True),
    ("I don't really watch telly anymore, mostly youtube", "User no longer watches television", True),
    ("I don't really watch telly anymore, mostly youtube", "User watches a lot of TV", False),
    ("Me and my best mate Tom are doing a bike ride", "User has a best friend named Tom", True),
    ("got 2 grand for the old car, honestly more than I thought", "User got 2,000 for the car", True),
    ("got 2 grand for the old car, honestly more than I thought", "User got 20,000 for the car", False),
    ("the van has 140k miles on it", "The van has 140,000 miles on it", True),
    ("the van has 140k miles on it", "The van has 40,000 miles on it", False),
    ("we hit the 10k/month limit on the API again", "The API limit is 10,000 a month", True),
    ("we don't have a car, just the bikes", "User doesn't own a car", True),
    ("we don't have a car, just the bikes", "User owns a car", False),
    ("Our boiler died on Thursday so no hot water all weekend", "User's boiler broke", True),
    ("Our boiler died on Thursday so no hot water all weekend", "User had no hot water", True),
    ("Our boiler died on Thursday so no hot water all weekend", "User had no electricity", False),
    ("Been gluten free since my coeliac diagnosis in 2022", "User has coeliac disease", True),
    ("Been gluten free since my coeliac diagnosis in 2022", "User doesn't eat gluten", True),
    ("Been gluten free since my coeliac diagnosis in 2022", "User doesn't eat dairy", False),
    ("Off to Lisbon for my sister's hen do next weekend!", "User is going to their sister's hen party", True),
    ("Off to Lisbon for my sister's hen do next weekend!", "User went to Lisbon", False),
    ("yeah I play five-a-side every Wednesday with some lads from work", "User plays football", True),
    ("yeah I play five-a-side every Wednesday with some lads from work", "User plays rugby", False),
    ("My partner's a firefighter so he works 24 hour shifts", "User's partner is a man", True),
    ("My partner's a firefighter so he works 24 hour shifts", "User's partner is a woman", False),
    ("Started therapy a couple months back, it's helping", "User started therapy about two months ago", True),
    ("I have two teenagers and a very old cat.", "User has two children", True),
    ("I have two teenagers and a very old cat.", "User has three children", False),
    ("I'm 29, single, and living with two roommates in Queens.", "User is not married", True),
    ("I'm 29, single, and living with two roommates in Queens.", "User is married", False),
])
def test_everyday_words_and_scaled_numbers(turn: str, content: str, kept: bool) -> None:
    passed, explain = _check(turn, content)
    assert passed == kept, explain


@pytest.mark.parametrize(("content", "kept"), [
    ("User is getting married in June 2027", True),   # a plan's month is the coming one, "married" is no past
    ("User is getting married in May 2027", False),
    ("User got married in June 2027", False),          # told in the past: the last June only
])
def test_a_participle_after_be_or_get_is_no_past(content: str, kept: bool) -> None:
    said_at = datetime(2026, 11, 9, 10, tzinfo=timezone.utc)
    facts, _, _, _ = validate_items({"facts": [{"content": content, "category": "temporal", "confidence": 0.9}]},
                                    "we're getting married in june!! small thing", settings=SETTINGS,
                                    timestamp=said_at)
    assert bool(facts) == kept
