"""Where suffix's whole batch step goes inside ``specplug perf --batch``: its Python stages and its kernel.

``profile_suffix.py`` splits the kernel; this splits the step the benchmark times, in the benchmark
itself (one after another, or ``--interleave`` with the other subjects, as issue 11's runs are): the
functions a suffix step calls are wrapped with a clock while the suffix subject steps, and each
stage is the median over the run's steps of its time per step:

- new tokens -> step: ``step_of_pieces``, the rows' new tokens into the step's flat arrays;
- checks: ``Proposer._check_step``;
- slots: ``SlotTable.begin_step`` (the rows' slots, the step's acceptance and token arrays);
- kernel: ``_suffix_kernels.step_batch``, one numba call for every row;
- the rest: the step's time less those (the output arrays, the lock, the calls between).

Run it with one thread, on an otherwise idle machine:

  NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python scripts/profile_step_stages.py \\
      --batch 128 --contexts 64k --workloads code-edit,text --steps 60 --interleave
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from specplug._proposer import Proposer
from specplug.lab import _perf_batch
from specplug.proposers import _row_drafts
from specplug.proposers.lookup import _suffix_kernels
from specplug.proposers.lookup.suffix import SuffixProposer

STAGES = ("new tokens -> step", "checks", "slots", "kernel")
CLOCK = time.perf_counter_ns


class _Stages:
    """Per-call times of the wrapped functions while the suffix subject steps."""

    def __init__(self) -> None:
        self.on = False
        self.current: dict[str, int] = {}
        self.steps: list[dict[str, int]] = []

    def wrap(self, stage: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            if not self.on:
                return function(*args, **kwargs)
            start = CLOCK()
            try:
                return function(*args, **kwargs)
            finally:
                self.current[stage] = self.current.get(stage, 0) + CLOCK() - start
        return timed


def instrument(stages: _Stages) -> None:
    """Wrap the stages' functions where the step finds them, and the subject's step, for suffix only."""
    _perf_batch.step_of_pieces = stages.wrap(STAGES[0], _perf_batch.step_of_pieces)
    Proposer._check_step = stages.wrap(STAGES[1], Proposer._check_step)
    _row_drafts.SlotTable.begin_step = stages.wrap(STAGES[2], _row_drafts.SlotTable.begin_step)
    _suffix_kernels.step_batch = stages.wrap(STAGES[3], _suffix_kernels.step_batch)
    step = _perf_batch._BatchSubject.step

    def subject_step(subject) -> int:
        if type(subject.proposer) is not SuffixProposer:
            return step(subject)
        stages.on, stages.current = True, {}
        try:
            ns = step(subject)
        finally:
            stages.on = False
        stages.steps.append({**stages.current, "whole": ns})
        return ns

    _perf_batch._BatchSubject.step = subject_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--contexts", default="64k")
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--methods", default="suffix,ngram,hybrid,adaptive", help="the subjects (suffix among them)")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--interleave", action="store_true", help="the subjects step in turn, as --interleave does")
    parser.add_argument("--peers", default="vllm", help="'' leaves out vLLM's NgramProposer")
    args = parser.parse_args()
    stages = _Stages()
    instrument(stages)
    columns = (*STAGES, "the rest", "whole")
    print(f"µs per step (and per row) of suffix's steps, batch {args.batch}{', interleaved' if args.interleave else ''}")
    print("| context | workload | " + " | ".join(columns) + " |")
    print("|---|---|" + "---:|" * len(columns))
    for context in args.contexts.split(","):
        tokens = int(context[:-1]) * 1024 if context.endswith("k") else int(context)
        for workload in args.workloads.split(","):
            stages.steps.clear()
            _perf_batch.run_batch_perf([args.batch], [tokens], workloads=[workload], methods=args.methods.split(","),
                                       vllm="vllm" in args.peers, steps=args.steps, repeats=1, per_request_at=(),
                                       interleave=args.interleave)
            steps = stages.steps
            for step in steps:
                step["the rest"] = step["whole"] - sum(step.get(stage, 0) for stage in STAGES)
            medians = {name: statistics.median(step.get(name, 0) for step in steps) / 1000 for name in columns}
            print(f"| {context} | {workload} | "
                  + " | ".join(f"{us:.0f} ({us / args.batch:.2f})" for us in medians.values()) + " |", flush=True)


if __name__ == "__main__":
    main()
