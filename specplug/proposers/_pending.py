"""Scoring a lookup's draft against the tokens verified after it, however many steps they take.

A step verifies only what was drafted, so a lookup draft that was not chosen (or was cut
short) would be scored on one token, and a position the proposer never drafts would never
be observed: estimates for long drafts would stay at their prior. The verified text goes
on regardless, so each draft waits here until the tokens after it either cover it or
contradict it, and is scored then, exactly as if it had been verified.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

__all__ = ["PendingDrafts"]


@dataclass
class PendingDrafts:
    """Drafts of one request, each tagged (``key``) and anchored where its first token goes.

    >>> pending = PendingDrafts()
    >>> pending.add("suffix", (5, 6, 7), at=10)
    >>> list(pending.extend(np.array([5]), at=10))          # one token: nothing decided yet
    []
    >>> list(pending.extend(np.array([6, 9]), at=11))       # 9 contradicts the third token
    [('suffix', (5, 6, 7), [5, 6, 9])]
    """

    _drafts: list[tuple[object, tuple[int, ...], int]] = field(default_factory=list)
    _tail: list[int] = field(default_factory=list)  # verified tokens from _tail_at on
    _tail_at: int = 0

    def add(self, key: object, draft: tuple[int, ...], at: int) -> None:
        if not draft:
            return
        if not self._drafts:
            self._tail, self._tail_at = [], at
        self._drafts.append((key, draft, at))

    def extend(self, tokens: np.ndarray, at: int) -> Iterator[tuple[object, tuple[int, ...], list[int]]]:
        """Record verified ``tokens`` (the first at position ``at``); yield each draft now decided
        as ``(key, draft, truth)``, truth being the verified tokens under it."""
        if not self._drafts:
            return
        if at != self._tail_at + len(self._tail):  # a gap (should not happen): drop what waits
            self._drafts.clear()
            return
        self._tail.extend(int(token) for token in tokens)
        waiting = []
        for key, draft, start in self._drafts:
            truth = self._tail[start - self._tail_at : start - self._tail_at + len(draft)]
            if len(truth) == len(draft) or truth != list(draft[: len(truth)]):
                yield key, draft, truth
            else:
                waiting.append((key, draft, start))
        self._drafts = waiting
        if waiting:  # forget the verified tokens no waiting draft still needs
            first = min(start for _, _, start in waiting)
            del self._tail[: first - self._tail_at]
            self._tail_at = first
