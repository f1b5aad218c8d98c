"""A proposer wrapper that tells the replay which drafters ran in a step, for the cost model."""

from __future__ import annotations

import numpy as np

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer

__all__ = ["Metered"]


class Metered(Proposer):
    """Forwards everything to ``inner`` and records whether it drafted since :meth:`reset`.

    A neural drafter costs its forward passes whenever it is called; a lookup is charged
    only when it found a draft (a miss costs plain decoding, as in arXiv 2601.11580's
    simulator; its CPU time is reported separately as microseconds per step).
    """

    def __init__(self, inner: Proposer, kind: str | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.draft_kind = kind or inner.draft_kind
        self.max_draft_tokens = getattr(inner, "max_draft_tokens", None)
        self.charged = False

    def reset(self) -> None:
        self.charged = False

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self.inner.start(request_id, prompt)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        draft = self.inner.propose(request_id, max_tokens)
        if self.draft_kind == "neural" or draft.tokens:
            self.charged = True
        return draft

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self.inner.extend(request_id, tokens)

    def _stop(self, request_id: RequestId) -> None:
        self.inner.stop(request_id)
