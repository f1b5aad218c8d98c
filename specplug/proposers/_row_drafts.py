"""Each live request's last draft in arrays by slot, so a batch step costs no Python per row.

The contract keeps a request's last draft in ``Proposer._pending`` (``extend`` counts
acceptance against it). A lookup's batch kernel instead reads and writes the drafts here:
``tokens[slot, :lengths[slot]]``, one row per request slot. Both paths stay one state:

- a request whose ``_pending`` entry is its :class:`RowDraft` (a view of its row) is *clean*:
  the arrays are what the per-request ``extend`` reads too;
- a per-request call (``start``, ``propose``, ``extend``, ``propose_alternatives``) marks its
  request *dirty* (the hooks call :meth:`RowDrafts.touch`): ``_pending`` holds the truth (a
  ``Draft``, or None), and the next kernel step first copies it into the arrays
  (:meth:`RowDrafts.sync`). An engine that only runs batch steps has nothing to copy.

A tree draft (with alternatives, from ``propose_alternatives``) keeps its ``Draft`` in
``_pending`` and in :attr:`RowDrafts.trees`: the arrays hold its main branch, and the batch
path counts its acceptance along the best branch in Python (a tree engine drafts per request).

:class:`KernelLookup` is the batch step the lookups built on these arrays share (suffix, ngram):
one kernel call for every row, writing the drafts into arrays it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import NamedTuple

import numpy as np
from numba import njit

from specplug._batch import BatchDrafts, BatchStep
from specplug._drafts import Draft, RequestId, draft_accepted
from specplug._proposer import Proposer

__all__ = [
    "KernelLookup", "RowDraft", "RowDrafts", "SlotTable", "StepArrays", "remember", "remember_rows", "resolve", "resolve_rows",
]


class RowDraft:
    """A request's last draft, read from its row of :class:`RowDrafts` (what ``_pending`` holds
    for a clean request; ``extend`` reads ``tokens`` and ``alternatives`` as from a ``Draft``)."""

    __slots__ = ("_rows", "_slot", "source")

    alternatives: tuple[tuple[int, ...], ...] = ()
    needs_neural = True

    def __init__(self, rows: RowDrafts, slot: int, source: str) -> None:
        self._rows, self._slot, self.source = rows, slot, source

    @property
    def tokens(self) -> tuple[int, ...]:
        rows, slot = self._rows, self._slot
        return tuple(rows.tokens[slot, : rows.lengths[slot]].tolist())

    @property
    def score(self) -> float | None:
        score = float(self._rows.scores[self._slot])
        return None if score != score else score

    def __len__(self) -> int:
        return int(self._rows.lengths[self._slot])

    def draft(self) -> Draft:
        return Draft(self.tokens, self.source, self.score)


class RowDrafts:
    """The last draft of every request slot (``tokens``, ``lengths``, ``scores``: NaN for none)."""

    def __init__(self, width: int, source: str, rows: int = 16) -> None:
        self.width = width
        self.source = source
        self.tokens = np.zeros((rows, width), dtype=np.int32)
        self.lengths = np.zeros(rows, dtype=np.int64)
        self.scores = np.full(rows, np.nan)
        #: requests whose ``_pending`` entry, not the arrays, holds their last draft
        self.dirty: set[RequestId] = set()
        #: requests whose last draft is a tree (its ``Draft`` stays in ``_pending``)
        self.trees: dict[RequestId, Draft] = {}
        self._views: dict[RequestId, RowDraft] = {}

    def grow(self, rows: int) -> None:
        """Room for ``rows`` slots (the tables' rows move; views read them through this object)."""
        old = len(self.lengths)
        if rows <= old:
            return
        tokens = np.zeros((rows, self.width), dtype=np.int32)
        tokens[:old] = self.tokens
        lengths = np.zeros(rows, dtype=np.int64)
        lengths[:old] = self.lengths
        scores = np.full(rows, np.nan)
        scores[:old] = self.scores
        self.tokens, self.lengths, self.scores = tokens, lengths, scores

    def start(self, request_id: RequestId, slot: int) -> None:
        self.lengths[slot] = 0
        self._views[request_id] = RowDraft(self, slot, self.source)
        self.dirty.add(request_id)

    def stop(self, request_id: RequestId, slot: int) -> None:
        self.lengths[slot] = 0
        self.dirty.discard(request_id)
        self.trees.pop(request_id, None)
        del self._views[request_id]

    def touch(self, request_id: RequestId) -> None:
        """A per-request call changed ``request_id``'s draft: ``_pending`` holds it now."""
        self.dirty.add(request_id)

    def sync(self, pending: MutableMapping[RequestId, object], slots: MutableMapping[RequestId, int]) -> None:
        """Copy the dirty requests' drafts from ``_pending`` into the arrays (before a kernel step)."""
        views = self._views
        for request_id in self.dirty:
            draft = pending[request_id]
            if draft is views[request_id]:
                continue
            slot = slots[request_id]
            self.trees.pop(request_id, None)
            if draft is None:
                self.lengths[slot] = 0
                pending[request_id] = views[request_id]
                continue
            tokens = draft.tokens
            self.tokens[slot, : len(tokens)] = tokens
            self.lengths[slot] = len(tokens)
            self.scores[slot] = np.nan if draft.score is None else draft.score
            if draft.alternatives:
                self.trees[request_id] = draft  # stays in _pending: the arrays hold one branch
            else:
                pending[request_id] = views[request_id]
        self.dirty.clear()

    def settle_trees(
        self,
        pending: MutableMapping[RequestId, object],
        ids: list[RequestId],
        flat: np.ndarray,
        bounds: np.ndarray,
        limits: np.ndarray,
        accepted: np.ndarray,
    ) -> None:
        """After a kernel step: rows whose last draft was a tree count acceptance along its best branch."""
        for row, request_id in enumerate(ids):
            tree = self.trees.get(request_id)
            if tree is None:
                continue
            begin, end = int(bounds[row]), int(bounds[row + 1])
            if end > begin:
                accepted[row] = draft_accepted(tree, flat[begin:end].tolist())
            if end > begin or limits[row] > 0:  # resolved, or replaced by the kernel's draft
                del self.trees[request_id]
                pending[request_id] = self._views[request_id]


class StepArrays(NamedTuple):
    """What a lookup's batch kernel reads and writes for one step (:meth:`SlotTable.begin_step`),
    besides the drafts' arrays (:meth:`KernelLookup._draft_rows` is given those)."""

    slots: np.ndarray  # int64 [rows]: each row's slot
    accepted: np.ndarray  # int64 [rows]
    blocked: np.ndarray  # bool [rows]: rows the kernel left for Python (no room)
    new_tokens: np.ndarray  # int32: the step's tokens as the kernel reads them


class RowSlots:
    """A batch step's rows' slots, looked up once per set of rows: the last step's array while the
    request ids are the same (compared as a list or tuple, to a copy of the last ones) and no
    request has taken or given back a slot since (its owner calls :meth:`forget` then).

    Why: a step of 128 rows looked its slots up with a dict read per row (``np.fromiter`` over
    ``dict.__getitem__``), about 5 µs warm and several times that on caches an engine's other
    work has evicted; an engine's rows stay the same over most steps."""

    __slots__ = ("_ids", "_slots")

    def __init__(self) -> None:
        self._ids: Sequence[RequestId] | None = None
        self._slots = np.zeros(0, dtype=np.int64)

    def of(self, ids: Sequence[RequestId], slot_of: Mapping[RequestId, int]) -> np.ndarray:
        """Each row's slot (``slot_of[id]``), int64; read only: it may be the last step's array."""
        same_kind = ids.__class__ in (list, tuple)
        if same_kind and ids == self._ids:
            return self._slots
        slots = np.fromiter(map(slot_of.__getitem__, ids), dtype=np.int64, count=len(ids))
        if same_kind:
            self._ids, self._slots = ids[:], slots
        return slots

    def forget(self) -> None:
        """A request took or gave back a slot: the next step looks its rows up anew."""
        self._ids = None


class SlotTable:
    """A lookup's live requests by slot: ``slot`` (request id -> slot), each slot's token count
    (``lengths``, moved by the kernel) and last draft (``drafts``); a freed slot is reused.
    Subclasses hold the per-request arrays the kernel reaches."""

    def __init__(self, width: int, source: str) -> None:
        self.lengths = np.zeros(16, dtype=np.int64)
        self.drafts = RowDrafts(width, source)
        self.slot: dict[RequestId, int] = {}  # changed through _claim and _release only
        self._free: list[int] = []
        self._rows = RowSlots()

    def _claim(self, request_id: RequestId, slot: int) -> None:
        """``slot`` is ``request_id``'s now, with no last draft."""
        self.slot[request_id] = slot
        self.drafts.start(request_id, slot)
        self._rows.forget()

    def _release(self, request_id: RequestId, slot: int) -> None:
        """``request_id`` stopped: its slot is free for the next request."""
        del self.slot[request_id]
        self.drafts.stop(request_id, slot)
        self._free.append(slot)
        self._rows.forget()

    def begin_step(self, step: BatchStep, pending: MutableMapping[RequestId, object]) -> StepArrays:
        """Before a kernel step: the dirty drafts copied in, and the step's arrays.

        The rows' slots are the last step's while its rows are the same (:class:`RowSlots`).
        """
        drafts = self.drafts
        if drafts.dirty:
            drafts.sync(pending, self.slot)
        rows = step.rows
        slots = self._rows.of(step.request_ids, self.slot)
        return StepArrays(
            slots, np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.bool_), step.new_tokens.astype(np.int32)
        )


class KernelLookup(Proposer):
    """A lookup whose batch step is one kernel call for every row (suffix, ngram).

    :meth:`_draft_rows` makes the call and writes the drafts into arrays it is given, so a composite
    hands it rows of its own arrays and copies nothing (``_composite``); :meth:`_step_batch` gives
    it fresh ones. A subclass that learns from acceptance (``_observe``), or a batch of fewer rows
    than ``batch_kernel_from``, goes through the per-request hooks row by row instead.
    """

    #: batches of at least this many rows go through the batch kernel (fewer: row by row)
    batch_kernel_from = 2

    def kernel_takes(self, rows: int) -> bool:
        """Whether a step of ``rows`` rows is one kernel call (:meth:`_draft_rows`)."""
        return rows >= self.batch_kernel_from and type(self)._observe is Proposer._observe

    def _step_batch(self, step: BatchStep) -> BatchDrafts:
        """The batch path: lifecycle changes per request, then one kernel call for every row.

        Per row, no Python: acceptance is counted and the drafts kept in arrays by slot
        (:class:`RowDrafts`), so a step costs one kernel call plus a few array allocations.
        """
        self._step_lifecycle(step)
        rows = step.rows
        if not self.kernel_takes(rows):
            return self._step_rows(step)
        width = int(step.limits.max()) if rows else 0
        out, lengths, scores = np.zeros((rows, width), dtype=np.int64), np.zeros(rows, dtype=np.int64), np.empty(rows)
        matches = np.empty(rows, dtype=np.int64)
        accepted = self._draft_rows(step, out, lengths, scores, matches)
        return BatchDrafts(out, lengths, accepted, [self.name] * rows, scores, np.ones(rows, dtype=np.bool_), matches)

    def _draft_rows(
        self, step: BatchStep, out: np.ndarray, lengths: np.ndarray, scores: np.ndarray, matches: np.ndarray
    ) -> np.ndarray:
        """Every row's step (its tokens in, its draft into ``out[row, :lengths[row]]``, its score into
        ``scores[row]`` and its match length into ``matches[row]``, 0 where not known, each written for
        every row; ``out`` at least ``step.limits.max()`` wide), the step's requests live and its
        lifecycle done. Returns each row's acceptance."""
        raise NotImplementedError


@njit(cache=True, inline="always")
def resolve(drafts, draft_lengths, slot, new_tokens, begin, count):
    """How many tokens of slot's last draft the new tokens accept; the draft is then forgotten."""
    most = min(draft_lengths[slot], count)
    accepted = 0
    while accepted < most and drafts[slot, accepted] == new_tokens[begin + accepted]:
        accepted += 1
    draft_lengths[slot] = 0
    return accepted


@njit(cache=True, inline="always")
def remember(drafts, draft_lengths, slot, out, row, taken):
    """Keep row's draft (``out[row, :taken]``) as slot's last draft."""
    for k in range(taken):
        drafts[slot, k] = out[row, k]
    draft_lengths[slot] = taken


@njit(cache=True)
def resolve_rows(drafts, draft_lengths, slots, new_tokens, offsets, accepted):
    """:func:`resolve` for every row that has new tokens (``accepted[row]``; others stay as they are)."""
    for row in range(slots.shape[0]):
        begin = offsets[row]
        count = offsets[row + 1] - begin
        if count:
            accepted[row] = resolve(drafts, draft_lengths, slots[row], new_tokens, begin, count)


@njit(cache=True)
def remember_rows(drafts, draft_lengths, draft_scores, slots, limits, out, out_lengths, out_scores):
    """:func:`remember` every row that was asked for a draft (``limits[row] > 0``), with its score."""
    for row in range(slots.shape[0]):
        if limits[row] > 0:
            slot = slots[row]
            remember(drafts, draft_lengths, slot, out, row, out_lengths[row])
            draft_scores[slot] = out_scores[row]
