"""Keeping a proposer's request lifecycle in step with what an engine shows of its requests.

Engines do not call ``start``/``extend``/``stop``; they show, at each drafting step, the
tokens each sequence holds. Two shapes of that view are kept here (a third, each request by
id with its full history and an end the engine announces, is :mod:`specplug.engine._keyed_history`):

- a **batch** of rows (vLLM): per row, the tokens it gained since the last step (the
  accepted draft prefix plus the target's own token) and its full history.
  Rows move between steps (requests finish, the batch is condensed), so state is keyed by
  request id where the engine gives one, and by row otherwise: a row whose history does not
  continue the one seen there starts afresh, so a moved request costs its drafting state,
  never a wrong draft. :class:`BatchSync`.
- a **single history** (llama-cpp-python's draft model): the whole token sequence each call,
  with no request id. A history that extends the last one is an ``extend`` of the running
  request; any other is a new generation (stop, then start). :class:`HistorySync` recognises
  which, with no proposer (a counter of acceptance can use it alone);
  :class:`SingleRequestSync` drives a proposer with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from specplug import InvalidTokensError, RequestId

__all__ = ["BatchSync", "HistoryPlan", "HistoryStep", "HistorySync", "Lifecycle", "SingleRequestSync", "SyncPlan"]

#: tokens of a row's history remembered to recognise the same request at the same row
_FINGERPRINT = 8


class Lifecycle(Protocol):
    """What the syncs call: a proposer, or a :class:`specplug.GuardedProposer` around one."""

    def start(self, request_id: RequestId, prompt_ids: Sequence[int] | np.ndarray) -> None: ...

    def extend(self, request_id: RequestId, token_ids: Sequence[int] | np.ndarray) -> int: ...

    def stop(self, request_id: RequestId) -> None: ...


_NO_TOKENS = np.empty(0, dtype=np.int64)


@dataclass
class SyncPlan:
    """One step of a batch's lifecycle, planned by :meth:`BatchSync.plan`."""

    #: requests to stop before any start (a row's request replaced by a new one)
    stopped_first: list[RequestId] = field(default_factory=list)
    #: requests to start, with their prompts
    started: list[tuple[RequestId, np.ndarray]] = field(default_factory=list)
    #: per row, the request id to extend and draft for, or None (the row cannot draft)
    rows: list[RequestId | None] = field(default_factory=list)
    #: per row, its new tokens as the engine gave them (a list or an int array; empty for a None row)
    new_tokens: list[Sequence[int] | np.ndarray] = field(default_factory=list)
    #: requests that left the batch
    stopped_absent: list[RequestId] = field(default_factory=list)
    #: the same, as per-request calls in the order they arose: ``(action, request id, tokens)``
    calls: list[tuple[str, RequestId, np.ndarray | None]] = field(default_factory=list)


@dataclass
class _Seen:
    request_id: RequestId  # the id the proposer knows the request by
    length: int  # history length when last seen
    tail: tuple[int, ...]  # its last tokens, to recognise it by row


class BatchSync:
    """Starts, extends and stops requests on a proposer as an engine's batch changes.

    >>> from specplug import GuardedProposer, create
    >>> sync = BatchSync(GuardedProposer(create("ngram")))
    >>> histories = np.array([[1, 2, 3, 0], [4, 5, 6, 7]])
    >>> sync.update([[3], []], [3, 3], histories, ["a", "b"])   # "b" is mid-prefill: no draft yet
    ['a', None]
    >>> sync.update([[7]], [4], histories[1:], ["b"])           # "a" left the batch: stopped
    ['b']
    >>> len(sync)
    1
    """

    def __init__(self, proposer: Lifecycle) -> None:
        self.proposer = proposer
        self._seen: dict[object, _Seen] = {}  # key: the engine's request id, or ("row", index)
        self._ids = itertools.count()

    def __len__(self) -> int:
        return len(self._seen)

    def update(
        self,
        new_tokens: Sequence[Sequence[int]],
        lengths: Sequence[int] | np.ndarray,
        histories: Sequence[Sequence[int]] | np.ndarray,
        request_ids: Sequence[RequestId] | None = None,
        live: Container[RequestId] | None = None,
    ) -> list[RequestId | None]:
        """Feed one step's new tokens; return, per row, the proposer's request id or None.

        Per row: ``new_tokens[row]`` are the tokens it gained this step, ``lengths[row]`` its
        history's length with them, and ``histories[row]`` holds at least the history before
        them. None marks a row that cannot draft this step (a partial prefill, or a discarded
        row: no new tokens). ``request_ids`` are the engine's ids of the rows (None: key by
        row). ``live`` holds the ids of requests that still exist although not in this batch
        (paused or preempted); other requests seen before and absent now are stopped.
        """
        plan = self.plan(new_tokens, lengths, histories, request_ids, live)
        # the plan's calls in the order they arose, row by row
        for action, request_id, tokens in plan.calls:
            if action == "stop":
                self.proposer.stop(request_id)
            elif action == "start":
                self.proposer.start(request_id, tokens)
            else:
                self.proposer.extend(request_id, [int(token) for token in tokens])
        return plan.rows

    def plan(
        self,
        new_tokens: Sequence[Sequence[int]],
        lengths: Sequence[int] | np.ndarray,
        histories: Sequence[Sequence[int]] | np.ndarray,
        request_ids: Sequence[RequestId] | None = None,
        live: Container[RequestId] | None = None,
        *,
        with_calls: bool = True,
    ) -> SyncPlan:
        """What :meth:`update` does, as a plan for one batch step, without calling the proposer.

        The sync's own bookkeeping moves on as if the plan were carried out (the engine layer
        carries it out in one :meth:`specplug.Proposer.step_batch`, and asks for no
        ``calls``: ``with_calls=False`` leaves that list empty).
        """
        if request_ids is not None and len(request_ids) < len(new_tokens):
            raise ValueError(f"{len(new_tokens)} rows of new tokens but {len(request_ids)} request ids")
        by_row = request_ids is None
        count = len(new_tokens)
        plan = SyncPlan()
        seen_by_key = self._seen
        # per row only dict look-ups and list appends: the lengths read as one list, each row's new
        # tokens kept as the engine gave them (the step's flat array is built once, for all rows)
        lengths = lengths[:count].tolist() if isinstance(lengths, np.ndarray) else lengths
        keys = [("row", row) for row in range(count)] if by_row else request_ids[:count]  # type: ignore[index]
        rows, pieces, calls = plan.rows, plan.new_tokens, plan.calls
        for row, new in enumerate(new_tokens):
            key = keys[row]
            if not len(new):
                rows.append(None)
                pieces.append(_NO_TOKENS)
                continue
            length = int(lengths[row])
            before = length - len(new)
            seen = seen_by_key.get(key)
            if seen is None or seen.length != before or (by_row and not _same_tail(seen, before, histories[row])):
                history = histories[row]
                if seen is not None:
                    plan.stopped_first.append(seen.request_id)
                    calls.append(("stop", seen.request_id, None))
                # by row, a fresh id: the proposer may still hold the old one's finished state
                request_id = f"row{row}-{next(self._ids)}" if by_row else key
                prompt = np.array(history[:before], dtype=np.int64)
                plan.started.append((request_id, prompt))
                calls.append(("start", request_id, prompt))
                seen = seen_by_key[key] = _Seen(request_id, before, ())
            pieces.append(new)
            if with_calls:
                calls.append(("extend", seen.request_id, new))
            seen.length = length
            if by_row:
                seen.tail = tuple(int(token) for token in histories[row][max(0, length - _FINGERPRINT) : length])
            rows.append(seen.request_id)
        gone = seen_by_key.keys() - set(keys)  # in C; the stops keep the order requests were seen in
        if gone and live is not None:
            gone = {key for key in gone if key not in live}
        for key in [key for key in seen_by_key if key in gone] if gone else ():
            plan.stopped_absent.append(seen_by_key[key].request_id)
            calls.append(("stop", seen_by_key.pop(key).request_id, None))
        return plan

    def stop_all(self) -> None:
        """Stop every tracked request (the drafter is going away)."""
        seen, self._seen = self._seen, {}
        for entry in seen.values():
            self.proposer.stop(entry.request_id)


def _same_tail(seen: _Seen, before: int, history: Sequence[int] | np.ndarray) -> bool:
    """Keyed by row: the history ends as the one last seen there did (the same request)."""
    start = max(0, before - _FINGERPRINT)
    return tuple(int(token) for token in history[start:before]) == seen.tail


class HistorySync:
    """Recognises whether a single sequence's history continues the last one seen.

    It holds no proposer: :meth:`advance` says what changed, and the caller decides what that
    means (extend a request, count accepted tokens, ...).

    >>> sync = HistorySync()
    >>> sync.advance([1, 2, 3]) is None          # nothing seen before: a new sequence
    True
    >>> sync.advance([1, 2, 3, 4, 5]).tolist()   # continues it: the tokens it gained
    [4, 5]
    >>> sync.advance([1, 2, 9]) is None          # diverges: a new sequence
    True
    """

    def __init__(self) -> None:
        self._history = np.empty(0, dtype=np.int64)

    @property
    def history(self) -> np.ndarray:
        """The last history seen (a copy the engine cannot change)."""
        return self._history

    def advance(self, history: Sequence[int] | np.ndarray) -> np.ndarray | None:
        """Remember ``history``; return the tokens it adds to the last one, or None when it does not extend it.

        The history is copied: engines often pass a view of a buffer they reuse.
        """
        ids = np.array(history, dtype=np.int64, copy=True)
        if ids.ndim != 1:
            raise InvalidTokensError(f"a history must be a 1-D sequence of token ids; got shape {ids.shape}")
        known = len(self._history)
        continues = known > 0 and len(ids) >= known and np.array_equal(ids[:known], self._history)
        self._history = ids
        return ids[known:] if continues else None

    def reset(self) -> None:
        """Forget the last history: the next one is a new sequence."""
        self._history = np.empty(0, dtype=np.int64)


@dataclass(frozen=True)
class HistoryStep:
    """What :meth:`SingleRequestSync.update` did with one history."""

    request_id: RequestId
    #: a new request began with this history (the last one, if any, was stopped)
    started: bool
    #: tokens the running request gained (empty when it started)
    new_tokens: np.ndarray
    #: how many of the proposer's last draft the new tokens accepted
    accepted: int


@dataclass(frozen=True)
class HistoryPlan:
    """What one history does to a single-sequence engine's requests (:meth:`SingleRequestSync.plan`)."""

    request_id: RequestId
    #: a new request begins (``prompt``); ``stopped`` names the one it replaces, if any
    started: bool
    #: tokens the running request gains (empty when it starts)
    new_tokens: np.ndarray
    stopped: RequestId | None
    prompt: np.ndarray


class SingleRequestSync:
    """Drives one request at a time on a proposer from a single sequence's histories.

    A history that extends the last is an ``extend`` of the running request (its new tokens
    are the accepted draft prefix plus the target's own token, what ``extend`` takes); any
    other history stops it and starts a new request. Requests are numbered 1, 2, ...

    >>> from specplug import GuardedProposer, create
    >>> proposer = create("ngram", min_n=1, max_n=2)
    >>> sync = SingleRequestSync(proposer)
    >>> sync.update([1, 2, 3, 1, 2]).started
    True
    >>> proposer.propose(sync.request_id, 2).tokens
    (3, 1)
    >>> step = sync.update([1, 2, 3, 1, 2, 3, 7])     # 3 accepted, 7 is the target's own token
    >>> step.started, step.new_tokens.tolist(), step.accepted
    (False, [3, 7], 1)
    """

    def __init__(self, proposer: Lifecycle) -> None:
        self.proposer = proposer
        self.generations = 0
        self._sync = HistorySync()
        self._request: int | None = None

    @property
    def request_id(self) -> int | None:
        """The running request's id, or None before the first history and after :meth:`close`."""
        return self._request

    def update(self, history: Sequence[int] | np.ndarray) -> HistoryStep:
        """Extend the running request with ``history``'s new tokens, or start a new request with it."""
        planned = self.plan(history)
        if not planned.started:
            # no new tokens: the same history again; extending by nothing would drop the pending draft
            accepted = self.proposer.extend(planned.request_id, planned.new_tokens) if len(planned.new_tokens) else 0
            return HistoryStep(planned.request_id, False, planned.new_tokens, accepted)
        self._request = None
        if planned.stopped is not None:
            self.proposer.stop(planned.stopped)
        self.proposer.start(planned.request_id, planned.prompt)
        self._request = planned.request_id  # only once started: a start that raised leaves no request to extend
        return HistoryStep(planned.request_id, True, planned.new_tokens, 0)

    def plan(self, history: Sequence[int] | np.ndarray) -> HistoryPlan:
        """What :meth:`update` does with ``history``, without calling the proposer (the engine
        layer carries it out in one batch step); the sync moves on as if it were done."""
        new = self._sync.advance(history)
        if self._request is not None and new is not None:
            return HistoryPlan(self._request, False, new, None, _NO_TOKENS)
        stopped, self._request = self._request, None
        self.generations += 1
        request, prompt = self.generations, self._sync.history
        self._request = request
        return HistoryPlan(request, True, prompt[:0], stopped, prompt)

    def close(self) -> None:
        """Stop the running request (a finished generation reaches the proposer's caches)."""
        if self._request is not None:
            request, self._request = self._request, None
            self.proposer.stop(request)
        self._sync.reset()
