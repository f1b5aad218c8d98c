"""Numba kernels of the n-gram index: one open-addressing table per n.

Why this is fast: a step appends a token and inserts one n-gram per n (O(max_n - min_n + 1)
hash probes), and a lookup probes each table once, so the cost of a step does not grow with
the history. Why it is small: a table slot holds only the *end position* of the most recent
occurrence (int32); the key is never stored, it is re-read from the token array when a probe
needs to compare, so a slot costs 4 bytes (8 with hit counts).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from specplug.proposers._hashing import NO_RING, window_hash
from specplug.proposers._prefetch import prefetch
from specplug.proposers._row_drafts import remember, resolve

EMPTY = -1
#: tables grow (and are rebuilt from the tokens) before their load exceeds this
MAX_LOAD = 0.75


@njit(cache=True, inline="always")
def _same(tokens, a, b, n):
    for k in range(n):
        if tokens[a - k] != tokens[b - k]:
            return False
    return True


@njit(cache=True, inline="always")
def _slot(tokens, row, mask, end, n):
    """Slot of the n-gram ending at `end` in `row`: its entry, or the empty slot to fill."""
    return _slot_from(tokens, row, mask, end, n, window_hash(tokens, end, n, NO_RING) & mask)


@njit(cache=True, inline="always")
def _slot_from(tokens, row, mask, end, n, index):
    """:func:`_slot` with the n-gram's home slot (its hash & mask) already known."""
    while True:
        stored = row[index]
        if stored == EMPTY or _same(tokens, stored, end, n):
            return index
        index = (index + 1) & mask


@njit(cache=True)
def ngram_append(tokens, length, new_tokens, positions, counts, used, min_n):
    """Write `new_tokens` after `length` tokens and index every n-gram that gains a continuation.

    Once token i is written, the n-gram ending at i - 1 has a continuation, so that is the
    one inserted: the tables hold exactly the n-grams ending at <= length - 2. Returns the
    new length. The caller guarantees room in `tokens` and in the tables.
    """
    mask = positions.shape[1] - 1
    count_hits = counts.shape[1] > 0
    for token in new_tokens:
        tokens[length] = token
        end = length - 1
        for row in range(positions.shape[0]):
            n = min_n + row
            if end - n + 1 < 0:
                break
            slot = _slot(tokens, positions[row], mask, end, n)
            if positions[row, slot] == EMPTY:
                used[row] += 1
            positions[row, slot] = end
            if count_hits:
                counts[row, slot] += 1
        length += 1
    return length


@njit(cache=True)
def ngram_lookup(tokens, length, positions, counts, min_n, min_hits):
    """Start of the continuation of the longest suffix n-gram seen before, or -1.

    Tries n from the largest down; the first n whose last n tokens occurred earlier (at least
    `min_hits` times when hits are counted) wins, and its most recent occurrence is used.
    """
    mask = positions.shape[1] - 1
    count_hits = counts.shape[1] > 0
    end = length - 1
    for row in range(positions.shape[0] - 1, -1, -1):
        n = min_n + row
        if end - n < 0:  # the suffix itself plus at least one earlier end position
            continue
        slot = _slot(tokens, positions[row], mask, end, n)
        stored = positions[row, slot]
        if stored == EMPTY:
            continue
        if count_hits and counts[row, slot] < min_hits:
            continue
        return stored + 1
    return -1


@njit(cache=True, inline="always")
def _append_from(tokens, length, new_tokens, begin, count, positions, counts, used, min_n, homes, hashed):
    """:func:`ngram_append` of ``new_tokens[begin : begin + count]``, the probes of the first
    ``hashed`` ends starting at their home slots from ``homes`` (by :func:`_hash_row`; the
    others hashed here)."""
    mask = positions.shape[1] - 1
    width = positions.shape[0]
    count_hits = counts.shape[1] > 0
    for i in range(count):
        tokens[length] = new_tokens[begin + i]
        end = length - 1
        for row in range(width):
            n = min_n + row
            if end - n + 1 < 0:
                break
            if i < hashed:
                home = homes[i * width + row]
            else:
                home = window_hash(tokens, end, n, NO_RING) & mask
            slot = _slot_from(tokens, positions[row], mask, end, n, home)
            if positions[row, slot] == EMPTY:
                used[row] += 1
            positions[row, slot] = end
            if count_hits:
                counts[row, slot] += 1
        length += 1
    return length


@njit(cache=True, inline="always")
def _lookup_from(tokens, length, positions, counts, min_n, min_hits, homes, hashed, last):
    """:func:`ngram_lookup`, its probes starting at their home slots from ``homes`` (the ``last``-th
    end's) when that end was hashed (``last < hashed``; see :func:`_append_from`)."""
    mask = positions.shape[1] - 1
    width = positions.shape[0]
    count_hits = counts.shape[1] > 0
    end = length - 1
    for row in range(width - 1, -1, -1):
        n = min_n + row
        if end - n < 0:  # the suffix itself plus at least one earlier end position
            continue
        if last < hashed:
            home = homes[last * width + row]
        else:
            home = window_hash(tokens, end, n, NO_RING) & mask
        slot = _slot_from(tokens, positions[row], mask, end, n, home)
        stored = positions[row, slot]
        if stored == EMPTY:
            continue
        if count_hits and counts[row, slot] < min_hits:
            continue
        return stored + 1
    return -1


@njit(cache=True, inline="always")
def _step_row(arrays, lengths, slot, new_tokens, begin, count, limit, min_n, min_hits, max_tokens,
              drafts, draft_lengths, row, out, out_lengths, accepted, homes, hashed):
    """One row of a batch step; False when its arrays have no room (it is left untouched).
    ``homes``: the home slots of its first ``hashed`` ends' probes (:func:`_hash_row`; 0: none)."""
    tokens, table, row_counts, row_used = arrays[slot]
    length = lengths[slot]
    out_lengths[row] = 0
    if count:
        most = 0
        for k in range(len(row_used)):
            most = max(most, row_used[k])
        if length + count > len(tokens) or most + count > MAX_LOAD * table.shape[1]:
            return False
        accepted[row] = resolve(drafts, draft_lengths, slot, new_tokens, begin, count)
        length = _append_from(tokens, length, new_tokens, begin, count, table, row_counts, row_used, min_n,
                              homes, hashed)
        lengths[slot] = length
    if limit < 1:
        return True
    start = _lookup_from(tokens, length, table, row_counts, min_n, min_hits, homes, hashed, count)
    take = 0 if start < 0 else min(limit, max_tokens, length - start)
    for k in range(take):
        out[row, k] = tokens[start + k]
    out_lengths[row] = take
    remember(drafts, draft_lengths, slot, out, row, take)
    return True


#: the most new tokens of a row whose probes are hashed ahead (more: the first ones only)
PREFETCH_TOKENS = 16
#: rows whose probes are hashed and prefetched together, before any of them runs
LOCKSTEP_ROWS = 8


@njit(cache=True, inline="always")
def _hash_row(arrays, lengths, slot, new_tokens, begin, count, min_n, scratch, homes):
    """Hash a row's probes once, ahead: ``homes[i * width + k]`` is the home slot of the n-gram
    of n = min_n + k ending at the i-th end (i < count: the i-th insert's, i = count: the
    look-up's), and its table slot is prefetched. Returns how many ends are hashed (0 for a row
    without room; past PREFETCH_TOKENS new tokens the row hashes the rest itself); within them,
    the n too long for the history are not hashed, and the row never probes them. Home slots depend only
    on the tokens and the table's size, which nothing changes before the row runs, so a row
    probes exactly as when it hashes alone. ``scratch`` holds the widest n-gram plus
    PREFETCH_TOKENS tokens."""
    tokens, table = arrays[slot][0], arrays[slot][1]
    length = lengths[slot]
    width = table.shape[0]
    if length + count > len(tokens):
        return 0
    count = min(count, PREFETCH_TOKENS)
    kept = min(length, min_n + width - 1)  # tokens before the new ones in scratch
    for i in range(kept):
        scratch[i] = tokens[length - kept + i]
    for i in range(count):
        scratch[kept + i] = new_tokens[begin + i]
    mask = table.shape[1] - 1
    for i in range(count + 1):
        e = kept - 1 + i  # the end in scratch (length - 1 + i in tokens)
        for k in range(width):
            n = min_n + k
            if e - n + 1 < 0:
                break
            home = window_hash(scratch, e, n, NO_RING) & mask
            homes[i * width + k] = home
            prefetch(table[k], home)
    return count + 1  # the i-th end is length - 1 + i, an insert's or the look-up's alike


@njit(cache=True)
def ngram_step_batch(arrays, lengths, slots, new_tokens, offsets, limits, min_n, min_hits, max_tokens,
                     drafts, draft_lengths, out, out_lengths, accepted, blocked):
    """One engine step for every row: count acceptance, append its new tokens, draft (one call for the batch).

    Why this is fast: the per-request path pays a Python call, argument checks and a numba
    dispatch per request and per operation; here the whole batch is one dispatch, and each
    row's work is the same O(1) hash probes as :func:`ngram_append` and :func:`ngram_lookup`.
    Each slot's last draft lives in ``drafts[slot, :draft_lengths[slot]]`` (acceptance is
    counted against it, then it is replaced). A row whose token array or tables have no room
    for its new tokens is not touched and is marked in `blocked`: the caller grows it (rare:
    capacities double) and runs it alone. Returns how many rows are blocked. Serial over rows:
    see :func:`ngram_step_batch_parallel` for many rows on many cores.

    Rows go in blocks of ``LOCKSTEP_ROWS`` so that their misses overlap (_prefetch.py says
    why): each row of a block hashes its probes once (:func:`_hash_row`, prefetching their
    table slots), then the rows run, probing from the hashed home slots. Fewer stages than
    before measured cheaper: each stage re-reads the row's arrays from the typed list (~40 ns,
    reference counts included), about what a prefetch of the token tail or of the tokens the
    slots point at saves (docs/performance.md).
    """
    stuck = 0
    rows = len(slots)
    width = 1
    if rows:
        width = arrays[slots[0]][1].shape[0]
    scratch = np.empty(min_n + width - 1 + PREFETCH_TOKENS, dtype=np.int64)
    homes = np.empty((LOCKSTEP_ROWS, (PREFETCH_TOKENS + 1) * width), dtype=np.int64)
    hashed = np.zeros(LOCKSTEP_ROWS, dtype=np.int64)
    for first in range(0, rows, LOCKSTEP_ROWS):
        block = min(LOCKSTEP_ROWS, rows - first)
        for b in range(block):
            row = first + b
            hashed[b] = _hash_row(arrays, lengths, slots[row], new_tokens, offsets[row],
                                  offsets[row + 1] - offsets[row], min_n, scratch, homes[b])
        for b in range(block):
            row = first + b
            begin = offsets[row]
            if not _step_row(arrays, lengths, slots[row], new_tokens, begin, offsets[row + 1] - begin, limits[row],
                             min_n, min_hits, max_tokens, drafts, draft_lengths, row, out, out_lengths, accepted,
                             homes[b], hashed[b]):
                blocked[row] = True
                stuck += 1
    return stuck


@njit(cache=True, parallel=True)
def ngram_step_batch_parallel(arrays, lengths, slots, new_tokens, offsets, limits, min_n, min_hits, max_tokens,
                              drafts, draft_lengths, out, out_lengths, accepted, blocked):
    """:func:`ngram_step_batch` with the rows spread over numba's threads (rows share no state;
    each hashes its own probes)."""
    stuck = 0
    unhashed = np.empty(0, dtype=np.int64)
    for row in prange(len(slots)):
        begin = offsets[row]
        if not _step_row(arrays, lengths, slots[row], new_tokens, begin, offsets[row + 1] - begin, limits[row],
                         min_n, min_hits, max_tokens, drafts, draft_lengths, row, out, out_lengths, accepted,
                         unhashed, 0):
            blocked[row] = True
            stuck += 1
    return stuck
