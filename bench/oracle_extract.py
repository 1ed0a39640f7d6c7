"""Output oracle for the rule path: every result of the extraction over a fixed set of texts, one line each.

Made for speed work on the engine (issue 14): record the output before a change, again after it, and compare
the two files; any difference is a change of behaviour, not only of speed. The texts are every distinct message
of bench_extract's mix (Switchboard, persona chat, injection set, team chat), the technical chat of eval_tech,
every persona line of Synthetic-Persona-Chat and every string of the rule files (examples, counter-examples); then
every persona-chat line as a turn with the line before it as the assistant's words, and every LoCoMo turn, extracted
with its session's date (temporal resolution) and, as a turn, with the previous speaker's message as the assistant's
words (confirmations, elliptical answers, references). Each line holds the whole result: the gate's verdict, the facts
with their explanations, hints, entities and relationships.

Usage: .venv/bin/python bench/oracle_extract.py OUT.txt [--data DIR]
       .venv/bin/python bench/oracle_extract.py OUT.txt --compare BEFORE.txt
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_extract import DATA, sources  # noqa: E402
from eval_tech import GOLD, TRAPS  # noqa: E402

from factforge.rules.extract import Extractor  # noqa: E402
from factforge.rules.rulefile import default_patterns_dir  # noqa: E402
from factforge.types import Extraction  # noqa: E402


# Messages are read as if sent at this moment, so relative dates resolve the same way on every run.
NOW = datetime(2026, 3, 14, 12, 0, tzinfo=timezone.utc)


def _locomo(data: Path) -> list[tuple[str, datetime | None, str | None]]:
    """(text, session date, previous turn) of every LoCoMo turn."""
    path = data / "locomo_dev.json"
    if not path.exists():
        return []
    out: list[tuple[str, datetime | None, str | None]] = []
    for conv in json.loads(path.read_text(encoding="utf-8")):
        c = conv["conversation"]
        n = 1
        while f"session_{n}_date_time" in c:
            turns = c.get(f"session_{n}") or []
            when = datetime.strptime(c[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
            prior = None
            for turn in turns:
                out.append((turn["text"], when, prior))
                prior = turn["text"]
            n += 1
    return out


def _personas(data: Path) -> list[str]:
    """Every persona line of Synthetic-Persona-Chat (both speakers' columns)."""
    path = data / "spc_valid.csv"
    if not path.exists():
        return []
    with path.open(encoding="utf-8") as fh:
        return [line.strip() for row in csv.DictReader(fh) for column in ("user 1 personas", "user 2 personas")
                for line in row[column].splitlines() if line.strip()]


def _chat_turns(data: Path) -> list[tuple[str, str | None]]:
    """(line, the line before it) of every Synthetic-Persona-Chat conversation."""
    path = data / "spc_valid.csv"
    if not path.exists():
        return []
    out: list[tuple[str, str | None]] = []
    with path.open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            prior = None
            for line in row["Best Generated Conversation"].splitlines():
                if ":" in line:
                    text = line.split(":", 1)[1].strip()
                    if text:
                        out.append((text, prior))
                        prior = text
    return out


def _rule_strings() -> list[str]:
    """Every string of the shipped rule files' examples and counter-examples (and their ``text`` fields)."""
    out: list[str] = []

    def walk(node: object, wanted: bool) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, wanted or key in ("examples", "counter_examples", "text"))
        elif isinstance(node, list):
            for value in node:
                walk(value, wanted)
        elif isinstance(node, str) and wanted:
            out.append(node)

    for path in sorted(default_patterns_dir().glob("*.yaml")):
        walk(yaml.safe_load(path.read_text(encoding="utf-8")), False)
    return out


def _line(kind: str, text: str, x: Extraction) -> str:
    return json.dumps([kind, text, repr(x)], ensure_ascii=False)


def record(out: Path, data: Path) -> int:
    ex = Extractor()
    texts = list(dict.fromkeys(sources(data) + [t for t, _ in GOLD] + TRAPS + _personas(data) + _rule_strings()))
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for t in texts:
            fh.write(_line("msg", t, ex.extract(t, timestamp=NOW)) + "\n")
            n += 1
        for t, prior in _chat_turns(data):
            fh.write(_line("chat_turn", t, ex.extract_turn(t, timestamp=NOW, prior_assistant=prior)) + "\n")
            n += 1
        for t, when, prior in _locomo(data):
            fh.write(_line("dated", t, ex.extract(t, timestamp=when)) + "\n")
            fh.write(_line("turn", t, ex.extract_turn(t, timestamp=when, prior_assistant=prior)) + "\n")
            n += 2
    return n


def compare(got: Path, want: Path) -> int:
    a = got.read_text(encoding="utf-8").splitlines()
    b = want.read_text(encoding="utf-8").splitlines()
    diffs = [(i, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y]
    for i, x, y in diffs[:20]:
        print(f"line {i + 1}:\n  before: {y}\n  after:  {x}")
    if len(a) != len(b):
        print(f"{len(b)} lines before, {len(a)} after")
    print(f"{len(diffs)} of {len(b)} results differ")
    return 1 if diffs or len(a) != len(b) else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--compare", type=Path, help="an earlier output to compare with")
    args = ap.parse_args()
    n = record(args.out, args.data)
    print(f"{n} results written to {args.out}")
    if args.compare:
        sys.exit(compare(args.out, args.compare))


if __name__ == "__main__":
    main()
