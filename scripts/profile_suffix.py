"""Where suffix's batch step spends its time: its phases timed apart, per row, on the rows
``specplug perf --batch`` builds (``_perf_batch._rows``: every row a request at the same context).

Two suffix proposers start the same rows. One steps as the benchmark does (``step_batch``, timed
whole: "step"). The other's rings are driven phase by phase, each phase one compiled loop over the
batch calling the kernels' own pieces on the same state:

- append: the rows' new tokens indexed (``append``);
- candidates: each row's anchor looked up, its chain walked (``_walk_lockstep``, as the batch kernel
  walks it, blocks of ``LOCKSTEP_ROWS`` rows) and the candidates' match lengths (``_match_lengths``);
- vote: each row's vote among its candidates (``vote_found``).

The phases' drafts are asserted equal to the whole step's at every step, so both compute the same.
The phase loops leave out what the batch kernel overlaps (its prefetches of later rows) and its
bookkeeping (acceptance, the global cache, which these rows leave empty), so their sum differs from
"step". Each figure: the thread's CPU time (``time.thread_time_ns``) per row, median over the timed
steps, then over ``--repeats``; beside them, how many candidates the rows' walks found (the
first repeat's mean over rows and steps, and its largest). ``--max-candidates`` sets suffix's
option (the most links a walk follows; fewer change the drafts). With ``--evict MB`` the steps
start on cold caches, as they do in the interleaved benchmark: before the phases and before the
whole step, the script streams over that many MiB (untimed); the phases after the first then find
what the earlier ones left cached, as a row's phases do inside the whole step. Run it with one thread:

  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/profile_suffix.py \\
      --batch 128 --contexts 8k,64k --workloads code-edit,text --steps 60 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from numba import njit

import specplug
from specplug._batch import BatchStep
from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _advance, _rows
from specplug.proposers.lookup import _suffix_kernels as kernels

PHASES = ("append", "candidates", "vote")
#: whether this checkout's vote is the linear one, with its scratch (issue 11); the script also runs on
#: a checkout before it (copied there), to profile the quadratic vote on the same rows
LINEAR_VOTE = hasattr(kernels, "vote_scratch")

if LINEAR_VOTE:
    _vote = kernels.vote_found
else:
    @njit
    def _vote(tokens, state, found, ends, lengths, max_tokens, spec_factor, spec_offset, min_token_prob, out, tally):
        return kernels.vote_found(tokens, state, found, ends, lengths, max_tokens, spec_factor, spec_offset,
                                  min_token_prob, out)


@njit
def _append_rows(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l):
    for row in range(len(slots)):
        slot = slots[row]
        state, tokens, prev_s, head_s, prev_l, head_l = kernels.pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
        count = offsets[row + 1] - offsets[row]
        if lengths[slot] + count > tokens.shape[0]:
            raise ValueError("a ring has no room: give fewer --steps")
        kernels.append(tokens, prev_s, head_s, prev_l, head_l, state, new_tokens[offsets[row] : offsets[row + 1]],
                       a_s, a_l, False)
        lengths[slot] += count


@njit
def _candidate_rows(memory, bases, capacities, lengths, slots, a_s, a_l, max_depth, ends, matches, found):
    """Each row's candidates into ``ends[row]``, their match lengths into ``matches[row]``, how many
    into ``found[row]``: anchors, then a block's chain walks interleaved, as ``step_batch`` does."""
    block_rows = kernels.LOCKSTEP_ROWS
    at = np.empty(block_rows, dtype=np.int64)
    chain_at = np.empty(block_rows, dtype=np.int64)
    tokens_at = np.empty(block_rows, dtype=np.int64)
    masks = np.empty(block_rows, dtype=np.int64)
    starts = np.empty(block_rows, dtype=np.int64)
    rows = len(slots)
    for first_row in range(0, rows, block_rows):
        block = min(block_rows, rows - first_row)
        for i in range(block):
            at[i], chain_at[i], tokens_at[i], masks[i], starts[i] = kernels.walk_start(
                memory, bases, capacities, lengths, slots[first_row + i], a_s, a_l, max_depth)
            found[first_row + i] = 0
        kernels._walk_lockstep(memory, at, chain_at, tokens_at, masks, starts, block, ends[first_row:], found[first_row:])
        for i in range(block):
            row = first_row + i
            slot = slots[row]
            state, tokens, prev_s, head_s, prev_l, head_l = kernels.pooled_ring(memory, bases[slot], capacities[slot],
                                                                                 a_l > 0)
            length = lengths[slot]
            first = max(0, length - max_depth)
            kernels._match_lengths(tokens, state, tokens[first:length], length - first, max_depth, ends[row], matches[row],
                                   found[row])


@njit
def _vote_rows(memory, bases, capacities, slots, limits, a_l, max_tokens, spec_factor, spec_offset, min_token_prob,
               ends, matches, found, tally, out, out_lengths):
    for row in range(len(slots)):
        slot = slots[row]
        state, tokens, prev_s, head_s, prev_l, head_l = kernels.pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
        taken, score, match = _vote(tokens, state, found[row], ends[row], matches[row], min(limits[row], max_tokens),
                                    spec_factor, spec_offset, min_token_prob, out[row], tally)
        out_lengths[row] = taken


def _start(proposer, ids, rows) -> None:
    proposer.step_batch(BatchStep(ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                                  [(row, rows[row][0]) for row in ids]))


def profile(workload: str, context: int, batch: int, steps: int, k: int, skip: int, evict: np.ndarray | None = None,
            **options) -> dict[str, float]:
    """µs per row of each phase and of the whole step: medians over the timed steps; and the
    candidates a row's walk found, on average ("found") and at most ("most found"), over the timed steps."""
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    ids = list(range(batch))
    whole, phased = specplug.create("suffix", **options), specplug.create("suffix", **options)
    options = phased.options
    a_s, a_l = options.anchors
    for proposer in (whole, phased):
        _start(proposer, ids, rows)
    table = phased._slots
    slots = np.array([table.slot[row] for row in ids], dtype=np.int64)
    limits = np.full(batch, k, dtype=np.int64)
    ends = np.empty((batch, options.max_candidates), dtype=np.int64)
    matches = np.empty((batch, options.max_candidates), dtype=np.int64)
    found = np.zeros(batch, dtype=np.int64)
    tally = kernels.vote_scratch(options.max_candidates) if LINEAR_VOTE else np.zeros(1, dtype=np.int64)
    out = np.zeros((batch, options.max_tokens), dtype=np.int64)
    out_lengths = np.zeros(batch, dtype=np.int64)
    position = [0] * batch
    new = [np.empty(0, np.int64)] * batch
    times: dict[str, list[int]] = {name: [] for name in (*PHASES, "step")}
    walked: list[np.ndarray] = []
    clock = time.thread_time_ns
    for index in range(steps):
        step = step_of_pieces(ids, new, limits)
        memory, bases, capacities, lengths = phased._pool.memory, table.bases, table.capacities, table.lengths
        if evict is not None:
            evict += 1  # read and write every line
        t0 = clock()
        _append_rows(memory, bases, capacities, lengths, slots, step.new_tokens, step.offsets, a_s, a_l)
        t1 = clock()
        _candidate_rows(memory, bases, capacities, lengths, slots, a_s, a_l, options.max_depth, ends, matches, found)
        t2 = clock()
        _vote_rows(memory, bases, capacities, slots, limits, a_l, options.max_tokens, options.max_spec_factor,
                   options.max_spec_offset, options.min_token_prob, ends, matches, found, tally, out, out_lengths)
        t3 = clock()
        if evict is not None:
            evict += 1
        t4 = clock()
        got = whole.step_batch(step)
        t5 = clock()
        assert got.lengths.tolist() == out_lengths.tolist(), "the phases drafted otherwise than the whole step"
        for row in range(batch):
            assert got.tokens[row, : got.lengths[row]].tolist() == out[row, : out_lengths[row]].tolist()
        if index >= skip:
            for name, ns in zip((*PHASES, "step"), (t1 - t0, t2 - t1, t3 - t2, t5 - t4)):
                times[name].append(ns)
            walked.append(found.copy())
        _advance(rows, got, position, new)
    found_all = np.concatenate(walked)
    return {**{name: statistics.median(ns) / 1000 / batch for name, ns in times.items()},
            "found": float(found_all.mean()), "most found": int(found_all.max())}


def _context(text: str) -> int:
    return int(text[:-1]) * 1024 if text.endswith("k") else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--contexts", default="8k,64k")
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--skip", type=int, default=5, help="first steps not timed (warm-up)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--max-candidates", type=int, default=None,
                        help="suffix's max_candidates (default: its own), the most chain links a row's walk follows")
    parser.add_argument("--evict", type=int, default=0, metavar="MB",
                        help="stream over this many MiB before the phases and before the whole step (cold caches)")
    args = parser.parse_args()
    options = {} if args.max_candidates is None else {"max_candidates": args.max_candidates}
    evict = np.zeros(args.evict << 20, dtype=np.uint8) if args.evict else None
    print("| workload | context | append µs/row | candidates µs/row | vote µs/row | phases' sum | step µs/row "
          "| candidates found per row (mean, most) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for context in args.contexts.split(","):
        for workload in args.workloads.split(","):
            runs = [profile(workload, _context(context), args.batch, args.steps, args.k, args.skip, evict, **options)
                    for _ in range(args.repeats)]
            us = {name: statistics.median(run[name] for run in runs) for name in (*PHASES, "step")}
            total = sum(us[name] for name in PHASES)
            print(f"| {workload} | {context} | {us['append']:.2f} | {us['candidates']:.2f} | {us['vote']:.2f} | "
                  f"{total:.2f} | {us['step']:.2f} | {runs[0]['found']:.2f}, {runs[0]['most found']} |", flush=True)


if __name__ == "__main__":
    main()
