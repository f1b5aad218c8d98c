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
    # what an engine reads beside the tokens: the alternatives a tree engine verifies, the side fields
    "alt-out-of-range": Draft((5, 6), "bad", alternatives=((-3, 2**40),)),
    "alt-none": Draft((5, 6), "bad", alternatives=None),
    "alt-list": Draft((5, 6), "bad", alternatives=[(5, 7)]),
    "alt-numpy": Draft((5, 6), "bad", alternatives=((np.int64(5), 7),)),
    "alt-too-long": Draft((5,), "bad", alternatives=(tuple(range(100)),)),
    "alt-too-many": Draft((5,), "bad", alternatives=((7,),) * 100),
    "source-int": Draft((5,), 7),
    "score-str": Draft((5,), "bad", "high"),
    "needs-neural-array": Draft((5,), "bad", None, np.array([True, False])),
    "match-negative": Draft((5,), "bad", match=-2),
    "match-str": Draft((5,), "bad", match="long"),
}
#: bad only as a chain (a tree engine's check cuts a tree to its budget rather than refusing it)
TOO_BIG_FOR_A_CHAIN = ("alt-too-long", "alt-too-many")
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


class ShiftingDraft(Draft):
    """Valid tokens the first time they are read (by the check), a negative token after: what
    reaches the engine must be what was checked."""

    __slots__ = ("_reads", "_tokens")

    @property
    def tokens(self):
        object.__setattr__(self, "_reads", getattr(self, "_reads", 0) + 1)
        return self._tokens if self._reads == 1 else (-1, 2**40)

    @tokens.setter
    def tokens(self, value):
        object.__setattr__(self, "_tokens", value)


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


class ShiftingBatch(BatchDrafts):
    """Valid arrays when first read (by the check), out-of-range tokens after."""

    __slots__ = ("reads",)

    @property
    def tokens(self):
        self.reads = getattr(self, "reads", 0) + 1
        tokens = BatchDrafts.tokens.__get__(self)
        return tokens if self.reads == 1 else tokens - 10


#: a plugin batch path's result with valid tokens and one malformed side field, by name
BAD_BATCH_FIELDS = {
    "sources-array": lambda rows: {"sources": np.array(["bad"] * rows)},
    "sources-short": lambda rows: {"sources": ["bad"] * (rows - 1)},
    "sources-not-str": lambda rows: {"sources": [7] * rows},
    "scores-short": lambda rows: {"scores": np.zeros(rows - 1)},
    "scores-str": lambda rows: {"scores": np.array(["x"] * rows)},
    "scores-list": lambda rows: {"scores": [0.5] * rows},
    "needs-neural-short": lambda rows: {"needs_neural": np.ones(rows + 1, dtype=bool)},
    "needs-neural-int": lambda rows: {"needs_neural": np.ones(rows, dtype=np.int64)},
    "accepted-short": lambda rows: {"accepted": np.zeros(rows - 1, dtype=np.int64)},
    "accepted-float": lambda rows: {"accepted": np.zeros(rows)},
    "accepted-negative": lambda rows: {"accepted": np.full(rows, -1, dtype=np.int64)},
    "matches-negative": lambda rows: {"matches": np.full(rows, -1, dtype=np.int64)},
    "matches-float": lambda rows: {"matches": np.zeros(rows)},
    "lengths-2d": lambda rows: {"lengths": np.ones((rows, 1), dtype=np.int64)},
    "tokens-float": lambda rows: {"tokens": np.ones((rows, 4))},
    "shifting": lambda rows: {"class": ShiftingBatch},
}


class BadBatchFields(BadDrafts):
    """A batch path whose rows are all GOOD but whose result has the malformed field ``field``."""

    def __init__(self, field: str) -> None:
        super().__init__()
        self.field = field

    def _step_batch(self, step):
        self._step_lifecycle(step)
        rows = step.rows
        fields = {
            "tokens": np.zeros((rows, 4), dtype=np.int64), "lengths": np.full(rows, 2, dtype=np.int64),
            "accepted": np.zeros(rows, dtype=np.int64), "sources": ["bad"] * rows,
            "scores": np.full(rows, np.nan), "needs_neural": np.ones(rows, dtype=bool), "class": BatchDrafts,
        }  # fmt: skip
        fields["tokens"][:, :2] = GOOD.tokens
        fields.update(BAD_BATCH_FIELDS[self.field](rows))
        cls = fields.pop("class")
        return cls(**fields)
