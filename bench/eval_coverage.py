"""Rule coverage on LoCoMo long conversations: how much of everyday personal chat the rules answer alone.

Every turn goes through ``Extractor.extract_turn`` with the previous turn as the message it answers (so a
"yes" or an elliptical answer can use the question) and the session's date as its timestamp. Reports, over
the turns that pass the gatekeeper: the share with >= 1 rule fact (MEDIUM or better), the share with a HIGH
fact, and the share queued for the LLM. ``--sample N`` prints N random emitted facts with their turns, for
judging precision by hand; ``--misses N`` prints gate-passed turns that left no fact; ``--out DIR`` writes every
emitted fact (``facts.jsonl``: confidence, rule, content, turn) and every miss (``misses.txt``) there, to diff two
versions of the rules (write it outside the repository: the turns are LoCoMo's, which stays out of the project).

Usage: .venv/bin/python bench/eval_coverage.py [--sample 0] [--misses 0] [--seed 7] [--convs conv-26,conv-30] [--out DIR] [--json]

Splits used for issue 14: develop on conv-26,conv-30,conv-41; check on conv-42,conv-43.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import datetime, timezone
from pathlib import Path

from factforge.rules.extract import Extractor

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "dev"


def session_time(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def turns(path: Path, convs: set[str] | None = None):
    """(text, previous turn's text, session time) for every turn of every conversation (or of ``convs``)."""
    for conv in json.loads(path.read_text(encoding="utf-8")):
        if convs and conv.get("sample_id") not in convs:
            continue
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            when = session_time(c.get(f"session_{n}_date_time", ""))
            prev = None
            for t in c[f"session_{n}"]:
                yield t["text"], prev, when
                prev = t["text"]
            n += 1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--misses", type=int, default=0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", type=Path, default=DATA, help="folder holding locomo_dev.json")
    ap.add_argument("--convs", default="", help="comma-separated sample_ids to read (a split), default all")
    ap.add_argument("--out", type=Path, default=None, help="folder to write facts.jsonl and misses.txt to")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    convs = {c.strip() for c in args.convs.split(",") if c.strip()} or None
    ex = Extractor()
    total = passed = with_fact = with_high = queued = 0
    emitted: list[tuple[str, str, str, float]] = []
    misses: list[str] = []
    high = ex.settings.high_confidence
    for text, prev, when in turns(args.data / "locomo_dev.json", convs):
        x = ex.extract_turn(text, timestamp=when, prior_assistant=prev)
        total += 1
        if not x.gate.passed:
            continue
        passed += 1
        with_fact += bool(x.facts)
        with_high += any(f.confidence >= high for f in x.facts)
        queued += x.needs_llm
        emitted += [(f.content, f.explanation.rule_id or "", text, f.confidence) for f in x.facts]
        if not x.facts:
            misses.append(text)
    res = {"turns": total, "passed_gate": passed, "facts": len(emitted),
           "share_with_fact": round(with_fact / max(passed, 1), 3),
           "share_with_high": round(with_high / max(passed, 1), 3),
           "share_queued_for_llm": round(queued / max(passed, 1), 3)}
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        with (args.out / "facts.jsonl").open("w", encoding="utf-8") as out:
            for content, rule, text, conf in emitted:
                out.write(json.dumps({"confidence": round(conf, 2), "rule": rule, "content": content, "turn": text}) + "\n")
        (args.out / "misses.txt").write_text("".join(t.replace("\n", " ") + "\n" for t in misses), encoding="utf-8")
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>22}: {v}")
    rng = random.Random(args.seed)
    for content, rule, text, conf in rng.sample(emitted, min(args.sample, len(emitted))):
        print(f"{conf:.2f} {rule:28} {content!r}  <- {text!r}")
    for text in rng.sample(misses, min(args.misses, len(misses))):
        print(f"MISS {text!r}")


if __name__ == "__main__":
    main()
