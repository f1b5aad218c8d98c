"""One engine step for a whole batch: :class:`BatchStep` in, :class:`BatchDrafts` out.

Every adapter makes one proposer call per engine step with these; their arrays are checked once,
in Python or in one compiled pass, before any request's state changes.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from specplug._drafts import MAX_TOKEN_ID, Draft, RequestId, as_token_array, check_draft
from specplug._errors import InvalidDraftError, InvalidOptionError, InvalidTokensError, shown

__all__ = ["NEURAL_METHOD", "BatchDrafts", "BatchStep", "check_batch_drafts", "check_batch_size"]

#: how a row of ``BatchStep.methods`` names a composite's neural parts (the engine's own drafter, whatever it is)
NEURAL_METHOD = "neural"

def check_batch_drafts(drafts: object, limits: np.ndarray, who: str = "proposer", copy: bool = True) -> BatchDrafts:
    """``drafts`` checked as a whole, or :class:`InvalidDraftError` naming the first bad value.

    Everything an engine reads is checked: one valid draft per row within its row's limit
    (``tokens`` a 2-D int array, ``lengths`` ints within the limit and the width, every used
    token in ``[0, MAX_TOKEN_ID]``), ``accepted`` and ``matches`` one int >= 0 per row, ``scores``
    one float per row, ``needs_neural`` one bool per row and ``sources`` a list or tuple of one str per row.
    With ``copy`` (a plugin's result) the values come back copied into a plain BatchDrafts, so
    nothing the proposer keeps, or a subclass overrides, can change them after the check.

    >>> check_batch_drafts(BatchDrafts.from_drafts([Draft((1, 2), "x")], [0], 2), np.array([2])).draft(0).tokens
    (1, 2)
    >>> bad = BatchDrafts(np.zeros((1, 2), dtype=np.int64), np.ones(1, dtype=np.int64), np.zeros(1, dtype=np.int64), ["x"], np.zeros(2), np.ones(1, dtype=bool))
    >>> check_batch_drafts(bad, np.array([2]))
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidDraftError: proposer returned batch scores of shape (2,) and dtype float64 for 1 rows; they are one float per row
    """
    if not isinstance(drafts, BatchDrafts):
        raise InvalidDraftError(
            "not a Draft", f"{who} returned {type(drafts).__name__} {shown(drafts)} from a batch step, not BatchDrafts"
        )
    rows = len(limits)
    width = int(limits.max()) if rows else 0
    per_row = drafts._drafts
    if per_row is not None:  # per-row drafts: each checked (and copied) here
        if per_row.__class__ not in (list, tuple) or len(per_row) != rows:
            raise InvalidDraftError("not a Draft", f"{who} returned {_count(per_row)} drafts for {rows} rows")
        accepted = batch_column(drafts._accepted, rows, "accepted", "iu", who)
        checked = [check_draft(draft, int(limits[row]), who) for row, draft in enumerate(per_row)]
        if not copy and drafts.__class__ is BatchDrafts and drafts._width <= width and all(
            mine is theirs for mine, theirs in zip(checked, per_row)
        ):
            return drafts
        return BatchDrafts.from_drafts(checked, accepted, width)
    tokens, lengths = drafts.tokens, drafts.lengths
    if (
        tokens.__class__ is not np.ndarray or tokens.ndim != 2 or len(tokens) != rows
        or tokens.dtype.kind not in "iu"
    ):
        raise InvalidDraftError(
            "not a Draft", f"{who} returned batch tokens that are not a 2-D int array of {rows} rows"
        )
    lengths = batch_column(lengths, rows, "lengths", "iu", who)
    accepted = batch_column(drafts.accepted, rows, "accepted", "iu", who)
    scores = batch_column(drafts.scores, rows, "scores", "f", who)
    needs_neural = batch_column(drafts.needs_neural, rows, "needs_neural", "b", who)
    matches = batch_column(drafts.matches, rows, "matches", "iu", who)
    sources = drafts.sources
    if (
        sources.__class__ not in (list, tuple) or len(sources) != rows
        or (rows and not (sources[0].__class__ is str and sources.count(sources[0]) == rows)
            and not all(source.__class__ is str for source in sources))
    ):
        raise InvalidDraftError(
            "not a Draft", f"{who} returned batch sources of type {type(sources).__name__} and length "
            f"{_count(sources)} for {rows} rows; they are a list of one str per row"
        )
    if rows:
        if (lengths > limits).any() or (lengths < 0).any() or int(lengths.max()) > tokens.shape[1]:
            row = int(np.argmax((lengths > limits) | (lengths < 0) | (lengths > tokens.shape[1])))
            raise InvalidDraftError(
                "too long", f"{who} drafted {int(lengths[row])} tokens in row {row} where {int(limits[row])} were asked for"
            )
        _check_non_negative(accepted, "accepted", who)
        _check_non_negative(matches, "matches", who)
        if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) > MAX_TOKEN_ID):
            used = np.arange(tokens.shape[1]) < lengths[:, None]
            bad = used & ((tokens < 0) | (tokens > MAX_TOKEN_ID))
            if bad.any():
                row, position = (int(i) for i in np.argwhere(bad)[0])
                raise InvalidDraftError(
                    "token out of range",
                    f"{who} drafted token {int(tokens[row, position])} in row {row} at position {position}; "
                    f"token ids are ints in [0, {MAX_TOKEN_ID}]",
                )
    if not copy and drafts.__class__ is BatchDrafts:
        return drafts
    return BatchDrafts(
        np.array(tokens[:, :width], dtype=np.int64), np.array(lengths, dtype=np.int64),
        np.array(accepted, dtype=np.int64), [str(source) for source in sources],
        np.array(scores, dtype=np.float64), np.array(needs_neural, dtype=np.bool_), np.array(matches, dtype=np.int64),
    )


def _check_non_negative(values: np.ndarray, what: str, who: str) -> None:
    if int(values.min()) < 0:
        row = int(np.argmin(values))
        raise InvalidDraftError("not a Draft", f"{who} returned {what} = {int(values[row])} in row {row}; it is >= 0")


def _count(values: object) -> str:
    try:
        return str(len(values))  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - no length at all
        return "no"


def batch_column(values: object, rows: int, what: str, kinds: str, who: str) -> np.ndarray:
    """One of a batch's per-row arrays, checked: a 1-D array of ``rows`` values of a dtype kind in
    ``kinds`` (a list of ints for ``accepted``, which per-row drafts keep as given)."""
    if values.__class__ in (list, tuple) and kinds == "iu":
        if len(values) == rows and all(value.__class__ is int for value in values):
            return np.array(values, dtype=np.int64)
    elif values.__class__ is np.ndarray and values.shape == (rows,) and values.dtype.kind in kinds:
        return values
    kind = {"iu": "int", "f": "float", "b": "bool"}[kinds]
    shape = getattr(values, "shape", None)
    dtype = getattr(values, "dtype", None)
    got = f"of shape {shape} and dtype {dtype}" if shape is not None else f"of type {type(values).__name__} and length {_count(values)}"
    raise InvalidDraftError("not a Draft", f"{who} returned batch {what} {got} for {rows} rows; they are one {kind} per row")


@dataclass(frozen=True, slots=True)
class BatchStep:
    """One engine step for a whole batch, as arrays: what :meth:`Proposer.step_batch` takes.

    Applied in this order: ``stopped`` requests end; ``started`` requests begin with their
    prompts; then per row ``i`` (request ``request_ids[i]``) the tokens
    ``new_tokens[offsets[i]:offsets[i + 1]]`` are appended (none: the row is only drafted for),
    and a draft of at most ``limits[i]`` tokens is made (a limit of 0: no draft for that row).
    ``methods`` (None: no row asks) holds per row the part of a composite method (one of its
    ``request_methods``: a lookup's method name, or :data:`NEURAL_METHOD`) that row's request
    restricts its draft to, or None; a proposer that is not made of parts reads no such field.

    >>> step = BatchStep.of(["a", "b"], [[5, 6], []], [4, 4], started=[("b", [1, 2])])
    >>> step.offsets.tolist(), step.rows
    ([0, 2, 2], 2)
    """

    request_ids: Sequence[RequestId]
    #: every row's new tokens, concatenated (int64)
    new_tokens: np.ndarray
    #: row ``i``'s new tokens are ``new_tokens[offsets[i]:offsets[i + 1]]`` (int64, rows + 1)
    offsets: np.ndarray
    #: most draft tokens per row (int64; 0: none)
    limits: np.ndarray
    started: Sequence[tuple[RequestId, np.ndarray]] = ()
    stopped: Sequence[RequestId] = ()
    #: per row, the part of a composite its request is drafted by (None: any), or None for every row
    methods: Sequence[str | None] | None = None

    @property
    def rows(self) -> int:
        return len(self.request_ids)

    @classmethod
    def of(
        cls,
        request_ids: Sequence[RequestId],
        new_tokens: Sequence[Sequence[int] | np.ndarray],
        limits: Sequence[int] | np.ndarray,
        *,
        started: Iterable[tuple[RequestId, Sequence[int] | np.ndarray]] = (),
        stopped: Iterable[RequestId] = (),
    ) -> BatchStep:
        """Build a step from per-row lists (validating every token)."""
        arrays = [as_token_array(tokens, f"new_tokens[{row}]") for row, tokens in enumerate(items_of(new_tokens, "new_tokens"))]
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(array) for array in arrays], dtype=np.int64)
        flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
        return cls(
            items_of(request_ids, "request_ids"),
            flat.astype(np.int64, copy=False),
            offsets,
            int_array(limits, "limits"),
            [
                (request_id, as_token_array(prompt, "prompt_ids"))
                for request_id, prompt in pairs_of(started, "started", "(request_id, prompt_ids)")
            ],
            items_of(stopped, "stopped"),
        )


class BatchDrafts:
    """Every row's draft of one :class:`BatchStep`, as arrays.

    Row ``i`` drafted ``tokens[i, :lengths[i]]``; ``accepted[i]`` is how many tokens of its
    previous draft the step's new tokens accepted; ``scores[i]`` is NaN where the proposer gave
    no score; ``matches[i]`` is the draft's :attr:`Draft.match`, 0 where not known. ``sources``
    and ``needs_neural`` are per row too. Made from per-row drafts (the
    per-request path), the arrays are built on first use: an engine that reads :meth:`draft`
    per row pays for no array it does not read.
    """

    __slots__ = (
        "_accepted", "_drafts", "_lengths", "_matches", "_needs_neural", "_scores", "_sources", "_tokens", "_width",
    )

    def __init__(
        self,
        tokens: np.ndarray,
        lengths: np.ndarray,
        accepted: np.ndarray,
        sources: Sequence[str],
        scores: np.ndarray,
        needs_neural: np.ndarray,
        matches: np.ndarray | None = None,
    ) -> None:
        self._tokens: np.ndarray | None = tokens  # int64 [rows, width]
        self._lengths: np.ndarray | None = lengths  # int64 [rows]
        self._accepted = accepted  # int64 [rows]
        self._sources: Sequence[str] | None = sources
        self._scores: np.ndarray | None = scores  # float64 [rows], NaN: no score
        self._needs_neural: np.ndarray | None = needs_neural  # bool [rows]
        self._matches = matches  # int64 [rows], 0: not known; None: made when first read
        self._drafts: Sequence[Draft] | None = None
        self._width = tokens.shape[1] if tokens.ndim == 2 else 0

    @classmethod
    def from_drafts(cls, drafts: Sequence[Draft], accepted: Sequence[int] | np.ndarray, width: int) -> BatchDrafts:
        """Per-row drafts (each within ``width`` tokens) as a batch; the arrays are made when first read."""
        self = cls.__new__(cls)
        self._drafts = drafts
        self._width = width
        self._accepted = accepted  # an array when first read: a one-row step's reader may never ask
        self._tokens = self._lengths = self._scores = self._needs_neural = self._matches = None
        self._sources = None
        return self

    def __len__(self) -> int:
        return len(self._drafts) if self._drafts is not None else len(self._accepted)

    @property
    def accepted(self) -> np.ndarray:
        accepted = self._accepted
        if accepted.__class__ is not np.ndarray:
            accepted = self._accepted = np.asarray(accepted, dtype=np.int64)
        return accepted

    @property
    def lengths(self) -> np.ndarray:
        if self._lengths is None:
            self._lengths = np.array([len(draft.tokens) for draft in self._drafts], dtype=np.int64)
        return self._lengths

    @property
    def tokens(self) -> np.ndarray:
        if self._tokens is None:
            tokens = np.zeros((len(self), self._width), dtype=np.int64)
            for row, draft in enumerate(self._drafts):
                if draft.tokens:
                    tokens[row, : len(draft.tokens)] = draft.tokens
            self._tokens = tokens
        return self._tokens

    @property
    def sources(self) -> Sequence[str]:
        if self._sources is None:
            self._sources = [draft.source for draft in self._drafts]
        return self._sources

    @property
    def scores(self) -> np.ndarray:
        if self._scores is None:
            self._scores = np.array(
                [np.nan if draft.score is None else draft.score for draft in self._drafts], dtype=np.float64
            )
        return self._scores

    @property
    def matches(self) -> np.ndarray:
        if self._matches is None:
            if self._drafts is None:
                self._matches = np.zeros(len(self), dtype=np.int64)
            else:
                self._matches = np.array([draft.match or 0 for draft in self._drafts], dtype=np.int64)
        return self._matches

    @property
    def needs_neural(self) -> np.ndarray:
        if self._needs_neural is None:
            self._needs_neural = np.array([draft.needs_neural for draft in self._drafts], dtype=np.bool_)
        return self._needs_neural

    def draft(self, row: int) -> Draft:
        """Row ``row``'s draft as a :class:`Draft`."""
        if self._drafts is not None:
            return self._drafts[row]
        score = float(self.scores[row])
        return Draft(
            tuple(self.tokens[row, : self.lengths[row]].tolist()),
            self.sources[row],
            None if score != score else score,
            bool(self.needs_neural[row]),
            match=int(self.matches[row]) or None,
        )

    def drafts(self) -> list[Draft]:
        return [self.draft(row) for row in range(len(self))]



def items_of(values: object, what: str) -> list:
    """``values`` as a list, read once, or a one-line error naming what was given."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidOptionError(f"{what} must be an iterable; got {type(values).__name__} {shown(values)}")
    return list(values)


def pairs_of(values: object, what: str, shape: str) -> list[tuple[object, object]]:
    """``values`` as a list of pairs, read once, or a one-line error naming the first bad item."""
    items = items_of(values, what)
    for index, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidOptionError(f"{what} takes {shape} pairs; item {index} is {shown(item)}")
        if item.__class__ is not tuple:
            items[index] = tuple(item)
    return items


def int_array(values: object, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InvalidOptionError(f"{what} must be a 1-D array of ints; got {array.dtype} of shape {array.shape}")
    return array.astype(np.int64, copy=False)


def checked_step_arrays(rows: int, offsets: np.ndarray, limits: np.ndarray, tokens: object) -> np.ndarray:
    """A step's offsets, limits and new tokens checked in Python (offsets and limits int64 arrays of
    the step's shapes): the new tokens as an int64 array, or an error naming the bad value."""
    if rows:
        bounds = offsets.tolist()
        # sorted() runs in C, and in one pass over offsets that already rise
        if bounds[0] != 0 or bounds[-1] != len(tokens) or (rows > 1 and bounds != sorted(bounds)):
            raise InvalidTokensError(
                f"offsets {shown(bounds, 80)} must rise from 0 to len(new_tokens) = {len(tokens)}"
            )
        least = min(limits.tolist())
        if least < 0:
            raise InvalidOptionError(
                f"limits[{limits.tolist().index(least)}] = {least} is negative; limits are ints >= 0"
            )
    if not isinstance(tokens, np.ndarray) or tokens.dtype != np.int64 or tokens.ndim != 1:
        return as_token_array(tokens, "new_tokens")  # raises naming the bad value, or converts
    if len(tokens):
        # a step's few tokens: min/max over a list beat numpy's reductions
        values = tokens.tolist() if len(tokens) < 256 else (int(tokens.min()), int(tokens.max()))
        if min(values) < 0 or max(values) > MAX_TOKEN_ID:
            as_token_array(tokens, "new_tokens")
    return tokens


@functools.cache
def compiled_step_check():
    """:func:`specplug._step_arrays.step_arrays_ok`, imported on first use (it loads numba)."""
    from specplug._step_arrays import step_arrays_ok

    return step_arrays_ok



def check_batch_size(batch_size: object) -> int:
    """``batch_size`` as an int if it is an int >= 1 (numpy integers too), else a clear error.

    >>> check_batch_size(np.int64(4))
    4
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InvalidOptionError(f"batch_size = {shown(batch_size)} is not valid; it must be an int >= 1")
    return operator.index(batch_size)
