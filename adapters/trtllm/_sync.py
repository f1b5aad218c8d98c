"""Keeping a proposer's requests in step with TensorRT-LLM's ``LlmRequest`` objects.

TensorRT-LLM hands a drafter the step's scheduled requests; each generation request holds its
whole history (``get_tokens(0)``: prompt and every token accepted so far), never the step's
delta. So a request is started on first sight with that history and, on later steps, extended
with what the history gained since (the accepted draft prefix and the target's own token:
exactly what ``Proposer.extend`` takes). It is stopped when the request completes or the
resource manager frees it. A history that does not continue the one seen last (an id reused
after its request ended unseen, a rewind) starts afresh: the request loses its lookup state,
never gets a wrong draft.

This is the one place the adapter keeps per-request state; it talks to the proposer only
through :class:`specplug.GuardedProposer`, so a proposer fault costs that request its draft.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from specplug import GuardedProposer

__all__ = ["RequestSync", "is_dummy", "request_key"]

#: flags TensorRT-LLM sets on the padding requests it schedules (attention-DP and CUDA-graph warm-up)
_DUMMY_FLAGS = ("is_attention_dp_dummy", "is_cuda_graph_dummy", "is_dummy", "is_dummy_request")


def request_key(request: Any) -> Hashable:
    """The id a request is known by: ``py_request_id`` (the Python mirror), else ``request_id``."""
    key = getattr(request, "py_request_id", None)
    return request.request_id if key is None else key


def is_dummy(request: Any) -> bool:
    """Whether TensorRT-LLM scheduled ``request`` only as padding (it must not draft or be tracked)."""
    return any(getattr(request, flag, False) is True for flag in _DUMMY_FLAGS)


class RequestSync:
    """Starts, extends and stops requests on a guarded proposer from their token histories.

    >>> import specplug
    >>> sync = RequestSync(specplug.GuardedProposer(specplug.create("ngram", min_n=1, max_n=2)))
    >>> sync.observe("r", [1, 2, 3, 1, 2])     # first sight: started with the history
    5
    >>> sync.guard.propose("r", 2).tokens
    (3, 1)
    >>> sync.observe("r", [1, 2, 3, 1, 2, 3, 9])  # the step accepted 3, then the target said 9
    7
    >>> sync.stop("r"); len(sync)
    0
    """

    def __init__(self, guard: GuardedProposer) -> None:
        self.guard = guard
        # request id -> (tokens synced, the last of them): the tail tells a reused id apart
        self._seen: dict[Hashable, tuple[int, int]] = {}

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, key: object) -> bool:
        return key in self._seen

    def observe(self, key: Hashable, tokens: Sequence[int]) -> int:
        """Bring ``key`` up to its history ``tokens``; return how many tokens it now holds."""
        length = len(tokens)
        seen = self._seen.get(key)
        if seen is not None:
            synced, last = seen
            if length < synced or (synced and int(tokens[synced - 1]) != last):
                self.stop(key)  # not a continuation: an id reused, or a history rewritten
                seen = None
            elif length > synced:
                self.guard.extend(key, [int(token) for token in tokens[synced:]])
        if seen is None:
            self.guard.start(key, [int(token) for token in tokens])
        self._seen[key] = (length, int(tokens[-1]) if length else -1)
        return length

    def stop(self, key: Hashable) -> None:
        """Forget ``key`` and free its proposer state (a no-op for an id not tracked)."""
        if self._seen.pop(key, None) is not None:
            self.guard.stop(key)

    def stop_all(self) -> None:
        """Stop every tracked request (the executor is shutting down)."""
        for key in list(self._seen):
            self.stop(key)
