"""The proposer contract: a request lifecycle over token ids.

Every proposer subclasses :class:`Proposer` and implements four private hooks
(``_start``, ``_propose``, ``_extend``, ``_stop``). The public methods validate their
arguments and the request's lifecycle *before* touching any state, so a call that
raises leaves every request as it was.
"""

from __future__ import annotations

import abc
import operator
import threading
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import ClassVar

import numpy as np

from specplug._batch import (
    BatchDrafts,
    BatchStep,
    check_batch_size,
    checked_step_arrays,
    compiled_step_check,
    int_array,
    items_of,
    pairs_of,
)  # fmt: skip
from specplug._drafts import (
    INT64,
    MAX_TOKEN_ID,
    Draft,
    DraftKind,
    RequestId,
    as_token_array,
    check_draft,
    check_tree_draft,
    draft_accepted,
)  # fmt: skip
from specplug._errors import InvalidOptionError, InvalidTokensError, RequestStateError, shown

__all__ = ["MAX_DRAFT_LIMIT", "Proposer"]

#: the most tokens a proposer is asked for when it names no maximum of its own: a larger limit is
#: cut to it rather than allocated (a limit of 10**8 would be gigabytes of draft buffers)
MAX_DRAFT_LIMIT = 4096

def _check_max_branches(max_branches: object) -> int:
    if isinstance(max_branches, bool) or not isinstance(max_branches, (int, np.integer)) or max_branches < 1:
        raise InvalidOptionError(f"max_branches = {shown(max_branches)} is not valid; it must be an int >= 1")
    return operator.index(max_branches)


def _check_max_tokens(max_tokens: object) -> int:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)):
        raise InvalidOptionError(f"max_tokens = {shown(max_tokens)} is not an int; it must be an int >= 1")
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
    #: the options' ``max_tokens`` once read (:meth:`_most_tokens`)
    _options_most: int | None = None

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
                    f"request {shown(request_id)} is already started; stop() it before starting it again"
                )
            prompt = as_token_array(prompt_ids, "prompt_ids")
            self._start(request_id, prompt)
            self._pending[request_id] = None
            self._checked_ids = None

    def propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        """Draft at most ``max_tokens`` tokens to follow the request's tokens so far."""
        with self._lock:
            self._check_live(request_id, "propose")
            limit = min(_check_max_tokens(max_tokens), self._most_tokens())
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
            # a tree's budget is its verify width, past one branch's longest draft: cut only to the cap of all
            limit = min(_check_max_tokens(max_tokens), MAX_DRAFT_LIMIT)
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
            items = pairs_of(requests, "propose_batch", "(request_id, max_tokens)")
            for request_id, max_tokens in items:
                self._check_live(request_id, "propose")
                _check_max_tokens(max_tokens)
            return [self.propose(request_id, max_tokens) for request_id, max_tokens in items]

    def extend_batch(self, updates: Iterable[tuple[RequestId, Sequence[int]]]) -> list[int]:
        """Append verified tokens to several requests: ``[(request_id, token_ids), ...]``."""
        with self._lock:
            items = pairs_of(updates, "extend_batch", "(request_id, token_ids)")
            for index, (request_id, tokens) in enumerate(items):
                self._check_live(request_id, "extend")
                # converted once: token_ids may be an iterator, which a second reading finds empty
                items[index] = (request_id, as_token_array(tokens))
            return [self.extend(request_id, tokens) for request_id, tokens in items]

    def step_batch(self, step: BatchStep) -> BatchDrafts:
        """One engine step for the whole batch: stops, starts, every row's new tokens, every row's draft.

        The batch path of ``stop``/``start``/``extend``/``propose`` (see :class:`BatchStep` for the
        order): it gives the same drafts and the same learning as those calls, and a proposer with
        a fast path overrides :meth:`_step_batch`. Everything is checked before any state changes
        (ids started, stopped or drafted twice included), so a step that raises leaves every request
        as it was. Drafts are cut to their row's limit, and limits past the method's own maximum
        (:meth:`_most_tokens`) to it.

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
        most = self._most_tokens()
        if (
            step.__class__ is BatchStep and step.request_ids.__class__ in (list, tuple)
            and len(step.request_ids) == 1 and step.methods is None and self._one_row_ok(step, most)
        ):
            return step
        if not isinstance(step, BatchStep):
            raise InvalidOptionError(f"step_batch takes a BatchStep; got {type(step).__name__} {shown(step)}")
        if not isinstance(step.request_ids, Sequence) or isinstance(step.request_ids, (str, bytes)):
            raise InvalidOptionError(
                f"BatchStep.request_ids must be a sequence (list or tuple) of ids; got {type(step.request_ids).__name__}"
            )
        rows = step.rows
        if step.methods is not None and (step.methods.__class__ not in (list, tuple) or len(step.methods) != rows):
            raise InvalidOptionError(f"BatchStep.methods must be None or a list of one name (or None) per row; got "
                                     f"{type(step.methods).__name__} {shown(step.methods)} for {rows} rows")
        offsets, limits, tokens = step.offsets, step.limits, step.new_tokens
        if not (isinstance(offsets, np.ndarray) and offsets.dtype == np.int64):
            offsets = int_array(offsets, "offsets")
        if not (isinstance(limits, np.ndarray) and limits.dtype == np.int64):
            limits = int_array(limits, "limits")
        if offsets.shape != (rows + 1,) or limits.shape != (rows,):
            raise InvalidTokensError(
                f"a batch step of {rows} rows needs offsets of shape ({rows + 1},) and limits of shape ({rows},); "
                f"got {offsets.shape} and {limits.shape}"
            )
        # Many rows in the engine's own arrays: one compiled pass over them (_step_arrays says why); the
        # checks in Python run only where it finds something wrong, or for anything else, and name it.
        if not (
            rows > 1 and tokens.__class__ is np.ndarray and tokens.dtype is INT64 and tokens.ndim == 1
            and compiled_step_check()(offsets, limits, tokens, MAX_TOKEN_ID, most)
        ):
            tokens = checked_step_arrays(rows, offsets, limits, tokens)
            if rows and int(limits.max()) > most:
                limits = np.minimum(limits, most)
        pending = self._pending
        # materialised once: an iterator read here would be empty when the step is carried out
        stopped_ids = step.stopped if step.stopped.__class__ in (list, tuple) else items_of(step.stopped, "BatchStep.stopped")
        starts = step.started
        if starts:
            starts = [
                (request_id, as_token_array(prompt, "prompt_ids"))
                for request_id, prompt in pairs_of(starts, "BatchStep.started", "(request_id, prompt_ids)")
            ]
        elif starts.__class__ not in (list, tuple):
            starts = items_of(starts, "BatchStep.started")
        stopped = set()
        for request_id in stopped_ids:
            self._check_live(request_id, "stop")
            if request_id in stopped:
                raise RequestStateError(f"request {shown(request_id)} is stopped twice in one batch step")
            stopped.add(request_id)
        started = set()
        for request_id, _ in starts:
            self._check_id(request_id)
            if (request_id in pending and request_id not in stopped) or request_id in started:
                raise RequestStateError(
                    f"request {shown(request_id)} is already started; stop it before starting it again"
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
                f"row for request {shown(request_id)}, which is not started (or stopped); start it in the step first"
            )

    def _one_row_ok(self, step: BatchStep, most: int) -> bool:
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
            or tokens.__class__ is not np.ndarray or offsets.dtype is not INT64 or limits.dtype is not INT64
            or tokens.dtype is not INT64 or tokens.ndim != 1 or offsets.shape != (2,) or limits.shape != (1,)
        ):
            return False
        begin, end = offsets.tolist()
        if begin != 0 or end != len(tokens) or not 0 <= limits.tolist()[0] <= most:
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

    def _most_tokens(self) -> int:
        """The longest draft this proposer can make: ``max_draft_tokens``, else its options'
        ``max_tokens``, else :data:`MAX_DRAFT_LIMIT`; a step's limits are cut to it."""
        most = self.max_draft_tokens
        if most is None:
            most = self._options_most
            if most is None:  # options do not change once made: read once (a step's checks call this)
                most = getattr(getattr(self, "options", None), "max_tokens", None)
                most = self._options_most = most if most.__class__ is int and most >= 1 else MAX_DRAFT_LIMIT
            return most
        if most.__class__ is not int or most < 1:
            return MAX_DRAFT_LIMIT
        return most

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
                f"request_id {shown(request_id)} is not hashable; use a str or an int"
            ) from None

    def _check_live(self, request_id: RequestId, action: str) -> None:
        self._check_id(request_id)
        if request_id not in self._pending:
            raise RequestStateError(
                f"{action}() for request {shown(request_id)}, which is not started (or already stopped); "
                f"call start({shown(request_id)}, prompt_ids) first"
            )

    def empty_draft(self) -> Draft:
        """An empty draft from this proposer."""
        return Draft((), self.name, 0.0)
