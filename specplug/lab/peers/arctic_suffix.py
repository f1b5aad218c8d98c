"""``arctic-suffix``: Snowflake's suffix decoding (``arctic_inference.suffix_decoding``), per request.

This drives ``SuffixDecodingCache`` the way vLLM's ``suffix`` method does (vLLM's
``SuffixDecodingProposer``): ``start_request`` with the prompt (evicting a cached response
under the same id first), ``add_active_response`` with every verified token, and
``speculate`` with the last ``max_tree_depth`` tokens as the pattern. The cache keeps the
responses of finished requests (up to ``max_cached_requests``, FIFO) and drafts from them
for other requests, as vLLM runs it. Defaults are vLLM's ``suffix_decoding_*`` settings.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug.lab.peers._common import PeerNotInstalledError, PeerOptions, TokenTail

__all__ = ["ArcticSuffixOptions", "ArcticSuffixPeer"]


class ArcticSuffixOptions(PeerOptions):
    max_tree_depth: int = Field(24, ge=1, le=1024, description="longest pattern matched, and suffix tree depth")
    max_cached_requests: int = Field(10_000, ge=-1, description="finished responses kept (-1: no limit, 0: none)")
    num_speculative_tokens: int = Field(24, ge=1, le=1024, description="most tokens in one draft")
    max_spec_factor: float = Field(1.0, ge=0, description="draft length <= factor * match length + offset")
    max_spec_offset: float = Field(0.0, description="... plus this many tokens")
    min_token_prob: float = Field(0.1, ge=0, le=1, description="stop below this estimated token probability")


def _load_cache_class() -> Any:
    try:
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except Exception as error:  # noqa: BLE001 - a missing or broken build both mean "install it"
        raise PeerNotInstalledError(
            "arctic-suffix", "arctic_inference (its suffix_decoding extension)", error
        ) from error
    return SuffixDecodingCache


class ArcticSuffixPeer(Proposer):
    """Arctic Inference's ``SuffixDecodingCache`` behind the specplug contract."""

    name = "arctic-suffix"

    def __init__(self, options: ArcticSuffixOptions) -> None:
        super().__init__()
        cache_cls = _load_cache_class()
        self.options = options
        self.cache = cache_cls(max_tree_depth=options.max_tree_depth, max_cached_requests=options.max_cached_requests)
        self._tails: dict[RequestId, TokenTail] = {}

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        if request_id in self.cache.cached_requests:
            # vLLM does the same: a reused id first drops its earlier cached response.
            self.cache.evict_cached_response(request_id)
        prompt32 = np.ascontiguousarray(prompt, dtype=np.int32)
        self.cache.start_request(request_id, prompt32)
        self._tails[request_id] = TokenTail(prompt32, self.options.max_tree_depth)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        pattern = self._tails[request_id].tokens
        if len(pattern) == 0:
            return self.empty_draft()
        # Always pass max_spec_tokens: None makes the cache read an attribute it lacks.
        draft = self.cache.speculate(
            request_id,
            pattern,
            max_spec_tokens=min(max_tokens, self.options.num_speculative_tokens),
            max_spec_factor=self.options.max_spec_factor,
            max_spec_offset=self.options.max_spec_offset,
            min_token_prob=self.options.min_token_prob,
        )
        return Draft(tuple(int(token) for token in draft.token_ids), self.name, float(draft.score))

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        tokens32 = np.ascontiguousarray(tokens, dtype=np.int32)
        self.cache.add_active_response(request_id, tokens32)
        self._tails[request_id].append(tokens32)

    def _stop(self, request_id: RequestId) -> None:
        del self._tails[request_id]
        self.cache.stop_request(request_id)
