"""Scoring a draft against the tokens verified after it, however many steps they take.

A step verifies only what was drafted, so a lookup draft that was not chosen (or was cut
short) would be scored on a token or two, and a position the proposer never drafts would
never be observed: estimates for long drafts would stay at their prior. The verified text
goes on regardless, so each draft waits here until the tokens after it either cover it or
contradict it; its positions are scored as the verified tokens reach them, exactly as if it
had been verified, and each position once.

Every request's waiting drafts live in arrays by slot (:class:`PendingTable`), which the
composites' kernels read and write for a whole batch at once. A waiting draft has matched
every verified token so far, and its scored positions reach the request's end: the next
tokens alone decide what is left of it, so no verified text is kept.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "MAX_WAITING", "PendingTable", "add_pending", "add_pending_of", "room_wanted", "score_pending", "score_pending_of",
]

#: most drafts waiting per request. A step adds one per track, and a draft waits at most as many
#: steps as it has tokens, so an engine that extends after each propose keeps far fewer; an
#: engine that proposes again and again without extending would otherwise pile them up (memory,
#: and the time of the next extend)
MAX_WAITING = 256

# the columns of PendingTable.meta
TRACK, BAND, AT, LENGTH, SCORED, FOLLOW = range(6)


class PendingTable:
    """The waiting drafts of every request, by slot: ``count[slot]`` drafts, each with its
    ``meta`` (track, band, position of its first token, length, positions scored, followed) and
    its ``tokens``, in the order they were added.

    >>> table = PendingTable(slots=1, positions=4)
    >>> add_pending(table.meta, table.tokens, table.count, 0, 0, 1, np.array([5, 6, 7]), 3, 10, True)
    >>> own, pooled = np.zeros((2, 2, 2, 4)), np.zeros((2, 2, 2, 4))   # drafted, accepted [track, band, position]
    >>> score_pending(0, np.array([5, 6, 9]), 0, 3, 10, table.meta, table.tokens, table.count, *own, *pooled, 1.0, 4)
    >>> own[0, 0, 1].tolist(), own[1, 0, 1].tolist(), int(table.count[0])   # 9 contradicts the third token
    ([1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0], 0)
    """

    def __init__(self, slots: int, positions: int, waiting: int = 8) -> None:
        self.positions = positions
        self.count = np.zeros(slots, dtype=np.int64)
        self.meta = np.zeros((slots, waiting, 6), dtype=np.int64)
        self.tokens = np.zeros((slots, waiting, positions), dtype=np.int64)

    @property
    def capacity(self) -> int:
        return self.meta.shape[1]

    def grow_slots(self, slots: int) -> None:
        """Room for ``slots`` requests."""
        old = len(self.count)
        if slots <= old:
            return
        self.count = np.concatenate([self.count, np.zeros(slots - old, dtype=np.int64)])
        self.meta = np.concatenate([self.meta, np.zeros((slots - old, *self.meta.shape[1:]), dtype=np.int64)])
        self.tokens = np.concatenate([self.tokens, np.zeros((slots - old, *self.tokens.shape[1:]), dtype=np.int64)])

    def make_room(self, most: int) -> None:
        """Room for ``most`` waiting drafts per request (never more than :data:`MAX_WAITING`)."""
        wanted = min(most, MAX_WAITING)
        if wanted <= self.capacity:
            return
        width = self.capacity
        while width < wanted:
            width *= 2
        width = min(width, MAX_WAITING)
        slots = len(self.count)
        meta = np.zeros((slots, width, 6), dtype=np.int64)
        tokens = np.zeros((slots, width, self.positions), dtype=np.int64)
        meta[:, : self.capacity] = self.meta
        tokens[:, : self.capacity] = self.tokens
        self.meta, self.tokens = meta, tokens

    def clear(self, slot: int) -> None:
        self.count[slot] = 0


@njit(cache=True)
def room_wanted(slots: np.ndarray, count: np.ndarray, capacity: int, adds: int) -> int:  # pragma: no cover - compiled
    """What :meth:`PendingTable.make_room` is to be given before a step of ``slots`` that adds up
    to ``adds`` drafts per row, or 0 when the table has that room already (a kernel checks this
    before it changes anything, and returns it for Python to grow the table and call again)."""
    if len(slots) == 0:
        return 0
    most = 0
    for row in range(len(slots)):
        most = max(most, count[slots[row]])
    wanted = min(most + adds, MAX_WAITING)
    return wanted if wanted > capacity else 0


@njit(cache=True, inline="always")
def add_pending(
    meta: np.ndarray, tokens: np.ndarray, count: np.ndarray, slot: int, track: int, band: int,
    draft: np.ndarray, length: int, at: int, follow: bool,
) -> None:  # pragma: no cover - compiled
    """Wait for the verified tokens under ``draft[:length]``, whose first token goes at position
    ``at`` (``follow=False``: score it on the next tokens only)."""
    add_pending_of(meta, tokens, count, slot, track, band, draft.reshape(1, 1, draft.shape[0]), 0, 0, length, at, follow)


@njit(cache=True, inline="always")
def add_pending_of(
    meta: np.ndarray, tokens: np.ndarray, count: np.ndarray, slot: int, track: int, band: int,
    drafts: np.ndarray, part: int, row: int, length: int, at: int, follow: bool,
) -> None:  # pragma: no cover - compiled
    """:func:`add_pending` of the draft ``drafts[part, row]`` (the kernels' [part, row, position]
    tables, indexed, not sliced: a view costs a reference count update each way, per row; so the
    entries that move are moved element by element too)."""
    if length == 0:
        return
    n = count[slot]
    # Proposing again before a token is verified drafts the same position again: the newer draft
    # replaces the one of the same track and band there (scoring both would count that position
    # twice). Drafts are added in position order, so those at ``at`` are the last ones.
    for entry in range(n - 1, -1, -1):
        if meta[slot, entry, AT] != at:
            break
        if meta[slot, entry, TRACK] == track and meta[slot, entry, BAND] == band:
            _shift_down(meta, tokens, slot, entry, n)
            n -= 1
            break
    if n == MAX_WAITING:  # the oldest goes unscored
        _shift_down(meta, tokens, slot, 0, n)
        n -= 1
    meta[slot, n, TRACK] = track
    meta[slot, n, BAND] = band
    meta[slot, n, AT] = at
    meta[slot, n, LENGTH] = length
    meta[slot, n, SCORED] = 0
    meta[slot, n, FOLLOW] = 1 if follow else 0
    for j in range(length):
        tokens[slot, n, j] = drafts[part, row, j]
    count[slot] = n + 1


@njit(cache=True, inline="always")
def _shift_down(meta, tokens, slot, first, n):  # pragma: no cover - compiled
    # entries first + 1 .. n - 1 of slot move down one place (entry ``first`` is dropped)
    for later in range(first, n - 1):
        for column in range(meta.shape[2]):
            meta[slot, later, column] = meta[slot, later + 1, column]
        for j in range(tokens.shape[2]):
            tokens[slot, later, j] = tokens[slot, later + 1, j]


@njit(cache=True, inline="always")
def score_pending(
    slot: int, new_tokens: np.ndarray, begin: int, end: int, old_length: int,
    meta: np.ndarray, tokens: np.ndarray, count: np.ndarray,
    drafted: np.ndarray, accepted: np.ndarray, pooled_drafted: np.ndarray, pooled_accepted: np.ndarray, decay: float,
    widest: int,
) -> None:  # pragma: no cover - compiled
    """Score the waiting drafts of ``slot`` on its verified ``new_tokens[begin:end]`` (the first at
    position ``old_length``), each position once, into the request's ``drafted``/``accepted``
    [track, band, position] and the pooled counts; keep the drafts still neither covered nor
    contradicted.

    ``decay`` < 1: a band's earlier counts of the request are first worth that much less (once
    per draft, when its first position is scored), so they follow acceptance that drifts. Only
    positions below ``widest`` (the longest draft limit the composite was ever asked for) are
    decayed: no draft reaches past it, so the counts there are zero, and stay so."""
    own = (1, drafted.shape[0], drafted.shape[1], drafted.shape[2])
    score_pending_of(slot, new_tokens, begin, end, old_length, meta, tokens, count, drafted.reshape(own),
                     accepted.reshape(own), 0, pooled_drafted, pooled_accepted, decay, widest)


@njit(cache=True, inline="always")
def score_pending_of(
    slot: int, new_tokens: np.ndarray, begin: int, end: int, old_length: int,
    meta: np.ndarray, tokens: np.ndarray, count: np.ndarray,
    own_drafted: np.ndarray, own_accepted: np.ndarray, stats: int, pooled_drafted: np.ndarray,
    pooled_accepted: np.ndarray, decay: float, widest: int,
) -> None:  # pragma: no cover - compiled
    """:func:`score_pending` into row ``stats`` of ``own_drafted``/``own_accepted`` [request, track,
    band, position] (the kernels' tables, indexed, not sliced: a view costs a reference count update
    each way, per row). Waiting drafts kept are moved element by element, for the same reason."""
    new_length = old_length + (end - begin)
    positions = own_drafted.shape[3]
    kept = 0
    for entry in range(count[slot]):
        track, band, at = meta[slot, entry, TRACK], meta[slot, entry, BAND], meta[slot, entry, AT]
        length, scored = meta[slot, entry, LENGTH], meta[slot, entry, SCORED]
        reached = min(length, new_length - at)  # positions the verified text covers
        matched = True
        if reached > scored:
            if decay < 1.0 and scored == 0:
                for j in range(min(widest, positions)):
                    own_drafted[stats, track, band, j] *= decay
                    own_accepted[stats, track, band, j] *= decay
            # a waiting draft's scored positions end where the new tokens start
            for j in range(scored, min(reached, positions)):
                own_drafted[stats, track, band, j] += 1.0
                pooled_drafted[track, band, j] += 1.0
                if tokens[slot, entry, j] != new_tokens[begin + at + j - old_length]:
                    matched = False
                    break
                own_accepted[stats, track, band, j] += 1.0
                pooled_accepted[track, band, j] += 1.0
            meta[slot, entry, SCORED] = reached
        if meta[slot, entry, FOLLOW] == 1 and reached < length and matched:
            if kept != entry:
                for column in range(meta.shape[2]):
                    meta[slot, kept, column] = meta[slot, entry, column]
                for j in range(tokens.shape[2]):
                    tokens[slot, kept, j] = tokens[slot, entry, j]
            kept += 1
    count[slot] = kept
