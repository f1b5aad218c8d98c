"""Serial against parallel rows in the lookups' batch kernels, on a machine with many cores.

suffix and ngram step through the perf harness's rows (every row at the same context) twice in
turn: once with the serial kernel (the default), once with the ``prange`` kernel
(``parallel_from = 0``) at each thread count of ``--threads``; their drafts are asserted alike at
every step. Wall-clock time per step (the threads' work is what an engine waits for), medians of
the steps after ``--skip``, µs per row. Needs ``NUMBA_NUM_THREADS`` at least the largest count.

Usage (16 cores):
  NUMBA_NUM_THREADS=16 PYTHONPATH=. python3 scripts/bench_parallel_rows.py --batch 128 \\
      --contexts 8k,64k --workloads code-edit,text --threads 1,2,4,8,16 --steps 40
"""

from __future__ import annotations

import argparse
import os
import statistics

import numba
import numpy as np

from specplug.lab._perf_batch import _BatchSubject, _create_method, _rows


def run(method: str, workload: str, context: int, batch: int, steps: int, skip: int, threads: list[int]) -> str:
    k = 8
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    serial = _BatchSubject(_create_method(method), rows, k)
    parallel = {}
    for count in threads:
        proposer = _create_method(method)
        proposer.parallel_from = 0
        parallel[count] = _BatchSubject(proposer, rows, k)
    times: dict[object, list[int]] = {"serial": [], **{count: [] for count in threads}}
    for index in range(steps):
        numba.set_num_threads(1)
        ns = serial.step()
        if index >= skip:
            times["serial"].append(ns)
        for count, subject in parallel.items():
            numba.set_num_threads(count)
            ns = subject.step()
            if index >= skip:
                times[count].append(ns)
            assert subject.position == serial.position, (method, count, index)  # the same drafts, accepted alike
    us = {key: statistics.median(values) / 1000 / batch for key, values in times.items()}
    cells = [f"{us['serial']:.2f}"] + [f"{us[count]:.2f} ({us['serial'] / us[count]:.1f}x)" for count in threads]
    return f"| {method} | {workload} | {context // 1024}k | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--contexts", default="8k,64k")
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--methods", default="suffix,ngram")
    parser.add_argument("--threads", default="1,2,4,8,16")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--skip", type=int, default=5)
    args = parser.parse_args()
    threads = [int(count) for count in args.threads.split(",")]
    if max(threads) > numba.config.NUMBA_NUM_THREADS:
        raise SystemExit(f"--threads up to {max(threads)} needs NUMBA_NUM_THREADS >= {max(threads)}; "
                         f"it is {numba.config.NUMBA_NUM_THREADS}")
    print(f"cores: {os.cpu_count()}, numba {numba.__version__}, numpy {np.__version__}, threading layer "
          f"{numba.config.THREADING_LAYER}")
    print("| method | workload | context | serial µs/row | " + " | ".join(f"{count} threads" for count in threads) + " |")
    print("|---|---|---|---:|" + "---:|" * len(threads))
    for workload in args.workloads.split(","):
        for size in args.contexts.split(","):
            context = int(size.removesuffix("k")) * 1024
            for method in args.methods.split(","):
                print(run(method, workload, context, args.batch, args.steps, args.skip, threads), flush=True)


if __name__ == "__main__":
    main()
