"""Paired benchmark of suffix's batch kernel: the row-by-row kernel of the fifth round against the
lockstep one (``_suffix_kernels.step_batch``: chain walks of ``LOCKSTEP_ROWS`` rows interleaved).

Two suffix proposers get the same rows (the perf harness's, every row at the same context) and
step in turn, one with the old kernel swapped in, one with the new; their drafts, scores and
acceptance are asserted equal at every step, and each step's CPU time of the thread
(``time.thread_time_ns``, not the wall clock: the machine is shared) is kept. The order of the
two alternates step by step, so drift hits both alike.

Usage (one thread; about a minute at 128 rows):
  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_suffix_lockstep.py \
      --batch 128 --context 8192 --workloads code-edit,text --steps 120
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from numba import njit

from specplug._contract import BatchStep, accepted_prefix
from specplug.proposers._hashing import NO_RING, window_hash  # noqa: F401 - inlined helpers resolve names here
from specplug.engine import step_of_pieces
from specplug.lab._perf_batch import _rows
from specplug.proposers import _suffix_kernels as kernels
from specplug.proposers._prefetch import prefetch  # noqa: F401 - the old kernel's helpers below
from specplug.proposers._row_drafts import remember, resolve
from specplug.proposers._suffix_kernels import (
    PREFETCH_ROWS,
    PREFETCH_TOKENS,
    STATE_WORDS,
    _prefetch_tables,
    _prefetch_tail,
    append,
    pooled_ring,
    vote,
)

# ---- the kernel before the lockstep walks (commit fd1cbc9), kept here only to measure against

@njit(cache=True)
def _old_step_row(memory, bases, capacities, lengths, slot, new_tokens, begin, count, limit, a_s, a_l, max_depth, max_candidates,
              max_tokens, spec_factor, spec_offset, min_token_prob, use_cache,
              c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
              drafts, draft_lengths, draft_scores, row, out, out_lengths, scores, accepted, cached, ends, matches):
    """One row of a batch step; False when its ring has no room (it is left untouched).
    ``ends`` and ``matches`` are the votes' scratch (max_candidates each)."""
    state, tokens, prev_s, head_s, prev_l, head_l = pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
    length = lengths[slot]
    out_lengths[row] = 0
    scores[row] = 0.0
    if count:
        if length + count > tokens.shape[0]:
            return False
        accepted[row] = resolve(drafts, draft_lengths, slot, new_tokens, begin, count)
        append(tokens, prev_s, head_s, prev_l, head_l, state, new_tokens[begin : begin + count], a_s, a_l, False)
        length += count
        lengths[slot] = length
    if limit < 1:
        return True
    limit = min(limit, max_tokens)
    first = max(0, length - max_depth)
    query = tokens[first:length]
    mine = out[row]
    taken, score, match = vote(tokens, prev_s, head_s, prev_l, head_l, state, query, length - first, a_s, a_l,
                               max_depth, limit, spec_factor, spec_offset, min_token_prob, mine, ends, matches)
    if use_cache:
        theirs = cached[row]
        c_taken, c_score, c_match = vote(c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state, query,
                                         length - first, a_s, a_l, max_depth, limit, spec_factor, spec_offset,
                                         min_token_prob, theirs, ends, matches)
        if c_match > match or (c_match == match and c_score > score):
            taken, score = c_taken, c_score
            for k in range(taken):
                mine[k] = theirs[k]
    out_lengths[row] = taken
    scores[row] = score
    remember(drafts, draft_lengths, slot, out, row, taken)
    draft_scores[slot] = score
    return True


#: the most new tokens of a row whose head-table slots are prefetched (more: the first ones only)
PREFETCH_TOKENS = 16
#: rows ahead whose ring tail is prefetched; the rows between get their head-table slots, then what they hold
PREFETCH_ROWS = 3


@njit(cache=True, inline="always")
def _prefetch_tail(memory, bases, capacities, lengths, slot, a_l):
    """Start the misses of a later row's ring tail: its state, the last tokens and the chain
    entries its new tokens write (addresses known before the row runs)."""
    base = bases[slot]
    capacity = capacities[slot]
    at = min(max(lengths[slot] - 1, 0), capacity - 1)
    tokens_at = base + STATE_WORDS
    prefetch(memory, base)
    prefetch(memory, tokens_at + at)
    prefetch(memory, tokens_at + capacity + at)
    if a_l > 0:
        prefetch(memory, tokens_at + 4 * capacity + at)


@njit(cache=True)
def _prefetch_tables(memory, bases, capacities, lengths, slot, new_tokens, begin, count, a_s, a_l, scratch, stored):
    """Start the misses of a later row's head-table probes: the slots its inserts and its
    look-ups hash to, computed from its ring's tail (prefetched a row earlier) and its new tokens.
    A hint: a row whose ring will grow, or a hash of an anchor that will not be indexed, costs a
    useless prefetch, never a wrong result. ``scratch`` holds ``len(scratch) >= max(a_s, a_l) +
    PREFETCH_TOKENS`` tokens. With ``stored`` (the slots, prefetched a row earlier, are cached
    now) it prefetches what the slots point at instead: the stored position's tokens (an anchor
    comparison) and chain entry (a walk's first link)."""
    base = bases[slot]
    capacity = capacities[slot]
    length = lengths[slot]
    if length + count > capacity:
        return
    count = min(count, PREFETCH_TOKENS)
    widest = max(a_s, a_l)
    kept = min(length, widest)  # ring tokens before the new ones in scratch
    tokens_at = base + STATE_WORDS
    for i in range(kept):
        scratch[i] = memory[tokens_at + length - kept + i]
    for i in range(count):
        scratch[kept + i] = new_tokens[begin + i]
    hmask = 2 * capacity - 1
    head_s_at = tokens_at + 2 * capacity
    head_l_at = tokens_at + 5 * capacity
    prev_s_at = tokens_at + capacity
    prev_l_at = tokens_at + 4 * capacity
    # the inserts' anchors end at global positions length - 1 .. length + count - 2 (scratch
    # kept - 1 ..); the last e is the draft's look-ups, the anchors ending at the last token
    for e in range(kept - 1, kept + count):
        if e - a_s + 1 >= 0:
            _prefetch_slot(memory, head_s_at + (window_hash(scratch, e, a_s, NO_RING) & hmask), tokens_at, prev_s_at, length, stored)
        if a_l > 0 and e - a_l + 1 >= 0:
            _prefetch_slot(memory, head_l_at + (window_hash(scratch, e, a_l, NO_RING) & hmask), tokens_at, prev_l_at, length, stored)


@njit(cache=True, inline="always")
def _prefetch_slot(memory, at, tokens_at, prev_at, length, stored):
    if not stored:
        prefetch(memory, at)
        return
    position = memory[at]
    if 0 <= position < length:
        prefetch(memory, tokens_at + position)
        prefetch(memory, prev_at + position)


@njit(cache=True)
def old_step_batch(memory, bases, capacities, lengths, slots, new_tokens, offsets, limits, a_s, a_l, max_depth, max_candidates,
               max_tokens, spec_factor, spec_offset, min_token_prob, use_cache,
               c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
               drafts, draft_lengths, draft_scores, out, out_lengths, scores, accepted, blocked, cached):
    """One engine step for every row: count acceptance, append its new tokens, draft (request, then cache).

    Why this is fast: one numba dispatch for the batch instead of, per request, Python calls
    and four dispatches (append, the request's draft, the cache's draft, the tail slice).
    Each slot's last draft lives in ``drafts[slot, :draft_lengths[slot]]`` (acceptance is
    counted against it, then it is replaced). A row whose ring has no room for its new tokens
    is left untouched and marked in ``blocked`` (the caller grows its ring and runs it alone);
    returns how many. ``cached`` is per-row scratch for the cache's draft. Serial over rows:
    see :func:`step_batch_parallel` for many rows on many cores.
    """
    stuck = 0
    ends = np.empty(max_candidates, dtype=np.int64)
    matches = np.empty(max_candidates, dtype=np.int64)
    scratch = np.empty(max(a_s, a_l) + PREFETCH_TOKENS, dtype=np.int64)
    rows = len(slots)
    # Rows' misses overlap (_prefetch.py says why): three rows ahead, the ring's tail is prefetched;
    # two ahead (its tail now cached), the head-table slots its inserts and look-ups hash to; one
    # ahead (those slots now cached), the positions they hold.
    for row in range(min(rows, PREFETCH_ROWS)):
        _prefetch_tail(memory, bases, capacities, lengths, slots[row], a_l)
    for row in range(rows):
        ahead = row + PREFETCH_ROWS
        if ahead < rows:
            _prefetch_tail(memory, bases, capacities, lengths, slots[ahead], a_l)
        for later in range(row + 1, min(ahead, rows)):  # PREFETCH_ROWS - 1 rows: slots, then what they point at
            _prefetch_tables(memory, bases, capacities, lengths, slots[later], new_tokens, offsets[later],
                             offsets[later + 1] - offsets[later], a_s, a_l, scratch, later == row + 1)
        begin = offsets[row]
        if not _old_step_row(memory, bases, capacities, lengths, slots[row], new_tokens, begin, offsets[row + 1] - begin, limits[row],
                         a_s, a_l, max_depth, max_candidates, max_tokens, spec_factor, spec_offset, min_token_prob,
                         use_cache, c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
                         drafts, draft_lengths, draft_scores, row, out, out_lengths, scores, accepted, cached,
                         ends, matches):
            blocked[row] = True
            stuck += 1
    return stuck



# ---- the paired run


def _step(proposer, kernel, step):
    kernels.step_batch = kernel  # suffix.py reads the module's attribute at each call
    t0 = time.thread_time_ns()
    got = proposer.step_batch(step)
    return got, time.thread_time_ns() - t0


def paired(workload: str, batch: int, context: int, steps: int, k: int, skip: int) -> dict[str, float]:
    import specplug

    new_kernel = kernels.step_batch
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    ids = list(range(batch))
    pair = [specplug.create("suffix"), specplug.create("suffix")]
    started = BatchStep(ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                        [(row, rows[row][0]) for row in ids])
    for proposer in pair:
        proposer.step_batch(started)
    position = [0] * batch
    new = [np.empty(0, np.int64)] * batch
    limits = np.full(batch, k, dtype=np.int64)
    times: dict[str, list[int]] = {"old": [], "new": []}
    accepted_total = 0
    try:
        for index in range(steps):
            order = [("old", old_step_batch, pair[0]), ("new", new_kernel, pair[1])]
            if index % 2:
                order.reverse()
            got = {}
            for name, kernel, proposer in order:
                got[name], ns = _step(proposer, kernel, step_of_pieces(ids, new, limits))
                if index >= skip:
                    times[name].append(ns)
            a, b = got["old"], got["new"]
            assert np.array_equal(a.lengths, b.lengths) and np.array_equal(a.accepted, b.accepted)
            assert np.array_equal(a.scores, b.scores)
            drafted, lengths = a.tokens.tolist(), a.lengths.tolist()
            assert drafted == b.tokens.tolist()
            for row in ids:
                truth = rows[row][1]
                accepted = accepted_prefix(drafted[row][: lengths[row]], truth[position[row]:])
                new[row] = truth[position[row]: position[row] + accepted + 1]
                position[row] += accepted + 1
                accepted_total += accepted
    finally:
        kernels.step_batch = new_kernel
    old_us = statistics.median(times["old"]) / 1000 / batch
    new_us = statistics.median(times["new"]) / 1000 / batch
    return {"old": old_us, "new": new_us, "ratio": new_us / old_us, "accepted_per_row_step": accepted_total / steps / batch}


class _Stepper:
    """A proposer stepping through the rows as the perf harness does (its own acceptance)."""

    def __init__(self, proposer, kernel, rows, k: int) -> None:
        self.proposer, self.kernel, self.rows = proposer, kernel, rows
        self.ids = list(range(len(rows)))
        self.position = [0] * len(rows)
        self.new = [np.empty(0, np.int64)] * len(rows)
        self.limits = np.full(len(rows), k, dtype=np.int64)
        kernels.step_batch = kernel
        proposer.step_batch(BatchStep(self.ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                                      [(row, rows[row][0]) for row in self.ids]))
        self.times: list[int] = []

    def step(self, timed: bool) -> None:
        got, ns = _step(self.proposer, self.kernel, step_of_pieces(self.ids, self.new, self.limits))
        if timed:
            self.times.append(ns)
        drafted, lengths = got.tokens.tolist(), got.lengths.tolist()
        for row in self.ids:
            truth = self.rows[row][1]
            accepted = accepted_prefix(drafted[row][: lengths[row]], truth[self.position[row]:])
            self.new[row] = truth[self.position[row]: self.position[row] + accepted + 1]
            self.position[row] += accepted + 1


def composites(workload: str, batch: int, context: int, steps: int, k: int, skip: int, names: list[str]) -> None:
    """suffix and the composites, each with the old kernel and the new, stepping in turn (rotated)."""
    from specplug.lab._perf_batch import _create_method

    new_kernel = kernels.step_batch
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    subjects = {}
    try:
        for name in ["suffix", *names]:
            for label, kernel in (("old", old_step_batch), ("new", new_kernel)):
                subjects[(name, label)] = _Stepper(_create_method(name), kernel, rows, k)
        keys = list(subjects)
        for index in range(steps):
            turn = keys[index % len(keys):] + keys[: index % len(keys)]
            for key in turn:
                subjects[key].step(index >= skip)
    finally:
        kernels.step_batch = new_kernel
    us = {key: statistics.median(s.times) / 1000 / batch for key, s in subjects.items()}
    for name in ["suffix", *names]:
        line = f"| {workload} | {batch} | {name} | {us[(name, 'old')]:.2f} | {us[(name, 'new')]:.2f} |"
        if name != "suffix":
            line += f" {us[(name, 'old')] / us[('suffix', 'old')]:.2f} | {us[(name, 'new')] / us[('suffix', 'new')]:.2f} |"
        else:
            line += " - | - |"
        print(line, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--skip", type=int, default=5, help="first steps not timed (warm-up)")
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--composites", default="", help="e.g. hybrid,adaptive: time these beside suffix instead "
                        "(old and new kernel each, stepping in turn; µs/row and × suffix)")
    args = parser.parse_args()
    if args.composites:
        print("| workload | batch | proposer | old µs/row | new µs/row | old × suffix | new × suffix |")
        print("|---|---:|---|---:|---:|---:|---:|")
        for workload in args.workloads.split(","):
            composites(workload, args.batch, args.context, args.steps, args.k, args.skip, args.composites.split(","))
        return
    print("| workload | batch | steps | old µs/row | new µs/row | new ÷ old | acc/row-step |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for workload in args.workloads.split(","):
        got = paired(workload, args.batch, args.context, args.steps, args.k, args.skip)
        print(f"| {workload} | {args.batch} | {args.steps - args.skip} | {got['old']:.2f} | {got['new']:.2f} | "
              f"{got['ratio']:.2f} | {got['accepted_per_row_step']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
