"""Fault isolation for adapters: a proposer fault costs one draft, never the engine."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence

import numpy as np

from specplug._batch import BatchDrafts, BatchStep, batch_column, check_batch_drafts
from specplug._drafts import Draft, RequestId, check_draft, check_tree_draft
from specplug._proposer import MAX_DRAFT_LIMIT, Proposer
from specplug._errors import InvalidDraftError, RequestStateError, shown

__all__ = ["GuardedProposer"]

log = logging.getLogger("specplug")


class GuardedProposer:
    """Wraps a proposer so that its exceptions and bad drafts turn into empty drafts.

    A fault in ``propose`` costs that step its draft. A fault in ``start`` or ``extend``
    leaves the request's drafting state unknown, so that request goes on without
    speculation until it stops. A bad draft (not a :class:`Draft`, tokens that are not a
    tuple of Python ints in ``[0, MAX_TOKEN_ID]``, more tokens than asked: see
    :func:`specplug.check_draft`) becomes that row's empty draft, so no bad token reaches an
    engine; it counts as a fault and in ``counters["bad_drafts"]``. Each kind of fault is
    logged once, with its traceback; ``counters`` keeps drafts by source, empty drafts and
    faults for metrics (an adapter adds the faults of its own code around the proposer with
    :meth:`record_fault`). Safe to call from several threads (the counters are updated
    under a lock; the proposer keeps its own).

    >>> from specplug import create
    >>> guarded = GuardedProposer(create("ngram"))
    >>> guarded.propose("never-started", 4).tokens
    ()
    >>> guarded.counters["faults"]
    1
    """

    def __init__(self, proposer, *, logger: logging.Logger = log) -> None:
        self.proposer = proposer
        self.counters: Counter[str] = Counter()
        self._disabled: set[RequestId] = set()
        self._logged: set[tuple[str, ...]] = set()
        self._log = logger
        self._count_lock = threading.Lock()

    @property
    def proposer(self):
        return self._proposer

    @proposer.setter
    def proposer(self, proposer) -> None:
        self._proposer = proposer
        # Proposer.propose checks its drafts itself; anything else is checked here
        self._checks_drafts = not (isinstance(proposer, Proposer) and type(proposer).propose is Proposer.propose)
        self._checks_trees = not (
            isinstance(proposer, Proposer) and type(proposer).propose_alternatives is Proposer.propose_alternatives
        )
        # a batch path of specplug's own is checked in place; a plugin's result is checked and copied
        step_batch = getattr(type(proposer), "_step_batch", None)
        self._own_batch_path = getattr(step_batch, "__module__", "").startswith("specplug.")

    @property
    def name(self) -> str:
        return getattr(self.proposer, "name", type(self.proposer).__name__)

    def record_fault(self, where: str, error: BaseException, consequence: str = "drafting skipped") -> None:
        """Count a fault that an adapter caught in its own code around the proposer.

        It counts in ``counters["faults"]`` with the proposer's own, and is logged once per
        ``where`` and kind of error, with its traceback; ``consequence`` says what was lost.

        >>> from specplug import create
        >>> guarded = GuardedProposer(create("ngram"))
        >>> guarded.record_fault("set_batch_size(0)", ValueError("no batch"), "batch size not passed on")
        >>> guarded.counters["faults"]
        1
        """
        if self._counted(("adapter", where, type(error).__name__)):
            self._log.warning(
                "specplug %s: %s raised %s; %s (logged once per kind of fault)",
                self.name,
                where,
                type(error).__name__,
                consequence,
                exc_info=error,
            )

    def _counted(self, key: tuple[str, ...]) -> bool:
        """Count a fault; true the first time a fault of this key is seen (it is to be logged)."""
        with self._count_lock:
            self.counters["faults"] += 1
            if key in self._logged:
                return False
            self._logged.add(key)
            return True

    def _add(self, key: str, amount: int = 1) -> None:
        with self._count_lock:
            self.counters[key] += amount

    def _fault(self, action: str, request_id: RequestId, error: BaseException) -> None:
        if isinstance(error, InvalidDraftError):
            self._bad_draft(action, request_id, error)
            return
        if self._counted(("proposer", action, type(error).__name__)):
            self._log.warning(
                "specplug proposer %s raised in %s() for request %s; drafting skipped "
                "(logged once per kind of fault)",
                self.name,
                action,
                shown(request_id),
                exc_info=error,
            )

    def _bad_draft(self, action: str, request_id: RequestId, error: InvalidDraftError) -> None:
        self._add("bad_drafts")
        if self._counted(("draft", action, error.kind)):
            self._log.warning(
                "specplug proposer %s made a bad draft in %s() for request %s (%s): %s; that draft is "
                "dropped (logged once per kind of bad draft)",
                self.name,
                action,
                shown(request_id),
                error.kind,
                error,
            )

    def _unhashable(self, action: str, request_id: object) -> bool:
        """True (and a fault counted) when ``request_id`` cannot be a request id."""
        try:
            hash(request_id)
        except TypeError:
            error = RequestStateError(f"request_id {shown(request_id)} is not hashable; use a str or an int")
            self._fault(action, "<unhashable>", error)
            return True
        return False

    def start(self, request_id: RequestId, prompt_ids: Sequence[int]) -> None:
        if self._unhashable("start", request_id):
            return
        self._disabled.discard(request_id)
        try:
            self.proposer.start(request_id, prompt_ids)
        except Exception as error:  # noqa: BLE001 - isolation is the point
            self._fault("start", request_id, error)
            self._disabled.add(request_id)

    def propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        if self._unhashable("propose", request_id) or request_id in self._disabled:
            self._add("empty_drafts")
            return Draft((), self.name, 0.0)
        draft = self._propose(request_id, max_tokens)
        self._count_draft(draft)
        return draft

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        """The proposer's draft, checked; an empty one where it raised or drafted badly."""
        try:
            draft = self.proposer.propose(request_id, max_tokens)
            if self._checks_drafts:
                draft = check_draft(draft, max_tokens, self.name)
        except Exception as error:  # noqa: BLE001
            self._fault("propose", request_id, error)
            draft = Draft((), self.name, 0.0)
        return draft

    def propose_alternatives(self, request_id: RequestId, max_tokens: int, max_branches: int) -> Draft:
        """:meth:`Proposer.propose_alternatives`, faults and bad drafts isolated as in :meth:`propose`.

        ``counters["tree_drafts"]`` counts the drafts that came with alternatives and
        ``counters["alternatives"]`` the alternatives themselves.
        """
        if self._unhashable("propose_alternatives", request_id) or request_id in self._disabled:
            self._add("empty_drafts")
            return Draft((), self.name, 0.0)
        try:
            draft = self.proposer.propose_alternatives(request_id, max_tokens, max_branches)
            if self._checks_trees:
                draft = check_tree_draft(draft, max_tokens, max_branches, self.name)
        except Exception as error:  # noqa: BLE001
            self._fault("propose_alternatives", request_id, error)
            draft = Draft((), self.name, 0.0)
        self._count_draft(draft)
        if draft.alternatives:
            with self._count_lock:
                self.counters["tree_drafts"] += 1
                self.counters["alternatives"] += len(draft.alternatives)
        return draft

    def _count_draft(self, draft: Draft) -> None:
        with self._count_lock:
            if draft.tokens:
                self.counters[f"drafts.{draft.source}"] += 1
                self.counters["draft_tokens"] += len(draft.tokens)
            else:
                self.counters["empty_drafts"] += 1

    def extend(self, request_id: RequestId, token_ids: Sequence[int]) -> int:
        if self._unhashable("extend", request_id) or request_id in self._disabled:
            return 0
        try:
            return self.proposer.extend(request_id, token_ids)
        except Exception as error:  # noqa: BLE001
            self._fault("extend", request_id, error)
            self._disabled.add(request_id)
            return 0

    def stop(self, request_id: RequestId) -> None:
        if self._unhashable("stop", request_id):
            return
        self._disabled.discard(request_id)
        if request_id not in self.proposer:  # its start failed: nothing to free
            return
        try:
            self.proposer.stop(request_id)
        except Exception as error:  # noqa: BLE001
            self._fault("stop", request_id, error)

    def __contains__(self, request_id: object) -> bool:
        try:
            return request_id in self.proposer
        except TypeError:  # unhashable: never a request
            return False

    def step_batch(self, step: BatchStep) -> BatchDrafts:
        """One engine step for the batch (:meth:`Proposer.step_batch`), faults isolated.

        A proposer with its own batch path (it overrides ``_step_batch``) is called once for the
        step: a fault there leaves every request of the step in an unknown state, so they go on
        without drafts until they stop. Any other proposer is driven per request through this
        guard's ``stop``/``start``/``extend``/``propose``, so a fault costs only its request.
        """
        try:  # hashing the tuple hashes every id in C; the sets below would raise a bare TypeError
            hash(tuple(step.request_ids))
            if step.started or step.stopped:
                hash((tuple(request_id for request_id, _ in step.started), tuple(step.stopped)))
        except TypeError:
            error = RequestStateError("a batch step names a request_id that is not hashable; use a str or an int")
            self._fault("step_batch", "<unhashable>", error)
            return _empty_drafts(step.rows, self._width(step), self.name)
        step = self._capped(step)
        if _has_batch_path(self.proposer):
            drafts = self._step_batched(step)
        else:
            drafts = self._step_per_request(step)
        self._count(drafts, step.limits)
        return drafts

    def _step_per_request(self, step: BatchStep) -> BatchDrafts:
        for request_id in step.stopped:
            self.stop(request_id)
        for request_id, prompt in step.started:
            self.start(request_id, prompt)
        accepted = np.zeros(step.rows, dtype=np.int64)
        drafts: list[Draft] = []
        empty = Draft((), self.name, 0.0)
        for row, request_id in enumerate(step.request_ids):
            begin, end = int(step.offsets[row]), int(step.offsets[row + 1])
            if end > begin:
                accepted[row] = self.extend(request_id, step.new_tokens[begin:end])
            limit = int(step.limits[row])
            draft = empty
            if limit > 0 and request_id not in self._disabled:
                draft = self._propose(request_id, limit)
            drafts.append(draft)
        return BatchDrafts.from_drafts(drafts, accepted, self._width(step))

    def _most_tokens(self) -> int:
        proposer = self.proposer
        return proposer._most_tokens() if isinstance(proposer, Proposer) else MAX_DRAFT_LIMIT

    def _capped(self, step: BatchStep) -> BatchStep:
        """``step`` with its limits cut to the proposer's longest draft (never allocated past it)."""
        limits = step.limits
        if limits.__class__ is np.ndarray and limits.ndim == 1 and limits.size and limits.dtype.kind in "iu":
            most = self._most_tokens()
            if int(limits.max()) > most:
                return BatchStep(
                    step.request_ids, step.new_tokens, step.offsets, np.minimum(limits, most), step.started, step.stopped,
                    step.methods,
                )
        return step

    def _width(self, step: BatchStep) -> int:
        """The draft width of ``step``: its largest limit, within the proposer's longest draft
        (0 where the limits cannot be read: the step is refused)."""
        try:
            width = int(np.max(step.limits)) if step.rows else 0
        except Exception:  # noqa: BLE001 - a malformed step is the proposer check's to name
            return 0
        return max(0, min(width, self._most_tokens()))

    def _step_batched(self, step: BatchStep) -> BatchDrafts:
        proposer = self.proposer
        for request_id in step.stopped:
            self._disabled.discard(request_id)
        # once each: an engine that reports a stop twice has not made the step bad
        stopped = [request_id for request_id in dict.fromkeys(step.stopped) if request_id in proposer]
        for request_id, _ in step.started:
            self._disabled.discard(request_id)
        rows = step.rows
        width = self._width(step)
        disabled = self._disabled
        keep = [row for row, request_id in enumerate(step.request_ids) if request_id not in disabled] if disabled else None
        call = step if keep is None else _select_rows(step, keep)
        call = BatchStep(call.request_ids, call.new_tokens, call.offsets, call.limits, step.started, stopped, call.methods)
        try:
            got = proposer.step_batch(call)
        except Exception as error:  # noqa: BLE001 - isolation is the point
            self._fault("step_batch", f"<{rows} rows>", error)
            self._disabled.update(step.request_ids)
            self._disabled.update(request_id for request_id, _ in step.started)
            return _empty_drafts(rows, width, self.name)
        got = self._clean(got, call)
        if keep is None:
            return got
        out = _empty_drafts(rows, width, self.name)
        index = np.asarray(keep, dtype=np.int64)
        shared = min(out.tokens.shape[1], got.tokens.shape[1])  # lengths are within both
        out.tokens[index, :shared] = got.tokens[:, :shared]
        out.lengths[index] = got.lengths
        out.accepted[index] = got.accepted
        out.scores[index] = got.scores
        out.needs_neural[index] = got.needs_neural
        out.matches[index] = got.matches
        sources = list(out.sources)
        for position, row in enumerate(keep):
            sources[row] = got.sources[position]
        return BatchDrafts(out.tokens, out.lengths, out.accepted, sources, out.scores, out.needs_neural, out.matches)

    def _clean(self, got: object, step: BatchStep) -> BatchDrafts:
        """A batch path's drafts, with every bad row's draft emptied (and each counted); anything
        else wrong with them (the side arrays) empties every row."""
        try:
            return check_batch_drafts(got, step.limits, self.name, copy=not self._own_batch_path)
        except InvalidDraftError as error:
            # a bad row costs that row's draft; anything else wrong (a side array) costs every row's
            one_row = error.kind in ("too long", "token out of range") or (
                isinstance(got, BatchDrafts) and got._drafts is not None
            )
            if not one_row or _rows(got) != step.rows or _accepted(got, step.rows) is None:
                self._bad_draft("step_batch", f"<{step.rows} rows>", error)
                return _empty_drafts(step.rows, self._width(step), self.name)
        drafts = []
        for row, request_id in enumerate(step.request_ids):
            try:
                if got._drafts is None and not 0 <= int(got.lengths[row]) <= min(int(step.limits[row]), got.tokens.shape[1]):
                    raise InvalidDraftError(
                        "too long", f"{self.name} drafted {int(got.lengths[row])} tokens where {int(step.limits[row])} were asked for"
                    )
                drafts.append(check_draft(got.draft(row), int(step.limits[row]), self.name))
            except Exception as error:  # noqa: BLE001 - a row that cannot even be read is as bad
                if not isinstance(error, InvalidDraftError):
                    error = InvalidDraftError("not a Draft", f"row {row} of the batch drafts cannot be read: {shown(error, 80)}")
                self._bad_draft("step_batch", request_id, error)
                drafts.append(Draft((), self.name, 0.0))
        return BatchDrafts.from_drafts(drafts, _accepted(got, step.rows), self._width(step))

    def _count(self, drafts: BatchDrafts, limits: np.ndarray) -> None:
        lengths = drafts.lengths
        drafted = np.flatnonzero(lengths)
        # rows given no room (limit 0) only gained tokens: not an empty draft
        empty = int(np.count_nonzero(limits)) - len(drafted)
        with self._count_lock:
            if empty:
                self.counters["empty_drafts"] += empty
            if len(drafted):
                self.counters["draft_tokens"] += int(lengths.sum())
                sources = drafts.sources
                first = sources[int(drafted[0])]
                # a batch path names one source for every row: list.count compares in C
                if sources.count(first) == len(sources) or all(sources[row] == first for row in drafted.tolist()):
                    self.counters[f"drafts.{first}"] += len(drafted)
                else:
                    for row in drafted.tolist():
                        self.counters[f"drafts.{sources[row]}"] += 1


def _has_batch_path(proposer: object) -> bool:
    """Whether a proposer has its own batch path (else the guard drives it per request)."""
    return isinstance(proposer, Proposer) and type(proposer)._step_batch is not Proposer._step_batch


def _rows(drafts: BatchDrafts) -> int | None:
    try:
        return len(drafts)
    except Exception:  # noqa: BLE001 - a malformed result has no length
        return None


def _accepted(drafts: BatchDrafts, rows: int) -> np.ndarray | None:
    """A batch result's ``accepted``, checked (one int >= 0 per row), else None."""
    try:
        accepted = batch_column(drafts.accepted, rows, "accepted", "iu", "proposer")
    except Exception:  # noqa: BLE001 - unreadable, or the wrong shape or type
        return None
    return np.array(accepted, dtype=np.int64) if not rows or int(accepted.min()) >= 0 else None


def _select_rows(step: BatchStep, keep: list[int]) -> BatchStep:
    offsets = step.offsets
    pieces = [step.new_tokens[offsets[row] : offsets[row + 1]] for row in keep]
    new_offsets = np.zeros(len(keep) + 1, dtype=np.int64)
    new_offsets[1:] = np.cumsum([len(piece) for piece in pieces], dtype=np.int64)
    flat = np.concatenate(pieces) if pieces else np.empty(0, dtype=np.int64)
    methods = None if step.methods is None else [step.methods[row] for row in keep]
    return BatchStep(
        [step.request_ids[row] for row in keep], flat, new_offsets, step.limits[np.asarray(keep, dtype=np.int64)],
        methods=methods,
    )


def _empty_drafts(rows: int, width: int, source: str) -> BatchDrafts:
    return BatchDrafts(
        np.zeros((rows, width), dtype=np.int64),
        np.zeros(rows, dtype=np.int64),
        np.zeros(rows, dtype=np.int64),
        [source] * rows,
        np.full(rows, np.nan),
        np.ones(rows, dtype=bool),
        np.zeros(rows, dtype=np.int64),
    )
