"""How a suffix batch step's cold time splits between drafting and the rest (acceptance, inserts, Python).

Two suffix proposers start the same rows (``specplug perf --batch``'s: every row a request at the
same context) and take the same new tokens each step, the ones the first one's drafts let through:

- "whole": ``step_batch`` as the benchmark calls it (limit ``-k`` a row);
- "no draft": ``step_batch`` with every limit 0, so it counts acceptance and appends and indexes
  the new tokens, and drafts nothing.

Each is timed right after streaming over ``--evict`` MiB (cold), then called again at once with no
new tokens (warm: the whole one drafts again on warm caches; the other does its Python and
bookkeeping alone). The whole step's cold time less the no-draft one's is what drafting costs
cold; the no-draft one's cold time less its warm one is about what its inserts cost cold, plus
its Python's own cold misses. The thread's CPU time per row, median over the timed steps. Run it
with one thread:

  NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_cold_step_parts.py \\
      --batch 128 --context 65536 --workloads code-edit,text --steps 40
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import specplug
from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _advance, _rows

sys.path.insert(0, str(Path(__file__).parent))
from profile_suffix import _start  # noqa: E402

CLOCK = time.thread_time_ns
COLUMNS = ("whole cold", "no draft cold", "whole warm", "no draft warm")


def parts(workload: str, context: int, batch: int, steps: int, k: int, skip: int, evict: np.ndarray) -> dict[str, float]:
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    ids = list(range(batch))
    subjects = {"no draft": (specplug.create("suffix"), np.zeros(batch, dtype=np.int64)),
                "whole": (specplug.create("suffix"), np.full(batch, k, dtype=np.int64))}
    for proposer, _ in subjects.values():
        _start(proposer, ids, rows)
    nothing = [np.empty(0, np.int64)] * batch
    position, new = [0] * batch, nothing
    times: dict[str, list[int]] = {name: [] for name in COLUMNS}
    for index in range(steps):
        for name, (proposer, limits) in subjects.items():  # "whole" last: its drafts set the next tokens
            evict += 1  # read and write every line
            step = step_of_pieces(ids, new, limits)
            start = CLOCK()
            got = proposer.step_batch(step)
            cold = CLOCK() - start
            again = step_of_pieces(ids, nothing, limits)
            start = CLOCK()
            proposer.step_batch(again)
            warm = CLOCK() - start
            if index >= skip:
                times[f"{name} cold"].append(cold)
                times[f"{name} warm"].append(warm)
        new = list(nothing)
        _advance(rows, got, position, new)
    return {name: statistics.median(ns) / 1000 / batch for name, ns in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--context", type=int, default=65536)
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--skip", type=int, default=5, help="first steps not timed (warm-up)")
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--evict", type=int, default=64, metavar="MB", help="MiB streamed over before each cold step")
    args = parser.parse_args()
    evict = np.zeros(args.evict << 20, dtype=np.uint8)
    print(f"µs per row, batch {args.batch}, context {args.context}, median of {args.steps - args.skip} steps")
    print("| workload | " + " | ".join(COLUMNS) + " |")
    print("|---|" + "---:|" * len(COLUMNS))
    for workload in args.workloads.split(","):
        us = parts(workload, args.context, args.batch, args.steps, args.k, args.skip, evict)
        print(f"| {workload} | " + " | ".join(f"{us[name]:.2f}" for name in COLUMNS) + " |", flush=True)


if __name__ == "__main__":
    main()
