"""Would the local embedder (all-MiniLM-L6-v2 int8, the only model factforge has offline) tell true facts from invented
ones among those that lexical grounding rejects? (issue 14, stop 40)

For each case set named, every fact the validator rejects is embedded ("User" read as "I", "their" as "my") with each
sentence of its turn and the whole turn; its score is the best cosine similarity. Reports the AUC of that score (true
facts against invented ones) and, for thresholds, how many rejected true facts a rule "pass when the score >= t" would
rescue and how many rejected invented facts it would let through - the two errors the issue asks to weigh.

Usage: .venv/bin/python bench/eval_embed_judge.py tune36 tune38 tune39 tune40 [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

import numpy as np
import regex

from factforge.models.embed import LocalEmbedder
from factforge.models.validate import validate_items
from factforge.settings import Settings

sys.path.insert(0, str(Path(__file__).parent))
from eval_validate import CASES, SETS  # noqa: E402

_SENTENCE = regex.compile(r"[^\n.!?]+[.!?]*")


def _first_person(fact: str) -> str:
    text = regex.sub(r"\bUser's\b", "my", fact)
    text = regex.sub(r"\bUser\b", "I", text)
    return regex.sub(r"\b(?:their|them)\b", "my", text)


def _auc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sets", nargs="+")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = Settings(home=Path("."))
    embedder = LocalEmbedder()
    rejected: list[tuple[str, str, str]] = []  # (kind, fact, turn)
    for name in args.sets:
        cases, said_at = CASES, None
        if name in SETS:
            module = importlib.import_module(SETS[name][0])
            cases, said_at = getattr(module, SETS[name][1]), getattr(module, "SAID_AT", None)
        for turn, true, invented in cases:
            for kind, items in (("true", true), ("invented", invented)):
                for content, category in items:
                    raw = {"facts": [{"content": content, "category": category, "confidence": 0.8}]}
                    facts, _, _, _ = validate_items(raw, turn, timestamp=said_at, settings=settings)
                    if not facts:
                        rejected.append((kind, content, turn))
    scores: dict[str, list[float]] = {"true": [], "invented": []}
    for kind, content, turn in rejected:
        pieces = [turn, *(s.strip() for s in _SENTENCE.findall(turn) if s.strip())]
        vectors = np.array(embedder.embed([_first_person(content), *pieces]), dtype=np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        scores[kind].append(float(np.max(vectors[1:] @ vectors[0])))
    res = {"rejected_true": len(scores["true"]), "rejected_invented": len(scores["invented"]),
           "auc": round(_auc(scores["true"], scores["invented"]), 3),
           "thresholds": {f"{t:.2f}": {"true_rescued": sum(s >= t for s in scores["true"]),
                                       "invented_let_through": sum(s >= t for s in scores["invented"])}
                          for t in (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)}}
    print(json.dumps(res) if args.json else json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
