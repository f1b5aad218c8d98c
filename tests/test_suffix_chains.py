"""suffix's chain walks find exactly an anchor's live occurrences, most recent first.

These tests hold the walks to the plain definition, a scan of the window, on small vocabularies
where anchors repeat far more often than the walk may follow (many links), through a request
ring's growth (a rebuild) and the global cache's evictions (a window that slides and wraps around
its ring). They hold any chain layout to that definition: the one link a position the kernels keep,
and any other tried in its place.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specplug.proposers.lookup import _suffix_kernels as kernels
from specplug.proposers.lookup._suffix_index import BYTES_PER_SLOT, GlobalCache, RequestIndex, ring_pool

SEP = kernels.SEP


def _scanned(ring, query, a_s, a_l, limit):
    """The candidates by definition: the indexed positions (an anchor wholly in the window, no SEP
    in it, a continuation that is not SEP) whose anchor is the query's last ``a_l`` tokens or,
    when none is, its last ``a_s``; most recent first, at most ``limit``."""
    start, end = int(ring.state[kernels.START]), int(ring.state[kernels.END])
    mask = ring.capacity - 1
    window = {g: int(ring.tokens[g & mask]) for g in range(start, end)}

    def occurrences(a):
        if a == 0 or len(query) < a:
            return []
        wanted = [int(t) for t in query[-a:]]
        found = []
        for e in range(end - 2, start + a - 2, -1):
            anchor = [window[e - a + 1 + k] for k in range(a)]
            if SEP not in anchor and window[e + 1] != SEP and anchor == wanted:
                found.append(e)
        return found

    if len(query) < a_s:
        return []
    return (occurrences(a_l) or occurrences(a_s))[:limit]


def _walked(ring, query, a_s, a_l, limit):
    ends = np.empty(limit, dtype=np.int64)
    lengths = np.empty(limit, dtype=np.int64)
    found = kernels.candidates(ring.tokens, ring.prev_s, ring.head_s, ring.prev_l, ring.head_l, ring.state,
                               query, len(query), a_s, a_l, 8, ends, lengths)
    return ends[:found].tolist()


tokens_of = st.lists(st.integers(0, 2), min_size=1, max_size=300)


@settings(max_examples=150, deadline=None)
@given(prompt=tokens_of, steps=st.lists(tokens_of, max_size=6), a_l=st.sampled_from([0, 3, 4]),
       limit=st.sampled_from([1, 4, 5, 9, 64]), query=st.lists(st.integers(0, 2), min_size=1, max_size=8))
def test_a_request_rings_walk_finds_the_anchors_occurrences_most_recent_first(prompt, steps, a_l, limit, query):
    index = RequestIndex(np.array(prompt, dtype=np.int32), (2, a_l), ring_pool())
    query = np.array(query, dtype=np.int32)
    for chunk in [[], *steps]:  # the ring grows (and is re-indexed) as the steps outrun it
        index.append(np.array(chunk, dtype=np.int32))
        assert _walked(index.ring, query, 2, a_l, limit) == _scanned(index.ring, query, 2, a_l, limit)


@settings(max_examples=100, deadline=None)
@given(outputs=st.lists(tokens_of, min_size=1, max_size=10), a_l=st.sampled_from([0, 3]),
       limit=st.sampled_from([3, 6, 64]), query=st.lists(st.integers(0, 2), min_size=2, max_size=8))
def test_the_global_caches_walk_stops_at_its_evicted_occurrences(outputs, a_l, limit, query):
    cache = GlobalCache(max_requests=4, max_bytes=64 * BYTES_PER_SLOT, anchors=(2, a_l))  # 64 slots: evicts and wraps
    query = np.array(query, dtype=np.int32)
    for output in outputs:
        cache.add(np.array(output, dtype=np.int32))
        ring = cache._ring
        assert _walked(ring, query, 2, a_l, limit) == _scanned(ring, query, 2, a_l, limit)
