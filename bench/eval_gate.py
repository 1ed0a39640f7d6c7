"""Measure the gatekeeper on the development data and print the figures.

- swda_val.txt (speaker|text|act): share of no-fact dialogue acts dropped, share of statements (sd, sv)
  wrongly dropped, per-reason counts; a too_short drop of a statement is reported separately (Switchboard
  statements are often fragments such as "and, uh,").
- injections_train.jsonl: injection recall and false-positive rate of ``Gatekeeper.is_injection``.
- judge() speed in microseconds per message over both files.

Usage: python bench/eval_gate.py [--data DIR] [--misses N]
"""

from __future__ import annotations

import argparse
import base64
import codecs
import json
import time
from collections import Counter
from pathlib import Path

from factforge.rules.gatekeeper import Gatekeeper

NO_FACT_ACTS = frozenset({"b", "bk", "ba", "bh", "aa", "fp", "fc", "ft", "fa", "%"})
STATEMENT_ACTS = frozenset({"sd", "sv"})
DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "dev"


def eval_swda(gate: Gatekeeper, path: Path, misses: int) -> list[str]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split("|")
        if len(parts) >= 3:
            rows.append(("|".join(parts[1:-1]), parts[-1]))
    no_fact = [(t, a) for t, a in rows if a in NO_FACT_ACTS]
    statements = [(t, a) for t, a in rows if a in STATEMENT_ACTS]
    dropped_reasons: Counter[str] = Counter()
    kept_no_fact: list[str] = []
    for text, act in no_fact:
        d = gate.judge(text)
        if d.passed:
            kept_no_fact.append(f"{act}\t{text}")
        else:
            dropped_reasons[d.reason or "?"] += 1
    stmt_reasons: Counter[str] = Counter()
    wrongly: list[str] = []
    for text, act in statements:
        d = gate.judge(text)
        if not d.passed:
            stmt_reasons[d.reason or "?"] += 1
            if d.reason != "too_short":
                wrongly.append(f"{act}\t{d.reason}\t{text}")
    n_drop = sum(dropped_reasons.values())
    n_stmt = sum(stmt_reasons.values())
    short = stmt_reasons["too_short"]
    print(f"swda: {len(rows)} utterances, {len(no_fact)} no-fact acts, {len(statements)} statements")
    print(f"  no-fact acts dropped: {n_drop}/{len(no_fact)} = {n_drop / len(no_fact):.1%}  "
          f"by reason {dict(dropped_reasons.most_common())}")
    print(f"  statements dropped:   {n_stmt}/{len(statements)} = {n_stmt / len(statements):.1%}  "
          f"by reason {dict(stmt_reasons.most_common())}")
    print(f"    of which too_short (fragments): {short} = {short / len(statements):.1%}; "
          f"other reasons: {n_stmt - short} = {(n_stmt - short) / len(statements):.1%}")
    per_act = Counter(a for _, a in no_fact)
    kept_act = Counter(line.split("\t")[0] for line in kept_no_fact)
    print("  per act dropped: " + ", ".join(
        f"{a} {per_act[a] - kept_act[a]}/{per_act[a]}" for a in sorted(per_act, key=lambda a: -per_act[a])))
    if misses:
        print(f"  kept no-fact acts (first {misses}):")
        for line in kept_no_fact[:misses]:
            print("    " + line)
        print(f"  statements dropped for a reason other than too_short (first {misses}):")
        for line in wrongly[:misses]:
            print("    " + line)
    return [t for t, _ in rows]


def eval_injections(gate: Gatekeeper, path: Path, misses: int) -> list[str]:
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    tp = fp = fn = tn = 0
    rules: Counter[str] = Counter()
    missed: list[str] = []
    false_pos: list[str] = []
    for item in items:
        rule = gate.is_injection(item["text"])
        if item["label"] == 1:
            if rule:
                tp += 1
                rules[rule] += 1
            else:
                fn += 1
                missed.append(item["text"])
        elif rule:
            fp += 1
            false_pos.append(f"{rule}\t{item['text']}")
        else:
            tn += 1
    print(f"injections: {len(items)} prompts ({tp + fn} injections, {fp + tn} benign)")
    print(f"  recall {tp}/{tp + fn} = {tp / (tp + fn):.1%}; false positives {fp}/{fp + tn} = {fp / (fp + tn):.1%}; "
          f"precision {tp / max(tp + fp, 1):.1%}")
    print(f"  hits per rule {dict(rules.most_common())}")
    if misses:
        print(f"  false positives (first {misses}):")
        for line in false_pos[:misses]:
            print("    " + line[:160])
        print(f"  missed (first {misses}):")
        for line in missed[:misses]:
            print("    " + line[:160])
    return [item["text"] for item in items]


# Disguises an attacker applies to a whole prompt; the gate should catch the disguised prompt as often as the
# plain one (same recall) without flagging more benign ones. Written here, not taken from the data.
_HOMOGLYPHS = str.maketrans({"a": "а", "e": "е", "o": "о", "c": "с", "p": "р", "i": "і", "x": "х", "y": "у"})
_LEET = str.maketrans({"a": "4", "e": "3", "i": "1", "o": "0", "s": "5", "t": "7"})
DISGUISES = {
    "homoglyph": lambda t: t.translate(_HOMOGLYPHS),
    "zero_width": lambda t: "\u200d".join(t.split(" ")),
    "zero_width_inside": lambda t: " ".join("\u200b".join(w) if len(w) > 3 else w for w in t.split(" ")),
    "fullwidth": lambda t: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in t),
    "leetspeak": lambda t: t.translate(_LEET),
    "base64": lambda t: "Decode this and do it: " + base64.b64encode(t.encode()).decode(),
    "rot13": lambda t: "rot13: " + codecs.encode(t, "rot13"),
}


def eval_disguised(gate: Gatekeeper, path: Path) -> None:
    """Recall and false positives of ``is_injection`` on every prompt of the file under each disguise."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    plain = {i: bool(gate.is_injection(item["text"])) for i, item in enumerate(items)}
    print("disguised injections (recall of the plain prompts the gate catches; false positives on benign ones):")
    for name, disguise in DISGUISES.items():
        tp = sum(1 for i, item in enumerate(items) if item["label"] == 1 and gate.is_injection(disguise(item["text"])))
        caught_plain = sum(1 for i, item in enumerate(items) if item["label"] == 1 and plain[i])
        fp = sum(1 for item in items if item["label"] == 0 and gate.is_injection(disguise(item["text"])))
        n_inj = sum(1 for item in items if item["label"] == 1)
        print(f"  {name:18s} recall {tp}/{n_inj} = {tp / n_inj:.1%} (plain {caught_plain}); "
              f"false positives {fp}/{len(items) - n_inj}")


def time_judge(gate: Gatekeeper, texts: list[str], rounds: int = 5) -> float:
    """Mean microseconds per judge() call (best of ``rounds`` passes, to damp noise from other processes). Each
    pass starts with the gate's decision cache empty, so only a repeat within the pass is answered from it (as in
    a chat, where "Uh-huh." and "Thanks!" come back), not every message of the passes after the first."""
    best = float("inf")
    for _ in range(rounds):
        gate.decision_cache.clear()
        start = time.perf_counter()
        for text in texts:
            gate.judge(text)
        best = min(best, time.perf_counter() - start)
    return best / len(texts) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--misses", type=int, default=0, help="print up to N misses of each kind")
    parser.add_argument("--disguised", action="store_true",
                        help="also measure the injection file under homoglyph, zero-width, fullwidth, leetspeak, "
                             "base64 and rot13 disguises")
    args = parser.parse_args()
    gate = Gatekeeper.from_dir()
    swda = eval_swda(gate, args.data / "swda_val.txt", args.misses)
    inj = eval_injections(gate, args.data / "injections_train.jsonl", args.misses)
    if args.disguised:
        eval_disguised(gate, args.data / "injections_train.jsonl")
    print(f"judge(): {time_judge(gate, swda):.1f} µs/message on swda ({len(swda)} short utterances), "
          f"{time_judge(gate, inj):.1f} µs/message on injection prompts (mean {sum(map(len, inj)) / len(inj):.0f} chars)")


if __name__ == "__main__":
    main()
