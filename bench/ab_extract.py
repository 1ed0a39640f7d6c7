"""Two checkouts' rule paths timed side by side: the same messages in short turns, so a busy host's load falls on both.

On a shared host, separate ``bench_extract.py`` runs a minute apart see different load (one run may lose a third of
its speed to a neighbour's burst), which hides a 5-10% change. Here one worker process per checkout (each importing
its own ``factforge`` through ``PYTHONPATH``, its rules warmed and 500 messages extracted first) extracts the same
chunk of 500 of bench_extract's messages in turn, the order swapped every chunk; each chunk's CPU time (this thread's)
is compared with the other checkout's on the same chunk moments apart.

Usage: .venv/bin/python bench/ab_extract.py OLD_DIR NEW_DIR [--passes 3] [--data DIR]
Prints msg per CPU-second and p50/p95/p99 per checkout, and the median (and quartiles) of the old/new CPU ratio per
chunk (above 1: the new code is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

CHUNK = 500
MESSAGES = 12000

WORKER = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1] + "/bench")
from bench_extract import corpus
from factforge.rules.extract import Extractor
ex = Extractor()
msgs = corpus(int(sys.argv[3]), data=Path(sys.argv[2]))
ex.rules.warm()
for t in msgs[:500]:
    ex.extract(t)
print("ready", flush=True)
for line in sys.stdin:
    i, n = map(int, line.split())
    times = []
    for t in msgs[i * n:(i + 1) * n]:
        start = time.thread_time_ns()
        ex.extract(t)
        times.append(time.thread_time_ns() - start)
    print(json.dumps(times), flush=True)
"""


def _start(checkout: Path, data: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    proc = subprocess.Popen([sys.executable, "-c", WORKER, str(checkout), str(data), str(MESSAGES)], env=env,
                            cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"the worker for {checkout} did not start")
    return proc


def _chunk(proc: subprocess.Popen[str], i: int) -> list[int]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{i} {CHUNK}\n")
    proc.stdin.flush()
    return list(json.loads(proc.stdout.readline()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "dev")
    args = ap.parse_args()
    workers = {"old": _start(args.old.resolve(), args.data), "new": _start(args.new.resolve(), args.data)}
    times: dict[str, list[int]] = {"old": [], "new": []}
    ratios = []
    for rep in range(args.passes):
        for i in range(MESSAGES // CHUNK):
            spent = {}
            for side in ("old", "new") if (i + rep) % 2 == 0 else ("new", "old"):
                got = _chunk(workers[side], i)
                spent[side] = sum(got)
                times[side] += got
            ratios.append(spent["old"] / spent["new"])
    for side, got in times.items():
        q = statistics.quantiles(got, n=100)
        print(f"{side}: {round(len(got) / (sum(got) / 1e9)):,} msg per CPU-s, p50 / p95 / p99 "
              f"{q[49] / 1e3:.1f} / {q[94] / 1e3:.1f} / {q[98] / 1e3:.1f} us")
    quartiles = statistics.quantiles(ratios, n=4)
    print(f"old/new CPU per chunk: median {statistics.median(ratios):.3f}, quartiles {quartiles[0]:.3f} / "
          f"{quartiles[2]:.3f}, {len(ratios)} chunks")
    for proc in workers.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()


if __name__ == "__main__":
    main()
