"""Paired benchmark of the composites' batch choice: the three numba calls and their numpy
arrays of an earlier commit (``score_bands_of_rows``, ``linear_step_times``, ``choose_rows``,
loaded from that commit's files under other names) against the one kernel ``choose_batch``.
The old calls run inside this checkout's ``_choose``, so the script runs only from a checkout
whose ``choose_rows`` takes the arguments ``ed1cff7``'s did: before the change that priced the
rows where they are chosen (``choose_rows`` gained ``widest``, ``price_here`` and ``pricing``);
since then ``scripts/bench_composite_glue.py`` pairs the composites with their old kernels.

suffix, and each composite with the old choice and with the new, step in turn on the same rows
(the perf harness's, every row at the same context; the order rotates each step), each step's
CPU time of the thread kept (``time.thread_time_ns``; the machine is shared). The two copies of a
composite must draft the same at every step (asserted).

Usage (one thread; about a minute):
  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_choose_batch.py \
      --before ed1cff7 --batch 128 --workloads code-edit,text --steps 150
"""

from __future__ import annotations

import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from specplug.proposers.composite import _composite

sys.path.insert(0, str(Path(__file__).parent))
from _before import module_at, paired_parser  # noqa: E402
from _paired_kernel import Stepper  # noqa: E402
from bench_suffix_lockstep import KERNEL as SUFFIX_KERNEL  # noqa: E402

from specplug.lab._perf_batch import _create_method, _rows  # noqa: E402
from specplug.proposers.lookup import _suffix_kernels as kernels  # noqa: E402


def _old_choice(choice, step_times, parts):
    """``_choose_batch`` as the batch step did it before: bands, extended rows, then ``_choose``
    with the old module's kernels (its numpy arrays made per step)."""

    def choose_batch(self, slots, new_tokens, offsets, limits, tokens, lengths, scores):
        extended = offsets[1:] > offsets[:-1]
        bands = parts.score_bands_of_rows(scores, lengths, limits) if len(scores) else lengths.copy()
        return self._choose(slots, new_tokens, offsets, extended, limits, tokens, lengths, bands)

    def choose(self, *args):
        saved = _composite._choice.choose_rows, _composite.linear_step_times
        _composite._choice.choose_rows, _composite.linear_step_times = choice.choose_rows, step_times.linear_step_times
        try:
            return _composite.CompositeProposer._choose(self, *args)
        finally:
            _composite._choice.choose_rows, _composite.linear_step_times = saved

    return choose_batch, choose


def _timed(choose, times: list[int]):
    """``choose`` (a ``_choose_batch``), each call's thread CPU time appended to ``times``."""

    def timed(self, *args):
        t0 = time.thread_time_ns()
        out = choose(self, *args)
        times.append(time.thread_time_ns() - t0)
        return out

    return timed


def run(workload: str, batch: int, context: int, steps: int, k: int, skip: int, names: list[str], old) -> None:
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    new_kernel = kernels.step_batch
    choice_times = {(name, label): [] for name in names for label in ("old", "new")}
    subjects = {("suffix", "-"): Stepper(SUFFIX_KERNEL, _create_method("suffix"), new_kernel, rows, k)}
    for name in names:
        for label in ("old", "new"):
            proposer = _create_method(name)
            if label == "old":
                proposer._choose = types.MethodType(old[1], proposer)
            choose = old[0] if label == "old" else type(proposer)._choose_batch
            proposer._choose_batch = types.MethodType(_timed(choose, choice_times[(name, label)]), proposer)
            subjects[(name, label)] = Stepper(SUFFIX_KERNEL, proposer, new_kernel, rows, k)
    keys = list(subjects)
    for index in range(steps):
        for key in keys[index % len(keys):] + keys[: index % len(keys)]:
            subjects[key].step(index >= skip)
        if index < skip:
            for times in choice_times.values():
                times.clear()
        for name in names:  # the same drafts: they stay in step
            assert subjects[(name, "old")].position == subjects[(name, "new")].position, (name, index)
    us = {key: statistics.median(s.times) / 1000 / batch for key, s in subjects.items()}
    suffix = us[("suffix", "-")]
    choice = {key: statistics.median(times) / 1000 / batch for key, times in choice_times.items()}
    print(f"| {workload} | {batch} | suffix | {suffix:.2f} | | | | | |", flush=True)
    for name in names:
        before, after = us[(name, "old")], us[(name, "new")]
        print(f"| {workload} | {batch} | {name} | {before:.2f} | {after:.2f} | {before / suffix:.2f} | {after / suffix:.2f} | "
              f"{choice[(name, 'old')]:.3f} | {choice[(name, 'new')]:.3f} |", flush=True)


def main() -> None:
    parser = paired_parser(__doc__, before="ed1cff7", what="choice kernels", steps=150)
    parser.add_argument("--composites", default="adaptive,hybrid")
    args = parser.parse_args()
    import inspect

    if "pricing" in inspect.signature(_composite._choice.choose_rows.py_func).parameters:
        raise SystemExit("this checkout's choose_rows prices its rows itself (widest, price_here, pricing), which the "
                         "--before kernels cannot take: run scripts/bench_composite_glue.py, or this script from an "
                         "older checkout")
    with tempfile.TemporaryDirectory() as folder:
        choice = module_at(args.before, "specplug/proposers/composite/_choice.py", "_choice_before", Path(folder))
        step_times = module_at(args.before, "specplug/proposers/composite/_step_times.py", "_step_times_before", Path(folder))
        parts = module_at(args.before, "specplug/proposers/composite/_parts.py", "_parts_before", Path(folder))
        old = _old_choice(choice, step_times, parts)
        print("| workload | batch | proposer | before µs/row | after µs/row | before × suffix | after × suffix "
              "| choice before µs/row | choice after µs/row |")
        print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
        for workload in args.workloads.split(","):
            run(workload, args.batch, args.context, args.steps, args.k, args.skip, args.composites.split(","), old)


if __name__ == "__main__":
    main()
