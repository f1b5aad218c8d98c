"""Fault isolation for adapters: a proposer fault costs one draft, never the engine."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from specplug._contract import Draft, RequestId

__all__ = ["GuardedProposer"]

log = logging.getLogger("specplug")


class GuardedProposer:
    """Wraps a proposer so that its exceptions turn into empty drafts.

    A fault in ``propose`` costs that step its draft. A fault in ``start`` or ``extend``
    leaves the request's drafting state unknown, so that request goes on without
    speculation until it stops. Each kind of fault is logged once, with its traceback;
    ``counters`` keeps drafts by source, empty drafts and faults for metrics (an adapter
    adds the faults of its own code around the proposer with :meth:`record_fault`).

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
        self.counters["faults"] += 1
        if key in self._logged:
            return False
        self._logged.add(key)
        return True

    def _fault(self, action: str, request_id: RequestId, error: BaseException) -> None:
        if self._counted(("proposer", action, type(error).__name__)):
            self._log.warning(
                "specplug proposer %s raised in %s() for request %r; drafting skipped "
                "(logged once per kind of fault)",
                self.name,
                action,
                request_id,
                exc_info=error,
            )

    def start(self, request_id: RequestId, prompt_ids: Sequence[int]) -> None:
        self._disabled.discard(request_id)
        try:
            self.proposer.start(request_id, prompt_ids)
        except Exception as error:  # noqa: BLE001 - isolation is the point
            self._fault("start", request_id, error)
            self._disabled.add(request_id)

    def propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        if request_id in self._disabled:
            self.counters["empty_drafts"] += 1
            return Draft((), self.name, 0.0)
        try:
            draft = self.proposer.propose(request_id, max_tokens)
        except Exception as error:  # noqa: BLE001
            self._fault("propose", request_id, error)
            draft = Draft((), self.name, 0.0)
        if draft.tokens:
            self.counters[f"drafts.{draft.source}"] += 1
            self.counters["draft_tokens"] += len(draft.tokens)
        else:
            self.counters["empty_drafts"] += 1
        return draft

    def extend(self, request_id: RequestId, token_ids: Sequence[int]) -> int:
        if request_id in self._disabled:
            return 0
        try:
            return self.proposer.extend(request_id, token_ids)
        except Exception as error:  # noqa: BLE001
            self._fault("extend", request_id, error)
            self._disabled.add(request_id)
            return 0

    def stop(self, request_id: RequestId) -> None:
        self._disabled.discard(request_id)
        if request_id not in self.proposer:  # its start failed: nothing to free
            return
        try:
            self.proposer.stop(request_id)
        except Exception as error:  # noqa: BLE001
            self._fault("stop", request_id, error)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self.proposer
