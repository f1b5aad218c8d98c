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

from specplug.proposers.lookup._hashing import NO_RING, window_hash
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
def _slot(tokens, row, mask, end, n, key):
    """Slot of the n-gram ending at `end` in `row`: its entry, or the empty slot to fill."""
    index = window_hash(tokens, end, n, NO_RING, key) & mask
    while True:
        stored = row[index]
        if stored == EMPTY or _same(tokens, stored, end, n):
            return index
        index = (index + 1) & mask


@njit(cache=True, inline="always")
def ngram_append(tokens, length, new_tokens, positions, counts, used, min_n, key):
    """Write `new_tokens` after `length` tokens and index every n-gram that gains a continuation.

    Once token i is written, the n-gram ending at i - 1 has a continuation, so that is the
    one inserted: the tables hold exactly the n-grams ending at <= length - 2. Returns the
    new length. The caller guarantees room in `tokens` and in the tables. ``key``: the hash key
    (``_hashing.HASH_KEY``), as in every kernel here.
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
            slot = _slot(tokens, positions[row], mask, end, n, key)
            if positions[row, slot] == EMPTY:
                used[row] += 1
            positions[row, slot] = end
            if count_hits:
                counts[row, slot] += 1
        length += 1
    return length


@njit(cache=True, inline="always")
def ngram_lookup(tokens, length, positions, counts, min_n, min_hits, key):
    """(start, n): where the continuation of the longest suffix n-gram seen before starts, and
    its n (the draft's match); (-1, 0) when none was seen.

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
        slot = _slot(tokens, positions[row], mask, end, n, key)
        stored = positions[row, slot]
        if stored == EMPTY:
            continue
        if count_hits and counts[row, slot] < min_hits:
            continue
        return stored + 1, n
    return -1, 0


#: int32 words before a block's tokens: its ``used`` counts, padded so that the arrays after them
#: start on a cache line (a block's offset is a multiple of this too)
BLOCK_ALIGN = 16


@njit(cache=True, inline="always")
def _header(rows):
    return -(-rows // BLOCK_ALIGN) * BLOCK_ALIGN


def block_words(rows: int, token_capacity: int, table_capacity: int, count_hits: bool) -> int:
    """int32 words of one request's block in the pool (see :func:`pooled_block`)."""
    return _header.py_func(rows) + token_capacity + rows * table_capacity * (2 if count_hits else 1)


@njit(cache=True, inline="always")
def pooled_block(memory, base, rows, token_capacity, table_capacity, count_hits):
    """One request's arrays as views of its block at ``base`` in the pool's ``memory``: ``used``
    (entries per table), the tokens, the tables [rows, capacity] and the hit counts (none without
    ``count_hits``). The per-request path holds these views; the batch kernel takes them anew per
    row from ``memory`` and the slot's base and capacities (one buffer, nothing to unbox per row)."""
    used = memory[base : base + rows]
    at = base + _header(rows)
    tokens = memory[at : at + token_capacity]
    at += token_capacity
    table = memory[at : at + rows * table_capacity].reshape((rows, table_capacity))
    at += rows * table_capacity
    width = table_capacity if count_hits else 0
    counts = memory[at : at + rows * width].reshape((rows, width))
    return tokens, table, counts, used


@njit(cache=True, inline="always")
def _slot_arrays(pool, bases, token_caps, table_caps, slot, rows, count_hits):
    return pooled_block(pool, bases[slot], rows, token_caps[slot], table_caps[slot], count_hits)


@njit(cache=True, inline="always")
def _step_row(pool, bases, token_caps, table_caps, rows, lengths, slot, new_tokens, begin, count, limit, min_n, min_hits,
              max_tokens, drafts, draft_lengths, row, out, out_lengths, out_matches, accepted, key):
    """One row of a batch step; False when its arrays have no room (it is left untouched)."""
    tokens, table, row_counts, row_used = _slot_arrays(pool, bases, token_caps, table_caps, slot, rows, min_hits > 1)
    length = lengths[slot]
    out_lengths[row] = out_matches[row] = 0
    if count:
        most = 0
        for k in range(len(row_used)):
            most = max(most, row_used[k])
        if length + count > len(tokens) or most + count > MAX_LOAD * table.shape[1]:
            return False
        accepted[row] = resolve(drafts, draft_lengths, slot, new_tokens, begin, count)
        length = ngram_append(tokens, length, new_tokens[begin : begin + count], table, row_counts, row_used, min_n, key)
        lengths[slot] = length
    if limit < 1:
        return True
    start, n = ngram_lookup(tokens, length, table, row_counts, min_n, min_hits, key)
    take = 0 if start < 0 else min(limit, max_tokens, length - start)
    for k in range(take):
        out[row, k] = tokens[start + k]
    out_lengths[row] = take
    out_matches[row] = n  # 0 where nothing matched (take is then 0; a match always drafts a token)
    remember(drafts, draft_lengths, slot, out, row, take)
    return True


#: the most new tokens of a row whose table slots are prefetched (more: the first ones only)
PREFETCH_TOKENS = 16
#: rows ahead whose token tail is prefetched; the rows between get their table slots, then what they hold
PREFETCH_ROWS = 3


# The prefetches index the pool by offsets (its block layout, :func:`pooled_block`) rather than
# taking a row's arrays as views: three rows' views per row cost more than the prefetches saved.


@njit(cache=True, inline="always")
def _prefetch_tail(pool, bases, token_caps, lengths, slot, rows, drafts):
    """Start the misses of a later row's token tail (the n-grams' last tokens, where its new
    tokens go) and its row of last drafts (addresses known before the row runs)."""
    tokens_at = bases[slot] + _header(rows)
    prefetch(pool, tokens_at + min(max(lengths[slot] - 1, 0), token_caps[slot] - 1))
    prefetch(drafts, (slot, 0))


@njit(cache=True, inline="always")
def _prefetch_slots(pool, bases, token_caps, table_caps, rows, lengths, slot, new_tokens, begin, count, min_n, scratch,
                    homes, key):
    """Start the misses of a later row's table probes: the slots its inserts and its look-up hash
    to, from its token tail (prefetched a row earlier) and its new tokens. Each n-gram's slot goes
    into ``homes[i, k]`` (the n-gram ending at its i-th new position, table k; -1: none), for
    :func:`_prefetch_stored` a row later. Returns how many positions it hashed (0: the row will
    grow, nothing prefetched). A hint: it never changes a result. ``scratch`` holds the widest
    n-gram plus PREFETCH_TOKENS tokens."""
    length = lengths[slot]
    token_cap, table_cap = token_caps[slot], table_caps[slot]
    if length + count > token_cap:
        return 0
    tokens_at = bases[slot] + _header(rows)
    table_at = tokens_at + token_cap
    count = min(count, PREFETCH_TOKENS)
    widest = min(min_n + rows - 1, len(scratch) - PREFETCH_TOKENS)
    kept = min(length, widest)  # tokens before the new ones in scratch
    for i in range(kept):
        scratch[i] = pool[tokens_at + length - kept + i]
    for i in range(count):
        scratch[kept + i] = new_tokens[begin + i]
    mask = table_cap - 1
    # the inserts' n-grams end at length - 1 .. length + count - 2 (scratch kept - 1 ..); the
    # last end is the look-up's, the n-grams ending at the last token
    for i in range(count + 1):
        e = kept - 1 + i
        for k in range(rows):
            homes[i, k] = -1
            n = min_n + k
            if e - n + 1 < 0:
                continue
            index = window_hash(scratch, e, n, NO_RING, key) & mask
            homes[i, k] = index
            prefetch(pool, table_at + k * table_cap + index)
    return count + 1


@njit(cache=True, inline="always")
def _prefetch_stored(pool, bases, token_caps, table_caps, rows, lengths, slot, homes, hashed):
    """A row after :func:`_prefetch_slots` (its slots now cached): prefetch the tokens they point at
    (the n-gram comparisons, the draft's first tokens). Nothing to hash again: ``homes`` has them."""
    length = lengths[slot]
    tokens_at = bases[slot] + _header(rows)
    table_at = tokens_at + token_caps[slot]
    table_cap = table_caps[slot]
    for i in range(hashed):
        for k in range(rows):
            index = homes[i, k]
            if index >= 0:
                position = pool[table_at + k * table_cap + index]
                if 0 <= position < length:
                    prefetch(pool, tokens_at + position)


@njit(cache=True)
def ngram_step_batch(pool, bases, token_caps, table_caps, rows_per_table, lengths, slots, new_tokens, offsets, limits,
                     min_n, min_hits, max_tokens, drafts, draft_lengths, out, out_lengths, out_matches, accepted, blocked,
                     key):
    """One engine step for every row: count acceptance, append its new tokens, draft (one call for the batch),
    each draft's match (its n; 0: no draft) into ``out_matches``.

    Why this is fast: the per-request path pays a Python call, argument checks and a numba
    dispatch per request and per operation; here the whole batch is one dispatch, and each
    row's work is the same O(1) hash probes as :func:`ngram_append` and :func:`ngram_lookup`.
    Every request's arrays are a block of ``pool`` (:func:`pooled_block`, at ``bases[slot]``
    with its capacities), so a row's arrays cost a few loads, nothing to unbox.
    Each slot's last draft lives in ``drafts[slot, :draft_lengths[slot]]`` (acceptance is
    counted against it, then it is replaced). A row whose token array or tables have no room
    for its new tokens is not touched and is marked in `blocked`: the caller grows it (rare:
    capacities double) and runs it alone. Returns how many rows are blocked. Serial over rows:
    see :func:`ngram_step_batch_parallel` for many rows on many cores.
    """
    stuck = 0
    rows = len(slots)
    count_hits = min_hits > 1
    scratch = np.empty(min_n + rows_per_table - 1 + PREFETCH_TOKENS, dtype=np.int64)
    # the slots that rows two and one ahead hash to (buffer row % PREFETCH_ROWS), and how many positions
    homes = np.empty((PREFETCH_ROWS, PREFETCH_TOKENS + 1, rows_per_table), dtype=np.int64)
    hashed = np.zeros(PREFETCH_ROWS, dtype=np.int64)
    # Rows' misses overlap (_prefetch.py says why): three rows ahead, the token tail is
    # prefetched; two ahead (its tail now cached), the table slots its inserts and look-up hash
    # to; one ahead (those slots now cached), the tokens they point at.
    for row in range(min(rows, PREFETCH_ROWS)):
        _prefetch_tail(pool, bases, token_caps, lengths, slots[row], rows_per_table, drafts)
    for row in range(rows):
        ahead = row + PREFETCH_ROWS
        if ahead < rows:
            _prefetch_tail(pool, bases, token_caps, lengths, slots[ahead], rows_per_table, drafts)
        later = row + 1
        if later < rows:  # hashed a row ago (none for the first rows)
            _prefetch_stored(pool, bases, token_caps, table_caps, rows_per_table, lengths, slots[later],
                             homes[later % PREFETCH_ROWS], hashed[later % PREFETCH_ROWS])
        later = row + 2
        if later < rows:
            hashed[later % PREFETCH_ROWS] = _prefetch_slots(
                pool, bases, token_caps, table_caps, rows_per_table, lengths, slots[later], new_tokens, offsets[later],
                offsets[later + 1] - offsets[later], min_n, scratch, homes[later % PREFETCH_ROWS], key,
            )
        begin = offsets[row]
        if not _step_row(pool, bases, token_caps, table_caps, rows_per_table, lengths, slots[row], new_tokens, begin,
                         offsets[row + 1] - begin, limits[row], min_n, min_hits, max_tokens, drafts, draft_lengths, row,
                         out, out_lengths, out_matches, accepted, key):
            blocked[row] = True
            stuck += 1
    return stuck


@njit(cache=True, parallel=True)
def ngram_step_batch_parallel(pool, bases, token_caps, table_caps, rows_per_table, lengths, slots, new_tokens, offsets,
                              limits, min_n, min_hits, max_tokens, drafts, draft_lengths, out, out_lengths, out_matches,
                              accepted, blocked, key):
    """:func:`ngram_step_batch` with the rows spread over numba's threads (rows share no state)."""
    stuck = 0
    for row in prange(len(slots)):
        begin = offsets[row]
        if not _step_row(pool, bases, token_caps, table_caps, rows_per_table, lengths, slots[row], new_tokens, begin,
                         offsets[row + 1] - begin, limits[row], min_n, min_hits, max_tokens, drafts, draft_lengths, row,
                         out, out_lengths, out_matches, accepted, key):
            blocked[row] = True
            stuck += 1
    return stuck
