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
    ``counters`` keeps drafts by source, empty drafts and faults for metrics.

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
        self._logged: set[tuple[str, str]] = set()
        self._log = logger

    @property
    def name(self) -> str:
        return getattr(self.proposer, "name", type(self.proposer).__name__)

    def _fault(self, action: str, request_id: RequestId, error: BaseException) -> None:
        self.counters["faults"] += 1
        key = (action, type(error).__name__)
        if key not in self._logged:
            self._logged.add(key)
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
