"""The engines' own lookup drafters, as their sources describe them, for the engine rules.

- :class:`SuffixAutomatonLookup`: TensorRT-LLM's suffix automaton (``sa_config``; its CUDA
  kernel ``suffixAutomaton.h``): the longest suffix of the request's tokens that occurred
  earlier, and the tokens after its *first* occurrence (a state keeps the end of the text
  where it was created; clones keep the original's).
- :class:`NgramModLookup`: llama.cpp's ``ngram-mod`` (``common/ngram-mod.cpp`` and its
  ``common_speculative_impl_ngram_mod``): one hash table shared by every request and kept
  across them, from the ``n_match`` tokens before a position to the token there (the newest
  write wins); a draft chains lookups from the last ``n_match`` tokens, and is dropped when
  it is shorter than ``n_min``. New n-grams enter in chunks of more than 32 tokens; the table
  is cleared when a request's prompt leaves it over a quarter full, or after five drafts in a
  row with under a quarter of their tokens accepted.
- :class:`TrtllmNgramLookup`: TensorRT-LLM's ``NGramPoolManager`` (``_torch/speculative/
  ngram.py``): a pool shared by every request from patterns of 1..``max_matching_ngram_size``
  tokens to the continuations that followed them (up to ``max_draft_len`` tokens; a longer
  continuation of the same pattern drops the shorter ones), drafting the oldest match of the
  longest pattern that ends the tokens.

Each is written here from those descriptions (none of the engines' code is used); a test per
lookup checks it on small hand-made token streams against what the source does.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug.lab.peers._common import PeerOptions

__all__ = [
    "NgramModLookup",
    "NgramModOptions",
    "SuffixAutomaton",
    "SuffixAutomatonLookup",
    "TrtllmNgramLookup",
    "TrtllmNgramOptions",
]


class SuffixAutomaton:
    """A suffix automaton over one token stream, built one token at a time.

    :meth:`lookup` gives ``(end, length)``: the longest suffix of the stream that also
    ended earlier, ``length`` tokens long, whose first occurrence ends just before ``end``.

    >>> sa = SuffixAutomaton()
    >>> for token in [5, 6, 7, 1, 5, 6, 7, 2, 5, 6]:
    ...     sa.extend(token)
    >>> sa.lookup()          # "5 6" first ended at index 1: the draft starts at index 2
    (2, 2)
    """

    __slots__ = ("last", "length", "link", "first_end", "next", "tokens")

    def __init__(self) -> None:
        self.length = [0]
        self.link = [-1]
        self.first_end = [-1]
        self.next: list[dict[int, int]] = [{}]
        self.last = 0
        self.tokens: list[int] = []

    def extend(self, token: int) -> None:
        self.tokens.append(token)
        current = len(self.length)
        self.length.append(self.length[self.last] + 1)
        self.link.append(0)
        self.first_end.append(len(self.tokens) - 1)
        self.next.append({})
        state = self.last
        while state != -1 and token not in self.next[state]:
            self.next[state][token] = current
            state = self.link[state]
        if state != -1:
            target = self.next[state][token]
            if self.length[state] + 1 == self.length[target]:
                self.link[current] = target
            else:
                clone = len(self.length)
                self.length.append(self.length[state] + 1)
                self.link.append(self.link[target])
                self.first_end.append(self.first_end[target])
                self.next.append(dict(self.next[target]))
                while state != -1 and self.next[state].get(token) == target:
                    self.next[state][token] = clone
                    state = self.link[state]
                self.link[target] = clone
                self.link[current] = clone
        self.last = current

    def lookup(self) -> tuple[int, int] | None:
        last_index = len(self.tokens) - 1
        state = self.last
        while state > 0:
            if self.first_end[state] < last_index:
                return self.first_end[state] + 1, self.length[state]
            state = self.link[state]
        return None


class SuffixAutomatonLookup(Proposer):
    """TensorRT-LLM's suffix-automaton drafter; ``Draft.score`` is the match length."""

    name = "trtllm-sa"

    def __init__(self) -> None:
        super().__init__()
        self._automata: dict[RequestId, SuffixAutomaton] = {}

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        automaton = SuffixAutomaton()
        for token in prompt.tolist():
            automaton.extend(token)
        self._automata[request_id] = automaton

    def match(self, request_id: RequestId, max_tokens: int) -> tuple[int, tuple[int, ...]]:
        """The match length and the tokens after the match (at most ``max_tokens``)."""
        automaton = self._automata[request_id]
        found = automaton.lookup()
        if found is None:
            return 0, ()
        end, length = found
        return length, tuple(automaton.tokens[end : end + max_tokens])

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        length, tokens = self.match(request_id, max_tokens)
        return Draft(tokens, self.name, float(length)) if tokens else self.empty_draft()

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        automaton = self._automata[request_id]
        for token in tokens.tolist():
            automaton.extend(token)

    def _stop(self, request_id: RequestId) -> None:
        del self._automata[request_id]


class NgramModOptions(PeerOptions):
    n_match: int = Field(24, ge=1, le=1024, description="tokens hashed per n-gram (--spec-ngram-mod-n-match)")
    n_min: int = Field(48, ge=0, le=1024, description="shortest draft kept (--spec-ngram-mod-n-min)")
    n_max: int = Field(64, ge=1, le=1024, description="longest draft (--spec-ngram-mod-n-max)")


#: llama.cpp's table: 4 Mi entries; the prompt that leaves it over a quarter full clears it
_TABLE_ENTRIES = 4 * 1024 * 1024
_OCCUPANCY_LIMIT = 0.25
_CHUNK = 32
_LOW_ACCEPTANCE, _LOW_STREAK = 0.25, 5


class NgramModLookup(Proposer):
    """llama.cpp's ``ngram-mod``: one table for all requests, kept across them.

    The table is keyed by the n-gram itself (llama.cpp hashes it into 4 Mi slots; collisions
    there are rare below the quarter occupancy at which it clears the table).
    """

    name = "llamacpp-ngram-mod"

    def __init__(self, options: NgramModOptions | None = None) -> None:
        super().__init__()
        self.options = options or NgramModOptions()
        self.max_draft_tokens = self.options.n_max
        self.table: dict[tuple[int, ...], int] = {}
        self._tokens: dict[RequestId, list[int]] = {}
        self._added: dict[RequestId, int] = {}  # the next position whose n-gram enters the table
        self._drafted: dict[RequestId, int] = {}  # length of the last draft (0: none)
        self._low: dict[RequestId, int] = {}

    def _add(self, tokens: list[int], start: int, stop: int) -> None:
        n = self.options.n_match
        for index in range(start, stop):
            self.table[tuple(tokens[index : index + n])] = tokens[index + n]

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        tokens = prompt.tolist()
        n = self.options.n_match
        self._tokens[request_id] = tokens
        self._drafted[request_id] = 0
        self._low[request_id] = 0
        self._added[request_id] = 0
        if len(tokens) < n:
            return
        self._add(tokens, 0, len(tokens) - n)
        self._added[request_id] = len(tokens) - n
        if len(self.table) / _TABLE_ENTRIES > _OCCUPANCY_LIMIT:
            self.table.clear()

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        # llama.cpp's "prompt" is every token but the last sampled one (id_last)
        tokens = self._tokens[request_id]
        n, n_min = self.options.n_match, self.options.n_min
        self._drafted[request_id] = 0
        known = len(tokens) - 1
        if known < n:
            return self.empty_draft()
        if self._added[request_id] + _CHUNK < known:
            self._add(tokens, self._added[request_id], known - n)
            self._added[request_id] = known - n
        window = tokens[-n:]
        draft: list[int] = []
        for index in range(self.options.n_max):
            token = self.table.get(tuple(window[index : index + n]))
            if token is None:
                if index < n_min:
                    return self.empty_draft()
                break
            window.append(token)
            draft.append(token)
        # the server cuts the draft to the slot's limit afterwards; acceptance is judged
        # against the length drafted
        self._drafted[request_id] = len(draft)
        return Draft(tuple(draft[:max_tokens]), self.name)

    def _observe(self, request_id: RequestId, draft: Draft, accepted: int) -> None:
        drafted = self._drafted[request_id]
        if not drafted:
            return
        if accepted / drafted < _LOW_ACCEPTANCE:
            self._low[request_id] += 1
            if self._low[request_id] >= _LOW_STREAK:
                self.table.clear()
                self._low[request_id] = 0
                self._added[request_id] = 0
        else:
            self._low[request_id] = 0

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._tokens[request_id].extend(tokens.tolist())

    def _stop(self, request_id: RequestId) -> None:
        for state in (self._tokens, self._added, self._drafted, self._low):
            del state[request_id]


class TrtllmNgramOptions(PeerOptions):
    max_draft_len: int = Field(5, ge=1, le=1024, description="longest continuation kept and drafted")
    max_matching_ngram_size: int = Field(3, ge=1, le=64, description="longest pattern matched")
    is_keep_all: bool = Field(True, description="keep every continuation of a pattern (else only the longest)")
    is_use_oldest: bool = Field(True, description="draft the oldest continuation (else the newest)")
    is_public_pool: bool = Field(True, description="one pool for all requests (else one per request)")


class TrtllmNgramLookup(Proposer):
    """TensorRT-LLM's n-gram drafter (``NGramPoolManager.get_draft_tokens``)."""

    name = "trtllm-ngram"

    def __init__(self, options: TrtllmNgramOptions | None = None) -> None:
        super().__init__()
        self.options = options or TrtllmNgramOptions()
        self.max_draft_tokens = self.options.max_draft_len
        self._public: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        self._pools: dict[RequestId, dict[tuple[int, ...], list[tuple[int, ...]]]] = {}
        self._tokens: dict[RequestId, list[int]] = {}
        self._scanned: dict[RequestId, int] = {}

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self._tokens[request_id] = prompt.tolist()
        self._scanned[request_id] = 0
        if not self.options.is_public_pool:
            self._pools[request_id] = {}

    def _update(self, pool: dict[tuple[int, ...], list[tuple[int, ...]]], sequence: list[int], longest: int) -> None:
        keep = self.options.max_draft_len
        for size in range(longest, 0, -1):
            for start in range(len(sequence) - size):
                pattern = tuple(sequence[start : start + size])
                match = tuple(sequence[start + size : min(start + size + keep, len(sequence))])
                matches = pool.get(pattern)
                if matches is None or (not self.options.is_keep_all and len(match) > len(matches[0])):
                    pool[pattern] = [match]
                elif match not in matches:
                    # the engine removes shorter matches while iterating its ordered set, which
                    # skips the element after each removal; the same walk keeps the same pool
                    index = 0
                    while index < len(matches):
                        if len(matches[index]) < len(match):
                            del matches[index]
                        index += 1
                    matches.append(match)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        tokens = self._tokens[request_id]
        options = self.options
        pool = self._public if options.is_public_pool else self._pools[request_id]
        longest = min(options.max_matching_ngram_size, len(tokens) - 1)
        self._update(pool, tokens[self._scanned[request_id] :], longest)
        draft: tuple[int, ...] = ()
        for size in range(longest, 0, -1):
            matches = pool.get(tuple(tokens[-size:]))
            if matches is not None:
                draft = matches[0 if options.is_use_oldest else -1][:max_tokens]
                break
        self._scanned[request_id] = max(0, len(tokens) - (options.max_draft_len + options.max_matching_ngram_size - 1))
        return Draft(draft, self.name) if draft else self.empty_draft()

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._tokens[request_id].extend(tokens.tolist())

    def _stop(self, request_id: RequestId) -> None:
        del self._tokens[request_id], self._scanned[request_id]
        self._pools.pop(request_id, None)
