"""Keeping a proposer's request lifecycle in step with vLLM's persistent batch.

vLLM hands a drafter, after each verification step, the tokens each row of its batch just
gained (``sampled_token_ids``: the accepted draft prefix plus the target's own token) and
the rows' full histories (``token_ids_cpu[row, :num_tokens_no_spec[row]]``). Rows move
between steps (requests finish, the batch is condensed), so state is keyed by request id
where the runner's ``input_batch.req_ids`` is at hand, and by row otherwise (a row whose
history does not continue the one seen there starts afresh, so a moved request costs its
lookup state, never a wrong draft).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Container, Sequence
from dataclasses import dataclass

import numpy as np

from specplug import GuardedProposer, Proposer
from specplug_adapters.vllm._config import DrafterSettings
from specplug_adapters.vllm._stats import LOGGER_NAME, reporter_for

__all__ = ["BatchDrafting", "BatchTracker"]

log = logging.getLogger(LOGGER_NAME)

#: tokens of a row's history remembered to recognise the same request at the same row
_FINGERPRINT = 8


@dataclass
class _Seen:
    request_id: object  # the id the proposer knows the request by
    length: int  # history length when last seen
    tail: tuple[int, ...]  # its last tokens, to recognise it by row


class BatchTracker:
    """Starts, extends and stops requests on a guarded proposer as the engine's batch changes."""

    def __init__(self, proposer: GuardedProposer) -> None:
        self.proposer = proposer
        self._seen: dict[object, _Seen] = {}  # key: vLLM request id, or ("row", index)
        self._ids = itertools.count()

    def __len__(self) -> int:
        return len(self._seen)

    def update(
        self,
        sampled_token_ids: Sequence[Sequence[int]],
        num_tokens_no_spec: np.ndarray,
        token_ids_cpu: np.ndarray,
        request_ids: Sequence[str] | None = None,
        live: Container[str] | None = None,
    ) -> list[object | None]:
        """Feed one step's new tokens; return, per row, the proposer's request id or None.

        None marks a row that cannot draft this step (a partial prefill, or a discarded
        row: no new tokens). ``request_ids`` are vLLM's ids of the rows (None: key by row).
        ``live`` holds the ids of requests that still exist although not in this batch
        (``runner.requests``); others that were seen before are stopped.
        """
        rows: list[object | None] = []
        present: set[object] = set()
        for row, new in enumerate(sampled_token_ids):
            key: object = request_ids[row] if request_ids is not None else ("row", row)
            present.add(key)
            if not len(new):
                rows.append(None)
                continue
            length = int(num_tokens_no_spec[row])
            history = token_ids_cpu[row]
            seen = self._seen.get(key)
            before = length - len(new)
            if seen is None or not self._continues(seen, before, history, by_row=request_ids is None):
                if seen is not None:
                    self.proposer.stop(seen.request_id)
                request_id = key if request_ids is not None else f"row{row}-{next(self._ids)}"
                self.proposer.start(request_id, history[:before])
                seen = self._seen[key] = _Seen(request_id, before, ())
            self.proposer.extend(seen.request_id, [int(token) for token in new])
            seen.length = length
            if request_ids is None:
                seen.tail = tuple(int(token) for token in history[max(0, length - _FINGERPRINT) : length])
            rows.append(seen.request_id)
        for key in [key for key in self._seen if key not in present and (live is None or key not in live)]:
            self.proposer.stop(self._seen.pop(key).request_id)
        return rows

    @staticmethod
    def _continues(seen: _Seen, before: int, history: np.ndarray, *, by_row: bool) -> bool:
        if seen.length != before:
            return False
        if not by_row:
            return True
        start = max(0, before - _FINGERPRINT)
        return tuple(int(token) for token in history[start:before]) == seen.tail

    def stop_all(self) -> None:
        """Stop every tracked request (the drafter is going away)."""
        for seen in self._seen.values():
            self.proposer.stop(seen.request_id)
        self._seen.clear()


class BatchDrafting:
    """A specplug method run over vLLM's batches: what the drafter and the hybrid overlay share.

    ``guard`` isolates the method's faults (and, through ``guard.record_fault``, the
    adapter's own), ``tracker`` keeps its requests in step with the batch, and ``stats``
    reports ``counters`` (the guard's) through vLLM's logger and the stats file.
    """

    def __init__(self, settings: DrafterSettings, proposer: Proposer) -> None:
        self.settings = settings
        self.guard = GuardedProposer(proposer, logger=log)
        self.counters = self.guard.counters
        self.tracker = BatchTracker(self.guard)
        self.stats = reporter_for(settings, self.counters)
