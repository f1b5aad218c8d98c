"""The harness of the paired kernel benchmarks (scripts/bench_suffix_lockstep.py,
scripts/bench_ngram_lockstep.py): a lookup's batch kernel of an earlier commit (read from git)
against this checkout's, swapped into the lookup's kernel module in turn, on the same rows.

Two proposers get the same rows (the perf harness's, every row at the same context) and step in
turn, one with the old kernel swapped in, one with the new; their drafts, scores and acceptance are
asserted equal at every step, and each step's CPU time of the thread (``time.thread_time_ns``, not
the wall clock: the machine is shared) is kept. The order alternates step by step, so drift hits
both alike. ``--composites`` times composites beside suffix instead, each with either kernel.
``--evict MB`` streams over a buffer of that size before each timed step (untimed), so both kernels
run on cold caches, as when other subjects step in between (``specplug perf --interleave``).
"""

from __future__ import annotations

import argparse
import inspect
import re
import statistics
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specplug._batch import BatchStep
from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _advance, _BatchSubject, _rows

sys.path.insert(0, str(Path(__file__).parent))
from _before import module_at, paired_parser  # noqa: E402


@dataclass(frozen=True)
class KernelUnderTest:
    """A lookup's batch kernel: ``attribute`` of ``module`` (its file ``path``), which the proposer
    ``method`` reads at each call, so swapping the attribute swaps the kernel."""

    method: str
    module: types.ModuleType
    attribute: str
    path: str
    nan_scores: bool = False  # whether its scores may hold NaN (equal when both are NaN)

    def current(self):
        return getattr(self.module, self.attribute)

    def swap_in(self, kernel) -> None:
        setattr(self.module, self.attribute, kernel)

    def before(self, commit: str, folder: Path):
        """The kernel as it was at ``commit``; it must take the same arguments as this checkout's."""
        name = f"{Path(self.path).stem}_before"
        old = getattr(module_at(commit, self.path, name, folder), self.attribute)
        theirs, ours = (inspect.signature(kernel.py_func).parameters for kernel in (old, self.current()))
        if list(theirs) != list(ours):
            raise SystemExit(f"--before {commit}: its {self.attribute} takes ({', '.join(theirs)}), this checkout's "
                             f"({', '.join(ours)}); give a commit whose kernel takes the same arguments")
        return old


class Evictor:
    """Streams over a buffer of ``megabytes`` before a timed step (untimed), so the step finds its
    state in memory rather than in the caches, as after an engine's other work (0: nothing)."""

    def __init__(self, megabytes: int) -> None:
        self.buffer = np.zeros(megabytes << 20, dtype=np.uint8)

    def __call__(self) -> None:
        if len(self.buffer):
            self.buffer += 1  # read and write every line


def _step(under: KernelUnderTest, proposer, kernel, step, evict=None):
    if evict is not None:
        evict()
    under.swap_in(kernel)
    t0 = time.thread_time_ns()
    got = proposer.step_batch(step)
    return got, time.thread_time_ns() - t0


def paired(under: KernelUnderTest, workload: str, batch: int, context: int, steps: int, k: int, skip: int,
           old_step_batch, evict_mb: int = 0) -> dict[str, float]:
    import specplug

    new_kernel = under.current()
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    ids = list(range(batch))
    pair = [specplug.create(under.method), specplug.create(under.method)]
    started = BatchStep(ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                        [(row, rows[row][0]) for row in ids])
    for proposer in pair:
        proposer.step_batch(started)
    position = [0] * batch
    new = [np.empty(0, np.int64)] * batch
    limits = np.full(batch, k, dtype=np.int64)
    times: dict[str, list[int]] = {"old": [], "new": []}
    accepted_total = 0
    evict = Evictor(evict_mb)
    try:
        for index in range(steps):
            order = [("old", old_step_batch, pair[0]), ("new", new_kernel, pair[1])]
            if index % 2:
                order.reverse()
            got = {}
            for name, kernel, proposer in order:
                got[name], ns = _step(under, proposer, kernel, step_of_pieces(ids, new, limits), evict)
                if index >= skip:
                    times[name].append(ns)
            a, b = got["old"], got["new"]
            assert np.array_equal(a.lengths, b.lengths) and np.array_equal(a.accepted, b.accepted)
            assert np.array_equal(a.scores, b.scores, equal_nan=under.nan_scores)
            assert a.tokens.tolist() == b.tokens.tolist()
            accepted_total += _advance(rows, a, position, new)
    finally:
        under.swap_in(new_kernel)
    old_us = statistics.median(times["old"]) / 1000 / batch
    new_us = statistics.median(times["new"]) / 1000 / batch
    return {"old": old_us, "new": new_us, "ratio": new_us / old_us, "accepted_per_row_step": accepted_total / steps / batch}


class Stepper(_BatchSubject):
    """A proposer stepping through the rows as the perf harness does (its own acceptance), with
    ``kernel`` swapped in for ``under`` at each of its steps; only ``step_batch`` is timed, in the
    thread's CPU time."""

    def __init__(self, under: KernelUnderTest, proposer, kernel, rows, k: int, evict=None) -> None:
        self.under, self.kernel, self.evict = under, kernel, evict
        under.swap_in(kernel)
        super().__init__(proposer, rows, k)
        self.times: list[int] = []

    def step(self, timed: bool) -> None:
        got, ns = _step(self.under, self.proposer, self.kernel, step_of_pieces(self.ids, self.new, self.limits),
                        self.evict)
        if timed:
            self.times.append(ns)
        _advance(self.rows, got, self.position, self.new)


def composites(under: KernelUnderTest, workload: str, batch: int, context: int, steps: int, k: int, skip: int,
               names: list[str], old_step_batch, evict_mb: int = 0) -> None:
    """suffix and the composites, each with the old kernel and the new, stepping in turn (rotated)."""
    from specplug.lab._perf_batch import _create_method

    new_kernel = under.current()
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    subjects = {}
    evict = Evictor(evict_mb)
    try:
        for name in ["suffix", *names]:
            for label, kernel in (("old", old_step_batch), ("new", new_kernel)):
                subjects[(name, label)] = Stepper(under, _create_method(name), kernel, rows, k, evict)
        keys = list(subjects)
        for index in range(steps):
            turn = keys[index % len(keys):] + keys[: index % len(keys)]
            for key in turn:
                subjects[key].step(index >= skip)
    finally:
        under.swap_in(new_kernel)
    us = {key: statistics.median(s.times) / 1000 / batch for key, s in subjects.items()}
    for name in ["suffix", *names]:
        line = f"| {workload} | {batch} | {name} | {us[(name, 'old')]:.2f} | {us[(name, 'new')]:.2f} |"
        if name != "suffix":
            line += f" {us[(name, 'old')] / us[('suffix', 'old')]:.2f} | {us[(name, 'new')] / us[('suffix', 'new')]:.2f} |"
        else:
            line += " - | - |"
        print(line, flush=True)


def main(under: KernelUnderTest, description: str, before: str) -> None:
    """The command line of a paired benchmark of ``under``'s kernel against commit ``before``'s."""
    parser = paired_parser(description, before=before, what=f"{under.method} kernel", steps=120)
    parser.add_argument("--composites", default="", help="e.g. hybrid,adaptive: time these beside suffix instead "
                        f"(old and new {under.method} kernel each, stepping in turn; µs/row and × suffix)")
    parser.add_argument("--evict", type=int, default=0, metavar="MB", help="before each timed step, stream over a "
                        "buffer of this many MiB (untimed): the kernels on cold caches")
    parser.add_argument("--refcounts", action="store_true", help="then count, in each kernel's compiled LLVM, the "
                        "call sites of numba's reference-count updates and the functions left as calls")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        old = under.before(args.before, Path(folder))
        _run(under, args, old)
        if args.refcounts:
            print(f"\n| {under.attribute} | NRT_incref call sites | NRT_decref call sites | functions |")
            print("|---|---:|---:|---:|")
            # this checkout's kernel may have come from numba's cache, which keeps no LLVM: compiled
            # afresh from a copy of its file, for the signatures the run called it with
            text = Path(under.path).read_text()
            now = getattr(module_at(args.before, under.path, f"{Path(under.path).stem}_now", Path(folder), text),
                          under.attribute)
            for signature in under.current().signatures:
                now.compile(signature)
            for label, kernel in ((f"{args.before} (old)", old), ("this checkout (new)", now)):
                counts = refcount_sites(kernel)
                print(f"| {label} | {counts['incref']} | {counts['decref']} | {counts['functions']} |")


def refcount_sites(kernel) -> dict[str, int]:
    """In ``kernel``'s compiled LLVM (every signature it was called with, after numba's optimisation
    and reference-count pruning): the call sites of ``NRT_incref`` and ``NRT_decref``, and the
    functions defined, i.e. the callees numba did not inline. Where such a call sits in a per-row
    loop, each array argument costs an atomic increment and decrement per row."""
    counts = {"incref": 0, "decref": 0, "functions": 0}
    for text in kernel.inspect_llvm().values():
        counts["incref"] += len(re.findall(r"call void @NRT_incref\(", text))
        counts["decref"] += len(re.findall(r"call void @NRT_decref\(", text))
        counts["functions"] += sum(line.startswith("define ") for line in text.splitlines())
    return counts


def _run(under: KernelUnderTest, args: argparse.Namespace, old_step_batch) -> None:
    if args.composites:
        print("| workload | batch | proposer | old µs/row | new µs/row | old × suffix | new × suffix |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for workload in args.workloads.split(","):
            composites(under, workload, args.batch, args.context, args.steps, args.k, args.skip, args.composites.split(","),
                       old_step_batch, args.evict)
        return
    print("| workload | batch | steps | old µs/row | new µs/row | new ÷ old | acc/row-step |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for workload in args.workloads.split(","):
        got = paired(under, workload, args.batch, args.context, args.steps, args.k, args.skip, old_step_batch, args.evict)
        print(f"| {workload} | {args.batch} | {args.steps - args.skip} | {got['old']:.2f} | {got['new']:.2f} | "
              f"{got['ratio']:.2f} | {got['accepted_per_row_step']:.3f} |", flush=True)

