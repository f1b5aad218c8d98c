"""What a drafter and its resource manager share: the method, its fault guard and the request sync.

Both objects travel inside ``UserProvidedDecodingConfig`` to TensorRT-LLM's executor process
(pickled with the LLM arguments), so the proposer is built lazily, where it runs, and is left
out of the pickle; pickling the pair together keeps them sharing one runtime.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from specplug import Draft, GuardedProposer, Proposer, RequestId
from specplug_adapters.trtllm._settings import DrafterSettings
from specplug_adapters.trtllm._sync import RequestSync

__all__ = ["LOGGER_NAME", "SpecplugRuntime"]

LOGGER_NAME = "specplug.trtllm"
log = logging.getLogger(LOGGER_NAME)


class _NoDrafts(Proposer):
    """Stands in for a method that failed to build in the executor: every request goes on unspeculated."""

    name = "unavailable"

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        pass

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        return self.empty_draft()

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        pass

    def _stop(self, request_id: RequestId) -> None:
        pass


class SpecplugRuntime:
    """A specplug method run for TensorRT-LLM: ``guard`` (the proposer, faults isolated) and ``sync``.

    ``proposer``, when given, is used as is (and must pickle, if TensorRT-LLM pickles the config);
    otherwise the method of ``settings`` is created on first use with ``parts``.
    """

    def __init__(self, settings: DrafterSettings, *, proposer: Proposer | None = None, parts: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self._given = proposer
        self._parts = dict(parts or {})
        self._sync: RequestSync | None = None
        self._lock = threading.Lock()

    @property
    def sync(self) -> RequestSync:
        if self._sync is None:
            with self._lock:
                if self._sync is None:
                    self._sync = RequestSync(GuardedProposer(self._build(), logger=log))
        return self._sync

    @property
    def guard(self) -> GuardedProposer:
        return self.sync.guard

    @property
    def counters(self):
        """Drafts by source, empty drafts and faults (``GuardedProposer.counters``)."""
        return self.guard.counters

    def _build(self) -> Proposer:
        if self._given is not None:
            return self._given
        try:
            proposer = self.settings.create(**self._parts)
        except Exception as error:  # noqa: BLE001 - the executor must start; drafting is what is lost
            log.error("specplug method %r failed to build in the executor; no drafts", self.settings.method, exc_info=error)
            return _NoDrafts()
        log.info("specplug %s drafting for TensorRT-LLM, options %s, max_draft_len %d", self.settings.method,
                 self.settings.options, self.settings.max_draft_len)  # fmt: skip
        return proposer

    def __getstate__(self) -> dict[str, Any]:
        # the built proposer holds numba state and request data: rebuilt where it is unpickled
        return {"settings": self.settings, "_given": self._given, "_parts": self._parts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._sync = None
        self._lock = threading.Lock()
