"""The engines' hybrid rules: which of a lookup's and the neural head's drafts an engine verifies.

Each rule is a proposer over two parts the benchmark hands in (the trace's neural head and the
rule's lookup), both metered, and calls the neural head exactly where its engine runs it, so
the replay charges the neural pass where the engine pays it:

- ``trtllm-sa``: TensorRT-LLM's MTP/EAGLE-3 worker with ``sa_config`` (``sa_enhancer.py``):
  the head always drafts its ``max_draft_len`` tokens; where the suffix automaton's match is
  at least ``threshold`` tokens long, its tokens replace all of them. Drafts are padded to
  ``max_draft_len`` (one CUDA graph per draft length).
- ``llamacpp-chain``: llama-server's ``--spec-type ngram-mod,draft-mtp``: the draftless type
  first, and the model drafter only for the sequences it left without a draft
  (``common_speculative_draft``); the MTP draft is ``--spec-draft-n-max`` tokens.
- ``arctic-switch``: ArcticInference's ``arctic`` method with suffix decoding on
  (``model_runner.py``): both draft; the suffix draft is taken where its score is at least the
  speculator's ``n_predict``, else the speculator's. Above ``disable_by_batch_size`` requests
  (64 unless set) only that many rows run the speculator; at ``hard_disable_by_batch_size`` none.
- ``vllm-ngram-eagle``: vLLM's open ``ngram-eagle`` pull request (24344): both draft every step;
  the n-gram draft wins wherever it is not empty, with a draft length per method.

A replay runs one request at a time and prices a step as the batch's (every row alike), so a
rule that lets only some rows draft (Arctic's soft cap) drafts in that share of the steps,
each charged the speculator's pass.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug.lab.peers._common import PeerOptions

__all__ = [
    "ArcticOptions",
    "ArcticSwitch",
    "EngineRule",
    "LookupFirstChain",
    "LookupFirstOptions",
    "NgramEagle",
    "NgramEagleOptions",
    "SaConfigOptions",
    "SaConfigRule",
    "padded",
]

#: the token an engine's draft buffer holds where a draft fell short of its fixed length
PAD = 0


def padded(tokens: tuple[int, ...], width: int) -> tuple[int, ...]:
    """``tokens`` cut or padded to ``width``, as an engine that verifies a fixed length sends it."""
    return tokens[:width] + (PAD,) * max(0, width - len(tokens))


class EngineRule(Proposer):
    """A rule over the parts an engine runs: every part sees every request's tokens."""

    draft_kind = "neural"

    def __init__(self, parts: list[Proposer]) -> None:
        super().__init__()
        self.parts = [part for part in parts if part is not None]
        self.batch_size = 1

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_size = int(batch_size)

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        for part in self.parts:
            part.start(request_id, prompt)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        for part in self.parts:
            part.extend(request_id, tokens)

    def _stop(self, request_id: RequestId) -> None:
        for part in self.parts:
            part.stop(request_id)


class SaConfigOptions(PeerOptions):
    max_draft_len: int = Field(3, ge=1, le=64, description="tokens the MTP/EAGLE-3 head drafts (and the draft length verified)")
    threshold: int = Field(4, ge=1, le=1024, description="sa_config.threshold: shortest suffix match that replaces the head's draft")


class SaConfigRule(EngineRule):
    """TensorRT-LLM's ``sa_config``: the suffix automaton's tokens where its match is long enough."""

    name = "trtllm-sa"

    def __init__(self, options: SaConfigOptions, neural: Proposer, lookup: Proposer) -> None:
        super().__init__([neural, lookup])
        self.options, self.neural, self.lookup = options, neural, lookup

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        width = min(self.options.max_draft_len, max_tokens)
        head = self.neural.propose(request_id, width)  # the head runs every step: SA only overrides
        sa = self.lookup.propose(request_id, width)
        if sa.tokens and (sa.score or 0.0) >= self.options.threshold:
            return Draft(padded(sa.tokens, width), "trtllm-sa")
        return Draft(padded(head.tokens, width), head.source)


class LookupFirstOptions(PeerOptions):
    draft_n_max: int = Field(3, ge=1, le=64, description="--spec-draft-n-max: tokens the model drafter drafts")
    n_match: int = Field(24, ge=1, le=1024, description="--spec-ngram-mod-n-match")
    n_min: int = Field(48, ge=0, le=1024, description="--spec-ngram-mod-n-min")
    n_max: int = Field(64, ge=1, le=1024, description="--spec-ngram-mod-n-max")


class LookupFirstChain(EngineRule):
    """llama.cpp's comma chain: the first type in its priority order with a draft wins."""

    name = "llamacpp-chain"

    def __init__(self, options: LookupFirstOptions, neural: Proposer, lookup: Proposer) -> None:
        super().__init__([neural, lookup])
        self.options, self.neural, self.lookup = options, neural, lookup

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        # the lookup drafts its own length; the server cuts it to the slot's limit
        found = self.lookup.propose(request_id, self.lookup.max_draft_tokens or max_tokens)
        if found.tokens:
            return Draft(found.tokens[:max_tokens], found.source)
        return self.neural.propose(request_id, min(self.options.draft_n_max, max_tokens))


class ArcticOptions(PeerOptions):
    n_predict: int = Field(3, ge=1, le=64, description="tokens the speculator drafts (its n_predict)")
    suffix: bool = Field(True, description="enable_suffix_decoding: the suffix draft where its score >= n_predict")
    disable_by_batch_size: int | None = Field(64, ge=1, description="soft cap: above this batch size only this many rows run the speculator")
    hard_disable_by_batch_size: int | None = Field(None, ge=1, description="hard cap: from this batch size on no row drafts")
    suffix_cache_max_depth: int = Field(64, ge=1, le=1024, description="suffix tree depth and pattern length")
    suffix_max_spec_factor: float = Field(1.0, ge=0)
    suffix_max_spec_offset: float = Field(0.0)
    suffix_min_token_prob: float = Field(0.1, ge=0, le=1)


class ArcticSwitch(EngineRule):
    """ArcticInference's speculator with its suffix switch and batch-size caps."""

    name = "arctic-switch"
    takes_batch_size = True

    def __init__(self, options: ArcticOptions, neural: Proposer, lookup: Proposer | None = None) -> None:
        super().__init__([neural, lookup])
        self.options, self.neural, self.lookup = options, neural, lookup
        self._steps = 0

    def drafting_share(self) -> float:
        """The share of a batch's rows that run the speculator at the current batch size."""
        batch, options = self.batch_size, self.options
        if options.hard_disable_by_batch_size is not None and batch >= options.hard_disable_by_batch_size:
            return 0.0
        if options.disable_by_batch_size is not None and batch > options.disable_by_batch_size:
            return options.disable_by_batch_size / batch
        return 1.0

    def _speculator_runs(self) -> bool:
        # the first N of B rows: a request is among them in that share of its steps
        share = self.drafting_share()
        step = self._steps
        self._steps += 1
        return int((step + 1) * share) > int(step * share)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        options = self.options
        if options.hard_disable_by_batch_size is not None and self.batch_size >= options.hard_disable_by_batch_size:
            return self.empty_draft()  # hard-gated: no drafter runs, no suffix either
        head = self.neural.propose(request_id, min(options.n_predict, max_tokens)) if self._speculator_runs() else None
        if self.lookup is not None and options.suffix:
            found = self.lookup.propose(request_id, max_tokens)
            if found.tokens and (found.score or 0.0) >= options.n_predict:
                return found
        return head if head is not None else self.empty_draft()


class NgramEagleOptions(PeerOptions):
    num_speculative_tokens_ngram: int = Field(3, ge=1, le=64, description="num_speculative_tokens_per_method['ngram']")
    num_speculative_tokens_eagle: int = Field(3, ge=1, le=64, description="num_speculative_tokens_per_method['eagle']")
    prompt_lookup_min: int | None = Field(None, ge=1, le=64, description="vLLM's n-gram: shortest pattern (None: vLLM's default)")
    prompt_lookup_max: int | None = Field(None, ge=1, le=64, description="vLLM's n-gram: longest pattern (None: vLLM's default)")


class NgramEagle(EngineRule):
    """vLLM's ``ngram-eagle``: the n-gram draft where it has one, EAGLE's otherwise; both run."""

    name = "vllm-ngram-eagle"

    def __init__(self, options: NgramEagleOptions, neural: Proposer, lookup: Proposer) -> None:
        super().__init__([neural, lookup])
        self.options, self.neural, self.lookup = options, neural, lookup

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        eagle = self.neural.propose(request_id, min(self.options.num_speculative_tokens_eagle, max_tokens))
        ngram = self.lookup.propose(request_id, min(self.options.num_speculative_tokens_ngram, max_tokens))
        return ngram if ngram.tokens else eagle
