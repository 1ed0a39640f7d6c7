"""Persona recall on spc_valid.csv: of the persona sentences voiced in the dialogue, how many come out as facts.

Also: the share of all dialogue turns that would go to the LLM after the gatekeeper and the patterns.

A persona sentence ("I love to bake cookies.") counts as voiced when a dialogue turn of the same speaker
shares >= 60% of its content words. It is recalled when extracting that turn yields a fact whose content
shares >= 50% of those content words (a rough but rule-independent check). Also reports the share of
voiced sentences that produced any fact at all, and prints a sample of misses for rule writers.

Usage: .venv/bin/python bench/eval_persona.py [--start 0] [--limit 1000] [--misses 15] [--json]

Splits used for issue 14: develop on rows 0-499 (--limit 500); check on rows 500-999 (--start 500).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
from pathlib import Path

from factforge.rules.extract import Extractor

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "dev"
STOP = set("i a an the to of and my me am is are was be have has it in on for at with do like love".split())
WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP and len(w) > 2}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=1000)
    ap.add_argument("--start", type=int, default=0, help="first row to read (rows --start .. --limit-1: a split)")
    ap.add_argument("--misses", type=int, default=15)
    ap.add_argument("--sample", type=int, default=0, help="print N random emitted facts to judge by hand")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", type=Path, default=DATA, help="folder holding spc_valid.csv")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    ex = Extractor()
    voiced = recalled = any_fact = 0
    turns_total = turns_passed = turns_llm = 0
    misses: list[str] = []
    emitted: list[tuple[str, str]] = []
    with (args.data / "spc_valid.csv").open(encoding="utf-8") as fh:
        for i, row in enumerate(csv.DictReader(fh)):
            if i >= args.limit:
                break
            if i < args.start:
                continue
            turns: dict[str, list[str]] = {"1": [], "2": []}
            for line in row["Best Generated Conversation"].splitlines():
                m = re.match(r"\s*User ([12]):\s*(.*)", line)
                if m:
                    turns[m.group(1)].append(m.group(2))
            for said in turns["1"] + turns["2"]:
                x = ex.extract(said)
                emitted += [(f.content, said) for f in x.facts]
                turns_total += 1
                turns_passed += x.gate.passed
                turns_llm += x.needs_llm
            for who in ("1", "2"):
                for persona in row[f"user {who} personas"].splitlines():
                    pw = words(persona)
                    if not pw:
                        continue
                    best = max(turns[who], key=lambda t: len(pw & words(t)), default=None)
                    if best is None or len(pw & words(best)) < 0.6 * len(pw):
                        continue
                    voiced += 1
                    facts = ex.extract(best).facts
                    any_fact += bool(facts)
                    if any(len(pw & words(f.content)) >= 0.5 * len(pw) for f in facts):
                        recalled += 1
                    elif len(misses) < args.misses:
                        misses.append(f"{persona.strip()!r} <- {best!r} -> {[f.content for f in facts]}")
    res = {"voiced_persona_sentences": voiced, "recalled": recalled, "recall": round(recalled / max(voiced, 1), 3),
           "turns_with_any_fact": round(any_fact / max(voiced, 1), 3),
           # Issue 4's headline figure: dialogue turns that would go to the LLM after gate + patterns.
           "facts_emitted": len(emitted), "dialogue_turns": turns_total, "passed_gate": turns_passed, "needs_llm": turns_llm,
           "llm_share_of_passed": round(turns_llm / max(turns_passed, 1), 3),
           "llm_share_of_all": round(turns_llm / max(turns_total, 1), 3)}
    if args.json:
        print(json.dumps(res))
        return
    for k, v in res.items():
        print(f"{k:>26}: {v}")
    print("\nsample misses:")
    for m in misses:
        print("  " + m)
    if args.sample:
        print("\nrandom emitted facts:")
        for n, (content, said) in enumerate(random.Random(args.seed).sample(emitted, min(args.sample, len(emitted))), 1):
            print(f"  {n:3} {content!r}  <- {said!r}")


if __name__ == "__main__":
    main()
