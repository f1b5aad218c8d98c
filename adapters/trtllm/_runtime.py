"""What a drafter and its resource manager share: the method run by the engine layer.

The request bookkeeping, fault guard, batch size, counters and stats are the engine layer's
:class:`specplug.engine.EngineDrafting`; TensorRT-LLM shows requests by id with their whole
history, so requests are kept by its ``requests`` (a :class:`specplug.engine.KeyedHistorySync`).

Both objects travel inside ``UserProvidedDecodingConfig`` to TensorRT-LLM's executor process
(pickled with the LLM arguments), so the proposer is built lazily, where it runs, and is left
out of the pickle; pickling the pair together keeps them sharing one runtime.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any


from specplug import GuardedProposer, Proposer
from specplug.engine import EngineDrafting, KeyedHistorySync, StandInDrafter
from specplug_adapters.trtllm._settings import DrafterSettings

__all__ = ["LOGGER_NAME", "SpecplugRuntime"]

LOGGER_NAME = "specplug.trtllm"
log = logging.getLogger(LOGGER_NAME)


class SpecplugRuntime:
    """A specplug method run for TensorRT-LLM: ``drafting`` (the engine layer's step), built on first use.

    ``proposer``, when given, is used as is (and must pickle, if TensorRT-LLM pickles the config);
    otherwise the method of ``settings`` is created on first use with ``parts``.
    """

    def __init__(self, settings: DrafterSettings, *, proposer: Proposer | None = None, parts: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self._given = proposer
        self._parts = dict(parts or {})
        self._drafting: EngineDrafting | None = None
        self._lock = threading.Lock()

    @property
    def drafting(self) -> EngineDrafting:
        """The engine layer's drafting state (the method is created on the first call)."""
        if self._drafting is None:
            with self._lock:  # the executor and its resource manager may ask first from two threads
                if self._drafting is None:
                    proposer, method = self._build()
                    self._drafting = EngineDrafting(
                        proposer,
                        method=method,
                        logger=LOGGER_NAME,
                        details={"engine": "TensorRT-LLM", "max_draft_len": self.settings.max_draft_len},
                    )
        return self._drafting

    @property
    def sync(self) -> KeyedHistorySync:
        """The requests, by TensorRT-LLM's request id, in step with their histories."""
        return self.drafting.requests

    @property
    def guard(self) -> GuardedProposer:
        return self.drafting.guard

    @property
    def counters(self) -> Counter[str]:
        """Drafts by source, empty drafts and faults (``GuardedProposer.counters``)."""
        return self.drafting.counters

    def close(self) -> None:
        """Stop every tracked request and report the final counters (nothing to do if never built)."""
        if self._drafting is not None:
            self._drafting.close()

    def _build(self) -> tuple[Proposer, str | None]:
        if self._given is not None:
            return self._given, None
        try:
            proposer = self.settings.create(**self._parts)
        except Exception as error:  # noqa: BLE001 - the executor must start; drafting is what is lost
            log.error("specplug method %r failed to build in the executor; no drafts", self.settings.method, exc_info=error)
            return StandInDrafter("unavailable", kind="lookup"), None
        log.info("specplug %s drafting for TensorRT-LLM, options %s, max_draft_len %d", self.settings.method,
                 self.settings.options, self.settings.max_draft_len)  # fmt: skip
        return proposer, self.settings.method

    def __getstate__(self) -> dict[str, Any]:
        # the built proposer holds numba state and request data: rebuilt where it is unpickled
        return {"settings": self.settings, "_given": self._given, "_parts": self._parts}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._drafting = None
        self._lock = threading.Lock()
