"""Where a composite's batch step spends its time: its kernels' calls, and the Python and numpy around them.

Each method steps the rows ``specplug perf --batch`` builds (``_perf_batch._rows``: every row a
request at the same context) as the benchmark does. The kernels a step calls are wrapped where their
callers look them up (the lookups' batch kernels, the composites' choice and finishing kernels), so
each call's time is counted apart; what is left of the step is "python" (the step's checks, the
parts' Python around their kernels, the composite's arrays and calls). Each figure: the thread's CPU
time (``time.thread_time_ns``) per step, median over the steps after ``--skip``, then over
``--repeats``; a wrapper's own clock reads (two per call, well under a µs) count in its kernel.
suffix and ngram run alone too, for what they cost outside a composite. Run it with one thread:

  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/profile_composite.py \\
      --batch 128 --contexts 8k --workloads code-edit --steps 60 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import numpy as np

from specplug import BatchStep
from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _advance, _create_method, _rows
from specplug.proposers.composite import _choice, _composite
from specplug.proposers.lookup import _ngram_kernels, _suffix_kernels

#: the kernels timed apart: (module whose attribute the caller reads, attribute, name in the table)
KERNELS = (
    (_suffix_kernels, "step_batch", "suffix kernel"),
    (_ngram_kernels, "ngram_step_batch", "ngram kernel"),
    (_composite, "choose_and_finish", "choice kernel"),
    (_composite, "choose_batch", "choice kernel"),
    (_choice, "finish_rows", "finish kernel"),
)
CLOCK = time.thread_time_ns


def wrap_kernels(spent: dict[str, int]) -> None:
    """Replace each kernel in :data:`KERNELS` by a wrapper adding its calls' time to ``spent``."""
    for module, attribute, name in KERNELS:
        kernel = getattr(module, attribute)

        def timed(*args, kernel=kernel, name=name):
            start = CLOCK()
            try:
                return kernel(*args)
            finally:
                spent[name] += CLOCK() - start

        setattr(module, attribute, timed)


def profile(method: str, workload: str, context: int, batch: int, steps: int, skip: int, seed: int,
            spent: dict[str, int]) -> dict[str, float]:
    """µs per step of each piece (kernels, "python", "step" in all), medians over the steps after ``skip``."""
    k = 8
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed)
    proposer = _create_method(method)
    ids = list(range(batch))
    proposer.step_batch(BatchStep(ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                                  [(row, rows[row][0]) for row in ids]))
    position, new = [0] * batch, [np.empty(0, np.int64)] * batch
    limits = np.full(batch, k, dtype=np.int64)
    pieces: dict[str, list[int]] = defaultdict(list)
    for at in range(steps):
        step = step_of_pieces(ids, new, limits)
        spent.clear()
        start = CLOCK()
        got = proposer.step_batch(step)
        whole = CLOCK() - start
        if at >= skip:
            pieces["step"].append(whole)
            pieces["python"].append(whole - sum(spent.values()))
            for name in {name for _, _, name in KERNELS}:
                pieces[name].append(spent.get(name, 0))
        _advance(rows, got, position, new)
    return {name: statistics.median(values) / 1000 for name, values in pieces.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--contexts", default="8k", help="comma-separated sizes, e.g. 8k,64k")
    parser.add_argument("--workloads", default="code-edit")
    parser.add_argument("--methods", default="suffix,ngram,hybrid,adaptive")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--skip", type=int, default=5, help="warm-up steps left out of the medians")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    spent: dict[str, int] = defaultdict(int)
    wrap_kernels(spent)
    names = ["step", "suffix kernel", "ngram kernel", "choice kernel", "finish kernel", "python"]
    print(f"µs per step at batch {args.batch} (thread CPU time; median over steps, then over repeats)")
    print("| workload | context | method | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---:|" * len(names))
    for workload in args.workloads.split(","):
        for size in args.contexts.split(","):
            context = int(size.removesuffix("k")) * 1024 if size.endswith("k") else int(size)
            for method in args.methods.split(","):
                runs = [profile(method, workload, context, args.batch, args.steps, args.skip, seed, spent)
                        for seed in range(args.repeats)]
                cells = [f"{statistics.median(run[name] for run in runs):.1f}" for name in names]
                print(f"| {workload} | {size} | {method} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
