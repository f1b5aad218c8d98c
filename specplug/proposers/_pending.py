"""Scoring a draft against the tokens verified after it, however many steps they take.

A step verifies only what was drafted, so a lookup draft that was not chosen (or was cut
short) would be scored on a token or two, and a position the proposer never drafts would
never be observed: estimates for long drafts would stay at their prior. The verified text
goes on regardless, so each draft waits here until the tokens after it either cover it or
contradict it; its positions are scored as the verified tokens reach them, exactly as if it
had been verified, and each position once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MAX_WAITING", "PendingDrafts"]

#: most drafts waiting per request. A step adds one per track, and a draft waits at most as many
#: steps as it has tokens, so an engine that extends after each propose keeps far fewer; an
#: engine that proposes again and again without extending would otherwise pile them up (memory,
#: and the time of the next extend)
MAX_WAITING = 256


@dataclass
class _Waiting:
    key: object
    draft: tuple[int, ...]
    at: int  # position of the draft's first token in the request
    follow: bool  # False: scored on the next tokens only, then dropped
    scored: int = 0  # leading positions already handed out for scoring


@dataclass
class PendingDrafts:
    """Drafts of one request, each tagged (``key``) and anchored where its first token goes.

    :meth:`extend` yields ``(key, draft, truth, scored)`` for every draft that the new tokens
    reach: ``truth`` holds the verified tokens under the draft so far, and positions before
    ``scored`` were handed out before.

    >>> pending = PendingDrafts()
    >>> pending.add("suffix", (5, 6, 7), at=10)
    >>> list(pending.extend(np.array([5]), at=10))          # the first position is decided
    [('suffix', (5, 6, 7), [5], 0)]
    >>> list(pending.extend(np.array([6, 9]), at=11))       # 9 contradicts the third token
    [('suffix', (5, 6, 7), [5, 6, 9], 1)]
    >>> list(pending.extend(np.array([1]), at=13))          # nothing waits any more
    []
    """

    _drafts: list[_Waiting] = field(default_factory=list)
    _tail: list[int] = field(default_factory=list)  # verified tokens from _tail_at on
    _tail_at: int = 0

    def add(self, key: object, draft: tuple[int, ...], at: int, *, follow: bool = True) -> None:
        """Wait for the verified tokens under ``draft``, whose first token goes at position ``at``
        (``follow=False``: score it on the next tokens only)."""
        if not draft:
            return
        drafts = self._drafts
        if not drafts:
            self._tail, self._tail_at = [], at
        # Proposing again before a token is verified drafts the same position again: the newer draft
        # replaces the one of the same key there (scoring both would count that position twice).
        # Drafts are added in position order, so those at ``at`` are the last ones.
        for index in range(len(drafts) - 1, -1, -1):
            entry = drafts[index]
            if entry.at != at:
                break
            if entry.key == key:
                del drafts[index]
                break
        drafts.append(_Waiting(key, draft, at, follow))
        if len(drafts) > MAX_WAITING:  # the oldest goes unscored
            del drafts[0]

    def extend(self, tokens: np.ndarray, at: int) -> Iterator[tuple[object, tuple[int, ...], list[int], int]]:
        """Record verified ``tokens`` (the first at position ``at``); yield each draft they reach."""
        if not self._drafts:
            return
        if at != self._tail_at + len(self._tail):  # a gap (should not happen): drop what waits
            self._drafts.clear()
            return
        self._tail.extend(int(token) for token in tokens)
        waiting = []
        for entry in self._drafts:
            start = entry.at - self._tail_at
            truth = self._tail[start : start + len(entry.draft)]
            if len(truth) > entry.scored:
                yield entry.key, entry.draft, truth, entry.scored
                entry.scored = len(truth)
            if entry.follow and len(truth) < len(entry.draft) and truth == list(entry.draft[: len(truth)]):
                waiting.append(entry)  # neither covered nor contradicted yet
        self._drafts = waiting
        if waiting:  # forget the verified tokens no waiting draft still needs
            first = min(entry.at for entry in waiting)
            del self._tail[: first - self._tail_at]
            self._tail_at = first
