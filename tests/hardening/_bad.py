"""Proposers that return bad drafts, one kind per request: the matrix the guard must contain."""

from __future__ import annotations

import numpy as np

from specplug import MAX_TOKEN_ID, BatchDrafts, Draft, Proposer

#: what a careless proposer returns, by name: none may reach an engine
BAD_DRAFTS = {
    "none": None,
    "tuple": (1, 2),
    "list": [1, 2],
    "list-tokens": Draft([1, 2], "bad"),
    "numpy-tokens": Draft((np.int64(1), np.int32(2)), "bad"),
    "negative": Draft((-5, 3), "bad"),
    "float": Draft((1.0, 2.5), "bad"),
    "str": Draft(("a",), "bad"),
    "bool": Draft((True,), "bad"),
    "int32-overflow": Draft((MAX_TOKEN_ID + 1,), "bad"),
    "huge": Draft((2**40,), "bad"),
    "too-long": Draft(tuple(range(1000)), "bad"),
}
GOOD = Draft((4, 5), "bad")


KINDS = sorted(BAD_DRAFTS)


def kind_of(request_id) -> str | None:
    """The bad kind a request stands for: its name, or for an int id ``KINDS[id]``; None: good."""
    if isinstance(request_id, int) and 0 <= request_id < len(KINDS):
        return KINDS[request_id]
    return request_id if request_id in BAD_DRAFTS else None


class BadDrafts(Proposer):
    """Drafts the bad draft of the kind its request stands for (:func:`kind_of`), else :data:`GOOD`;
    ``every``: that kind for every request."""

    name = "bad"

    def __init__(self, every: str | None = None) -> None:
        super().__init__()
        self.every = every

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        kind = self.every or kind_of(request_id)
        return GOOD if kind is None else BAD_DRAFTS[kind]

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass


class UncheckedBadDrafts(BadDrafts):
    """Overrides ``propose`` itself, so the base class's check never runs: the guard must check."""

    def propose(self, request_id, max_tokens):
        self._pending[request_id] = None
        return self._propose(request_id, max_tokens)


class BadBatchRows(BadDrafts):
    """A batch path (it overrides ``_step_batch``) that writes bad rows into good arrays."""

    def _step_batch(self, step):
        self._step_lifecycle(step)
        rows, width = step.rows, int(step.limits.max()) if step.rows else 0
        tokens = np.zeros((rows, max(width, 3)), dtype=np.int64)
        lengths = np.zeros(rows, dtype=np.int64)
        for row, request_id in enumerate(step.request_ids):
            if request_id == "negative":
                tokens[row, :2], lengths[row] = (-5, 3), 2
            elif request_id == "too-long":
                tokens[row, :3], lengths[row] = (1, 2, 3), width + 1
            elif request_id == "huge":
                tokens[row, :1], lengths[row] = (2**40,), 1
            else:
                tokens[row, :2], lengths[row] = GOOD.tokens, 2
        return BatchDrafts(tokens, lengths, np.zeros(rows, dtype=np.int64), ["bad"] * rows, np.full(rows, np.nan), np.ones(rows, dtype=bool))
