"""Paired benchmark of ngram's store: the proposer of ``--before`` (read from git; default 9da281b:
every request's arrays in a numba typed list, four unboxings of a tuple per row a step) against
this checkout's (one int32 pool, a block per request, reached by offset), alone and as adaptive's
ngram part.

Per workload, suffix, ngram and adaptive step in turn on the same rows (the perf harness's, every
row at the same context), ngram and adaptive each once with the old proposer and once with the
new, the order rotated each step; old and new are asserted to draft, score and accept alike at
every step. Each step's CPU time of the thread (``time.thread_time_ns``: the machine is shared) is
kept; medians after ``--skip`` warm-up steps, µs per row, and adaptive over suffix.

Usage (one thread; about a minute at 128 rows):
  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_ngram_pool.py \\
      --batch 128 --context 8192 --workloads code-edit,text --steps 60
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import specplug
from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _advance, _BatchSubject, _rows

sys.path.insert(0, str(Path(__file__).parent))
from _before import module_at, paired_parser, source_at  # noqa: E402

#: the commit whose ngram proposer (arrays in a typed list) is measured against
BEFORE = "9da281b"


def old_ngram_class(commit: str, folder: Path):
    """``NgramProposer`` as it was at ``commit``, with that commit's kernels and slot table
    (``_row_drafts``: its ``SlotTable.begin_step`` gives what that proposer unpacks)."""
    module_at(commit, "specplug/proposers/lookup/_ngram_kernels.py", "_ngram_kernels_before", folder)
    module_at(commit, "specplug/proposers/_row_drafts.py", "_row_drafts_before", folder)
    text = source_at(commit, "specplug/proposers/lookup/ngram.py").replace(
        "from specplug.proposers import _ngram_kernels as kernels", "import _ngram_kernels_before as kernels"
    ).replace("from specplug.proposers._row_drafts import", "from _row_drafts_before import").replace("@hookimpl", "")
    return module_at(commit, "specplug/proposers/lookup/ngram.py", "_ngram_before", folder, text=text).NgramProposer


class Stepper(_BatchSubject):
    """A proposer stepping through the rows as the perf harness does (on its own drafts); only
    ``step_batch`` is timed, in the thread's CPU time."""

    def __init__(self, proposer, rows, k: int) -> None:
        super().__init__(proposer, rows, k)
        self.times: list[int] = []
        self.last = None

    def step(self, timed: bool) -> None:
        step = step_of_pieces(self.ids, self.new, self.limits)
        t0 = time.thread_time_ns()
        got = self.proposer.step_batch(step)
        ns = time.thread_time_ns() - t0
        if timed:
            self.times.append(ns)
        self.last = got
        _advance(self.rows, got, self.position, self.new)


def time_in_turn(subjects: dict, steps: int, skip: int, batch: int, paired: tuple[str, ...]) -> dict:
    """Step every subject in turn (the order rotated each step, so none always runs on a warm cache),
    the ``(name, "old")`` and ``(name, "new")`` of each paired name checked equal at every step;
    the median µs per row of each subject's timed steps."""
    keys = list(subjects)
    for index in range(steps):
        for key in keys[index % len(keys):] + keys[: index % len(keys)]:
            subjects[key].step(index >= skip)
        for name in paired:
            _same(subjects[(name, "old")].last, subjects[(name, "new")].last)
    return {key: statistics.median(s.times) / 1000 / batch for key, s in subjects.items()}


def _same(a, b) -> None:
    assert a.tokens.tolist() == b.tokens.tolist() and np.array_equal(a.lengths, b.lengths)
    assert np.array_equal(a.accepted, b.accepted) and np.array_equal(a.scores, b.scores, equal_nan=True)
    assert list(a.sources) == list(b.sources)


def run(workload: str, batch: int, context: int, steps: int, k: int, skip: int, old_class) -> None:
    from specplug.proposers.lookup.ngram import NgramOptions

    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    subjects = {
        ("suffix", "-"): Stepper(specplug.create("suffix"), rows, k),
        ("ngram", "old"): Stepper(old_class(NgramOptions()), rows, k),
        ("ngram", "new"): Stepper(specplug.create("ngram"), rows, k),
        ("adaptive", "old"): Stepper(specplug.create("adaptive", candidates=["suffix", old_class(NgramOptions())]), rows, k),
        ("adaptive", "new"): Stepper(specplug.create("adaptive"), rows, k),
    }
    us = time_in_turn(subjects, steps, skip, batch, ("ngram", "adaptive"))
    suffix = us[("suffix", "-")]
    load = "-".join(f"{value:.1f}" for value in os.getloadavg()[:1])
    print(f"| {workload} | {batch} | {steps - skip} | {suffix:.2f} | {us[('ngram', 'old')]:.2f} | {us[('ngram', 'new')]:.2f} | "
          f"{us[('ngram', 'new')] / us[('ngram', 'old')]:.2f} | {us[('adaptive', 'old')]:.2f} | {us[('adaptive', 'new')]:.2f} | "
          f"{us[('adaptive', 'new')] / us[('adaptive', 'old')]:.2f} | {us[('adaptive', 'old')] / suffix:.2f} | "
          f"{us[('adaptive', 'new')] / suffix:.2f} | {load} |", flush=True)


def main() -> None:
    args = paired_parser(__doc__, before=BEFORE, what="ngram proposer", steps=60).parse_args()
    print("| workload | batch | steps | suffix µs/row | ngram old | ngram new | new ÷ old | adaptive old | adaptive new | "
          "new ÷ old | old × suffix | new × suffix | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        old_class = old_ngram_class(args.before, Path(folder))
        for workload in args.workloads.split(","):
            run(workload, args.batch, args.context, args.steps, args.k, args.skip, old_class)


if __name__ == "__main__":
    main()
