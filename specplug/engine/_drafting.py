"""One drafting step over an engine's batch: the guard, the batch size, the counters, the stats."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import replace

from typing import Any

import numpy as np

from specplug import BatchStep, Draft, GuardedProposer, InvalidOptionError, Proposer, RequestId
from specplug.engine._keyed_history import KeyedHistorySync
from specplug.engine._batch_step import step_of_pieces
from specplug.engine._request_control import RequestControl, request_control, served_methods
from specplug.engine._stats import DEFAULT_LOGGER, StatsReporter
from specplug.engine._sync import BatchSync, HistoryStep, SingleRequestSync

__all__ = ["EngineDrafting"]


class EngineDrafting:
    """A proposer run inside an engine: what every adapter shares, whatever the engine.

    ``guard`` isolates the proposer's faults (a fault costs that row its draft; a fault in
    ``start``/``extend`` leaves that request undrafted until it stops), and the adapter's own
    code records its faults there too (``guard.record_fault``), so ``counters`` hold drafts by
    source, empty drafts and all faults. ``batch`` keeps the requests of a batching engine in
    step with its rows (:meth:`sync_batch`); ``requests`` keeps them in step where the engine
    shows each request by id with its whole history and says when it ends
    (:class:`~specplug.engine.KeyedHistorySync`); a single-sequence engine drives ``guard``
    with a :class:`~specplug.engine.SingleRequestSync` instead. :meth:`draft` is one step's drafts, and
    ``stats`` reports the counters under the adapter's ``logger`` (and to ``stats_file``).

    >>> from specplug import create
    >>> drafting = EngineDrafting(create("ngram", min_n=1, max_n=2))
    >>> histories = np.array([[1, 2, 3, 1, 2], [7, 8, 9, 0, 0]])
    >>> rows = drafting.sync_batch([[2], []], [5, 3], histories, ["a", "b"])
    >>> [draft.tokens for draft in drafting.draft([(rows[0], 2), (rows[1], 2)])]
    [(3, 1), ()]
    >>> drafting.counters["drafts.ngram"], drafting.stats.steps
    (1, 1)
    """

    def __init__(
        self,
        proposer: Proposer,
        *,
        method: str | None = None,
        logger: logging.Logger | str = DEFAULT_LOGGER,
        stats_file: str | os.PathLike[str] | None = None,
        stats_interval: float = 30.0,
        details: Mapping[str, object] | None = None,
        request_method: str | None = None,
    ) -> None:
        log = logging.getLogger(logger) if isinstance(logger, str) else logger
        self.guard = GuardedProposer(proposer, logger=log)
        self.counters = self.guard.counters
        self.batch = BatchSync(self.guard)
        self.requests = KeyedHistorySync(self.guard)
        self.stats = StatsReporter(
            self.counters,
            method=method or proposer.name,
            path=stats_file,
            interval=stats_interval,
            logger=log,
            details=details,
        )
        #: False once ``set_batch_size`` raised: a proposer that refuses it is not asked again
        self.passes_batch_size = True
        #: the server's method (as its stats name it), and the names a request's ``specplug_method``
        #: may give: the method's own (``request_method``, default ``method``), then its parts
        self.method = method or proposer.name
        self.request_methods = served_methods(request_method or self.method, proposer)

    def sync_batch(
        self,
        new_tokens: Sequence[Sequence[int]],
        lengths: Sequence[int] | np.ndarray,
        histories: Sequence[Sequence[int]] | np.ndarray,
        request_ids: Sequence[RequestId] | None = None,
        live: Container[RequestId] | None = None,
    ) -> list[RequestId | None]:
        """Bring the requests in step with the batch; per row, the request id to draft for, or None.

        See :meth:`BatchSync.update` for the arguments.
        """
        return self.batch.update(new_tokens, lengths, histories, request_ids, live)

    def step(
        self,
        new_tokens: Sequence[Sequence[int]],
        lengths: Sequence[int] | np.ndarray,
        histories: Sequence[Sequence[int]] | np.ndarray,
        limits: Sequence[int] | np.ndarray,
        request_ids: Sequence[RequestId] | None = None,
        live: Container[RequestId] | None = None,
        *,
        batch_size: int | None = None,
        before_drafting: Callable[[list[RequestId | None]], None] | None = None,
        methods: Sequence[str | None] | None = None,
    ) -> list[Draft]:
        """One engine step in one call to the proposer: sync the batch and draft every row.

        :meth:`sync_batch`'s arguments, and per row the most tokens it may draft. The batch's
        starts, stops and new tokens and every row's draft go to the proposer as one
        :meth:`specplug.Proposer.step_batch` (a proposer with a batch fast path runs it in a few
        array calls, whatever the batch size). A row that cannot draft gets an empty draft.
        ``before_drafting`` is called with each row's request id (None: the row cannot draft)
        once they are known and before the proposer runs (an overlay offers the engine's own
        drafts there). ``methods``: per row, the part of a composite method its request is restricted
        to (:attr:`RequestControl.method`), or None where no request names one.

        >>> from specplug import create
        >>> drafting = EngineDrafting(create("ngram", min_n=1, max_n=2))
        >>> histories = np.array([[1, 2, 3, 1, 2], [7, 8, 9, 0, 0]])
        >>> [d.tokens for d in drafting.step([[2], []], [5, 3], histories, [2, 2], ["a", "b"])]
        [(3, 1), ()]
        """
        plan_rows, asked, got = self._step(new_tokens, lengths, histories, limits, request_ids, live, batch_size,
                                           before_drafting, methods)
        empty = Draft((), self.guard.name, 0.0)
        drafts = [empty] * len(plan_rows)
        for position, row in enumerate(asked):
            drafts[row] = got.draft(position)
        return drafts

    def step_token_lists(
        self,
        new_tokens: Sequence[Sequence[int]],
        lengths: Sequence[int] | np.ndarray,
        histories: Sequence[Sequence[int]] | np.ndarray,
        limits: Sequence[int] | np.ndarray,
        request_ids: Sequence[RequestId] | None = None,
        live: Container[RequestId] | None = None,
        *,
        batch_size: int | None = None,
        before_drafting: Callable[[list[RequestId | None]], None] | None = None,
        methods: Sequence[str | None] | None = None,
    ) -> list[list[int]]:
        """:meth:`step`, with every row's draft as a list of token ids (what vLLM takes), read
        from the batch's arrays: no ``Draft`` is built per row.

        >>> from specplug import create
        >>> drafting = EngineDrafting(create("ngram", min_n=1, max_n=2))
        >>> drafting.step_token_lists([[2], []], [5, 3], np.array([[1, 2, 3, 1, 2], [7, 8, 9, 0, 0]]), [2, 2], ["a", "b"])
        [[3, 1], []]
        """
        plan_rows, asked, got = self._step(new_tokens, lengths, histories, limits, request_ids, live, batch_size,
                                           before_drafting, methods)
        drafted = [row[:count] for row, count in zip(got.tokens.tolist(), got.lengths.tolist())]
        if len(asked) == len(plan_rows):  # every row asked: the rows are the step's rows
            return drafted
        out: list[list[int]] = [[] for _ in plan_rows]
        for position, row in enumerate(asked):
            out[row] = drafted[position]
        return out

    def _step(self, new_tokens, lengths, histories, limits, request_ids, live, batch_size, before_drafting, methods=None):
        """Plan the batch's lifecycle, then one ``step_batch``: (each row's id or None, the rows asked, drafts)."""
        plan = self.batch.plan(new_tokens, lengths, histories, request_ids, live, with_calls=False)
        self._pass_batch_size(len(plan.rows) if batch_size is None else batch_size)
        if before_drafting is not None:
            before_drafting(plan.rows)
        limits = np.asarray(limits, dtype=np.int64)
        if None in plan.rows:
            rows = [row for row, request_id in enumerate(plan.rows) if request_id is not None]
            ids = [plan.rows[row] for row in rows]
            pieces = [plan.new_tokens[row] for row in rows]
            row_limits = limits[np.asarray(rows, dtype=np.int64)] if rows else np.empty(0, dtype=np.int64)
            if methods is not None:
                methods = [methods[row] for row in rows]
        else:
            rows, ids, pieces, row_limits = range(len(plan.rows)), plan.rows, plan.new_tokens, limits[: len(plan.rows)]
            if methods is not None:
                methods = list(methods[: len(plan.rows)])
        step = step_of_pieces(
            ids, pieces, np.maximum(row_limits, 0), plan.started, plan.stopped_first + plan.stopped_absent
        )
        if methods is not None:
            step = replace(step, methods=methods)
        got = self.guard.step_batch(step)
        self.stats.step()
        return plan.rows, rows, got

    def step_requests(
        self,
        rows: Sequence[tuple[RequestId, Sequence[int] | np.ndarray, int] | None],
        *,
        stopping: Sequence[RequestId] = (),
        batch_size: int | None = None,
        max_branches: int = 1,
        methods: Sequence[str | None] | None = None,
    ) -> list[Draft]:
        """One step of an engine that shows each request by id with its whole history, in one
        call to the proposer: per row ``(request id, history, most tokens to draft)`` or None (a
        row that does not draft), and the requests that ended (``stopping``).

        ``requests`` (a :class:`~specplug.engine.KeyedHistorySync`) recognises each history: a
        first sight starts the request, a continuation extends it by what it gained, anything
        else restarts it; all of that and every row's draft go to the proposer as one
        :meth:`specplug.Proposer.step_batch`. ``max_branches`` > 1 (a tree verifier) with a
        proposer that ``proposes_alternatives``: the batch step carries the lifecycle and the
        tokens, then each row is drafted as a tree (:meth:`draft`'s ``max_branches``). ``methods``:
        per row, as :meth:`step`'s.

        >>> from specplug import create
        >>> drafting = EngineDrafting(create("ngram", min_n=1, max_n=2))
        >>> [d.tokens for d in drafting.step_requests([("a", [1, 2, 3, 1, 2], 2), None])]
        [(3, 1), ()]
        >>> [d.tokens for d in drafting.step_requests([("a", [1, 2, 3, 1, 2, 3, 1], 2)])]  # gained 3 1
        [(2, 3)]
        """
        sync = self.requests
        stopped = [request_id for request_id in stopping if sync.forget(request_id)]
        started: list[tuple[RequestId, np.ndarray]] = []
        ids: list[RequestId] = []
        pieces: list[np.ndarray] = []
        limits: list[int] = []
        asked: list[int] = []
        for position, row in enumerate(rows):
            if row is None:
                continue
            request_id, history, limit = row
            stop_first, start, tokens = sync.plan(request_id, history)
            if stop_first:
                stopped.append(request_id)
            if start:
                # a slice first: a history that is a lazy Sequence becomes a list in one call
                started.append((request_id, np.asarray(history[:], dtype=np.int64)))
            ids.append(request_id)
            pieces.append(tokens)
            limits.append(max(int(limit), 0))
            asked.append(position)
        self._pass_batch_size(len(rows) if batch_size is None else batch_size)
        trees = max_branches > 1 and getattr(self.guard.proposer, "proposes_alternatives", False)
        row_limits = np.array(limits, dtype=np.int64)
        step = step_of_pieces(ids, pieces, row_limits * (not trees), started, stopped)
        if methods is not None:
            step = replace(step, methods=[methods[position] for position in asked])
        got = self.guard.step_batch(step)
        empty = Draft((), self.guard.name, 0.0)
        drafts = [empty] * len(rows)
        if trees:  # alternatives have no batch path: per row, after the step's one sync
            guard = self.guard
            for index, position in enumerate(asked):
                if limits[index] > 0:
                    drafts[position] = guard.propose_alternatives(ids[index], limits[index], max_branches)
        else:
            for index, position in enumerate(asked):
                drafts[position] = got.draft(index)
        self.stats.step()
        return drafts

    def step_history(self, sync: SingleRequestSync, history: Sequence[int] | np.ndarray, limit: int) -> tuple[HistoryStep, Draft]:
        """One step of a single-sequence engine in one call to the proposer: ``sync`` recognises
        whether ``history`` continues the running request (then its new tokens extend it) or
        begins a new one (the old one stops, the new one starts), and the request is drafted for
        (at most ``limit`` tokens), all as one :meth:`specplug.Proposer.step_batch` of one row.

        ``sync`` drives this drafting's ``guard``. Returns what the sync saw (with the acceptance
        of the last draft) and the draft.

        >>> from specplug import create
        >>> drafting = EngineDrafting(create("ngram", min_n=1, max_n=2))
        >>> sync = SingleRequestSync(drafting.guard)
        >>> drafting.step_history(sync, [1, 2, 3, 1, 2], 2)[1].tokens
        (3, 1)
        >>> seen, draft = drafting.step_history(sync, [1, 2, 3, 1, 2, 3, 7], 2)   # 3 accepted, 7 the target's
        >>> seen.accepted, seen.new_tokens.tolist()
        (1, [3, 7])
        """
        planned = sync.plan(history)
        self._pass_batch_size(1)
        request_id = planned.request_id
        started = [(request_id, planned.prompt)] if planned.started else []
        stopped = [planned.stopped] if planned.stopped is not None else []
        tokens = planned.new_tokens
        limits = np.array([max(int(limit), 0)], dtype=np.int64)
        step = BatchStep([request_id], tokens, np.array([0, len(tokens)], dtype=np.int64), limits, started, stopped)
        got = self.guard.step_batch(step)
        self.stats.step()
        seen = HistoryStep(request_id, planned.started, tokens, int(got.accepted[0]))
        return seen, got.draft(0)

    def draft(
        self,
        rows: Sequence[tuple[RequestId | None, int]],
        *,
        batch_size: int | None = None,
        max_branches: int = 1,
    ) -> list[Draft]:
        """One step's drafts: per row, ``(request id or None, most tokens for that row)``.

        The batch size (``batch_size``, else the number of rows) reaches the proposer through
        ``set_batch_size`` first, since a proposer that prices drafts prices them per batch.
        A row with no request id or no room (a limit below 1) gets an empty draft without
        asking the proposer; a draft longer than its row's limit, or otherwise bad, is dropped
        (the guard's ``bad_drafts`` counter). The rows asked go to the
        proposer as one :meth:`specplug.Proposer.step_batch` with no new tokens.

        An engine that verifies draft trees passes ``max_branches`` > 1: a proposer that
        declares ``proposes_alternatives`` is then asked per row for its draft with up to
        ``max_branches - 1`` alternatives (``Draft.alternatives``, each within the row's limit;
        ``Draft.branches()`` lists them all); any other proposer drafts as with 1.

        >>> from specplug import create
        >>> drafting = EngineDrafting(create("suffix", min_token_prob=0.0))
        >>> rows = drafting.sync_batch([[2]], [8], [[1, 2, 3, 1, 2, 4, 1, 2]], ["a"])
        >>> drafting.draft([(rows[0], 4)], max_branches=3)[0].branches()  # a tree of 4 tokens
        ((4, 1), (3, 1))
        """
        self._pass_batch_size(len(rows) if batch_size is None else batch_size)
        asked = [row for row, (request_id, limit) in enumerate(rows) if request_id is not None and limit >= 1]
        if max_branches > 1 and getattr(self.guard.proposer, "proposes_alternatives", False):
            return self._draft_trees(rows, asked, max_branches)
        step = BatchStep(
            [rows[row][0] for row in asked],
            np.empty(0, dtype=np.int64),
            np.zeros(len(asked) + 1, dtype=np.int64),
            np.array([rows[row][1] for row in asked], dtype=np.int64),
        )
        got = self.guard.step_batch(step)
        empty = Draft((), self.guard.name, 0.0)
        drafts = [empty] * len(rows)
        for position, row in enumerate(asked):
            drafts[row] = got.draft(position)
        self.stats.step()
        return drafts

    def _draft_trees(self, rows: Sequence[tuple[RequestId | None, int]], asked: list[int], max_branches: int) -> list[Draft]:
        # per row: alternatives have no batch path (a tree engine drafts a few rows of a few branches)
        empty = Draft((), self.guard.name, 0.0)
        drafts = [empty] * len(rows)
        for row in asked:
            request_id, limit = rows[row]
            drafts[row] = self.guard.propose_alternatives(request_id, limit, max_branches)
        self.stats.step()
        return drafts

    def _pass_batch_size(self, size: int) -> None:
        if self.passes_batch_size and size > 0:
            try:
                self.guard.proposer.set_batch_size(size)
            except Exception as error:  # noqa: BLE001 - isolated like the guard's own calls, then not asked again
                self.passes_batch_size = False
                self.guard.record_fault(f"set_batch_size({size})", error, "batch size no longer passed on")

    def control_of(self, params: Mapping[str, Any] | None) -> RequestControl:
        """A row's speculation control this step, from its request's free-form parameters.

        A bad control (checked at admission; one that got past it) costs a fault and the row drafts
        as the server is set; a row a control shortens is counted (``request_control.off`` /
        ``request_control.capped``), and one restricted to a part of the server's method
        (``request_control.method``). Naming the server's own method restricts nothing.
        """
        try:
            control = request_control(params, self.request_methods)
        except InvalidOptionError as error:
            self.guard.record_fault("a request's speculation control", error, "it drafts as the server is set")
            return RequestControl()
        if control.method == self.request_methods[0]:
            control = replace(control, method=None)
        if not control.default:
            counters = self.counters
            if control.off or control.max_draft_tokens is not None:
                counters["request_control.off" if control.off else "request_control.capped"] += 1
            if control.method is not None and not control.off:
                counters["request_control.method"] += 1
        return control

    def close(self) -> None:
        """Stop every tracked request, keep what a composite learnt (its ``learnt_state`` file) and
        report the final counters."""
        self.batch.stop_all()
        self.requests.stop_all()
        proposer = self.guard.proposer
        if getattr(proposer, "keeps_learnt_state", False):
            proposer.save_learnt_state()  # a failed write is logged there, never raised
        self.stats.report(force_log=True)
