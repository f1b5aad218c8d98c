"""``suffix``: suffix lookup over the request and over a cache of finished requests.

Both sources are searched the same way: the occurrences of the context's last ``long_match``
tokens or, when those never occurred, of its last ``min_match`` tokens (most recent first, at
most ``max_candidates``) are extended backwards to find the longest match (at most
``max_depth`` tokens); the occurrences with that longest match vote
token by token on the continuation, as in suffix decoding (arXiv 2411.04975): the most
frequent token wins while the product of the winners' frequencies stays at or above
``min_token_prob``, and the draft may grow to ``max_spec_factor * match + max_spec_offset``
tokens. ``Draft.score`` is the expected number of accepted tokens (the sum of those
products). The source with the longer match drafts; on equal matches the higher score, then the
request itself. (Scores are not compared first: a single cached occurrence scores as if certain,
and on the shipped code-edit and agentic traces letting it outvote a longer local match cost
about 3 % of the tokens per step, see docs/benchmarks.md.)

For an engine that verifies draft trees, ``propose_alternatives`` grows the vote into a tree of
the voters' continuations, most probable nodes first (:func:`speculation_tree`): where the vote
was split, a losing continuation is verified too, and accepted where the target takes it.

The global cache keeps the outputs of finished requests (``stop``), bounded by
``max_cached_requests`` and ``max_cache_bytes`` with the oldest evicted first, so spans that
recur across requests (agent loops repeating tool calls) are drafted from earlier requests.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from specplug._batch import BatchStep
from specplug._drafts import Draft, RequestId, accepted_prefix
from specplug._proposer import Proposer
from specplug._hookimpl import hookimpl
from specplug._registry import MethodRegistrar
from specplug.proposers.lookup import _suffix_kernels
from specplug.proposers._options import MethodOptions
from specplug.proposers._row_drafts import KernelLookup, SlotTable
from specplug.proposers.lookup._suffix_index import GlobalCache, RequestIndex, VoteScratch, cache_capacity, ring_pool

__all__ = ["ReferenceSuffixProposer", "SuffixOptions", "SuffixProposer", "speculation_tree"]


class SuffixOptions(MethodOptions):
    max_depth: int = Field(16, ge=1, le=1024, description="longest suffix matched, in tokens")
    min_match: int = Field(1, ge=1, le=64, description="shortest suffix that may draft (the short anchor)")
    long_match: int = Field(6, ge=0, le=256, description="long anchor, looked up first (0: off)")
    max_candidates: int = Field(64, ge=1, le=4096, description="most recent occurrences that vote")
    max_tokens: int = Field(16, ge=1, le=1024, description="most tokens in one draft")
    max_spec_factor: float = Field(4.0, ge=0, le=1024, allow_inf_nan=False, description="draft length may grow to this times the match length")
    max_spec_offset: float = Field(0.0, ge=-1024, le=1024, allow_inf_nan=False, description="... plus this many tokens")
    min_token_prob: float = Field(0.1, ge=0, le=1, allow_inf_nan=False, description="stop when a draft token's estimated probability falls below")
    global_cache: bool = Field(True, description="also look up the outputs of finished requests")
    max_cached_requests: int = Field(10_000, ge=0, le=1 << 32, description="finished requests kept in the global cache")
    max_cache_bytes: int = Field(64 << 20, ge=4096, le=1 << 40, description="memory cap of the global cache")
    implementation: str = Field("fast", pattern="^(fast|reference)$", description="fast (numba) or reference")

    @model_validator(mode="after")
    def _consistent(self) -> SuffixOptions:
        if self.min_match > self.max_depth:
            raise ValueError(
                f"min_match = {self.min_match} is larger than max_depth = {self.max_depth}; need min_match <= max_depth"
            )
        if self.long_match and not self.min_match < self.long_match <= self.max_depth:
            raise ValueError(
                f"long_match = {self.long_match} must be 0 (off) or between min_match + 1 = {self.min_match + 1} "
                f"and max_depth = {self.max_depth}"
            )
        return self

    @property
    def anchors(self) -> tuple[int, int]:
        return self.min_match, self.long_match


def speculation_tree(
    draft: Draft,
    found: Sequence[tuple[int, tuple[int, ...]]],
    max_nodes: int,
    max_branches: int,
    min_token_prob: float,
) -> Draft:
    """The voted ``draft`` grown into a tree of at most ``max_nodes`` tokens and ``max_branches`` branches.

    ``found`` holds ``(match length, continuation)`` per candidate, most recent first (each
    continuation as long as the draft may grow). The candidates with the longest match (those
    that voted) form a trie; a node's probability is the share of them that continue through
    it, which is what the vote's running product estimates for the draft's own tokens. Nodes
    are taken most probable first (then shallower, then on the draft, then the most recent),
    each below a taken parent and at least ``min_token_prob``, as suffix decoding grows its
    speculation tree: where the vote was split, a losing continuation takes slots the draft
    would have spent past the split. ``tokens`` stays the voted draft (cut where the budget
    went to more probable alternatives); ``alternatives`` are the other branches.

    >>> vote = Draft((3, 8, 1), "suffix", 1.0)
    >>> found = [(2, (4, 7, 1)), (2, (3, 8, 1)), (2, (3, 9, 1)), (1, (5,))]
    >>> speculation_tree(vote, found, 5, 4, 0.1).branches()
    ((3, 8), (4, 7), (3, 9))
    """
    if not draft.tokens or not found:
        return draft
    best = max(match for match, _ in found)
    voters = [continuation for match, continuation in found if match == best]
    counts: dict[tuple[int, ...], int] = {}
    first: dict[tuple[int, ...], int] = {}
    for number, continuation in enumerate(voters):
        for depth in range(1, len(continuation) + 1):
            prefix = continuation[:depth]
            counts[prefix] = counts.get(prefix, 0) + 1
            first.setdefault(prefix, number)
    voted = {draft.tokens[:depth] for depth in range(1, len(draft.tokens) + 1)}
    floor = min_token_prob * len(voters)
    eligible = [prefix for prefix, count in counts.items() if count >= floor or prefix in voted]
    # a parent counts at least as many as its child and sorts first on ties (shallower): every
    # node is reached after its parent
    eligible.sort(key=lambda prefix: (-counts[prefix], len(prefix), prefix not in voted, first[prefix]))
    taken: list[tuple[int, ...]] = []
    chosen: set[tuple[int, ...]] = set()
    with_children: set[tuple[int, ...]] = set()
    leaves = 0
    for prefix in eligible:
        if len(taken) == max_nodes:
            break
        parent = prefix[:-1]
        if parent and parent not in chosen:
            continue
        adds_branch = parent in with_children or not parent
        if adds_branch and leaves == max_branches:
            continue
        leaves += adds_branch
        with_children.add(parent)
        chosen.add(prefix)
        taken.append(prefix)
    tokens = draft.tokens
    while tokens and tokens not in chosen:
        tokens = tokens[:-1]
    others = tuple(
        prefix for prefix in taken if prefix not in with_children and prefix not in voted
    )
    return replace(draft, tokens=tokens, alternatives=others)


class _Slots(SlotTable):
    """Where the batch kernel finds every live request's ring, by slot: its block's offset in the
    pool's buffer (``bases``) and its capacity. ``lengths[slot]`` is the request's token count
    (the kernel moves it), ``drafts`` its last draft. A ring that moves is published again; a
    stopped request's slot is reused.
    """

    def __init__(self, width: int, source: str) -> None:
        super().__init__(width, source)
        self.bases = np.zeros(len(self.lengths), dtype=np.int64)
        self.capacities = np.zeros(len(self.lengths), dtype=np.int64)
        self._next = 0

    def add(self, request_id: RequestId, index: RequestIndex) -> None:
        if self._free:
            slot = self._free.pop()
        else:
            slot = self._next
            self._next += 1
            if slot >= len(self.lengths):
                extra = np.zeros(len(self.lengths), dtype=np.int64)
                self.lengths = np.concatenate([self.lengths, extra])
                self.bases = np.concatenate([self.bases, extra])
                self.capacities = np.concatenate([self.capacities, extra])
                self.drafts.grow(len(self.lengths))
        self._claim(request_id, slot)
        self.publish(slot, index)

    def publish(self, slot: int, index: RequestIndex) -> None:
        ring = index.ring
        self.bases[slot] = ring.offset
        self.capacities[slot] = ring.capacity
        self.lengths[slot] = index.length

    def remove(self, request_id: RequestId) -> None:
        slot = self.slot[request_id]
        self.bases[slot] = 0
        self.capacities[slot] = 0
        self.lengths[slot] = 0
        self._release(request_id, slot)


class SuffixProposer(KernelLookup):
    """The fast path: hash-chained suffix index in numba (see ``_suffix_kernels``).

    >>> p = SuffixProposer(SuffixOptions())
    >>> p.start("a", [1, 2, 3, 4, 5, 9, 1, 2])
    >>> p.propose("a", 8).tokens  # a 2-token match drafts up to max_spec_factor * 2 tokens
    (3, 4, 5, 9, 1, 2)
    """

    name = "suffix"
    proposes_alternatives = True
    #: batches of at least this many rows spread over numba's threads (docs/performance.md)
    parallel_from = 1 << 30

    def __init__(self, options: SuffixOptions) -> None:
        super().__init__()
        self.options = options
        self._requests: dict[RequestId, RequestIndex] = {}
        self.cache = GlobalCache(options.max_cached_requests, options.max_cache_bytes, options.anchors)
        self._out = np.empty(options.max_tokens, dtype=np.int32)
        self._scratch = VoteScratch.of(options.max_candidates)  # the per-request vote's, like _out
        # every request's ring in one buffer, and where the batch kernel finds each, by slot
        self._pool = ring_pool()
        self._slots = _Slots(options.max_tokens, self.name)

    def _draft_rows(
        self, step: BatchStep, out: np.ndarray, lengths: np.ndarray, scores: np.ndarray, matches: np.ndarray
    ) -> np.ndarray:
        table, options = self._slots, self.options
        drafts = table.drafts
        slots, accepted, blocked, new_tokens = table.begin_step(step, self._pending)
        ids, limits, rows = step.request_ids, step.limits, step.rows
        cached = np.empty(out.shape, dtype=np.int64)
        cache = self.cache._ring
        a_s, a_l = options.anchors
        kernel = _suffix_kernels.step_batch_parallel if rows >= self.parallel_from else _suffix_kernels.step_batch
        stuck = kernel(
            self._pool.memory, table.bases, table.capacities, table.lengths, slots, new_tokens, step.offsets, limits, a_s, a_l,
            options.max_depth, options.max_candidates, options.max_tokens, options.max_spec_factor,
            options.max_spec_offset, options.min_token_prob, bool(options.global_cache and len(self.cache)),
            cache.tokens, cache.prev_s, cache.head_s, cache.prev_l, cache.head_l, cache.state,
            drafts.tokens, drafts.lengths, drafts.scores, out, lengths, scores, matches, accepted, blocked, cached,
        )
        if stuck:
            for row in np.flatnonzero(blocked).tolist():
                self._step_alone(ids[row], new_tokens, step.offsets, int(limits[row]), row, out, lengths, scores, matches,
                                 accepted)
        if drafts.trees:
            drafts.settle_trees(self._pending, ids, new_tokens, step.offsets, limits, accepted)
        return accepted

    def _step_alone(self, request_id, new_tokens, offsets, limit, row, out, lengths, scores, matches, accepted) -> None:
        """A row the kernel could not take (no room in its ring): grow it here, then draft it."""
        index = self._index(request_id)
        drafts = self._slots.drafts
        slot = self._slots.slot[request_id]
        tokens = new_tokens[offsets[row] : offsets[row + 1]]
        if len(tokens):
            accepted[row] = accepted_prefix(drafts.tokens[slot, : drafts.lengths[slot]].tolist(), tokens.tolist())
            drafts.lengths[slot] = 0
            self._append(request_id, index, tokens)
        scores[row] = 0.0
        matches[row] = 0
        if limit > 0:
            draft = self._vote(index, limit)
            lengths[row] = len(draft.tokens)
            out[row, : len(draft.tokens)] = draft.tokens
            scores[row] = draft.score
            matches[row] = draft.match or 0
            drafts.tokens[slot, : len(draft.tokens)] = draft.tokens
            drafts.lengths[slot] = len(draft.tokens)
            drafts.scores[slot] = draft.score

    def _index(self, request_id: RequestId) -> RequestIndex:
        """The request's index, its length brought up to the batch kernel's."""
        index = self._requests[request_id]
        index.length = int(self._slots.lengths[self._slots.slot[request_id]])
        return index

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        index = self._requests[request_id] = RequestIndex(prompt, self.options.anchors, self._pool)
        self._slots.add(request_id, index)

    def _voted(self, index: RequestIndex, max_tokens: int) -> tuple[Draft, Any, np.ndarray, int]:
        """The vote (the request's ring, then the cache; the longer match wins, then the higher score),
        with the one that drafted it (the ring or the cache: both ``draft`` and give ``continuations``),
        the query and the token limit (a tree grows from the same ones)."""
        limit = min(max_tokens, self.options.max_tokens)
        query = index.tail(self.options.max_depth)
        count, score, match = index.ring.draft(query, self.options, limit, self._out, self._scratch)
        tokens, source = tuple(self._out[:count].tolist()), index.ring
        if self.options.global_cache:
            count, cached_score, cached_match = self.cache.draft(query, self.options, limit, self._out, self._scratch)
            if (cached_match, cached_score) > (match, score):
                tokens, score, match, source = tuple(self._out[:count].tolist()), cached_score, cached_match, self.cache
        return Draft(tokens, self.name, score, match=int(match) if tokens else None), source, query, limit

    def _vote(self, index: RequestIndex, max_tokens: int) -> Draft:
        return self._voted(index, max_tokens)[0]

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        self._slots.drafts.touch(request_id)
        return self._vote(self._index(request_id), max_tokens)

    def _propose_alternatives(self, request_id: RequestId, max_tokens: int, max_branches: int) -> Draft:
        # the vote as _propose makes it, remembering which index drafted: its voters grow the tree
        self._slots.drafts.touch(request_id)
        draft, source, query, limit = self._voted(self._index(request_id), max_tokens)
        if not draft.tokens:
            return draft
        found = source.continuations(query, self.options, limit)
        return speculation_tree(draft, found, max_tokens, max_branches, self.options.min_token_prob)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._slots.drafts.touch(request_id)
        self._append(request_id, self._index(request_id), tokens)

    def _append(self, request_id: RequestId, index: RequestIndex, tokens: np.ndarray) -> None:
        moved = index.length + len(tokens) > len(index.ring.tokens)
        index.append(tokens)
        slot = self._slots.slot[request_id]
        if moved:
            self._slots.publish(slot, index)
        self._slots.lengths[slot] = index.length

    def _stop(self, request_id: RequestId) -> None:
        index = self._index(request_id)
        self._slots.remove(request_id)
        self._requests.pop(request_id)
        if self.options.global_cache:
            self.cache.add(index.output())
        index.release()

    def state_nbytes(self, request_id: RequestId) -> int:
        """Bytes held for one request (its ring, chains and head table, and its row of last drafts)."""
        with self._lock:
            self._check_live(request_id, "state_nbytes")
            drafts = self._slots.drafts
            return self._requests[request_id].nbytes() + drafts.tokens.itemsize * drafts.width + 16


# --------------------------------------------------------------------------- reference


def _occurrences(
    history: Sequence[Sequence[int]], query: list[int], a: int, options: SuffixOptions
) -> list[tuple[int, list[int]]]:
    """(match length, continuation) of the most recent occurrences of the query's last ``a`` tokens."""
    anchor = query[-a:]
    found: list[tuple[int, list[int]]] = []
    for sequence in reversed(history):
        for e in range(len(sequence) - 2, a - 2, -1):
            if list(sequence[e - a + 1 : e + 1]) != anchor:
                continue
            m = 0
            while m < min(options.max_depth, len(query)) and e - m >= 0 and sequence[e - m] == query[-1 - m]:
                m += 1
            found.append((m, list(sequence[e + 1 :])))
            if len(found) == options.max_candidates:
                return found
    return found


def _reference_continuations(
    history: Sequence[Sequence[int]], query: list[int], options: SuffixOptions, max_tokens: int
) -> list[tuple[int, tuple[int, ...]]]:
    """(match length, continuation) of the candidates :func:`_reference_draft` votes among, by brute force."""
    if len(query) < options.min_match:
        return []
    candidates: list[tuple[int, list[int]]] = []
    if options.long_match and len(query) >= options.long_match:
        candidates = _occurrences(history, query, options.long_match, options)
    if not candidates:
        candidates = _occurrences(history, query, options.min_match, options)
    out = []
    for m, continuation in candidates:
        budget = max(0, min(max_tokens, math.floor(options.max_spec_factor * m + options.max_spec_offset)))
        out.append((m, tuple(continuation[:budget])))
    return out


def _reference_draft(
    history: Sequence[Sequence[int]], query: list[int], options: SuffixOptions, max_tokens: int
) -> tuple[tuple[int, ...], float, int]:
    """The same rule as the kernel, by brute force over ``history`` (oldest sequence first)."""
    if len(query) < options.min_match:
        return (), 0.0, 0
    candidates: list[tuple[int, list[int]]] = []  # (match length, continuation), most recent first
    if options.long_match and len(query) >= options.long_match:
        candidates = _occurrences(history, query, options.long_match, options)
    if not candidates:
        candidates = _occurrences(history, query, options.min_match, options)
    if not candidates:
        return (), 0.0, 0
    best = max(m for m, _ in candidates)
    alive = [continuation for m, continuation in candidates if m == best]
    budget = min(max_tokens, math.floor(options.max_spec_factor * best + options.max_spec_offset))
    drafted: list[int] = []
    score, cumulative = 0.0, 1.0
    for d in range(budget):
        counts: dict[int, int] = {}
        for continuation in alive:  # insertion order = recency, which breaks ties
            if len(continuation) > d:
                counts[continuation[d]] = counts.get(continuation[d], 0) + 1
        if not counts:
            break
        token = max(counts, key=lambda t: counts[t])  # first of the most frequent
        cumulative *= counts[token] / len(alive)
        if cumulative < options.min_token_prob:
            break
        drafted.append(token)
        score += cumulative
        alive = [c for c in alive if len(c) > d and c[d] == token]
    return tuple(drafted), score, best


class ReferenceSuffixProposer(Proposer):
    """The reference: brute-force scans of the request and of the cached outputs."""

    name = "suffix"
    proposes_alternatives = True

    def __init__(self, options: SuffixOptions) -> None:
        super().__init__()
        self.options = options
        self._tokens: dict[RequestId, list[int]] = {}
        self._prompt_length: dict[RequestId, int] = {}
        self._cache: deque[list[int]] = deque()
        self._capacity = cache_capacity(options.max_cache_bytes)

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self._tokens[request_id] = prompt.tolist()
        self._prompt_length[request_id] = len(prompt)

    def _voted(self, request_id: RequestId, max_tokens: int) -> tuple[Draft, Sequence[Sequence[int]], list[int], int]:
        """The vote as the fast path makes it, with the history that drafted it, the query and the limit."""
        tokens = self._tokens[request_id]
        limit = min(max_tokens, self.options.max_tokens)
        query = tokens[-self.options.max_depth :]
        drafted, score, match = _reference_draft([tokens], query, self.options, limit)
        history: Sequence[Sequence[int]] = [tokens]
        if self.options.global_cache:
            cached, cached_score, cached_match = _reference_draft(list(self._cache), query, self.options, limit)
            if (cached_match, cached_score) > (match, score):
                drafted, score, match, history = cached, cached_score, cached_match, list(self._cache)
        return Draft(drafted, self.name, score, match=match if drafted else None), history, query, limit

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        return self._voted(request_id, max_tokens)[0]

    def _propose_alternatives(self, request_id: RequestId, max_tokens: int, max_branches: int) -> Draft:
        draft, history, query, limit = self._voted(request_id, max_tokens)
        if not draft.tokens:
            return draft
        found = _reference_continuations(history, query, self.options, limit)
        return speculation_tree(draft, found, max_tokens, max_branches, self.options.min_token_prob)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._tokens[request_id].extend(tokens.tolist())

    def _stop(self, request_id: RequestId) -> None:
        output = self._tokens.pop(request_id)[self._prompt_length.pop(request_id) :]
        if not self.options.global_cache or not output or self.options.max_cached_requests == 0 or self._capacity < 2:
            return
        output = output[-(self._capacity - 1) :]
        while self._cache and (
            len(self._cache) + 1 > self.options.max_cached_requests
            or sum(len(s) + 1 for s in self._cache) + len(output) + 1 > self._capacity
        ):
            self._cache.popleft()
        self._cache.append(output)


def _create(options: SuffixOptions) -> Proposer:
    if options.implementation == "reference":
        return ReferenceSuffixProposer(options)
    return SuffixProposer(options)


@hookimpl
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    registrar.add(
        "suffix",
        _create,
        options=SuffixOptions,
        summary="suffix decoding: frequency-scored continuations of the longest match in the request "
        "and in a bounded cache of finished requests",
    )
