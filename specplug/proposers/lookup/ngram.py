"""``ngram``: prompt lookup over the request's own tokens (prompt + output).

For n from ``max_n`` down to ``min_n``, the last n tokens are looked up among earlier
positions of the same request; the longest n that occurred (at least ``min_hits`` times)
wins, and the tokens that followed its most recent occurrence are the draft (``Draft.match``:
that n, so a composite judges drafts after a long match apart).
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from specplug._batch import BatchStep
from specplug._drafts import Draft, RequestId, accepted_prefix
from specplug._proposer import Proposer
from specplug._hookimpl import hookimpl
from specplug._registry import MethodRegistrar
from specplug.proposers.lookup import _ngram_kernels as kernels
from specplug.proposers.lookup._block_pool import BlockPool
from specplug.proposers.lookup._buffer import TokenBuffer
from specplug.proposers.lookup._hashing import HASH_KEY
from specplug.proposers._options import MethodOptions
from specplug.proposers._row_drafts import KernelLookup, SlotTable

__all__ = ["NgramOptions", "NgramProposer", "ReferenceNgramProposer"]


class NgramOptions(MethodOptions):
    min_n: int = Field(2, ge=1, le=64, description="shortest suffix n-gram to look up")
    max_n: int = Field(4, ge=1, le=64, description="longest suffix n-gram to look up (tried first)")
    max_tokens: int = Field(8, ge=1, le=1024, description="most tokens in one draft")
    min_hits: int = Field(1, ge=1, le=1 << 30, description="earlier occurrences an n-gram needs before it drafts")
    implementation: str = Field("fast", pattern="^(fast|reference)$", description="fast (numba) or reference")

    @model_validator(mode="after")
    def _n_range(self) -> NgramOptions:
        if self.min_n > self.max_n:
            raise ValueError(f"min_n = {self.min_n} is larger than max_n = {self.max_n}; need min_n <= max_n")
        return self


class _Index:
    """One request's tokens and n-gram tables: views of its block in the proposer's pool (``BlockPool``)
    (``slot``: its place in the batch path's arrays)."""

    __slots__ = ("buffer", "count_hits", "counts", "offset", "positions", "slot", "table_capacity", "token_capacity", "used")

    def __init__(self, rows: int, count_hits: bool) -> None:
        self.slot = self.offset = -1
        self.count_hits = count_hits
        self.token_capacity = self.table_capacity = 0
        self.buffer = TokenBuffer(np.empty(0, dtype=np.int32), spare=0)
        self.positions = np.empty((rows, 0), dtype=np.int32)
        self.counts = np.empty((rows, 0), dtype=np.int32)
        self.used = np.zeros(rows, dtype=np.int32)

    def point(self, memory: np.ndarray) -> None:
        """The arrays as views of the block at ``offset`` (again, after the pool's buffer moved)."""
        self.buffer.array, self.positions, self.counts, self.used = kernels.pooled_block.py_func(
            memory, self.offset, len(self.used), self.token_capacity, self.table_capacity, self.count_hits
        )

    def words(self) -> int:
        return kernels.block_words(len(self.used), self.token_capacity, self.table_capacity, self.count_hits)

    def nbytes(self) -> int:
        return self.words() * 4


class _Slots(SlotTable):
    """Every live request's block by slot, for the batch kernel: ``bases[slot]`` (its offset in the
    pool), ``token_caps`` and ``table_caps``; ``lengths[slot]`` is the request's token count (the
    kernel moves it), ``drafts`` its last draft. A stopped request's slot is reused.

    The per-request path and the batch path see one state: the ``_Index`` arrays are views of the
    same blocks; a request that moves to another block is published again.
    """

    def __init__(self, width: int, source: str) -> None:
        super().__init__(width, source)
        self.bases = np.zeros(len(self.lengths), dtype=np.int64)
        self.token_caps = np.zeros(len(self.lengths), dtype=np.int64)
        self.table_caps = np.zeros(len(self.lengths), dtype=np.int64)
        self._next = 0

    def add(self, request_id: RequestId, index: _Index) -> None:
        if self._free:
            index.slot = self._free.pop()
        else:
            index.slot = self._next
            self._next += 1
            if index.slot >= len(self.lengths):
                grown = 2 * len(self.lengths)
                self.lengths, self.bases, self.token_caps, self.table_caps = (
                    np.concatenate([array, np.zeros(grown - len(array), dtype=np.int64)])
                    for array in (self.lengths, self.bases, self.token_caps, self.table_caps)
                )
                self.drafts.grow(grown)
        self._claim(request_id, index.slot)

    def publish(self, index: _Index) -> None:
        slot = index.slot
        self.bases[slot] = index.offset
        self.token_caps[slot] = index.token_capacity
        self.table_caps[slot] = index.table_capacity
        self.lengths[slot] = index.buffer.length

    def remove(self, request_id: RequestId, index: _Index) -> None:
        slot = index.slot
        self.bases[slot] = self.token_caps[slot] = self.table_caps[slot] = self.lengths[slot] = 0
        self._release(request_id, slot)


class NgramProposer(KernelLookup):
    """The fast path: incremental per-n hash tables (see ``_ngram_kernels``).

    >>> p = NgramProposer(NgramOptions(min_n=2, max_n=3))
    >>> p.start("r", [7, 8, 9, 7, 8])
    >>> draft = p.propose("r", 4)
    >>> draft.tokens, draft.match  # what followed the 2-gram (7, 8), the longest seen before
    ((9, 7, 8), 2)
    """

    name = "ngram"
    #: batches of at least this many rows spread over numba's threads (docs/performance.md)
    parallel_from = 1 << 30

    def __init__(self, options: NgramOptions) -> None:
        super().__init__()
        self.options = options
        self._rows = options.max_n - options.min_n + 1
        self._index: dict[RequestId, _Index] = {}
        # every request's arrays in one buffer, and the batch path's view of them by slot (the
        # same memory as the _Index objects' arrays), so one kernel call reaches every row
        self._pool: BlockPool[_Index] = BlockPool(kernels.BLOCK_ALIGN, _Index.point)
        self._slots = _Slots(options.max_tokens, self.name)

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        index = _Index(self._rows, self.options.min_hits > 1)
        self._slots.add(request_id, index)
        # the capacities the first append would grow to: room for the prompt and 64 more tokens,
        # tables at a load of about a half once the prompt is in
        self._move(index, _token_capacity(len(prompt) + 64), _table_capacity(len(prompt)), fresh=True)
        self._append(index, prompt)
        self._index[request_id] = index

    def _move(self, index: _Index, token_capacity: int, table_capacity: int, fresh: bool) -> None:
        """Give ``index`` a block of these capacities, its tokens copied; ``fresh``: empty tables
        (the caller re-indexes the tokens), else the old tables copied. Published to the slots."""
        pool = self._pool
        tokens = index.buffer.view().copy()
        tables = None if fresh else (index.positions.copy(), index.counts.copy(), index.used.copy())
        if index.offset >= 0:
            pool.give(index.offset, index.words())
        index.token_capacity, index.table_capacity = token_capacity, table_capacity
        index.offset = pool.take(index, index.words())
        index.point(pool.memory)
        index.buffer.array[: len(tokens)] = tokens
        if tables is None:
            index.positions.fill(kernels.EMPTY)
            index.counts.fill(0)
            index.used.fill(0)
        else:
            index.positions[:], index.counts[:], index.used[:] = tables
        self._slots.publish(index)

    def _append(self, index: _Index, tokens: np.ndarray) -> None:
        buffer = index.buffer
        slots = self._slots
        buffer.length = int(slots.lengths[index.slot])  # the batch kernel may have moved it
        needed = max(index.used.tolist()) + len(tokens)  # a few rows: a list beats a numpy reduction
        rebuild = needed > kernels.MAX_LOAD * index.table_capacity
        if rebuild or buffer.length + len(tokens) > index.token_capacity:
            token_capacity = max(index.token_capacity, _token_capacity(buffer.length + len(tokens)))
            # grow the tables to a load of about a half and rebuild them from the tokens: amortised O(1)
            table_capacity = _table_capacity(needed) if rebuild else index.table_capacity
            self._move(index, token_capacity, table_capacity, fresh=rebuild)
            if rebuild:
                old = buffer.view().copy()
                buffer.length = kernels.ngram_append(
                    buffer.array, 0, old, index.positions, index.counts, index.used, self.options.min_n, HASH_KEY
                )
        buffer.length = kernels.ngram_append(
            buffer.array, buffer.length, tokens, index.positions, index.counts, index.used, self.options.min_n, HASH_KEY
        )
        slots.lengths[index.slot] = buffer.length

    def _draft_rows(
        self, step: BatchStep, out: np.ndarray, lengths: np.ndarray, scores: np.ndarray, matches: np.ndarray
    ) -> np.ndarray:
        table = self._slots
        drafts = table.drafts
        slots, accepted, blocked, new_tokens = table.begin_step(step, self._pending)
        ids, limits, options = step.request_ids, step.limits, self.options
        kernel = kernels.ngram_step_batch_parallel if step.rows >= self.parallel_from else kernels.ngram_step_batch
        stuck = kernel(
            self._pool.memory, table.bases, table.token_caps, table.table_caps, self._rows, table.lengths, slots,
            new_tokens, step.offsets, limits, options.min_n, options.min_hits, options.max_tokens, drafts.tokens,
            drafts.lengths, out, lengths, matches, accepted, blocked, HASH_KEY,
        )
        if stuck:
            for row in np.flatnonzero(blocked).tolist():
                self._step_alone(ids[row], new_tokens, step.offsets, int(limits[row]), row, out, lengths, matches, accepted)
        if drafts.trees:
            drafts.settle_trees(self._pending, ids, new_tokens, step.offsets, limits, accepted)
        scores.fill(np.nan)  # ngram gives no score
        return accepted

    def _step_alone(self, request_id, new_tokens, offsets, limit, row, out, lengths, matches, accepted) -> None:
        """A row the kernel could not take (no room): grow it here, then draft it, arrays kept in step."""
        index = self._index[request_id]
        drafts = self._slots.drafts
        slot = index.slot
        tokens = new_tokens[offsets[row] : offsets[row + 1]]
        if len(tokens):
            accepted[row] = accepted_prefix(drafts.tokens[slot, : drafts.lengths[slot]].tolist(), tokens.tolist())
            drafts.lengths[slot] = 0
            self._append(index, tokens)
        if limit > 0:
            drafted, match = self._lookup(index, limit)
            lengths[row] = len(drafted)
            matches[row] = match
            out[row, : len(drafted)] = drafted
            drafts.tokens[slot, : len(drafted)] = drafted
            drafts.lengths[slot] = len(drafted)

    def _lookup(self, index: _Index, max_tokens: int) -> tuple[np.ndarray, int]:
        """The draft and its match (the n of the n-gram it follows; 0: no draft)."""
        buffer = index.buffer
        length = int(self._slots.lengths[index.slot])  # the batch kernel may have moved it
        start, n = kernels.ngram_lookup(
            buffer.array, length, index.positions, index.counts, self.options.min_n, self.options.min_hits, HASH_KEY
        )
        if start < 0:
            return buffer.array[:0], 0
        return buffer.array[start : min(start + min(max_tokens, self.options.max_tokens), length)], n

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        self._slots.drafts.touch(request_id)
        drafted, match = self._lookup(self._index[request_id], max_tokens)
        return Draft(tuple(drafted.tolist()), self.name, match=match or None)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._slots.drafts.touch(request_id)
        self._append(self._index[request_id], tokens)

    def _stop(self, request_id: RequestId) -> None:
        index = self._index.pop(request_id)
        self._slots.remove(request_id, index)
        self._pool.give(index.offset, index.words())

    def state_nbytes(self, request_id: RequestId) -> int:
        """Bytes held for one request (tokens, tables and its row of last drafts)."""
        with self._lock:
            self._check_live(request_id, "state_nbytes")
            drafts = self._slots.drafts
            return self._index[request_id].nbytes() + drafts.tokens.itemsize * drafts.width + 8


class ReferenceNgramProposer(Proposer):
    """The reference: a plain scan of the history at every step, obviously right and slow."""

    name = "ngram"

    def __init__(self, options: NgramOptions) -> None:
        super().__init__()
        self.options = options
        self._tokens: dict[RequestId, list[int]] = {}

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self._tokens[request_id] = prompt.tolist()

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        tokens = self._tokens[request_id]
        limit = min(max_tokens, self.options.max_tokens)
        for n in range(self.options.max_n, self.options.min_n - 1, -1):
            if len(tokens) <= n:
                continue
            suffix = tokens[-n:]
            # earlier occurrences, most recent first: end positions len-2 down to n-1
            ends = [end for end in range(len(tokens) - 2, n - 2, -1) if tokens[end - n + 1 : end + 1] == suffix]
            if len(ends) >= self.options.min_hits:
                return Draft(tuple(tokens[ends[0] + 1 : ends[0] + 1 + limit]), self.name, match=n)
        return Draft((), self.name)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._tokens[request_id].extend(tokens.tolist())

    def _stop(self, request_id: RequestId) -> None:
        del self._tokens[request_id]


def _token_capacity(tokens: int) -> int:
    """A token array's capacity for ``tokens`` (a power of two, as ``TokenBuffer`` doubles)."""
    return max(16, 1 << (tokens - 1).bit_length())


def _table_capacity(entries: int) -> int:
    """The tables' capacity for ``entries`` n-grams: the smallest, 16, while that stays within
    ``MAX_LOAD``; past it a load of about a half."""
    return 16 if entries <= kernels.MAX_LOAD * 16 else 1 << int(2 * entries).bit_length()


def _create(options: NgramOptions) -> Proposer:
    if options.implementation == "reference":
        return ReferenceNgramProposer(options)
    return NgramProposer(options)


@hookimpl
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    registrar.add(
        "ngram",
        _create,
        options=NgramOptions,
        summary="prompt lookup: the longest suffix n-gram seen earlier in the request drafts what followed it",
    )
