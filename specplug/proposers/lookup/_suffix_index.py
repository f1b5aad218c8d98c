"""Python side of the suffix index: capacity, growth, eviction and the global cache."""

from __future__ import annotations

from collections import deque
from typing import NamedTuple

import numpy as np

from specplug.proposers.lookup import _suffix_kernels as kernels
from specplug.proposers.lookup._block_pool import BlockPool
from specplug.proposers.lookup._hashing import HASH_KEY

__all__ = ["BYTES_PER_SLOT", "STATE_WORDS", "GlobalCache", "RequestIndex", "VoteScratch", "cache_capacity", "ring_pool"]

#: bytes of one global-cache slot: the token (int32), a chain distance per anchor level (int32)
#: and, per level, two head slots (int64: global positions grow without bound)
BYTES_PER_SLOT = 4 + 2 * 4 + 2 * 2 * 8


class VoteScratch(NamedTuple):
    """A vote's scratch (``_suffix_kernels.vote``): the candidates' match ends and lengths, and the
    tally. Made once per proposer (:meth:`of`) and reused by every per-request draft, under the
    proposer's lock: allocating and zeroing them per call cost a fresh ~4 KB (260 KB at 4096 candidates)."""

    ends: np.ndarray
    lengths: np.ndarray
    tally: np.ndarray

    @classmethod
    def of(cls, max_candidates: int) -> VoteScratch:
        return cls(
            np.empty(max_candidates, dtype=np.int64), np.empty(max_candidates, dtype=np.int64),
            kernels.vote_scratch(max_candidates),
        )


def cache_capacity(max_cache_bytes: int) -> int:
    """Token slots of a global cache within ``max_cache_bytes``: the largest power of two that fits.

    >>> cache_capacity(44 * 1024)
    1024
    """
    slots = max_cache_bytes // BYTES_PER_SLOT
    return 1 << (slots.bit_length() - 1) if slots else 0


#: int32 words before a pooled ring's arrays: its state (start, end, used slots of each head
#: table), padded so that the arrays start on a cache line
STATE_WORDS = kernels.STATE_WORDS


def block_words(capacity: int, long_level: bool) -> int:
    """int32 words of a pooled request ring: state, tokens, short chain and head table, long ones.

    >>> block_words(1024, True), block_words(1024, False)
    (7184, 4114)
    """
    return STATE_WORDS + capacity * (7 if long_level else 4) + (0 if long_level else 2)


def ring_pool() -> BlockPool[_Ring]:
    """A proposer's pool of request rings (:class:`BlockPool`): blocks aligned to a cache line, the
    ring's state first."""
    return BlockPool(STATE_WORDS, lambda ring, memory: ring.point())


class _Ring:
    """The arrays of one index and the operations that keep them consistent.

    ``position_dtype`` is int32 for a request (its positions stay below 2**31, and a head
    slot then costs half) and int64 for the global cache, whose positions never restart.
    A request's ring lives in its proposer's :func:`ring_pool` (``pool``), its arrays views of
    the block at ``offset``; the cache's ring has arrays of its own.
    """

    __slots__ = ("anchors", "head_l", "head_s", "offset", "pool", "position_dtype", "prev_l", "prev_s", "state", "tokens")

    def __init__(self, capacity: int, anchors: tuple[int, int], position_dtype: type, pool: BlockPool | None = None) -> None:
        self.anchors = anchors
        self.position_dtype = position_dtype
        self.pool = pool
        self.offset = -1
        if pool is None:
            self.state = np.zeros(kernels.STATE_SIZE, dtype=np.int64)
            self._allocate(capacity)
        else:
            self.tokens = np.empty(0, dtype=np.int32)  # no block yet: _allocate takes one
            self._allocate(capacity)
            self.state[:] = 0
        self.state[kernels.KEY] = HASH_KEY

    def _allocate(self, capacity: int) -> None:
        """Fresh arrays (tokens SEP, chains 0, heads EMPTY) of ``capacity`` slots; the state stays."""
        long_level = self.anchors[1] > 0
        if self.pool is not None:
            state = self.state.copy() if self.offset >= 0 else None
            if self.offset >= 0:
                self.pool.give(self.offset, block_words(len(self.tokens), long_level))
            self.offset = self.pool.take(self, block_words(capacity, long_level))
            self.point(capacity)
            if state is not None:
                self.state[:] = state
            self.tokens[:] = kernels.SEP
            self.prev_s[:] = 0
            self.prev_l[:] = 0
            self.head_s[:] = kernels.EMPTY
            self.head_l[:] = kernels.EMPTY
            return
        self.tokens = np.full(capacity, kernels.SEP, dtype=np.int32)
        self.prev_s = np.zeros(capacity, dtype=np.int32)
        self.head_s = np.full(2 * capacity, kernels.EMPTY, dtype=self.position_dtype)
        self.prev_l = np.zeros(capacity if long_level else 1, dtype=np.int32)
        self.head_l = np.full(2 * capacity if long_level else 1, kernels.EMPTY, dtype=self.position_dtype)

    def point(self, capacity: int | None = None) -> None:
        """The arrays as views of the pool's block (again, after the pool's buffer moved)."""
        capacity = len(self.tokens) if capacity is None else capacity
        (self.state, self.tokens, self.prev_s, self.head_s, self.prev_l, self.head_l) = kernels.pooled_ring.py_func(
            self.pool.memory, self.offset, capacity, self.anchors[1] > 0
        )

    def release(self) -> None:
        """Give a pooled ring's block back (the ring is not used again)."""
        if self.pool is not None and self.offset >= 0:
            self.pool.give(self.offset, block_words(len(self.tokens), self.anchors[1] > 0))
            self.offset = -1

    @property
    def live(self) -> int:
        return int(self.state[kernels.END] - self.state[kernels.START])

    @property
    def capacity(self) -> int:
        return len(self.tokens)

    def nbytes(self) -> int:
        arrays = (self.tokens, self.prev_s, self.head_s, self.prev_l, self.head_l, self.state)
        return sum(array.nbytes for array in arrays)

    def _rebuild(self) -> None:
        kernels.rebuild(
            self.tokens, self.prev_s, self.head_s, self.prev_l, self.head_l, self.state, *self.anchors
        )

    def resize(self, capacity: int) -> None:
        """Move the live window into arrays of ``capacity`` slots and re-index it."""
        start, end = int(self.state[kernels.START]), int(self.state[kernels.END])
        positions = np.arange(start, end, dtype=np.int64)
        old = self.tokens[positions & (self.capacity - 1)]
        self._allocate(capacity)
        self.tokens[positions & (capacity - 1)] = old
        self._rebuild()

    def append(self, tokens: np.ndarray, separator: bool = False) -> None:
        """Append (the caller made room in the ring)."""
        kernels.append(
            self.tokens, self.prev_s, self.head_s, self.prev_l, self.head_l, self.state,
            tokens, *self.anchors, separator,
        )

    def draft(
        self, query: np.ndarray, options, max_tokens: int, out: np.ndarray, scratch: VoteScratch
    ) -> tuple[int, float, int]:
        return kernels.vote(
            self.tokens, self.prev_s, self.head_s, self.prev_l, self.head_l, self.state,
            query, len(query), *self.anchors, options.max_depth, max_tokens,
            options.max_spec_factor, options.max_spec_offset, options.min_token_prob, out, *scratch,
        )


    def continuations(self, query: np.ndarray, options, max_tokens: int) -> list[tuple[int, tuple[int, ...]]]:
        """(match length, continuation) of every candidate a draft is voted among, most recent first."""
        ends = np.empty(options.max_candidates, dtype=np.int64)
        lengths = np.empty(options.max_candidates, dtype=np.int64)
        found = kernels.candidates(
            self.tokens, self.prev_s, self.head_s, self.prev_l, self.head_l, self.state,
            query, len(query), *self.anchors, options.max_depth, ends, lengths,
        )
        if not found:
            return []
        out = np.empty((found, max_tokens), dtype=np.int32)
        counts = np.empty(found, dtype=np.int64)
        kernels.continuations(
            self.tokens, self.state, ends, lengths, found, max_tokens, options.max_spec_factor,
            options.max_spec_offset, out, counts,
        )
        rows, sizes, matches = out.tolist(), counts.tolist(), lengths[:found].tolist()
        return [(matches[i], tuple(rows[i][: sizes[i]])) for i in range(found)]


class RequestIndex:
    """One request's tokens (never evicted; the ring doubles as it fills)."""

    __slots__ = ("length", "prompt_length", "ring")

    def __init__(self, prompt: np.ndarray, anchors: tuple[int, int], pool: BlockPool | None = None) -> None:
        capacity = 1 << max(6, int(len(prompt) + 64).bit_length())
        self.ring = _Ring(capacity, anchors, np.int32, pool)
        self.prompt_length = len(prompt)
        self.length = 0  # a Python int: reading the state array costs more than a step's lookup
        self.append(prompt)

    def append(self, tokens: np.ndarray) -> None:
        needed = self.length + len(tokens)
        if needed > len(self.ring.tokens):
            self.ring.resize(1 << (needed - 1).bit_length())
        self.ring.append(tokens)
        self.length = needed

    def tail(self, count: int) -> np.ndarray:
        """The last ``count`` tokens (the ring never wraps: start is 0 and it grows instead)."""
        return self.ring.tokens[max(0, self.length - count) : self.length]

    def output(self) -> np.ndarray:
        return self.ring.tokens[self.prompt_length : self.length]

    def release(self) -> None:
        """The request ended: its ring's block goes back to the pool."""
        self.ring.release()

    def nbytes(self) -> int:
        return self.ring.nbytes()


class GlobalCache:
    """Outputs of finished requests, shared by all requests of one proposer.

    Bounded by a request count and by a byte cap (converted to token slots by
    :func:`cache_capacity`); the oldest requests are evicted first. Each cached sequence
    takes its length plus one separator slot; a longer one than fits keeps its tail.
    """

    def __init__(self, max_requests: int, max_bytes: int, anchors: tuple[int, int]) -> None:
        self.capacity = cache_capacity(max_bytes)
        self.max_bytes = max_bytes
        self.max_requests = max_requests
        self._ring = _Ring(min(self.capacity, 1024), anchors, np.int64)
        self._ends: deque[int] = deque()  # global end (exclusive, after SEP) of each cached sequence

    def __len__(self) -> int:
        return len(self._ends)

    @property
    def tokens(self) -> int:
        return self._ring.live

    def nbytes(self) -> int:
        return self._ring.nbytes()

    def add(self, sequence: np.ndarray) -> None:
        if len(sequence) == 0 or self.max_requests == 0 or self.capacity < 2:
            return
        sequence = sequence[-(self.capacity - 1) :]
        need = len(sequence) + 1
        while self._ends and (len(self._ends) + 1 > self.max_requests or self._ring.live + need > self.capacity):
            self._ring.state[kernels.START] = self._ends.popleft()
        if self._ring.live + need > self._ring.capacity:
            self._ring.resize(min(self.capacity, 1 << (self._ring.live + need - 1).bit_length()))
        self._ring.append(sequence, separator=True)
        self._ends.append(int(self._ring.state[kernels.END]))

    def draft(
        self, query: np.ndarray, options, max_tokens: int, out: np.ndarray, scratch: VoteScratch
    ) -> tuple[int, float, int]:
        if not self._ends:
            return 0, 0.0, 0
        return self._ring.draft(query, options, max_tokens, out, scratch)

    def continuations(self, query: np.ndarray, options, max_tokens: int) -> list[tuple[int, tuple[int, ...]]]:
        return self._ring.continuations(query, options, max_tokens) if self._ends else []
