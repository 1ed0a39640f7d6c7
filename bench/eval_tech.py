"""Technical team chat: fact F1 against hand-written gold, and "nothing to extract" traps.

The gold below was written for this script (issue 14) before the rules it measures were changed: each
message states one fact (or two), written as the rules' template would say it. A fact counts as found when
an emitted fact shares >= 70% of the gold fact's content words. Traps are messages that must yield no fact
at all (questions, hypotheticals, reported speech, casual talk that only sounds like a policy, chatter).

Usage: .venv/bin/python bench/eval_tech.py [--verbose] [--json]
"""

from __future__ import annotations

import argparse
import json
import re

from factforge.rules.extract import Extractor

GOLD: list[tuple[str, list[str]]] = [
    ("We switched from JWT to Clerk for authentication because of compliance requirements",
     ["Team switched from JWT to Clerk"]),
    ("We use PostgreSQL for the database and Redis for caching",
     ["Team uses PostgreSQL for the database", "Team uses Redis for caching"]),
    ("Always add null checks before accessing nested properties in PR reviews",
     ["Team policy: always add null checks before accessing nested properties"]),
    ("I prefer dark mode over light mode", ["User prefers dark mode over light mode"]),
    ("We decided to use Terraform for all infrastructure changes",
     ["Team decided to use Terraform for all infrastructure changes"]),
    ("My name is Dana and I work at Acme", ["User's name is Dana", "User works at Acme"]),
    ("We migrated from MySQL to Postgres 16 last month", ["Team switched from MySQL to Postgres 16"]),
    ("I use Neovim for everything", ["User uses Neovim"]),
    ("Our team uses GitHub Actions for CI", ["Team uses GitHub Actions for CI"]),
    ("We replaced Jenkins with Buildkite", ["Team switched from Jenkins to Buildkite"]),
    ("Never commit directly to main", ["Team policy: never commit directly to main"]),
    ("Don't merge without a passing build", ["Team policy: don't merge without a passing build"]),
    ("We always squash commits before merging", ["Team policy: always squash commits before merging"]),
    ("Two approvals are required for every PR", ["Team policy: two approvals are required for every PR"]),
    ("I'm a backend engineer at Stripe", ["User is a backend engineer at Stripe"]),
    ("I prefer tabs over spaces", ["User prefers tabs over spaces"]),
    ("We moved off Heroku onto Fly.io in March", ["Team switched from Heroku to Fly.io"]),
    ("I work remotely from Lisbon", ["User works remotely from Lisbon"]),
    ("We're using React Native for the mobile app", ["Team uses React Native for the mobile app"]),
    ("I switched to Zed last week", ["User switched to Zed"]),
    ("We chose Kafka over RabbitMQ for the event bus", ["Team chose Kafka over RabbitMQ"]),
    ("Our policy is to rotate secrets every 90 days", ["Team policy: rotate secrets every 90 days"]),
    ("I live in Berlin", ["User lives in Berlin"]),
    ("We need to bump the Node version to 20 before Friday", ["Team policy: bump the Node version to 20"]),
    ("I hate YAML anchors", ["User dislikes YAML anchors"]),
    ("We deploy on Kubernetes", ["Team deploys on Kubernetes"]),
    ("I've been using Rust for three years", ["User has been using Rust for three years"]),
    ("The team decided to go with Vite instead of Webpack", ["Team decided to go with Vite instead of Webpack"]),
    ("I found a workaround for NativeWind v4 by using className prop directly",
     ["User found a workaround for NativeWind v4: using className prop directly"]),
    ("We started using Sentry for error tracking in May", ["Team uses Sentry for error tracking"]),
    ("I'm the on-call engineer this week", ["User is the on-call engineer this week"]),
    ("Our staging database runs on RDS", ["Team's staging database runs on RDS"]),
]

TRAPS = [
    "thanks!", "ok", "Have you heard of Deno?", "Can you check if Redis is up?", "What if we used Kafka?",
    "Should we switch to Bun?", "If we migrate to Postgres, will the ORM break?", "Maybe we could try Vite.",
    "He said they use Jenkins.", "Never mind, I figured it out.", "Always happy to help!",
    "We need to talk about the weekend plans lol", "Never give up!", "I always forget my umbrella haha",
    "Let me know when the build is green.", "Looks good to me.", "Not sure we should use Mongo.",
    "Could you review my PR?", "Which do you prefer, tabs or spaces?", "I wonder whether Zig is ready.",
    "They told me Redis is down.", "Sounds great, thanks a lot!", "Do we use Terraform anywhere?",
    "Would you rather use Go or Rust?", "lgtm", "The build is failing again.", "Good morning team!",
    "I don't know.", "Never heard of it.", "We should grab lunch sometime.", "You always say that!",
    "Sure, I can take a look after lunch.", "Not today, sorry.", "What does the error say?",
    "Hmm, that's weird.", "I'll check.", "Did anyone deploy today?", "We need more coffee.",
    "Never again lol", "Always something with this printer.", "I think so.", "See you tomorrow!",
]

WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset("user team the a an to for of and in on with is are".split())


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def matches(gold: str, got: str) -> bool:
    g = words(gold)
    return len(g & words(got)) >= 0.7 * len(g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ex = Extractor()
    tp = fp = fn = 0
    lines = []
    for text, gold in GOLD:
        got = [f.content for f in ex.extract(text).facts]
        hit_gold = [g for g in gold if any(matches(g, c) for c in got)]
        good = [c for c in got if any(matches(g, c) for g in gold)]
        tp += len(hit_gold)
        fn += len(gold) - len(hit_gold)
        fp += len(got) - len(good)
        if len(hit_gold) < len(gold) or len(good) < len(got):
            lines.append(f"GOLD {text!r}: want {gold}, got {got}")
    fired = []
    for text in TRAPS:
        got = [f.content for f in ex.extract(text).facts]
        if got:
            fired.append(text)
            lines.append(f"TRAP {text!r}: got {got}")
    p = tp / max(tp + fp, 1)
    r = tp / max(tp + fn, 1)
    res = {"gold_facts": tp + fn, "precision": round(p, 3), "recall": round(r, 3),
           "f1": round(2 * p * r / max(p + r, 1e-9), 3), "traps": len(TRAPS), "traps_fired": len(fired)}
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>12}: {v}")
    if args.verbose:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
