"""Requests an engine shows by id with their whole history: start, extend and stop from that view.

Some engines hand a drafter, per step, each request's id and its full token list (prompt
plus every token accepted so far) rather than a row of a batch buffer: TensorRT-LLM's
``LlmRequest.get_tokens(0)``, SGLang's ``Req`` (``origin_input_ids + output_ids``). They tell
of a request's end separately (a resource manager frees it, its state turns complete). So
state is keyed by request id:

- first sight of an id starts the request with its history;
- later, the tokens the history gained since (the accepted draft prefix and the target's own
  token: what ``extend`` takes) extend it;
- the engine's "freed" or "complete" is a :meth:`KeyedHistorySync.stop`; an id seen again
  after that starts afresh;
- a history that does not continue the one seen (an id reused while nobody said the old
  request ended, or a rewritten history) stops the old request and starts anew: the request
  loses its drafting state, never gets a draft built on someone else's tokens.

A continuation is recognised by length and by the last tokens it held (a short fingerprint,
so memory per request stays constant whatever the history's length).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specplug import RequestId
from specplug.engine._sync import Lifecycle

__all__ = ["KeyedHistorySync"]

#: tokens of a history remembered to tell its continuation from another history of that id
_FINGERPRINT = 8
_NO_TOKENS = np.empty(0, dtype=np.int64)


def _tail(history: Sequence[int] | np.ndarray, end: int) -> tuple[int, ...]:
    return tuple(int(token) for token in history[max(0, end - _FINGERPRINT) : end])


class KeyedHistorySync:
    """Starts, extends and stops requests on a proposer from their ids and full histories.

    Drive it with a :class:`specplug.GuardedProposer` inside an engine (as
    :class:`~specplug.engine.EngineDrafting` does, as ``requests``), so a proposer's fault
    costs that request its drafts, never the engine.

    >>> from specplug import GuardedProposer, create
    >>> sync = KeyedHistorySync(GuardedProposer(create("ngram", min_n=1, max_n=2)))
    >>> sync.observe("r", [1, 2, 3, 1, 2])        # first sight: started with its history
    5
    >>> sync.proposer.propose("r", 2).tokens
    (3, 1)
    >>> sync.observe("r", [1, 2, 3, 1, 2, 3, 9])  # 3 accepted, 9 the target's own token
    7
    >>> sync.stop("r"); "r" in sync              # freed by the engine
    False
    >>> sync.observe("r", [4, 5])                 # the id again: a new request
    2
    """

    def __init__(self, proposer: Lifecycle) -> None:
        self.proposer = proposer
        # request id -> (tokens synced, the last of them): the tail tells a reused id's new history apart
        self._seen: dict[RequestId, tuple[int, tuple[int, ...]]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._seen

    def observe(self, request_id: RequestId, history: Sequence[int] | np.ndarray) -> int:
        """Bring ``request_id`` up to its full ``history``; return how many tokens it now holds.

        The same history again changes nothing (extending by no tokens would drop the draft
        the proposer is waiting to see resolved).
        """
        length = len(history)
        seen = self._seen.get(request_id)
        if seen is not None:
            synced, tail = seen
            if length < synced or _tail(history, synced) != tail:
                self.stop(request_id)  # not a continuation: the id was reused, or the history rewritten
                seen = None
            elif length > synced:
                self.proposer.extend(request_id, [int(token) for token in history[synced:]])
        if seen is None:
            self.proposer.start(request_id, history)
        # recorded only once started or extended: a call that raised leaves the last good state
        self._seen[request_id] = (length, _tail(history, length))
        return length

    def plan(self, request_id: RequestId, history: Sequence[int] | np.ndarray) -> tuple[bool, bool, np.ndarray]:
        """What :meth:`observe` does, without calling the proposer: ``(stop first, start, new tokens)``.

        The engine layer carries the step's plans out in one batch step; the sync moves on as
        if they were done. ``start`` means: start ``request_id`` with ``history`` (then there are
        no new tokens).

        >>> sync = KeyedHistorySync(None)
        >>> sync.plan("r", [1, 2, 3])
        (False, True, array([], dtype=int64))
        >>> sync.plan("r", [1, 2, 3, 4, 5])
        (False, False, array([4, 5]))
        >>> sync.plan("r", [9, 9, 9, 9, 9, 9])[:2]   # not a continuation: stopped and started again
        (True, True)
        """
        length = len(history)
        seen = self._seen.get(request_id)
        self._seen[request_id] = (length, _tail(history, length))
        if seen is not None:
            synced, tail = seen
            if length >= synced and _tail(history, synced) == tail:
                return False, False, np.asarray(history[synced:], dtype=np.int64)
        return seen is not None, True, _NO_TOKENS

    def absent(self, request_ids: Sequence[RequestId]) -> list[RequestId]:
        """The tracked requests not among ``request_ids`` (for an engine whose batch holds every
        live request: those left it, and are its ``stopping``).

        >>> sync = KeyedHistorySync(None)
        >>> _ = sync.plan("a", [1]), sync.plan("b", [2])
        >>> sync.absent(["b", "c"])
        ['a']
        """
        present = set(request_ids)
        return [request_id for request_id in self._seen if request_id not in present]

    def forget(self, request_id: RequestId) -> bool:
        """Stop tracking ``request_id`` without calling the proposer; True when it was tracked
        (the engine layer then stops it in its batch step)."""
        return self._seen.pop(request_id, None) is not None

    def stop(self, request_id: RequestId) -> None:
        """The engine freed or completed ``request_id``: stop it (a no-op for an id not tracked)."""
        if self._seen.pop(request_id, None) is not None:
            self.proposer.stop(request_id)

    def stop_all(self) -> None:
        """Stop every tracked request (the engine is shutting down)."""
        seen, self._seen = self._seen, {}
        for request_id in seen:
            self.proposer.stop(request_id)
