"""The proposer contract: a request lifecycle over token ids and the Draft it returns.

Every proposer subclasses :class:`Proposer` and implements four private hooks
(``_start``, ``_propose``, ``_extend``, ``_stop``). The public methods validate their
arguments and the request's lifecycle *before* touching any state, so a call that
raises leaves every request as it was.
"""

from __future__ import annotations

import abc
import functools
import operator
import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal

import numpy as np

from specplug._errors import InvalidDraftError, InvalidOptionError, InvalidTokensError, RequestStateError

__all__ = [
    "DRAFT_KINDS",
    "MAX_TOKEN_ID",
    "BatchDrafts",
    "BatchStep",
    "Draft",
    "DraftKind",
    "Proposer",
    "RequestId",
    "accepted_prefix",
    "as_token_array",
    "check_batch_drafts",
    "check_draft",
    "check_tree_draft",
    "draft_accepted",
]

RequestId = Hashable

#: what a draft costs: ``"lookup"`` (CPU time only) or ``"neural"`` (forward passes of a head or model)
DraftKind = Literal["lookup", "neural"]
DRAFT_KINDS: tuple[DraftKind, ...] = ("lookup", "neural")
#: the largest token id specplug stores (the kernels keep int32 tokens)
MAX_TOKEN_ID = int(np.iinfo(np.int32).max)
_INT64 = np.dtype(np.int64)  # compared by identity: numpy keeps one instance of each builtin dtype


def accepted_prefix(draft: Sequence[int] | np.ndarray, verified: Sequence[int] | np.ndarray) -> int:
    """How many leading tokens of ``draft`` the ``verified`` tokens confirm.

    Verification keeps a draft's tokens up to the first one the target disagrees with, then
    appends its own token: acceptance is the length of the common prefix.

    >>> accepted_prefix((5, 6, 7), [5, 6, 9, 1]), accepted_prefix((), [1]), accepted_prefix((5,), [])
    (2, 0, 0)
    """
    limit = min(len(draft), len(verified))
    accepted = 0
    # a plain loop: drafts are a few tokens, and it stops at the first mismatch
    while accepted < limit and draft[accepted] == verified[accepted]:
        accepted += 1
    return accepted


@dataclass(frozen=True, slots=True)
class Draft:
    """What a proposer drafts for one request step.

    ``tokens`` may be empty (no speculation this step). ``score`` is the expected number
    of accepted tokens where the proposer can estimate it, else None. ``needs_neural``
    is False when a hybrid decided its lookup draft wins, so an adapter may skip the
    model's own MTP/EAGLE pass for this step. ``alternatives`` are other continuations
    worth verifying beside ``tokens``, best first: only :meth:`Proposer.propose_alternatives`
    fills them, for an engine that verifies draft trees (an engine verifying chains reads
    ``tokens`` alone).

    >>> Draft((5, 6), source="ngram", score=1.5).tokens
    (5, 6)
    >>> Draft((5, 6), "suffix", alternatives=((5, 7),)).branches()
    ((5, 6), (5, 7))
    """

    tokens: tuple[int, ...]
    source: str
    score: float | None = None
    needs_neural: bool = field(default=True, compare=False)
    alternatives: tuple[tuple[int, ...], ...] = ()

    def __len__(self) -> int:
        return len(self.tokens)

    def branches(self) -> tuple[tuple[int, ...], ...]:
        """Every continuation to verify, ``tokens`` first; none when there is no draft."""
        if not self.tokens:
            return ()
        return (self.tokens, *self.alternatives)


def draft_accepted(draft: Draft, verified: Sequence[int] | np.ndarray) -> int:
    """How many tokens of ``draft`` the ``verified`` tokens confirm, along its best branch.

    A tree verifier keeps the longest branch the target agrees with, so a draft with
    alternatives is accepted as far as its best one.

    >>> draft_accepted(Draft((5, 6), "suffix", alternatives=((7, 8, 9),)), [7, 8, 1])
    2
    """
    accepted = accepted_prefix(draft.tokens, verified)
    for branch in draft.alternatives:
        accepted = max(accepted, accepted_prefix(branch, verified))
    return accepted


def check_tree_draft(draft: object, max_tokens: int, max_branches: int, who: str = "proposer") -> Draft:
    """A draft tree made safe to hand an engine, or :class:`InvalidDraftError` naming the bad value.

    ``tokens`` is checked as :func:`check_draft` checks a chain; each alternative must be a
    tuple of ints in ``[0, MAX_TOKEN_ID]`` too. The tree is then shaped to what the engine
    asked for: alternatives past ``max_branches - 1`` are dropped, and so are those that add
    nothing (empty, or a prefix of an earlier branch); the whole tree keeps within
    ``max_tokens`` tokens, a prefix shared with an earlier branch counted once (a branch that
    finds no room left is cut there).

    >>> check_tree_draft(Draft((1, 2, 3), "x", alternatives=((1, 4, 5), (), (6,))), 4, 3).branches()
    ((1, 2, 3), (1, 4))
    >>> check_tree_draft(Draft((1, 2), "x", alternatives=((1, -2),)), 4, 2)
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidDraftError: proposer drafted token -2 at position 1; token ids are ints in [0, 2147483647]
    """
    draft = check_draft(draft, max_tokens, who)
    tokens, alternatives = draft.tokens, draft.alternatives
    if alternatives.__class__ is not tuple:
        raise InvalidDraftError(
            "tokens not a tuple",
            f"{who} drafted alternatives of type {type(alternatives).__name__}; Draft.alternatives is a tuple of tuples",
        )
    kept: list[tuple[int, ...]] = []
    if alternatives and tokens and max_branches > 1:
        # the tree's nodes so far: every prefix of a kept branch
        nodes = {tokens[:depth] for depth in range(1, len(tokens) + 1)}
        for branch in alternatives:
            _check_token_tuple(branch, who, "an alternative of type {}; branches are tuples of ints")
            shared = 0
            while shared < len(branch) and branch[: shared + 1] in nodes:
                shared += 1
            branch = branch[: shared + max_tokens - len(nodes)]
            if len(branch) <= shared:
                continue  # nothing new (a prefix of an earlier branch), or no room left
            nodes.update(branch[:depth] for depth in range(shared + 1, len(branch) + 1))
            kept.append(branch)
            if len(kept) == max_branches - 1 or len(nodes) == max_tokens:
                break
    if tuple(kept) == alternatives:
        return draft
    return replace(draft, alternatives=tuple(kept))


def as_token_array(tokens: object, what: str = "token_ids") -> np.ndarray:
    """Return ``tokens`` as a 1-D int64 array, or raise naming the bad value.

    >>> as_token_array([3, 4]).tolist()
    [3, 4]
    """
    if isinstance(tokens, np.ndarray):
        if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
            raise InvalidTokensError(
                f"{what} must be a 1-D sequence of non-negative ints; got an array of "
                f"dtype {tokens.dtype} and shape {tokens.shape}"
            )
        array = tokens.astype(np.int64, copy=False)
        if array.size and (int(array.min()) < 0 or int(array.max()) > MAX_TOKEN_ID):
            index = int(np.argmax((array < 0) | (array > MAX_TOKEN_ID)))
            _reject(what, index, int(array[index]))
        return array
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
        raise InvalidTokensError(
            f"{what} must be a sequence of non-negative ints; got {type(tokens).__name__} {tokens!r:.80}"
        )
    items = list(tokens)
    # A plain loop: for the few tokens of a decoding step it is faster than numpy reductions.
    for index, token in enumerate(items):
        if token.__class__ is not int and (isinstance(token, bool) or not isinstance(token, (int, np.integer))):
            raise InvalidTokensError(
                f"{what}[{index}] = {token!r:.40} is not an int; token ids are non-negative ints"
            )
        if not 0 <= token <= MAX_TOKEN_ID:
            _reject(what, index, int(token))
    return np.array(items, dtype=np.int64)



def check_draft(draft: object, max_tokens: int, who: str = "proposer") -> Draft:
    """``draft`` if it is a valid draft of at most ``max_tokens`` tokens, else :class:`InvalidDraftError`.

    Valid: a :class:`Draft` whose ``tokens`` is a tuple of at most ``max_tokens`` Python ints in
    ``[0, MAX_TOKEN_ID]``. Engines write drafts into int32 buffers (or C arrays): anything else
    would reach them as a wrong token, an overflow or an out-of-bounds write.

    >>> check_draft(Draft((5, 6), "x"), 4).tokens
    (5, 6)
    >>> check_draft(Draft((5, -1), "x"), 4)
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidDraftError: proposer drafted token -1 at position 1; token ids are ints in [0, 2147483647]
    """
    if draft.__class__ is not Draft and not isinstance(draft, Draft):
        raise InvalidDraftError(
            "not a Draft", f"{who} returned {type(draft).__name__} {draft!r:.60}, not a Draft"
        )
    tokens = draft.tokens
    _check_token_tuple(tokens, who, "tokens of type {}; Draft.tokens is a tuple of ints")
    if len(tokens) > max_tokens:
        raise InvalidDraftError("too long", f"{who} drafted {len(tokens)} tokens where {max_tokens} were asked for")
    return draft


def _check_token_tuple(tokens: object, who: str, not_a_tuple: str) -> None:
    """Raise unless ``tokens`` is a tuple of valid token ids (``not_a_tuple`` says what was
    drafted instead, ``{}`` standing for its type)."""
    if tokens.__class__ is not tuple:
        raise InvalidDraftError("tokens not a tuple", f"{who} drafted {not_a_tuple.format(type(tokens).__name__)}")
    # a plain loop: a draft is a few tokens, and this is faster than any numpy call
    for token in tokens:
        if token.__class__ is not int or not 0 <= token <= MAX_TOKEN_ID:
            _reject_draft(tokens, who)


def _reject_draft(tokens: tuple, who: str) -> None:
    """Raise naming the first token of ``tokens`` that is not a valid token id."""
    for position, token in enumerate(tokens):
        if token.__class__ is not int:
            raise InvalidDraftError(
                "token not an int",
                f"{who} drafted {token!r:.40} ({type(token).__name__}) at position {position}; token ids are Python ints",
            )
        if not 0 <= token <= MAX_TOKEN_ID:
            raise InvalidDraftError(
                "token out of range",
                f"{who} drafted token {token} at position {position}; token ids are ints in [0, {MAX_TOKEN_ID}]",
            )


def check_batch_drafts(drafts: object, limits: np.ndarray, who: str = "proposer") -> BatchDrafts:
    """``drafts`` if it holds one valid draft per row within its row's limit, else :class:`InvalidDraftError`.

    Read through the arrays (a batch path writes them; per-row drafts were checked as made).
    """
    if not isinstance(drafts, BatchDrafts):
        raise InvalidDraftError(
            "not a Draft", f"{who} returned {type(drafts).__name__} {drafts!r:.60} from a batch step, not BatchDrafts"
        )
    rows = len(limits)
    if drafts._drafts is not None:  # per-row drafts: each checked where it was made, if not here
        if len(drafts._drafts) != rows:
            raise InvalidDraftError("not a Draft", f"{who} returned {len(drafts._drafts)} drafts for {rows} rows")
        for row, draft in enumerate(drafts._drafts):
            check_draft(draft, int(limits[row]), who)
        return drafts
    tokens, lengths = drafts.tokens, drafts.lengths
    if (
        not isinstance(tokens, np.ndarray) or not isinstance(lengths, np.ndarray) or tokens.ndim != 2
        or len(tokens) != rows or lengths.shape != (rows,) or not np.issubdtype(tokens.dtype, np.integer)
        or not np.issubdtype(lengths.dtype, np.integer)
    ):
        raise InvalidDraftError(
            "not a Draft", f"{who} returned batch drafts that are not int arrays of {rows} rows"
        )
    if rows:
        if (lengths > limits).any() or (lengths < 0).any() or int(lengths.max()) > tokens.shape[1]:
            row = int(np.argmax((lengths > limits) | (lengths < 0) | (lengths > tokens.shape[1])))
            raise InvalidDraftError(
                "too long", f"{who} drafted {int(lengths[row])} tokens in row {row} where {int(limits[row])} were asked for"
            )
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
    return drafts


@dataclass(frozen=True, slots=True)
class BatchStep:
    """One engine step for a whole batch, as arrays: what :meth:`Proposer.step_batch` takes.

    Applied in this order: ``stopped`` requests end; ``started`` requests begin with their
    prompts; then per row ``i`` (request ``request_ids[i]``) the tokens
    ``new_tokens[offsets[i]:offsets[i + 1]]`` are appended (none: the row is only drafted for),
    and a draft of at most ``limits[i]`` tokens is made (a limit of 0: no draft for that row).

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
        arrays = [as_token_array(tokens, f"new_tokens[{row}]") for row, tokens in enumerate(_items(new_tokens, "new_tokens"))]
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(array) for array in arrays], dtype=np.int64)
        flat = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.int64)
        return cls(
            _items(request_ids, "request_ids"),
            flat.astype(np.int64, copy=False),
            offsets,
            _int_array(limits, "limits"),
            [
                (request_id, as_token_array(prompt, "prompt_ids"))
                for request_id, prompt in _pairs(started, "started", "(request_id, prompt_ids)")
            ],
            _items(stopped, "stopped"),
        )


class BatchDrafts:
    """Every row's draft of one :class:`BatchStep`, as arrays.

    Row ``i`` drafted ``tokens[i, :lengths[i]]``; ``accepted[i]`` is how many tokens of its
    previous draft the step's new tokens accepted; ``scores[i]`` is NaN where the proposer gave
    no score. ``sources`` and ``needs_neural`` are per row too. Made from per-row drafts (the
    per-request path), the arrays are built on first use: an engine that reads :meth:`draft`
    per row pays for no array it does not read.
    """

    __slots__ = ("_accepted", "_drafts", "_lengths", "_needs_neural", "_scores", "_sources", "_tokens", "_width")

    def __init__(
        self,
        tokens: np.ndarray,
        lengths: np.ndarray,
        accepted: np.ndarray,
        sources: Sequence[str],
        scores: np.ndarray,
        needs_neural: np.ndarray,
    ) -> None:
        self._tokens: np.ndarray | None = tokens  # int64 [rows, width]
        self._lengths: np.ndarray | None = lengths  # int64 [rows]
        self._accepted = accepted  # int64 [rows]
        self._sources: Sequence[str] | None = sources
        self._scores: np.ndarray | None = scores  # float64 [rows], NaN: no score
        self._needs_neural: np.ndarray | None = needs_neural  # bool [rows]
        self._drafts: Sequence[Draft] | None = None
        self._width = tokens.shape[1] if tokens.ndim == 2 else 0

    @classmethod
    def from_drafts(cls, drafts: Sequence[Draft], accepted: Sequence[int] | np.ndarray, width: int) -> BatchDrafts:
        """Per-row drafts (each within ``width`` tokens) as a batch; the arrays are made when first read."""
        self = cls.__new__(cls)
        self._drafts = drafts
        self._width = width
        self._accepted = accepted  # an array when first read: a one-row step's reader may never ask
        self._tokens = self._lengths = self._scores = self._needs_neural = None
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
        )

    def drafts(self) -> list[Draft]:
        return [self.draft(row) for row in range(len(self))]


def _reject(what: str, index: int, token: int) -> None:
    if token < 0:
        raise InvalidTokensError(f"{what}[{index}] = {token} is negative; token ids are non-negative ints")
    raise InvalidTokensError(
        f"{what}[{index}] = {token} is larger than {MAX_TOKEN_ID}, the largest token id specplug stores"
    )


def _items(values: object, what: str) -> list:
    """``values`` as a list, read once, or a one-line error naming what was given."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise InvalidOptionError(f"{what} must be an iterable; got {type(values).__name__} {values!r:.60}")
    return list(values)


def _pairs(values: object, what: str, shape: str) -> list[tuple[object, object]]:
    """``values`` as a list of pairs, read once, or a one-line error naming the first bad item."""
    items = _items(values, what)
    for index, item in enumerate(items):
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise InvalidOptionError(f"{what} takes {shape} pairs; item {index} is {item!r:.60}")
        if item.__class__ is not tuple:
            items[index] = tuple(item)
    return items


def _int_array(values: object, what: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise InvalidOptionError(f"{what} must be a 1-D array of ints; got {array.dtype} of shape {array.shape}")
    return array.astype(np.int64, copy=False)


def _checked_arrays(rows: int, offsets: np.ndarray, limits: np.ndarray, tokens: object) -> np.ndarray:
    """A step's offsets, limits and new tokens checked in Python (offsets and limits int64 arrays of
    the step's shapes): the new tokens as an int64 array, or an error naming the bad value."""
    if rows:
        bounds = offsets.tolist()
        # sorted() runs in C, and in one pass over offsets that already rise
        if bounds[0] != 0 or bounds[-1] != len(tokens) or (rows > 1 and bounds != sorted(bounds)):
            raise InvalidTokensError(
                f"offsets {bounds!r:.80} must rise from 0 to len(new_tokens) = {len(tokens)}"
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
def _compiled_arrays_check():
    """:func:`specplug._step_arrays.step_arrays_ok`, imported on first use (it loads numba)."""
    from specplug._step_arrays import step_arrays_ok

    return step_arrays_ok


def check_batch_size(batch_size: object) -> int:
    """``batch_size`` as an int if it is an int >= 1 (numpy integers too), else a clear error.

    >>> check_batch_size(np.int64(4))
    4
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InvalidOptionError(f"batch_size = {batch_size!r} is not valid; it must be an int >= 1")
    return operator.index(batch_size)


def _check_max_branches(max_branches: object) -> int:
    if isinstance(max_branches, bool) or not isinstance(max_branches, (int, np.integer)) or max_branches < 1:
        raise InvalidOptionError(f"max_branches = {max_branches!r} is not valid; it must be an int >= 1")
    return operator.index(max_branches)


def _check_max_tokens(max_tokens: object) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
        raise InvalidOptionError(f"max_tokens = {max_tokens!r} is not an int; it must be an int >= 1")
    if max_tokens < 1:
        raise InvalidOptionError(f"max_tokens = {max_tokens} is not valid; it must be an int >= 1")
    return operator.index(max_tokens)


class Proposer(abc.ABC):
    """Base class of every proposer: lifecycle checks here, drafting in subclasses.

    Subclasses implement ``_start(rid, prompt)``, ``_propose(rid, max_tokens) -> Draft``,
    ``_extend(rid, tokens)`` and ``_stop(rid)`` over validated int64 arrays, and may
    override ``_observe(rid, draft, accepted)`` to learn from acceptance.
    """

    #: the method name, shown in ``Draft.source``
    name: str = "proposer"
    #: what its drafts cost, declared (never guessed from ``name``): cost models price the two
    #: kinds differently, and a composite calls a neural part only when it is chosen
    draft_kind: DraftKind = "lookup"
    #: the longest draft it can make (an MTP head drafts a fixed k), or None for no limit
    max_draft_tokens: int | None = None
    #: whether :meth:`set_batch_size` changes what it drafts (the engine layer calls it either way)
    takes_batch_size: ClassVar[bool] = False
    #: whether asking for fewer tokens saves work (a draft model evaluates one token per drafted
    #: token); an engine's MTP/EAGLE head drafts its full length anyway, so asking it for all of
    #: it is free: a composite's ``neural_probe`` default follows this
    shorter_drafts_save: ClassVar[bool] = False
    #: whether one pass of it drafts every row of an engine step (an engine's MTP/EAGLE head over
    #: the batch): its cost is paid once per step if any row takes its draft, so a composite with a
    #: cost model prices that pass once against the rows that chose it
    shared_pass: ClassVar[bool] = False
    #: whether :meth:`propose_alternatives` can give more than one branch (an engine that verifies
    #: draft trees asks only such proposers; the others' single draft comes through the batch path)
    proposes_alternatives: ClassVar[bool] = False

    def __init__(self) -> None:
        # request id -> the last draft proposed and not yet resolved by extend()
        self._pending: dict[RequestId, Draft | None] = {}
        # the request ids of the last batch step checked, while no request starts or stops (_check_step)
        self._checked_ids: list[RequestId] | tuple[RequestId, ...] | None = None
        # One public call at a time per proposer: the state shared by its requests (numba tables
        # by slot, output scratch, a global cache whose arrays a resize replaces, pooled
        # statistics) stays consistent when an engine calls from several threads. Reentrant, as
        # a batch step may call the public methods of the same proposer. Uncontended it costs
        # about a tenth of a microsecond per call (docs/performance.md).
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ public API
    def start(self, request_id: RequestId, prompt_ids: Sequence[int] | np.ndarray) -> None:
        """Begin a request with its prompt token ids."""
        with self._lock:
            self._check_id(request_id)
            if request_id in self._pending:
                raise RequestStateError(
                    f"request {request_id!r} is already started; stop() it before starting it again"
                )
            prompt = as_token_array(prompt_ids, "prompt_ids")
            self._start(request_id, prompt)
            self._pending[request_id] = None
            self._checked_ids = None

    def propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        """Draft at most ``max_tokens`` tokens to follow the request's tokens so far."""
        with self._lock:
            self._check_live(request_id, "propose")
            limit = _check_max_tokens(max_tokens)
            draft = check_draft(self._propose(request_id, limit), limit, self.name)
            self._pending[request_id] = draft
            return draft

    def propose_alternatives(self, request_id: RequestId, max_tokens: int, max_branches: int) -> Draft:
        """Draft as :meth:`propose` does, grown into a tree of up to ``max_branches`` branches.

        For an engine that verifies a draft tree of at most ``max_tokens`` tokens (its verify
        width; a prefix two branches share is one token): ``Draft.tokens`` is the most likely
        branch (what :meth:`propose` drafts, cut where the budget went to alternatives),
        ``Draft.alternatives`` the others, and :meth:`extend` counts acceptance along the best
        branch. A proposer without alternatives (``proposes_alternatives`` false) gives its
        single draft. The result is checked (:func:`check_tree_draft`) before it is recorded.

        >>> from specplug import create
        >>> p = create("suffix")
        >>> p.start("r", [1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 4, 7, 1, 2])
        >>> p.propose("r", 4).tokens
        (3, 8, 1, 2)
        >>> p.propose_alternatives("r", 4, 4).branches()  # "1 2" went on with 3 8, 3 9 and 4 7
        ((3, 8), (4, 7))
        >>> p.extend("r", [4, 7, 5])  # the target took the alternative: two tokens accepted
        2
        """
        with self._lock:
            self._check_live(request_id, "propose_alternatives")
            limit = _check_max_tokens(max_tokens)
            branches = _check_max_branches(max_branches)
            if branches > 1:
                draft = self._propose_alternatives(request_id, limit, branches)
            else:
                draft = self._propose(request_id, limit)
            draft = check_tree_draft(draft, limit, branches, self.name)
            self._pending[request_id] = draft
            return draft

    def extend(self, request_id: RequestId, token_ids: Sequence[int] | np.ndarray) -> int:
        """Append verified tokens; return how many of the last draft they accepted.

        ``token_ids`` is the accepted draft prefix followed by the target's own next
        token, so acceptance is the length of the common prefix with the last draft.
        """
        with self._lock:
            self._check_live(request_id, "extend")
            tokens = as_token_array(token_ids)
            draft = self._pending[request_id]
            accepted = draft_accepted(draft, tokens) if draft is not None else 0
            self._pending[request_id] = None
            self._extend(request_id, tokens)
            if draft is not None:
                self._observe(request_id, draft, accepted)
            return accepted

    def stop(self, request_id: RequestId) -> None:
        """End a request and free all of its state."""
        with self._lock:
            self._check_live(request_id, "stop")
            del self._pending[request_id]
            self._checked_ids = None
            self._stop(request_id)

    def propose_batch(self, requests: Iterable[tuple[RequestId, int]]) -> list[Draft]:
        """Draft for several requests at once: ``[(request_id, max_tokens), ...]``.

        All requests are checked before any is drafted, so a bad entry changes nothing.
        """
        with self._lock:
            items = _pairs(requests, "propose_batch", "(request_id, max_tokens)")
            for request_id, max_tokens in items:
                self._check_live(request_id, "propose")
                _check_max_tokens(max_tokens)
            return [self.propose(request_id, max_tokens) for request_id, max_tokens in items]

    def extend_batch(self, updates: Iterable[tuple[RequestId, Sequence[int]]]) -> list[int]:
        """Append verified tokens to several requests: ``[(request_id, token_ids), ...]``."""
        with self._lock:
            items = _pairs(updates, "extend_batch", "(request_id, token_ids)")
            for index, (request_id, tokens) in enumerate(items):
                self._check_live(request_id, "extend")
                # converted once: token_ids may be an iterator, which a second reading finds empty
                items[index] = (request_id, as_token_array(tokens))
            return [self.extend(request_id, tokens) for request_id, tokens in items]

    def step_batch(self, step: BatchStep) -> BatchDrafts:
        """One engine step for the whole batch: stops, starts, every row's new tokens, every row's draft.

        The batch path of ``stop``/``start``/``extend``/``propose`` (see :class:`BatchStep` for the
        order): it gives the same drafts and the same learning as those calls, and a proposer with
        a fast path overrides :meth:`_step_batch`. Everything is checked before any state changes,
        so a step that raises leaves every request as it was. Drafts are cut to their row's limit.

        >>> from specplug import create
        >>> p = create("ngram", min_n=1, max_n=2)
        >>> out = p.step_batch(BatchStep.of(["r"], [[2]], [2], started=[("r", [1, 2, 3, 1])]))
        >>> out.draft(0).tokens, out.accepted.tolist()
        ((3, 1), [0])
        """
        with self._lock:
            step = self._check_step(step)
            return self._step_batch(step)

    def _check_step(self, step: BatchStep) -> BatchStep:
        """Check a step before anything changes; return it with int64 arrays."""
        # Few numpy calls: at small batches each costs about as much as the step's lookups.
        if (
            step.__class__ is BatchStep and step.request_ids.__class__ in (list, tuple)
            and len(step.request_ids) == 1 and self._one_row_ok(step)
        ):
            return step
        if not isinstance(step, BatchStep):
            raise InvalidOptionError(f"step_batch takes a BatchStep; got {type(step).__name__} {step!r:.60}")
        if not isinstance(step.request_ids, Sequence) or isinstance(step.request_ids, (str, bytes)):
            raise InvalidOptionError(
                f"BatchStep.request_ids must be a sequence (list or tuple) of ids; got {type(step.request_ids).__name__}"
            )
        rows = step.rows
        offsets, limits, tokens = step.offsets, step.limits, step.new_tokens
        if not (isinstance(offsets, np.ndarray) and offsets.dtype == np.int64):
            offsets = _int_array(offsets, "offsets")
        if not (isinstance(limits, np.ndarray) and limits.dtype == np.int64):
            limits = _int_array(limits, "limits")
        if offsets.shape != (rows + 1,) or limits.shape != (rows,):
            raise InvalidTokensError(
                f"a batch step of {rows} rows needs offsets of shape ({rows + 1},) and limits of shape ({rows},); "
                f"got {offsets.shape} and {limits.shape}"
            )
        # Many rows in the engine's own arrays: one compiled pass over them (_step_arrays says why); the
        # checks in Python run only where it finds something wrong, or for anything else, and name it.
        if not (
            rows > 1 and tokens.__class__ is np.ndarray and tokens.dtype is _INT64 and tokens.ndim == 1
            and _compiled_arrays_check()(offsets, limits, tokens, MAX_TOKEN_ID)
        ):
            tokens = _checked_arrays(rows, offsets, limits, tokens)
        pending = self._pending
        # materialised once: an iterator read here would be empty when the step is carried out
        stopped_ids = step.stopped if step.stopped.__class__ in (list, tuple) else _items(step.stopped, "BatchStep.stopped")
        starts = step.started
        if starts:
            starts = [
                (request_id, as_token_array(prompt, "prompt_ids"))
                for request_id, prompt in _pairs(starts, "BatchStep.started", "(request_id, prompt_ids)")
            ]
        elif starts.__class__ not in (list, tuple):
            starts = _items(starts, "BatchStep.started")
        stopped = set()
        for request_id in stopped_ids:
            self._check_live(request_id, "stop")
            stopped.add(request_id)
        started = set()
        for request_id, _ in starts:
            self._check_id(request_id)
            if (request_id in pending and request_id not in stopped) or request_id in started:
                raise RequestStateError(
                    f"request {request_id!r} is already started; stop it before starting it again"
                )
            started.add(request_id)
        ids = step.request_ids
        # The rows of the last step checked, no request started or stopped since (start() and stop()
        # forget them): still hashable, apart and live. Compared as a list or tuple, to a copy.
        same_rows = not started and not stopped and ids.__class__ in (list, tuple)
        if not (same_rows and ids == self._checked_ids):
            self._check_ids(ids, rows, started, stopped)
            if same_rows:
                self._checked_ids = ids[:]
        if (
            offsets is not step.offsets or limits is not step.limits or tokens is not step.new_tokens
            or starts is not step.started or stopped_ids is not step.stopped
        ):
            step = replace(step, offsets=offsets, limits=limits, new_tokens=tokens, started=starts, stopped=stopped_ids)
        return step

    def _check_ids(self, ids: Sequence[RequestId], rows: int, started: set, stopped: set) -> None:
        """Every row's request id hashable, in one row only, and live or started in the step (not stopped)."""
        try:
            hash(tuple(ids))  # hashes every id in C
        except TypeError:
            for request_id in ids:
                self._check_id(request_id)  # raises naming the unhashable one
        id_set = set(ids)
        if len(id_set) != rows:
            raise RequestStateError("a request id appears in two rows of one batch step")
        # set operations in C: no Python per row (a row's request is live, or started in the step)
        unknown = id_set.difference(self._pending)
        if stopped:
            unknown |= id_set & stopped
        if started:
            unknown -= started
        if unknown:
            request_id = next(request_id for request_id in ids if request_id in unknown)
            raise RequestStateError(
                f"row for request {request_id!r}, which is not started (or stopped); start it in the step first"
            )

    def _one_row_ok(self, step: BatchStep) -> bool:
        """True when a one-row step, as an engine of one sequence sends it, needs no other check.

        The lean check of a single-sequence engine's step (llama.cpp, batch 1): int64 arrays,
        no starts or stops, a live request, tokens in range. Anything else (False) takes the
        full check, which names what is wrong; so this one never raises.
        """
        ids, offsets, limits, tokens = step.request_ids, step.offsets, step.limits, step.new_tokens
        if (
            step.started.__class__ not in (list, tuple) or step.stopped.__class__ not in (list, tuple)
            or step.started or step.stopped
            or offsets.__class__ is not np.ndarray or limits.__class__ is not np.ndarray
            or tokens.__class__ is not np.ndarray or offsets.dtype is not _INT64 or limits.dtype is not _INT64
            or tokens.dtype is not _INT64 or tokens.ndim != 1 or offsets.shape != (2,) or limits.shape != (1,)
        ):
            return False
        begin, end = offsets.tolist()
        if begin != 0 or end != len(tokens) or limits.tolist()[0] < 0:
            return False
        if end:
            if end > 256:  # a long chunk (a prompt-sized extend): the full check's numpy reductions
                return False
            values = tokens.tolist()
            if min(values) < 0 or max(values) > MAX_TOKEN_ID:
                return False
        try:
            return ids[0] in self._pending
        except TypeError:  # unhashable: the full check names it
            return False

    def _step_batch(self, step: BatchStep) -> BatchDrafts:
        """The per-request path, row by row: the default, and the reference of every fast path."""
        self._step_lifecycle(step)
        return self._step_rows(step)

    def _step_lifecycle(self, step: BatchStep) -> None:
        """The step's stops, then its starts (checked already)."""
        for request_id in step.stopped:
            self.stop(request_id)
        for request_id, prompt in step.started:
            self.start(request_id, prompt)

    def _step_rows(self, step: BatchStep) -> BatchDrafts:
        """Every row's ``extend`` then ``propose``, row by row, after the step's lifecycle changes.

        The step was checked as a whole, so the hooks are called directly (what ``extend`` and
        ``propose`` do after their checks); a subclass that overrides those public methods gets
        them called instead.
        """
        ids, new_tokens = step.request_ids, step.new_tokens
        bounds, limits = step.offsets.tolist(), step.limits.tolist()
        rows = len(ids)
        accepted = [0] * rows
        drafts: list[Draft] = []
        empty = self.empty_draft() if 0 in limits else None
        cls = type(self)
        if cls.extend is not Proposer.extend or cls.propose is not Proposer.propose:
            for row, request_id in enumerate(ids):
                if bounds[row + 1] > bounds[row]:
                    accepted[row] = self.extend(request_id, new_tokens[bounds[row] : bounds[row + 1]])
                limit = limits[row]
                drafts.append(check_draft(self.propose(request_id, limit), limit, self.name) if limit > 0 else empty)
            return BatchDrafts.from_drafts(drafts, accepted, max(limits, default=0))
        pending = self._pending
        if rows == 1:  # a single-sequence engine's step: the loop's bookkeeping costs as much as the hooks
            return self._step_one(ids[0], new_tokens, limits[0], empty)
        flat = new_tokens.tolist()
        for row, request_id in enumerate(ids):
            begin, end = bounds[row], bounds[row + 1]
            if end > begin:
                last = pending[request_id]
                pending[request_id] = None
                count = draft_accepted(last, flat[begin:end]) if last is not None else 0
                self._extend(request_id, new_tokens[begin:end])
                if last is not None:
                    accepted[row] = count
                    self._observe(request_id, last, count)
            limit = limits[row]
            if limit > 0:
                draft = pending[request_id] = check_draft(self._propose(request_id, limit), limit, self.name)
            else:
                draft = empty
            drafts.append(draft)
        return BatchDrafts.from_drafts(drafts, accepted, max(limits, default=0))

    def _step_one(self, request_id: RequestId, new_tokens: np.ndarray, limit: int, empty: Draft | None) -> BatchDrafts:
        """:meth:`_step_rows` for one row (the same hook calls, without the loop's lists)."""
        pending = self._pending
        accepted = 0
        if len(new_tokens):
            last = pending[request_id]
            pending[request_id] = None
            count = draft_accepted(last, new_tokens.tolist()) if last is not None else 0
            self._extend(request_id, new_tokens)
            if last is not None:
                accepted = count
                self._observe(request_id, last, count)
        if limit > 0:
            draft = pending[request_id] = check_draft(self._propose(request_id, limit), limit, self.name)
        else:
            draft = empty
        return BatchDrafts.from_drafts([draft], [accepted], limit)

    def active_requests(self) -> list[RequestId]:
        """Ids of the requests started and not yet stopped."""
        with self._lock:
            return list(self._pending)

    def __contains__(self, request_id: object) -> bool:
        try:
            with self._lock:
                return request_id in self._pending
        except TypeError:  # unhashable: never a request id
            return False

    def set_batch_size(self, batch_size: int) -> None:
        """The engine's current batch size, before a step's drafts are asked for.

        Checked here (an int >= 1, numpy integers too), then ignored; proposers that price drafts
        by batch size (``takes_batch_size``) override it.
        """
        check_batch_size(batch_size)

    def state_nbytes(self, request_id: RequestId) -> int | None:
        """Bytes of drafting state held for one live request, or None where not measured."""
        with self._lock:
            self._check_live(request_id, "state_nbytes")
            return None

    # ------------------------------------------------------------- subclass hooks
    @abc.abstractmethod
    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None: ...

    @abc.abstractmethod
    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft: ...

    @abc.abstractmethod
    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None: ...

    @abc.abstractmethod
    def _stop(self, request_id: RequestId) -> None: ...

    def _propose_alternatives(self, request_id: RequestId, max_tokens: int, max_branches: int) -> Draft:
        """The draft with its alternatives (``max_branches >= 2``); by default the single draft."""
        return self._propose(request_id, max_tokens)

    def _observe(self, request_id: RequestId, draft: Draft, accepted: int) -> None:
        """Called after ``extend`` with the last draft and how many of its tokens were accepted."""

    # -------------------------------------------------------------------- checks
    @staticmethod
    def _check_id(request_id: object) -> None:
        try:
            hash(request_id)
        except TypeError:
            raise RequestStateError(
                f"request_id {request_id!r:.60} is not hashable; use a str or an int"
            ) from None

    def _check_live(self, request_id: RequestId, action: str) -> None:
        self._check_id(request_id)
        if request_id not in self._pending:
            raise RequestStateError(
                f"{action}() for request {request_id!r}, which is not started (or already stopped); "
                f"call start({request_id!r}, prompt_ids) first"
            )

    def empty_draft(self) -> Draft:
        """An empty draft from this proposer."""
        return Draft((), self.name, 0.0)
