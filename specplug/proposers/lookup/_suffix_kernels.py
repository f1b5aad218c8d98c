"""Numba kernels of the suffix index: a ring of tokens with hash-chained anchor occurrences.

Layout (one index per request, and one for the global cache of finished requests):

- ``tokens[g & mask]``: the token at global position ``g``; ``SEP`` ends a cached sequence.
- Two anchor levels, a short one (``min_match`` tokens) and a long one (``long_match``),
  each with:
  ``prev[g & mask]``: distance from ``g`` back to the previous position whose anchor (the
  tokens ending there) is the same, 0 when none, so a chain walk visits the occurrences of
  an anchor most recent first and stops at the first evicted position; and
  ``head``: an open-addressing table, anchor -> most recent global position. Keys are not
  stored: a probe compares tokens in the ring. Entries older than ``start`` are stale; they
  are skipped, reused, and swept by a rebuild once the table is three-quarters full.
- ``state = [start, end, used_short, used_long, key]``: the live window ``[start, end)``, the
  occupied slots of each head table, and the key of the anchors' hash (``_hashing.HASH_KEY``,
  written when the ring is made: the kernels read it from there).

Why two levels: the occurrences of a 2-token anchor in code ("self .") are many, and the
one that continues the current line may be far back; the long anchor's occurrences are few
and all match at least ``long_match`` tokens, so it is looked up first.
Why this is fast: a step inserts one anchor per level and walks at most ``max_candidates``
chain links, comparing at most ``max_depth`` tokens for each, so its cost does not grow
with the history.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from specplug.proposers.lookup._hashing import NO_RING, window_hash
from specplug.proposers._prefetch import prefetch
from specplug.proposers._row_drafts import remember, resolve

EMPTY = -1
SEP = -1
START, END, USED_SHORT, USED_LONG, KEY = 0, 1, 2, 3, 4
#: words of a ring's state
STATE_SIZE = 5
MAX_LOAD = 0.75
#: int32 words before a pooled ring's arrays (its state, padded to a cache line)
STATE_WORDS = 16


@njit(cache=True, inline="always")
def pooled_ring(memory, offset, capacity, long_level):
    """A request ring's arrays, views of its block in the pool's buffer (``_suffix_index.ring_pool``):
    state, tokens, short chain, short head table, long chain, long head table (one slot each when
    the long level is off). Plain Python through ``pooled_ring.py_func``."""
    state = memory[offset : offset + STATE_SIZE]
    at = offset + STATE_WORDS
    tokens = memory[at : at + capacity]
    prev_s = memory[at + capacity : at + 2 * capacity]
    head_s = memory[at + 2 * capacity : at + 4 * capacity]
    at += 4 * capacity
    if long_level:
        prev_l = memory[at : at + capacity]
        head_l = memory[at + capacity : at + 3 * capacity]
    else:
        prev_l = memory[at : at + 1]
        head_l = memory[at + 1 : at + 2]
    return state, tokens, prev_s, head_s, prev_l, head_l


@njit(cache=True, inline="always")
def _same_anchor(tokens, mask, x, y, a):
    for k in range(a):
        if tokens[(x - k) & mask] != tokens[(y - k) & mask]:
            return False
    return True


@njit(cache=True, inline="always")
def _indexable(tokens, mask, start, e, a):
    if e - a + 1 < start:
        return False
    for k in range(a):
        if tokens[(e - k) & mask] == SEP:
            return False
    return True


@njit(cache=True, inline="always")
def _probe(tokens, head, start, e, a, mask, hmask, key):
    """Where the anchor of ``a`` tokens ending at ``e`` goes in ``head``: (its slot, the position
    stored there: the anchor's latest occurrence, or -1 when it has none and the slot is free:
    an empty one, or the first stale one on the way)."""
    slot = window_hash(tokens, e, a, mask, key) & hmask
    free = -1
    while True:
        stored = head[slot]
        if stored == EMPTY:
            return (slot if free < 0 else free), -1
        if stored < start:
            if free < 0:
                free = slot
        elif _same_anchor(tokens, mask, stored, e, a):
            return slot, stored
        slot = (slot + 1) & hmask


@njit(cache=True)
def _index_range(tokens, prev_s, head_s, prev_l, head_l, start, first, last, a_s, a_l, new_tokens, key):
    """Index the anchors ending at ``first .. last - 1`` whose continuation exists (is not SEP), at
    both levels: each one's chain link to its previous occurrence, and the head slot pointing at it.
    With ``new_tokens`` (one per anchor), each anchor's continuation is written first, at ``e + 1``.
    Returns the head slots each level newly occupied.

    Written flat, both levels in this one loop: with the insert as a function taking the arrays (inlined
    or called), numba kept reference-count updates of the arrays inside the loop, and an insert cost
    ten times as much (~50 ns in cache, against ~5)."""
    mask = tokens.shape[0] - 1
    hmask_s = head_s.shape[0] - 1
    hmask_l = head_l.shape[0] - 1
    writing = new_tokens.shape[0] > 0
    took_s = 0
    took_l = 0
    for e in range(first, last):
        if writing:
            tokens[(e + 1) & mask] = new_tokens[e - first]
        if tokens[(e + 1) & mask] == SEP or not _indexable(tokens, mask, start, e, a_s):
            continue
        slot, stored = _probe(tokens, head_s, start, e, a_s, mask, hmask_s, key)
        prev_s[e & mask] = 0 if stored < 0 else e - stored
        took_s += head_s[slot] == EMPTY
        head_s[slot] = e
        if a_l > 0 and _indexable(tokens, mask, start, e, a_l):
            slot, stored = _probe(tokens, head_l, start, e, a_l, mask, hmask_l, key)
            prev_l[e & mask] = 0 if stored < 0 else e - stored
            took_l += head_l[slot] == EMPTY
            head_l[slot] = e
    return took_s, took_l


@njit(cache=True)
def rebuild(tokens, prev_s, head_s, prev_l, head_l, state, a_s, a_l):
    """Re-index the live window from scratch (after growth, or to sweep stale head slots)."""
    head_s[:] = EMPTY
    head_l[:] = EMPTY
    start = state[START]
    took_s, took_l = _index_range(tokens, prev_s, head_s, prev_l, head_l, start, start, state[END] - 1, a_s, a_l,
                                  tokens[:0], state[KEY])
    state[USED_SHORT] = took_s
    state[USED_LONG] = took_l


@njit(cache=True, inline="always")
def append(tokens, prev_s, head_s, prev_l, head_l, state, new_tokens, a_s, a_l, separator):
    """Append ``new_tokens`` (then a SEP when ``separator``) and index new continuations.

    The caller guarantees room in the ring: ``end - start + len(new_tokens) + separator <=
    len(tokens)``. Stale head slots are swept first when the tables would pass their load
    limit (here rather than in Python: a step's bookkeeping stays in one compiled call).
    ``a_l == 0`` turns the long level off.
    """
    if max(state[USED_SHORT], state[USED_LONG]) + new_tokens.shape[0] > MAX_LOAD * head_s.shape[0]:
        rebuild(tokens, prev_s, head_s, prev_l, head_l, state, a_s, a_l)
    end = state[END]
    count = new_tokens.shape[0]
    if count:  # each new token is the continuation of the anchor ending just before it
        took_s, took_l = _index_range(tokens, prev_s, head_s, prev_l, head_l, state[START], end - 1, end + count - 1,
                                      a_s, a_l, new_tokens, state[KEY])
        state[USED_SHORT] += took_s
        state[USED_LONG] += took_l
        end += count
    if separator:
        tokens[end & (tokens.shape[0] - 1)] = SEP
        end += 1
    state[END] = end


@njit(cache=True)
def _find(tokens, head, state, query, q, a):
    mask = tokens.shape[0] - 1
    hmask = head.shape[0] - 1
    start = state[START]
    slot = window_hash(query, q - 1, a, NO_RING, state[KEY]) & hmask
    while True:
        stored = head[slot]
        if stored == EMPTY:
            return -1
        if stored >= start:
            same = True
            for k in range(a):
                if tokens[(stored - k) & mask] != query[q - 1 - k]:
                    same = False
                    break
            if same:
                return stored
        slot = (slot + 1) & hmask


@njit(cache=True, inline="always")
def anchor(tokens, head_s, head_l, state, query, q, a_s, a_l):
    """The most recent occurrence of the context's last ``a_l`` tokens (the long anchor) or, when
    it never occurred, of its last ``a_s`` tokens: (its end position, True when it is the long
    anchor's, so the walk follows the long chain); a position below ``state[START]`` when none."""
    if q < a_s:
        return -1, False
    g = -1
    long = False
    if a_l > 0 and q >= a_l:
        g = _find(tokens, head_l, state, query, q, a_l)
        long = True
    if g < state[START]:
        g = _find(tokens, head_s, state, query, q, a_s)
        long = False
    return g, long


@njit(cache=True, inline="always")
def _match_lengths(tokens, state, query, q, max_depth, ends, lengths, found):
    """How far each candidate agrees with the context backwards (at most ``max_depth``)."""
    mask = tokens.shape[0] - 1
    start = state[START]
    depth_cap = min(max_depth, q)
    for i in range(found):
        g = ends[i]
        m = 0
        while m < depth_cap and g - m >= start:
            t = tokens[(g - m) & mask]
            if t == SEP or t != query[q - 1 - m]:
                break
            m += 1
        lengths[i] = m


@njit(cache=True)
def candidates(tokens, prev_s, head_s, prev_l, head_l, state, query, q, a_s, a_l, max_depth, ends, lengths):
    """The occurrences a draft is voted among, most recent first: their end positions and match lengths.

    The ``len(ends)`` most recent occurrences of the context's last ``a_l`` tokens (the long
    anchor) or, when it never occurred, of its last ``a_s`` tokens; each one's match is how
    far it agrees with the context backwards (at most ``max_depth``). Returns how many.
    """
    if q < a_s:
        return 0
    g, long = anchor(tokens, head_s, head_l, state, query, q, a_s, a_l)
    prev = prev_l if long else prev_s
    mask = tokens.shape[0] - 1
    start = state[START]
    # Two passes. The chain walk is a chain of dependent loads (each link is read from the one
    # before), so it runs alone: a mispredicted match comparison in the same loop would throw the
    # next link's load away and serialize two cache misses per link. The comparisons then load
    # independent positions, which the CPU overlaps.
    found = _walk(prev, mask, start, g, ends)
    _match_lengths(tokens, state, query, q, max_depth, ends, lengths, found)
    return found


@njit(cache=True, inline="always")
def _walk(prev, mask, start, g, ends):
    """The chain from ``g``, most recent first, into ``ends`` (at most its length); how many."""
    found = 0
    while g >= start and found < ends.shape[0]:
        ends[found] = g
        found += 1
        step = prev[g & mask]
        if step == 0:
            break
        g -= step
    return found


@njit(cache=True)
def continuations(tokens, state, ends, lengths, found, max_tokens, spec_factor, spec_offset, out, counts):
    """Each candidate's continuation, as far as its match lets a draft grow (``out[i, :counts[i]]``).

    At most ``min(max_tokens, floor(spec_factor * match + spec_offset))`` tokens, ending at a
    sequence's end (SEP) or at the index's end.
    """
    mask = tokens.shape[0] - 1
    end = state[END]
    for i in range(found):
        budget = min(max_tokens, int(np.floor(spec_factor * lengths[i] + spec_offset)))
        n = 0
        g = ends[i] + 1
        while n < budget and g < end:
            t = tokens[g & mask]
            if t == SEP:
                break
            out[i, n] = t
            n += 1
            g += 1
        counts[i] = n


@njit(cache=True)
def vote(tokens, prev_s, head_s, prev_l, head_l, state, query, q, a_s, a_l, max_depth, max_tokens, spec_factor,
         spec_offset, min_token_prob, out, ends, lengths, tally):
    """Draft from the index for a context whose last ``q`` tokens are ``query[:q]``.

    The candidates are the ``max_candidates`` (``len(ends)``) most recent occurrences of the
    context's last ``a_l`` tokens (the long anchor) or, when it never occurred, of its last ``a_s``
    tokens (:func:`candidates`). Among them, the ones with the longest match (at most ``max_depth``)
    vote, token by token, on the continuation: the most frequent token wins (ties: the most
    recent occurrence), while the product of the winners' frequencies stays >= ``min_token_prob``.
    At most ``min(max_tokens, floor(spec_factor * match + spec_offset))`` tokens.
    Returns (tokens written to ``out``, score = expected accepted tokens, match length).

    The scratch is the caller's, made once (``len(ends)`` = ``len(lengths)`` = max_candidates,
    ``tally`` = ``vote_scratch(max_candidates)``): a batch step makes it once for all rows, a
    proposer once for all its per-request drafts (``_suffix_index.VoteScratch``).
    """
    found = candidates(tokens, prev_s, head_s, prev_l, head_l, state, query, q, a_s, a_l, max_depth, ends, lengths)
    return vote_found(tokens, state, found, ends, lengths, max_tokens, spec_factor, spec_offset, min_token_prob, out,
                      tally)


#: a voter's next token when it has none (past the index's end, or at a sequence's end): no int32 token
NO_VOTE = -(1 << 40)
#: int64 words of a vote's scratch before its voters' tokens: the stamp clock, the table's slots
TALLY_HEAD = 2


@njit(cache=True)
def vote_scratch(max_candidates):
    """The scratch of :func:`vote_found` for at most ``max_candidates`` voters, zeroed once: a stamp
    clock, the table's size, each voter's next token, the distinct tokens' slots in voter order, and
    an open-addressing table of (stamp, token, count) per slot, a power of two >= 2x the voters. Each
    draft position's counts carry a new stamp, so the table is never cleared (not between positions,
    rows or calls)."""
    size = 2
    while size < 2 * max_candidates:
        size *= 2
    tally = np.zeros(TALLY_HEAD + 2 * max_candidates + 3 * size, dtype=np.int64)
    tally[1] = size
    return tally


@njit(cache=True, inline="always")
def _slot(token, size_mask):
    # Fibonacci hashing: the product's high bits depend on every bit of the token
    return ((token * np.int64(-7046029254386353131)) >> 40) & size_mask


@njit(cache=True, inline="always")
def _count(tally, alive):
    """Count the ``alive`` voters' tokens (``tally[TALLY_HEAD:][:alive]``) under a new stamp; the
    winner: the token with the highest count, the earliest voter's on a tie (0, 0 when none votes)."""
    size = tally[1]
    table_at = tally.shape[0] - 3 * size
    cont_at = TALLY_HEAD
    distinct_at = table_at - (table_at - TALLY_HEAD) // 2
    stamp = tally[0] + 1
    tally[0] = stamp
    size_mask = size - 1
    distinct = 0
    for i in range(alive):
        t = tally[cont_at + i]
        if t == NO_VOTE:
            continue
        s = _slot(t, size_mask)
        while True:
            at = table_at + 3 * s
            if tally[at] != stamp:  # free under this stamp: the token's first voter
                tally[at] = stamp
                tally[at + 1] = t
                tally[at + 2] = 1
                tally[distinct_at + distinct] = at
                distinct += 1
                break
            if tally[at + 1] == t:
                tally[at + 2] += 1
                break
            s = (s + 1) & size_mask
    best_token = 0
    best_count = 0
    # the distinct tokens in the order of their first voters: the first to reach the highest count wins
    for k in range(distinct):
        at = tally[distinct_at + k]
        if tally[at + 2] > best_count:
            best_count = tally[at + 2]
            best_token = tally[at + 1]
    return best_token, best_count


@njit(cache=True, inline="always")
def vote_found(tokens, state, found, ends, lengths, max_tokens, spec_factor, spec_offset, min_token_prob, out, tally):
    """:func:`vote` once its ``found`` candidates are in ``ends`` and ``lengths`` (``ends`` is
    reused as scratch; ``tally`` is :func:`vote_scratch`'s, for at least ``found`` voters).

    Time proportional to the voters at each position: their next tokens are gathered once and
    counted in a hash table. The same drafts as counting each voter's token among all the others."""
    mask = tokens.shape[0] - 1
    end = state[END]
    best = 0
    for i in range(found):
        if lengths[i] > best:
            best = lengths[i]
    if found == 0:
        return 0, 0.0, 0
    budget = min(max_tokens, int(np.floor(spec_factor * best + spec_offset)))
    alive = 0
    for i in range(found):
        if lengths[i] == best:
            ends[alive] = ends[i]
            alive += 1
    n_out = 0
    score = 0.0
    cumulative = 1.0
    cont = tally[TALLY_HEAD : TALLY_HEAD + alive]
    for d in range(budget):
        agree = True
        for i in range(alive):
            g = ends[i] + 1 + d
            t = NO_VOTE
            if g < end:
                t = tokens[g & mask]
                if t == SEP:
                    t = NO_VOTE
            cont[i] = t
            agree = agree and t == cont[0]
        if agree:  # one token or none: no counting (the common case once the voters have converged)
            best_token, best_count = cont[0], alive
            if best_token == NO_VOTE:
                best_count = 0
        else:
            best_token, best_count = _count(tally, alive)
        if best_count == 0:
            break
        cumulative *= best_count / alive
        if cumulative < min_token_prob:
            break
        out[n_out] = best_token
        n_out += 1
        score += cumulative
        if best_count < alive:
            kept = 0
            for i in range(alive):
                if cont[i] == best_token:
                    ends[kept] = ends[i]
                    kept += 1
            alive = kept
    return n_out, score, best


@njit(cache=True, inline="always")
def _take_row(memory, bases, capacities, lengths, slot, new_tokens, begin, count, a_s, a_l, drafts, draft_lengths, row,
              out_lengths, scores, out_matches, accepted):
    """A row's new tokens: its last draft's acceptance counted, the tokens appended and indexed.
    False when its ring has no room (it is left untouched)."""
    state, tokens, prev_s, head_s, prev_l, head_l = pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
    out_lengths[row] = 0
    scores[row] = 0.0
    out_matches[row] = 0
    if count:
        length = lengths[slot]
        if length + count > tokens.shape[0]:
            return False
        accepted[row] = resolve(drafts, draft_lengths, slot, new_tokens, begin, count)
        append(tokens, prev_s, head_s, prev_l, head_l, state, new_tokens[begin : begin + count], a_s, a_l, False)
        lengths[slot] = length + count
    return True


@njit(cache=True, inline="always")
def _draft_row(memory, bases, capacities, lengths, slot, limit, a_s, a_l, max_depth, max_tokens, spec_factor, spec_offset,
               min_token_prob, use_cache, cache, draft_lengths, draft_scores, drafts, row, out, out_lengths, scores,
               out_matches, cached, found, ends, matches, c_ends, tally):
    """A row's draft, once the ``found`` candidates of its own ring are in ``ends`` (walked, not yet
    compared): its ring's vote, then the cache's (``cache``: its ring's arrays, as ``vote`` takes
    them), the longer match winning (then the higher score); ``out_matches[row]``: that match's
    length (0 when nothing was drafted).

    Inlined, so at most 30 arguments: past that, Python passes a call's arguments as one tuple, which
    numba cannot inline; called, it took and dropped a reference on each array argument, per row."""
    state, tokens, prev_s, head_s, prev_l, head_l = pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
    length = lengths[slot]
    limit = min(limit, max_tokens)
    first = max(0, length - max_depth)
    query = tokens[first:length]
    q = length - first
    _match_lengths(tokens, state, query, q, max_depth, ends, matches, found)
    mine = out[row]
    taken, score, match = vote_found(tokens, state, found, ends, matches, limit, spec_factor, spec_offset,
                                     min_token_prob, mine, tally)
    if use_cache:
        theirs = cached[row]
        c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state = cache
        c_taken, c_score, c_match = vote(c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state, query, q, a_s,
                                         a_l, max_depth, limit, spec_factor, spec_offset, min_token_prob, theirs,
                                         c_ends, matches, tally)
        if c_match > match or (c_match == match and c_score > score):
            taken, score, match = c_taken, c_score, c_match
            for k in range(taken):
                mine[k] = theirs[k]
    out_lengths[row] = taken
    scores[row] = score
    out_matches[row] = match if taken else 0
    remember(drafts, draft_lengths, slot, out, row, taken)
    draft_scores[slot] = score


@njit(cache=True)
def _step_row(memory, bases, capacities, lengths, slot, new_tokens, begin, count, limit, a_s, a_l, max_depth, max_candidates,
              max_tokens, spec_factor, spec_offset, min_token_prob, use_cache,
              c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
              drafts, draft_lengths, draft_scores, row, out, out_lengths, scores, out_matches, accepted, cached, ends, matches,
              tally):
    """One row of a batch step; False when its ring has no room (it is left untouched).
    ``ends`` and ``matches`` (max_candidates each) and ``tally`` (:func:`vote_scratch`) are the votes' scratch."""
    if not _take_row(memory, bases, capacities, lengths, slot, new_tokens, begin, count, a_s, a_l, drafts, draft_lengths,
                     row, out_lengths, scores, out_matches, accepted):
        return False
    if limit < 1:
        return True
    state, tokens, prev_s, head_s, prev_l, head_l = pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
    length = lengths[slot]
    first = max(0, length - max_depth)
    g, long = anchor(tokens, head_s, head_l, state, tokens[first:length], length - first, a_s, a_l)
    found = _walk(prev_l if long else prev_s, tokens.shape[0] - 1, state[START], g, ends)
    cache = (c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state)
    _draft_row(memory, bases, capacities, lengths, slot, limit, a_s, a_l, max_depth, max_tokens, spec_factor, spec_offset,
               min_token_prob, use_cache, cache, draft_lengths, draft_scores, drafts, row, out, out_lengths, scores,
               out_matches, cached, found, ends, matches, ends, tally)
    return True


#: the most new tokens of a row whose head-table slots are prefetched (more: the first ones only)
PREFETCH_TOKENS = 16


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


@njit(cache=True, inline="always")
def _prefetch_tables(memory, bases, capacities, lengths, slot, new_tokens, begin, count, a_s, a_l, scratch, queued):
    """Start the misses of a later row's head-table probes: the slots its inserts and its
    look-ups hash to, computed from its ring's tail (prefetched a stage earlier) and its new tokens.
    Each slot's offset in ``memory`` and its level's chain offset go into ``queued`` (rows of two),
    for :func:`_prefetch_queued`; returns how many. A hint: a row whose ring will grow, or a hash
    of an anchor that will not be indexed, costs a useless prefetch, never a wrong result.
    ``scratch`` holds ``max(a_s, a_l) + PREFETCH_TOKENS`` tokens, ``queued`` ``2 * (PREFETCH_TOKENS + 1)`` rows."""
    base = bases[slot]
    capacity = capacities[slot]
    length = lengths[slot]
    if length + count > capacity:
        return 0
    key = memory[base + KEY]  # the ring's state opens its block
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
    taken = 0
    # the inserts' anchors end at global positions length - 1 .. length + count - 2 (scratch
    # kept - 1 ..); the last e is the draft's look-ups, the anchors ending at the last token
    for e in range(kept - 1, kept + count):
        if e - a_s + 1 >= 0:
            at = head_s_at + (window_hash(scratch, e, a_s, NO_RING, key) & hmask)
            prefetch(memory, at)
            queued[taken, 0] = at
            queued[taken, 1] = prev_s_at
            taken += 1
        if a_l > 0 and e - a_l + 1 >= 0:
            at = head_l_at + (window_hash(scratch, e, a_l, NO_RING, key) & hmask)
            prefetch(memory, at)
            queued[taken, 0] = at
            queued[taken, 1] = prev_l_at
            taken += 1
    return taken


@njit(cache=True, inline="always")
def _prefetch_queued(memory, bases, lengths, slot, queued, taken):
    """Start the misses of what a later row's head-table slots hold (the slots, queued by
    :func:`_prefetch_tables` a stage earlier, are cached now): each stored position's tokens (an
    anchor comparison) and chain entry (a walk's first link)."""
    tokens_at = bases[slot] + STATE_WORDS
    length = lengths[slot]
    for j in range(taken):
        position = memory[queued[j, 0]]
        if 0 <= position < length:
            prefetch(memory, tokens_at + position)
            prefetch(memory, queued[j, 1] + position)


#: rows whose chain walks run interleaved, link by link (their misses overlap)
LOCKSTEP_ROWS = 16


@njit(cache=True, inline="always")
def _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken,
                    first_row, stage):
    """One prefetch stage for the rows of the block starting at ``first_row`` (none past the
    batch): 0, their ring tails; 1, the head-table slots their inserts and look-ups hash to (the
    tails cached by now), queued in ``queued[i]`` (``taken[i]`` of them for the block's row i);
    2, the positions those slots hold (the slots cached by now)."""
    for i in range(min(LOCKSTEP_ROWS, len(slots) - first_row)):
        row = first_row + i
        if stage == 0:
            _prefetch_tail(memory, bases, capacities, lengths, slots[row], a_l)
        elif stage == 1:
            taken[i] = _prefetch_tables(memory, bases, capacities, lengths, slots[row], new_tokens, offsets[row],
                                        offsets[row + 1] - offsets[row], a_s, a_l, scratch, queued[i])
        else:
            _prefetch_queued(memory, bases, lengths, slots[row], queued[i], taken[i])


@njit(cache=True)
def step_batch(memory, bases, capacities, lengths, slots, new_tokens, offsets, limits, a_s, a_l, max_depth, max_candidates,
               max_tokens, spec_factor, spec_offset, min_token_prob, use_cache,
               c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
               drafts, draft_lengths, draft_scores, out, out_lengths, scores, out_matches, accepted, blocked, cached):
    """One engine step for every row: count acceptance, append its new tokens, draft (request, then cache).

    Why this is fast: one numba dispatch for the batch instead of, per request, Python calls
    and four dispatches (append, the request's draft, the cache's draft, the tail slice).
    Each slot's last draft lives in ``drafts[slot, :draft_lengths[slot]]`` (acceptance is
    counted against it, then it is replaced). A row whose ring has no room for its new tokens
    is left untouched and marked in ``blocked`` (the caller grows its ring and runs it alone);
    returns how many. ``cached`` is per-row scratch for the cache's draft. Serial over rows:
    see :func:`step_batch_parallel` for many rows on many cores.

    Rows go in blocks of ``LOCKSTEP_ROWS``: each row of a block takes its new tokens and looks
    up its anchor, then the block's chain walks run interleaved (:func:`_walk_lockstep`), then
    each row is compared, voted and drafted; meanwhile the next block's misses are started
    (:func:`_prefetch_block`). A row touches only its own ring and slot (the cache is read only),
    so the order across rows does not change a result.
    """
    stuck = 0
    ends = np.empty((LOCKSTEP_ROWS, max_candidates), dtype=np.int64)
    matches = np.empty(max_candidates, dtype=np.int64)
    c_ends = np.empty(max_candidates, dtype=np.int64)
    tally = vote_scratch(max_candidates)
    found = np.zeros(LOCKSTEP_ROWS, dtype=np.int64)
    at = np.empty(LOCKSTEP_ROWS, dtype=np.int64)  # each walk's next link (-1: done)
    chain_at = np.empty(LOCKSTEP_ROWS, dtype=np.int64)  # where its chain array starts in memory
    tokens_at = np.empty(LOCKSTEP_ROWS, dtype=np.int64)
    masks = np.empty(LOCKSTEP_ROWS, dtype=np.int64)
    starts = np.empty(LOCKSTEP_ROWS, dtype=np.int64)
    drafting = np.zeros(LOCKSTEP_ROWS, dtype=np.bool_)
    scratch = np.empty(max(a_s, a_l) + PREFETCH_TOKENS, dtype=np.int64)
    queued = np.empty((LOCKSTEP_ROWS, 2 * (PREFETCH_TOKENS + 1), 2), dtype=np.int64)  # the next block's head slots
    taken = np.zeros(LOCKSTEP_ROWS, dtype=np.int64)
    cache = (c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state)
    rows = len(slots)
    # A block's misses are started a block ahead, one stage in each phase of the block before
    # (_prefetch.py says why): its rows' ring tails before that block takes its tokens, the
    # head-table slots they hash to (computed from the tails) before it walks, and the positions
    # those slots hold before it drafts. Rows ahead were a short lead in the take loop, where a
    # row takes a few hundred ns.
    _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken, 0, 0)
    _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken, 0, 1)
    _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken, 0, 2)
    for first_row in range(0, rows, LOCKSTEP_ROWS):
        block = min(LOCKSTEP_ROWS, rows - first_row)
        following = first_row + LOCKSTEP_ROWS
        _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken, following, 0)
        for i in range(block):
            row = first_row + i
            drafting[i] = False
            at[i] = -1
            starts[i] = 0  # np.empty left it unset: a row that drafts nothing must still read as done
            found[i] = 0
            slot = slots[row]
            begin = offsets[row]
            if not _take_row(memory, bases, capacities, lengths, slot, new_tokens, begin, offsets[row + 1] - begin, a_s, a_l,
                             drafts, draft_lengths, row, out_lengths, scores, out_matches, accepted):
                blocked[row] = True
                stuck += 1
                continue
            if limits[row] < 1:
                continue
            drafting[i] = True
            at[i], chain_at[i], tokens_at[i], masks[i], starts[i] = walk_start(memory, bases, capacities, lengths, slot,
                                                                               a_s, a_l, max_depth)
        _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken, following, 1)
        _walk_lockstep(memory, at, chain_at, tokens_at, masks, starts, block, ends, found)
        _prefetch_block(memory, bases, capacities, lengths, slots, new_tokens, offsets, a_s, a_l, scratch, queued, taken, following, 2)
        for i in range(block):
            if drafting[i]:
                row = first_row + i
                _draft_row(memory, bases, capacities, lengths, slots[row], limits[row], a_s, a_l, max_depth, max_tokens,
                           spec_factor, spec_offset, min_token_prob, use_cache, cache, draft_lengths, draft_scores, drafts,
                           row, out, out_lengths, scores, out_matches, cached, found[i], ends[i], matches, c_ends, tally)
    return stuck


@njit(cache=True, inline="always")
def walk_start(memory, bases, capacities, lengths, slot, a_s, a_l, max_depth):
    """Where the chain walk of ``slot``'s ring begins, as :func:`_walk_lockstep` takes it: the latest
    position of its context's anchor (:func:`anchor`; below the window's start when none), where the
    chain that anchor's level follows starts in ``memory``, where its tokens start, its mask and its
    window's start."""
    state, tokens, prev_s, head_s, prev_l, head_l = pooled_ring(memory, bases[slot], capacities[slot], a_l > 0)
    length = lengths[slot]
    first = max(0, length - max_depth)
    g, long = anchor(tokens, head_s, head_l, state, tokens[first:length], length - first, a_s, a_l)
    capacity = capacities[slot]
    tokens_at = bases[slot] + STATE_WORDS
    return g, tokens_at + (4 * capacity if long else capacity), tokens_at, capacity - 1, state[START]


@njit(cache=True)
def _walk_lockstep(memory, at, chain_at, tokens_at, masks, starts, block, ends, found):
    """The chain walks of a block's rows, one link of each in turn: each walk is a chain of
    dependent loads, but the walks are independent, so their misses overlap. The same links as
    :func:`_walk` row by row (``ends[i, :found[i]]``); each candidate's token line is prefetched
    for the comparisons and the vote that follow."""
    limit = ends.shape[1]
    live = block
    while live:
        live = 0
        for i in range(block):
            g = at[i]
            if g < 0 or g < starts[i]:  # done (-1), or past the live window
                continue
            n = found[i]
            if n >= limit:
                at[i] = -1
                continue
            ends[i, n] = g
            found[i] = n + 1
            where = g & masks[i]
            prefetch(memory, tokens_at[i] + where)
            step = memory[chain_at[i] + where]
            if step == 0:
                at[i] = -1
                continue
            at[i] = g - step
            live += 1


#: rows of one run of :func:`step_batch_parallel`: a thread's scratch is allocated once a run, not once a row
PARALLEL_RUN_ROWS = 8


@njit(cache=True, parallel=True)
def step_batch_parallel(memory, bases, capacities, lengths, slots, new_tokens, offsets, limits, a_s, a_l, max_depth, max_candidates,
                        max_tokens, spec_factor, spec_offset, min_token_prob, use_cache,
                        c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
                        drafts, draft_lengths, draft_scores, out, out_lengths, scores, out_matches, accepted, blocked, cached):
    """:func:`step_batch` with the rows spread over numba's threads (rows share only the cache, read-only).
    The rows go in runs of ``PARALLEL_RUN_ROWS``, each run on one thread with its own scratch."""
    rows = len(slots)
    per_run = PARALLEL_RUN_ROWS
    runs = (rows + per_run - 1) // per_run
    stuck_by_run = np.zeros(runs, dtype=np.int64)
    for run in prange(runs):
        ends = np.empty(max_candidates, dtype=np.int64)
        matches = np.empty(max_candidates, dtype=np.int64)
        tally = vote_scratch(max_candidates)
        for row in range(run * per_run, min(rows, (run + 1) * per_run)):
            begin = offsets[row]
            if not _step_row(memory, bases, capacities, lengths, slots[row], new_tokens, begin, offsets[row + 1] - begin,
                             limits[row], a_s, a_l, max_depth, max_candidates, max_tokens, spec_factor, spec_offset,
                             min_token_prob, use_cache, c_tokens, c_prev_s, c_head_s, c_prev_l, c_head_l, c_state,
                             drafts, draft_lengths, draft_scores, row, out, out_lengths, scores, out_matches, accepted,
                             cached, ends, matches, tally):
                blocked[row] = True
                stuck_by_run[run] += 1
    return stuck_by_run.sum()
