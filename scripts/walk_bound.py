"""What suffix's candidates would cost if each anchor's recent occurrences sat together.

suffix finds a row's candidates by walking a chain through its ring (each link read from the one
before: ``_suffix_kernels._walk_lockstep``, 16 rows at a time). This times that walk on the rings of
``specplug perf --batch``'s rows against reading the same positions from one contiguous run per
row, as an index keeping each anchor's occurrences in a vector of their own would hold them (each
row's run at a random cache line of a buffer as large as the rings, where such vectors would lie).
Both then read each candidate's token line once, as the comparisons that follow do first; both
start from the anchor's latest position (the head table's look-up, common to both, is not timed).

So it bounds what such an index could save on the walk, before anyone builds it: the positions
are the kernel's own (asserted alike), the vectors' upkeep on insert is not counted. Each figure:
the thread's CPU time per row at batch ``--batch``, median of ``--repeats`` timings, each right
after streaming over ``--evict`` MiB (cold) and again at once (warm), the two layouts alternating.
Run it with one thread:

  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/walk_bound.py \\
      --batch 128 --contexts 8k,64k --workloads code-edit,text --repeats 40
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from numba import njit

import specplug
from specplug.lab._perf_batch import _BatchSubject, _rows
from specplug.proposers.lookup import _suffix_kernels as kernels
from specplug.proposers._prefetch import prefetch

sys.path.insert(0, str(Path(__file__).parent))
from profile_suffix import _context  # noqa: E402

CLOCK = time.thread_time_ns


@njit(cache=True)
def _walk_starts(memory, bases, capacities, lengths, slots, a_s, a_l, max_depth, at, chain_at, tokens_at, masks, starts):
    """Each row's walk as the batch kernel begins it: its anchor's latest position and its chain."""
    for row in range(len(slots)):
        at[row], chain_at[row], tokens_at[row], masks[row], starts[row] = kernels.walk_start(
            memory, bases, capacities, lengths, slots[row], a_s, a_l, max_depth)


@njit(cache=True)
def chained(memory, at, chain_at, tokens_at, masks, starts, ends, found):
    """The kernel's walk, blocks of LOCKSTEP_ROWS rows, then each candidate's token line read once."""
    rows = len(at)
    block_rows = kernels.LOCKSTEP_ROWS
    walk_at = at.copy()
    found[:] = 0
    for first in range(0, rows, block_rows):
        block = min(block_rows, rows - first)
        kernels._walk_lockstep(memory, walk_at[first:], chain_at[first:], tokens_at[first:], masks[first:],
                               starts[first:], block, ends[first:], found[first:])
    total = 0
    for row in range(rows):
        for i in range(found[row]):
            total += memory[tokens_at[row] + (ends[row, i] & masks[row])]
    return total


@njit(cache=True)
def together(memory, vectors, vector_at, found, tokens_at, masks, positions):
    """The same positions read from each row's contiguous run (the next row's run prefetched), each
    candidate's token line prefetched as its position is read, then read once."""
    rows = len(vector_at)
    total = 0
    if rows:
        prefetch(vectors, vector_at[0])
    for row in range(rows):
        if row + 1 < rows:
            prefetch(vectors, vector_at[row + 1])
        base = vector_at[row]
        for i in range(found[row]):
            g = vectors[base + i]
            positions[i] = g
            prefetch(memory, tokens_at[row] + (g & masks[row]))
        for i in range(found[row]):
            total += memory[tokens_at[row] + (positions[i] & masks[row])]
    return total


def bound(workload: str, context: int, batch: int, k: int, warmup: int, repeats: int, evict: np.ndarray,
          seed: int = 0) -> dict[str, float]:
    subject = _BatchSubject(specplug.create("suffix"), _rows(workload, context, batch, (warmup + 1) * (k + 1) + 1, seed),
                            k)
    for _ in range(warmup):
        subject.step()
    proposer = subject.proposer
    options, table = proposer.options, proposer._slots
    a_s, a_l = options.anchors
    memory = proposer._pool.memory
    slots = np.array([table.slot[row] for row in subject.ids], dtype=np.int64)
    at, chain_at, tokens_at, masks, starts = (np.zeros(batch, dtype=np.int64) for _ in range(5))
    _walk_starts(memory, table.bases, table.capacities, table.lengths, slots, a_s, a_l, options.max_depth, at, chain_at,
                 tokens_at, masks, starts)
    ends = np.zeros((batch, options.max_candidates), dtype=np.int64)
    found = np.zeros(batch, dtype=np.int64)
    expected = chained(memory, at, chain_at, tokens_at, masks, starts, ends, found)
    # each row's run of positions at a random cache line of a buffer the rings' size
    rng = np.random.default_rng(seed)
    vectors = np.zeros(max(len(memory) // 2, 16 * batch * options.max_candidates), dtype=np.int64)
    lines = len(vectors) // 8 - options.max_candidates
    vector_at = rng.choice(lines, size=batch, replace=False).astype(np.int64) * 8
    for row in range(batch):
        vectors[vector_at[row] : vector_at[row] + found[row]] = ends[row, : found[row]]
    positions = np.zeros(options.max_candidates, dtype=np.int64)
    assert together(memory, vectors, vector_at, found, tokens_at, masks, positions) == expected
    layouts = {
        "chained": lambda: chained(memory, at, chain_at, tokens_at, masks, starts, ends, found),
        "together": lambda: together(memory, vectors, vector_at, found, tokens_at, masks, positions),
    }
    times: dict[str, list[int]] = {f"{name} {mode}": [] for name in layouts for mode in ("cold", "warm")}
    for index in range(repeats):
        for name in (layouts if index % 2 else reversed(layouts)):
            evict += 1  # read and write every line
            for mode in ("cold", "warm"):
                start = CLOCK()
                layouts[name]()
                times[f"{name} {mode}"].append(CLOCK() - start)
    out = {name: statistics.median(ns) / 1000 / batch for name, ns in times.items()}
    out["found"] = float(found.mean())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--contexts", default="8k,64k")
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--warmup", type=int, default=20, help="steps before the rings are read")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--evict", type=int, default=64, metavar="MB")
    parser.add_argument("-k", type=int, default=8)
    args = parser.parse_args()
    evict = np.zeros(args.evict << 20, dtype=np.uint8)
    print(f"µs per row at batch {args.batch}: finding a row's candidates and reading each one's token line once")
    print("| workload | context | candidates a row (mean) | chained, cold | together, cold | chained, warm | together, warm |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for context in args.contexts.split(","):
        for workload in args.workloads.split(","):
            us = bound(workload, _context(context), args.batch, args.k, args.warmup, args.repeats, evict)
            print(f"| {workload} | {context} | {us['found']:.1f} | {us['chained cold']:.2f} | {us['together cold']:.2f} | "
                  f"{us['chained warm']:.2f} | {us['together warm']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
