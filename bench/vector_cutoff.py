"""Measure the cosine distance cut-off of search's vector half (factforge.storage.search.VECTOR_MAX_DISTANCE).

On LoCoMo (../shared/data/dev/locomo_dev.json; measurement only, never copied into the repo): every turn goes
through the rule path (no LLM), each stored-fact text is embedded with the default local embedder, and each
question is compared with every fact of its conversation. *Relevant* facts come from the question's evidence
turns. For a range of cut-offs it prints the share of answerable questions whose best relevant fact is kept
(recall of the vector half) and the share of each question's 10 nearest facts that the cut-off drops (mostly
unrelated ones: a question has 1-3 evidence turns among hundreds).

    .venv/bin/python bench/vector_cutoff.py [path/to/locomo_dev.json]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data" / "dev" / "locomo_dev.json"


def main() -> int:
    from factforge.models.embed import make_embedder
    from factforge.rules.extract import Extractor
    from factforge.settings import Settings

    settings = Settings.from_env({"FACTFORGE_LLM": "off"})
    extractor = Extractor(settings)
    embedder = make_embedder(settings)
    assert embedder is not None
    best_relevant: list[float] = []
    best_rank: list[int] = []
    nearest: list[np.ndarray] = []
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else DATA
    for conv in json.loads(data.read_text()):
        facts: list[tuple[str, str]] = []  # (dia_id, fact text)
        c = conv["conversation"]
        for key, turns in c.items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for turn in turns:
                for fact in extractor.extract(turn["text"]).facts:
                    facts.append((turn["dia_id"], fact.content))
        vecs = np.asarray(embedder.embed([t for _, t in facts]), dtype=np.float32)
        questions = [q for q in conv["qa"] if q.get("category") != 5 and q.get("evidence")]
        qvecs = np.asarray(embedder.embed([q["question"] for q in questions]), dtype=np.float32)
        dist = 1.0 - qvecs @ vecs.T  # vectors are normalised: cosine distance
        for qi, q in enumerate(questions):
            rel = [i for i, (dia, _) in enumerate(facts) if dia in set(q["evidence"])]
            if rel:
                best_relevant.append(float(dist[qi, rel].min()))
                best_rank.append(int((dist[qi] < dist[qi, rel].min()).sum()))  # 0 = the nearest fact
            nearest.append(np.sort(dist[qi])[:10])
        print(f"{conv['sample_id']}: {len(facts)} facts, {len(questions)} questions", file=sys.stderr)
    rel = np.asarray(best_relevant)
    rank = np.asarray(best_rank)
    top = np.concatenate(nearest)
    print(f"questions with a stored evidence fact: {len(rel)}; best relevant distance p50 {np.median(rel):.3f}, "
          f"p90 {np.quantile(rel, 0.9):.3f}, p95 {np.quantile(rel, 0.95):.3f}")
    print(f"10 nearest facts of each question: distance p10 {np.quantile(top, 0.1):.3f}, p50 {np.median(top):.3f}")
    print(f"vector recall@10 (a relevant fact among the 10 nearest) without a cut-off: {np.mean(rank < 10):.1%}")
    print("cut-off  best relevant kept  recall@10  top-10 neighbours dropped  hits left of 10 (mean)")
    for cut in np.arange(0.40, 0.96, 0.05):
        left = (np.asarray(nearest) <= cut).sum(axis=1).mean()
        print(f"{cut:7.2f}  {np.mean(rel <= cut):18.1%}  {np.mean((rank < 10) & (rel <= cut)):9.1%}  "
              f"{np.mean(top > cut):25.1%}  {left:22.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
