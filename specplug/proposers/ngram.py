"""``ngram``: prompt lookup over the request's own tokens (prompt + output).

For n from ``max_n`` down to ``min_n``, the last n tokens are looked up among earlier
positions of the same request; the longest n that occurred (at least ``min_hits`` times)
wins, and the tokens that followed its most recent occurrence are the draft.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from specplug._contract import Draft, Proposer, RequestId
from specplug._hookimpl import hookimpl
from specplug._registry import MethodRegistrar
from specplug.proposers import _ngram_kernels as kernels
from specplug.proposers._buffer import TokenBuffer
from specplug.proposers._options import MethodOptions

__all__ = ["NgramOptions", "NgramProposer", "ReferenceNgramProposer"]


class NgramOptions(MethodOptions):
    min_n: int = Field(2, ge=1, le=64, description="shortest suffix n-gram to look up")
    max_n: int = Field(4, ge=1, le=64, description="longest suffix n-gram to look up (tried first)")
    max_tokens: int = Field(8, ge=1, le=1024, description="most tokens in one draft")
    min_hits: int = Field(1, ge=1, description="earlier occurrences an n-gram needs before it drafts")
    implementation: str = Field("fast", pattern="^(fast|reference)$", description="fast (numba) or reference")

    @model_validator(mode="after")
    def _n_range(self) -> NgramOptions:
        if self.min_n > self.max_n:
            raise ValueError(f"min_n = {self.min_n} is larger than max_n = {self.max_n}; need min_n <= max_n")
        return self


class _Index:
    """One request's tokens and its n-gram tables."""

    __slots__ = ("buffer", "counts", "positions", "used")

    def __init__(self, prompt: np.ndarray, rows: int, count_hits: bool) -> None:
        self.buffer = TokenBuffer(np.empty(0, dtype=np.int32), spare=len(prompt) + 64)
        self.positions = np.full((rows, 16), kernels.EMPTY, dtype=np.int32)
        self.counts = np.zeros((rows, 16 if count_hits else 0), dtype=np.int32)
        self.used = np.zeros(rows, dtype=np.int64)

    def nbytes(self) -> int:
        return self.buffer.array.nbytes + self.positions.nbytes + self.counts.nbytes + self.used.nbytes


class NgramProposer(Proposer):
    """The fast path: incremental per-n hash tables (see ``_ngram_kernels``).

    >>> p = NgramProposer(NgramOptions(min_n=2, max_n=3))
    >>> p.start("r", [7, 8, 9, 7, 8])
    >>> p.propose("r", 4).tokens
    (9, 7, 8)
    """

    name = "ngram"

    def __init__(self, options: NgramOptions) -> None:
        super().__init__()
        self.options = options
        self._rows = options.max_n - options.min_n + 1
        self._index: dict[RequestId, _Index] = {}

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        index = _Index(prompt, self._rows, self.options.min_hits > 1)
        self._append(index, prompt)
        self._index[request_id] = index

    def _append(self, index: _Index, tokens: np.ndarray) -> None:
        buffer = index.buffer
        buffer.reserve(len(tokens))
        needed = int(index.used.max()) + len(tokens)
        if needed > kernels.MAX_LOAD * index.positions.shape[1]:
            # Grow to a load of about a half and rebuild from the tokens: amortised O(1).
            capacity = 1 << int(2 * needed).bit_length()
            index.positions = np.full((self._rows, capacity), kernels.EMPTY, dtype=np.int32)
            index.counts = np.zeros((self._rows, capacity if index.counts.shape[1] else 0), dtype=np.int32)
            index.used[:] = 0
            old = buffer.view().copy()
            buffer.length = kernels.ngram_append(
                buffer.array, 0, old, index.positions, index.counts, index.used, self.options.min_n
            )
        buffer.length = kernels.ngram_append(
            buffer.array, buffer.length, tokens, index.positions, index.counts, index.used, self.options.min_n
        )

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        index = self._index[request_id]
        buffer = index.buffer
        start = kernels.ngram_lookup(
            buffer.array, buffer.length, index.positions, index.counts, self.options.min_n, self.options.min_hits
        )
        if start < 0:
            return Draft((), self.name)
        stop = min(start + min(max_tokens, self.options.max_tokens), buffer.length)
        return Draft(tuple(buffer.array[start:stop].tolist()), self.name)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._append(self._index[request_id], tokens)

    def _stop(self, request_id: RequestId) -> None:
        del self._index[request_id]

    def state_nbytes(self, request_id: RequestId) -> int:
        """Bytes held for one request (tokens and tables)."""
        return self._index[request_id].nbytes()


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
                return Draft(tuple(tokens[ends[0] + 1 : ends[0] + 1 + limit]), self.name)
        return Draft((), self.name)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._tokens[request_id].extend(tokens.tolist())

    def _stop(self, request_id: RequestId) -> None:
        del self._tokens[request_id]


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
