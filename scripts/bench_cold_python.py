"""What a batch step's Python costs on warm and on cold caches, and its check against an earlier commit's.

In ``specplug perf --batch --interleave`` the subjects step in turn, so each finds its state, and
the interpreter's own code and data, evicted by the others (vLLM's NgramProposer alone reads some
32 MiB of token arrays per 64k step). This measures that effect on the Python around the kernels:

- ``check``: ``Proposer._check_step`` of one 128-row step, this checkout's against ``--before``'s
  (its ``_contract.py`` read from git), each timed right after streaming over ``--evict`` MiB
  (cold) and again at once (warm), the two alternating;
- ``python``: a method's whole ``step_batch`` with the lookups' batch kernels replaced by no-ops,
  so what is timed is the step's Python and numpy (its checks, slots, arrays, the composites'
  choice kernels), cold and warm likewise.

Each figure: the thread's CPU time (``time.thread_time_ns``), median over ``--steps`` timings. The
rows are ``specplug perf --batch``'s (every row at the same context). Run it with one thread:

  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_cold_python.py \\
      --before 9ad5575 --methods suffix,ngram,adaptive --steps 40
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _BatchSubject, _create_method, _rows
from specplug.proposers.lookup import _ngram_kernels, _suffix_kernels

sys.path.insert(0, str(Path(__file__).parent))
from _before import module_at, paired_parser  # noqa: E402

CLOCK = time.thread_time_ns


def stepped(method: str, workload: str, context: int, batch: int, k: int, warmup: int):
    """A proposer of ``method`` after ``warmup`` steps over the perf harness's rows, and its next step."""
    rows = _rows(workload, context, batch, (warmup + 1) * (k + 1) + 1, seed=0)
    subject = _BatchSubject(_create_method(method), rows, k)
    for _ in range(warmup):
        subject.step()
    return subject.proposer, step_of_pieces(subject.ids, subject.new, subject.limits)


def cold_and_warm(subjects: dict[str, object], steps: int, evict: np.ndarray) -> dict[tuple[str, str], float]:
    """µs of each subject's call right after the eviction (cold) and again at once (warm); the
    subjects' order alternates between rounds."""
    times: dict[tuple[str, str], list[int]] = {(name, mode): [] for name in subjects for mode in ("cold", "warm")}
    names = list(subjects)
    for index in range(steps):
        for name in names if index % 2 else names[::-1]:
            call = subjects[name]
            evict += 1  # read and write every line
            for mode in ("cold", "warm"):
                start = CLOCK()
                call()
                times[(name, mode)].append(CLOCK() - start)
    return {key: statistics.median(values) / 1000 for key, values in times.items()}


def main() -> None:
    parser = paired_parser(__doc__, before="9ad5575", what="Proposer._check_step", steps=40)
    parser.add_argument("--methods", default="suffix,ngram,adaptive")
    parser.add_argument("--evict", type=int, default=64, metavar="MB", help="MiB streamed over before each cold call")
    args = parser.parse_args()
    import specplug._contract as contract

    old = module_at(args.before, "specplug/_contract.py", "contract_before", Path(tempfile.mkdtemp()))
    old.BatchStep = contract.BatchStep  # the steps are this checkout's
    evict = np.zeros(args.evict << 20, dtype=np.uint8)
    workload = args.workloads.split(",")[0]
    print(f"µs per 128-row step, {workload} at {args.context} tokens, one thread; cold: after streaming over "
          f"{args.evict} MiB (median of {args.steps})")
    print("| what | method | cold | warm |")
    print("|---|---|---:|---:|")
    proposer, step = stepped("suffix", workload, args.context, args.batch, args.k, 5)
    checks = cold_and_warm({"old": lambda: old.Proposer._check_step(proposer, step),
                            "new": lambda: proposer._check_step(step)}, args.steps, evict)
    for label in ("old", "new"):
        commit = args.before if label == "old" else "this checkout"
        print(f"| check ({commit}) | - | {checks[(label, 'cold')]:.1f} | {checks[(label, 'warm')]:.1f} |", flush=True)
    for method in args.methods.split(","):
        proposer, step = stepped(method, workload, args.context, args.batch, args.k, 5)
        kernels = _suffix_kernels.step_batch, _ngram_kernels.ngram_step_batch
        _suffix_kernels.step_batch = _ngram_kernels.ngram_step_batch = lambda *arguments: 0
        try:
            python = cold_and_warm({method: lambda: proposer.step_batch(step)}, args.steps, evict)
        finally:
            _suffix_kernels.step_batch, _ngram_kernels.ngram_step_batch = kernels
        print(f"| step without the lookups' kernels | {method} | {python[(method, 'cold')]:.1f} | "
              f"{python[(method, 'warm')]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
