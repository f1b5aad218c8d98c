"""``vllm-ngram``: vLLM's own ``NgramProposer`` (numba KMP over the whole context), per request.

vLLM calls ``NgramProposer.propose(k, sampled_token_ids, num_tokens_no_spec, token_ids_cpu)``
once per step for the whole batch: ``token_ids_cpu`` is a ``[max_num_seqs, max_model_len]``
int32 array of every request's tokens and ``num_tokens_no_spec`` their lengths. This wrapper
keeps one such row per request (a growable int32 buffer) and calls the same method with a
batch of one, so the timing is vLLM's own code path: the Python batch bookkeeping plus the
numba search, which rescans the whole context at every step.

The proposer is built from vLLM's real ``SpeculativeConfig`` (so vLLM validates the settings
and applies its defaults, ``prompt_lookup_min = prompt_lookup_max = 5`` when neither is given);
the model, scheduler and parallel configs it also reads are plain records, because a real
``ModelConfig`` needs a model checkpoint and the proposer only reads ``max_model_len`` from it.
"""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import numpy as np
from pydantic import Field

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug._errors import InvalidOptionError
from specplug.lab.peers._common import PeerNotInstalledError, PeerOptions
from specplug.proposers.lookup._buffer import TokenBuffer

__all__ = ["VllmNgramOptions", "VllmNgramPeer"]

#: vLLM's install script (the CUDA wheel, ``--no-deps``, into the main venv)
SETUP = "scripts/setup_vllm.sh && bash scripts/setup_peers.sh"


class VllmNgramOptions(PeerOptions):
    prompt_lookup_min: int | None = Field(None, ge=1, description="shortest n-gram matched (vLLM default 5)")
    prompt_lookup_max: int | None = Field(None, ge=1, description="longest n-gram matched (vLLM default 5)")
    num_speculative_tokens: int = Field(5, ge=1, le=1024, description="k: most tokens in one draft")
    max_model_len: int = Field(1 << 17, ge=16, description="vLLM stops drafting at this many tokens")


def _load_vllm() -> tuple[Any, Any]:
    # vLLM's CLI parser insists on a device; the proposer itself is CPU code.
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    try:
        from vllm.config import SpeculativeConfig
        from vllm.v1.spec_decode.ngram_proposer import NgramProposer
    except Exception as error:  # noqa: BLE001 - any import failure means "not installed right"
        raise PeerNotInstalledError(
            "vllm-ngram", "vllm (vllm.v1.spec_decode.ngram_proposer)", error, setup=SETUP
        ) from error
    return SpeculativeConfig, NgramProposer


class VllmNgramPeer(Proposer):
    """vLLM's ``NgramProposer`` behind the specplug contract.

    ``propose(rid, max_tokens)`` drafts ``min(max_tokens, num_speculative_tokens)`` tokens
    at most (vLLM's k is fixed when the proposer is built).
    """

    name = "vllm-ngram"

    def __init__(self, options: VllmNgramOptions) -> None:
        super().__init__()
        speculative_config_cls, proposer_cls = _load_vllm()
        try:
            speculative = speculative_config_cls(
                method="ngram",
                num_speculative_tokens=options.num_speculative_tokens,
                prompt_lookup_min=options.prompt_lookup_min,
                prompt_lookup_max=options.prompt_lookup_max,
            )
        except Exception as error:  # noqa: BLE001 - vLLM's own validation message, re-raised as ours
            raise InvalidOptionError(f"peer 'vllm-ngram': vLLM rejected the settings: {error}") from None
        config = SimpleNamespace(
            speculative_config=speculative,
            model_config=SimpleNamespace(max_model_len=options.max_model_len),
            scheduler_config=SimpleNamespace(max_num_seqs=1),
            parallel_config=SimpleNamespace(tensor_parallel_size=1),
        )
        self.options = options
        self.prompt_lookup_min: int = speculative.prompt_lookup_min
        self.prompt_lookup_max: int = speculative.prompt_lookup_max
        self._proposer = proposer_cls(config)
        self._k = options.num_speculative_tokens
        self._rows: dict[RequestId, TokenBuffer] = {}
        self._length = np.zeros(1, dtype=np.int32)

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self._rows[request_id] = TokenBuffer(prompt.astype(np.int32))

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        row = self._rows[request_id]
        if row.length == 0:
            return self.empty_draft()
        self._length[0] = row.length
        # A batch of one: vLLM skips a request whose sampled list is empty (a partial
        # prefill), so pass the last token as "sampled"; only its presence matters.
        drafts = self._proposer.propose(
            min(max_tokens, self._k),
            [[int(row.array[row.length - 1])]],
            self._length,
            row.array[None, :],
        )
        return Draft(tuple(drafts[0]), self.name, None)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        row = self._rows[request_id]
        row.reserve(len(tokens))
        row.array[row.length : row.length + len(tokens)] = tokens
        row.length += len(tokens)

    def _stop(self, request_id: RequestId) -> None:
        del self._rows[request_id]

    def state_nbytes(self, request_id: RequestId) -> int:
        """Bytes of the request's token row (vLLM itself keeps ``max_model_len`` int32 per slot)."""
        return int(self._rows[request_id].array.nbytes)
