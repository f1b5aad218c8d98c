"""``LlamaModelProposer``: a second ``llama_cpp.Llama`` as a specplug Proposer (greedy drafts).

It is the neural part of a ``hybrid`` in llama-cpp-python, where the engine has no MTP or
EAGLE head of its own: ``specplug.create("hybrid", neural=LlamaModelProposer(draft), lookup="suffix")``.
The draft model must share the target's vocabulary. Its KV cache holds one request at a
time; each ``propose`` keeps the longest prefix already evaluated and evaluates only the
rest, so steady decoding costs one batched eval of the newly verified tokens plus one
single-token eval per drafted token after the first.
"""

from __future__ import annotations

import llama_cpp
import numpy as np
from llama_cpp import Llama

from specplug import Draft, InvalidOptionError, Proposer, RequestId

__all__ = ["LlamaModelProposer"]


class LlamaModelProposer(Proposer):
    """Greedy drafts from a small ``Llama`` model of the target's vocabulary."""

    name = "llama-draft-model"
    draft_kind = "neural"
    #: it evaluates one token per drafted token: a composite asks it only for the length that pays
    shorter_drafts_save = True

    def __init__(self, llama: Llama, *, max_tokens: int = 4) -> None:
        super().__init__()
        if not isinstance(llama, Llama):
            raise InvalidOptionError(f"llama must be a llama_cpp.Llama, got {type(llama).__name__}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise InvalidOptionError(f"max_tokens = {max_tokens!r} is not valid; it must be an int >= 1")
        self.llama = llama
        self.max_tokens = max_tokens
        self._tokens: dict[RequestId, list[int]] = {}

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self._tokens[request_id] = prompt.tolist()

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._tokens[request_id].extend(tokens.tolist())

    def _stop(self, request_id: RequestId) -> None:
        del self._tokens[request_id]

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        history = self._tokens[request_id]
        if not history:
            return self.empty_draft()
        limit = min(max_tokens, self.max_tokens, self.llama.n_ctx() - len(history) - 1)
        if limit < 1:
            return self.empty_draft()
        self._sync(history)
        drafted: list[int] = []
        while True:
            token = int(np.argmax(self._last_logits()))
            drafted.append(token)
            if len(drafted) == limit:
                break
            self.llama.eval([token])
        return Draft(tuple(drafted), self.name, None)

    def _last_logits(self) -> np.ndarray:
        # read from the context: Llama.scores holds rows only with logits_all=True, whose
        # n_ctx x vocabulary buffer is too large to ask of a draft model
        pointer = llama_cpp.llama_get_logits_ith(self.llama.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(self.llama.n_vocab(),))

    def _sync(self, history: list[int]) -> None:
        """Make the model's evaluated tokens equal ``history``, reusing the common prefix."""
        llama = self.llama
        evaluated = llama.input_ids[: llama.n_tokens]
        limit = min(len(evaluated), len(history))
        mismatch = np.flatnonzero(evaluated[:limit] != np.asarray(history[:limit], dtype=evaluated.dtype))
        common = int(mismatch[0]) if len(mismatch) else limit
        if common == len(history) == llama.n_tokens:
            return  # the last decode ended at history[-1]: its logits are current
        keep = min(common, len(history) - 1)  # re-evaluate at least one token to get fresh logits
        llama.n_tokens = keep  # Llama.eval drops the KV cache beyond n_tokens itself
        llama.eval(history[keep:])
