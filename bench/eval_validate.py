"""Post-LLM validation on facts a perfect LLM would write: how many true facts pass, how many invented ones do.

The turns and facts below were written for this script (issue 14). For each turn, ``true`` facts say only
what the turn says (short ones and faithful paraphrases included); ``invented`` facts are what a model
hallucinates: plausible for the speaker but not in the turn (a different object, an added detail, the
opposite). Categories follow the validator's contract (data/fact_checks.yaml: a "temporal" fact names its
time, a "preference" one its liking), as a model that follows the prompt writes them. Reports the pass
rate of true facts (target >= 90%) and of invented ones (lower is better), with the rejection reasons.

The related-word groups of data/fact_checks.yaml were written alongside these facts, so this set is not
held out for them; the number, name and polarity checks are general.

``--cases heldout`` runs bench/validate_heldout.py instead: turns and facts written before the validator was
changed for issue 14 and never tuned on. ``--cases fresh`` runs bench/validate_fresh.py: a third set, persona-chat
and LoCoMo-style turns with facts phrased as a small model paraphrases them, written and frozen before the second
round of validator changes. ``--cases blind`` runs bench/validate_blind.py: a fourth set, casual, persona and
technical team chat, written blind (without reading the validator's code or word lists) and frozen before the
validator changes of stop 29. ``--cases blind2`` runs bench/validate_blind2.py: a fifth set of the same three
kinds, written blind and frozen after the validator changes of stop 29, to measure them. ``--cases blind3`` runs
bench/validate_blind3.py: a sixth set of the same three kinds, written blind and frozen before it was ever run.
``--cases blind4`` runs bench/validate_blind4.py: a seventh set, turns drawn at random from the dev data (LoCoMo,
persona chat, Switchboard) with facts written blind, frozen before the validator changes of stop 36.
``--cases tune36`` runs bench/validate_tune36.py: more dev turns with facts written like blind4's, to tune on.
``--cases tune38`` runs bench/validate_tune38.py: dev turns of family, partners, pets, plans and wishes, to tune on.
``--cases tune39`` runs bench/validate_tune39.py: everyday chat turns written for stop 39 to tune on (pet words, broader
words, kinship, number and time restatements).
``--cases tune40`` runs bench/validate_tune40.py: stop 40's tuning set, written after blind8 was frozen (absolute dates,
short facts, jobs said by what one does, soft deaths, more / fewer, number restatements).
``--cases tune40b`` runs bench/validate_tune40b.py: stop 40b's tuning set (facts framed as something said, "User
mentioned that they have a dog"; a field studied, a compound role or an ended state read as what the user is or has).
``--cases tune41`` runs bench/validate_tune41.py: stop 41's tuning set, written after blind9 was frozen (everyday and
team chat with a ``SAID_AT``: jobs by their nouns, deaths of pets, hedged wishes, shares and splits, part-time work).
``--cases blind5`` runs bench/validate_blind5.py: an eighth set, dev turns from LoCoMo sessions, persona chats and
Switchboard stretches no earlier set used, facts written blind and frozen before the validator changes of stop 37.
``--cases blind6`` runs bench/validate_blind6.py: a ninth set drawn the same way from what blind5 and the earlier sets
left, facts written blind and frozen before the validator changes of stop 38. ``--cases blind7`` runs
bench/validate_blind7.py: a tenth set, everyday personal chat turns written for it (not drawn from the dev data), facts
written blind and frozen before the validator changes of stop 39. ``--cases blind8`` runs bench/validate_blind8.py: an
eleventh set, everyday and team chat turns written for it, with relative dates made absolute as the extraction prompt
asks; its module's ``SAID_AT`` is passed to the validator as the turns' timestamp. ``--cases blind9`` runs
bench/validate_blind9.py: a twelfth set of the same two kinds with its own ``SAID_AT``, written blind and frozen before
the validator changes of stop 41.
Each set reports the cost per fact (validation only, warm).

Usage: .venv/bin/python bench/eval_validate.py [--cases old|heldout|fresh|blind|blind2|blind3|blind4|blind5|blind6|blind7|blind8|blind9|tune36|tune38|tune39|tune40|tune40b|tune41] [--verbose] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections import Counter
from pathlib import Path

from factforge.settings import Settings
from factforge.models.validate import validate_items

# (turn, [(true fact, category)], [(invented fact, category)])
CASES: list[tuple[str, list[tuple[str, str]], list[tuple[str, str]]]] = [
    ("I have a dog named Biscuit and two cats.",
     [("User has a dog", "identity"), ("User has a dog named Biscuit", "identity"), ("User has two cats", "identity"),
      ("User owns pets", "identity")],
     [("User has a parrot", "identity"), ("User has three dogs", "identity")]),
    ("I'm a mom of three and I work part time as a nurse.",
     [("User is a mom", "identity"), ("User has three kids", "identity"), ("User is a nurse", "identity"),
      ("User works part-time", "identity"), ("User is a mother of three children", "identity")],
     [("User is a doctor", "identity"), ("User works full time", "identity"), ("User is a dad", "identity")]),
    ("Trying to spend less this year, money's been tight since the layoff.",
     [("User is trying to spend less", "decision"), ("User is trying to save money", "decision"),
      ("User was laid off", "other"), ("User has money problems", "other")],
     [("User got a promotion", "other"), ("User is buying a new car", "decision")]),
    ("I love to bake cookies, especially chocolate chip ones.",
     [("User loves baking", "preference"), ("User likes to bake cookies", "preference"),
      ("User's favorite cookies are chocolate chip", "preference"), ("User bakes", "identity")],
     [("User loves baking bread", "preference"), ("User hates chocolate", "preference")]),
    ("Just got back from Lisbon, the conference was great.",
     [("User went to Lisbon", "other"), ("User attended a conference in Lisbon", "other"),
      ("User enjoyed the conference", "preference"), ("User traveled to Portugal", "other")],
     [("User went to Madrid", "other"), ("User gave a talk at the conference", "other")]),
    ("My sister is vegan so Thanksgiving is always interesting.",
     [("User's sister is vegan", "identity"), ("User has a sister", "identity"),
      ("User's sister doesn't eat meat", "identity")],
     [("User is vegan", "identity"), ("User's brother is vegetarian", "identity")]),
    ("I've been learning Korean for two years, mostly with an app.",
     [("User is learning Korean", "identity"), ("User studies Korean", "identity"),
      ("User has studied Korean for two years", "identity"), ("User learns Korean with an app", "identity")],
     [("User speaks Japanese", "identity"), ("User takes Korean classes", "identity")]),
    ("We moved to Denver last spring for my husband's job.",
     [("User lives in Denver", "identity"), ("User moved to Denver last spring", "temporal"), ("User is married", "identity"),
      ("User has a husband", "identity"), ("User relocated for their husband's job", "other")],
     [("User moved to Boston", "temporal"), ("User moved for their own job", "other")]),
    ("Running every morning keeps me sane honestly.",
     [("User runs every morning", "identity"), ("User jogs daily", "identity"), ("Running helps User", "other"),
      ("User is a runner", "identity")],
     [("User swims every morning", "identity"), ("User hates running", "preference")]),
    ("I work at a bakery downtown, early shifts mostly.",
     [("User works at a bakery", "identity"), ("User works early shifts", "identity"), ("User is a baker", "identity")],
     [("User works at a bank", "identity"), ("User works night shifts", "identity")]),
    ("My grandpa taught me to fish when I was little.",
     [("User can fish", "identity"), ("User's grandfather taught them fishing", "other"),
      ("User knows how to fish", "identity"), ("User has a grandpa", "identity")],
     [("User's father taught them to hunt", "other"), ("User fishes every weekend", "identity")]),
    ("I'm allergic to peanuts, so I always check labels.",
     [("User is allergic to peanuts", "identity"), ("User has a peanut allergy", "identity"),
      ("User checks food labels", "identity")],
     [("User is allergic to shellfish", "identity"), ("User is lactose intolerant", "identity")]),
    ("Got my driver's license yesterday!",
     [("User got a driver's license yesterday", "temporal"), ("User can drive", "identity"),
      ("User passed their driving test", "other")],
     [("User bought a car yesterday", "temporal"), ("User failed their driving test", "other")]),
    ("We use Postgres for everything and Redis for caching.",
     [("Team uses Postgres", "technology"), ("Team uses Redis for caching", "technology"),
      ("Team's database is Postgres", "technology")],
     [("Team uses MySQL", "technology"), ("Team uses Memcached for caching", "technology")]),
    ("I prefer tea over coffee, coffee makes me jittery.",
     [("User prefers tea", "preference"), ("User drinks tea", "other"), ("Coffee makes User jittery", "identity"),
      ("User prefers tea to coffee", "preference")],
     [("User prefers coffee", "preference"), ("User drinks green tea daily", "preference")]),
    ("I was a teacher for 20 years before I retired.",
     [("User was a teacher", "identity"), ("User is retired", "identity"), ("User taught for 20 years", "identity"),
      ("User is a retired teacher", "identity")],
     [("User was a nurse", "identity"), ("User taught for 10 years", "identity")]),
    ("Our dog Max is 3 and still acts like a puppy.",
     [("User has a dog", "identity"), ("User's dog is named Max", "identity"), ("User's dog Max is 3 years old", "identity")],
     [("User has a cat named Max", "identity"), ("User's dog is 10", "identity")]),
    ("I'm going to visit Japan in May with my best friend.",
     [("User plans to visit Japan", "decision"), ("User will travel to Japan in May", "decision"),
      ("User has a best friend", "identity"), ("User is going on a trip", "decision")],
     [("User plans to visit China", "decision"), ("User is moving to Japan", "decision")]),
    ("Painting calms me down after work.",
     [("User paints", "identity"), ("Painting relaxes User", "other"), ("User finds painting calming", "other")],
     [("User sells paintings", "identity"), ("User is a professional painter", "identity")]),
    ("I grew up in a small town in Ohio.",
     [("User is from Ohio", "identity"), ("User grew up in a small town", "identity"),
      ("User's hometown is in Ohio", "identity")],
     [("User is from Texas", "identity"), ("User grew up in a big city", "identity")]),
    ("I quit smoking last year and feel so much better.",
     [("User quit smoking last year", "temporal"), ("User used to smoke", "identity"), ("User is a former smoker", "identity"),
      ("User no longer smokes", "identity")],
     [("User started smoking last year", "temporal"), ("User quit drinking last year", "temporal")]),
    ("My partner and I are saving for a house.",
     [("User has a partner", "identity"), ("User is saving money", "decision"), ("User wants to buy a house", "preference"),
      ("User and their partner are saving for a house", "decision")],
     [("User bought a house", "other"), ("User is single", "identity")]),
]


# The other case sets: --cases name -> (module of bench/, its variable).
SETS = {"heldout": ("validate_heldout", "HELDOUT"), "fresh": ("validate_fresh", "FRESH"),
        "blind": ("validate_blind", "BLIND"), "blind2": ("validate_blind2", "BLIND2"),
        "blind3": ("validate_blind3", "BLIND3"), "blind4": ("validate_blind4", "BLIND4"),
        "blind5": ("validate_blind5", "BLIND5"), "blind6": ("validate_blind6", "BLIND6"),
        "blind7": ("validate_blind7", "BLIND7"), "blind8": ("validate_blind8", "BLIND8"),
        "blind9": ("validate_blind9", "BLIND9"),
        "tune36": ("validate_tune36", "TUNE36"), "tune38": ("validate_tune38", "TUNE38"),
        "tune39": ("validate_tune39", "TUNE39"), "tune40": ("validate_tune40", "TUNE40"),
        "tune40b": ("validate_tune40b", "TUNE40B"),
        "tune41": ("validate_tune41", "TUNE41")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--cases", choices=("old", *SETS), default="old")
    args = ap.parse_args()
    cases = CASES
    said_at = None  # when the turns were said: a set whose facts carry absolute dates names it (SAID_AT)
    if args.cases in SETS:
        module, name = SETS[args.cases]
        sys.path.insert(0, str(Path(__file__).parent))
        loaded = importlib.import_module(module)
        cases = getattr(loaded, name)
        said_at = getattr(loaded, "SAID_AT", None)
    settings = Settings(home=Path("."))
    counts = {"true": [0, 0], "invented": [0, 0]}
    reasons: dict[str, Counter[str]] = {"true": Counter(), "invented": Counter()}
    lines = []
    validate_items({"facts": [{"content": "User used to live in Portugal", "category": "identity"}]},
                   "I taught in Lisbon for years", settings=settings)  # warm: every data file read once
    spent = 0.0
    for turn, true, invented in cases:
        for kind, items in (("true", true), ("invented", invented)):
            for content, category in items:
                raw = {"facts": [{"content": content, "category": category, "confidence": 0.8}]}
                started = time.perf_counter()
                explain: list[tuple[str, str, str]] = []
                facts, _, _, rejections = validate_items(raw, turn, timestamp=said_at, settings=settings,
                                                        explain=explain)
                spent += time.perf_counter() - started
                counts[kind][0] += 1
                counts[kind][1] += bool(facts)
                reasons[kind].update(rejections)
                if (kind == "true") != bool(facts):
                    why = "; ".join(f"{reason} ({what})" for _, reason, what in explain)
                    lines.append(f"{kind:8} {'PASS' if facts else 'REJECT ' + why}: {content!r} <- {turn!r}")
    res = {"true_facts": counts["true"][0], "true_pass_rate": round(counts["true"][1] / counts["true"][0], 3),
           "invented_facts": counts["invented"][0],
           "invented_pass_rate": round(counts["invented"][1] / counts["invented"][0], 3),
           "us_per_fact": round(spent / (counts["true"][0] + counts["invented"][0]) * 1e6),
           "true_rejected_by": dict(reasons["true"]), "invented_rejected_by": dict(reasons["invented"])}
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>21}: {v}")
    if args.verbose:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
