"""specplug's own counters inside vLLM: logged through vLLM's logger and exported as JSON.

Acceptance itself needs nothing from here: the drafts a specplug drafter returns are verified
by vLLM, which counts them in its own spec-decode metrics (``vllm:spec_decode_num_drafts``,
``..._num_draft_tokens``, ``..._num_accepted_tokens``). What vLLM cannot know is specplug's
side: drafts by source (which part of a hybrid or adaptive drafted), empty drafts and
proposer faults -- the :class:`specplug.GuardedProposer` counters. They live in the worker
process that drafts, so they are logged there, under vLLM's ``vllm`` logger so they show in
the server's output, and written to a JSON file when ``stats_file`` is set.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["LOGGER_NAME", "StatsReporter", "read_stats", "stats_details"]

#: a child of vLLM's own logger, so lines appear with vLLM's format and level
LOGGER_NAME = "vllm.specplug"
#: the fewest seconds between two log lines, whatever the file's interval (0 writes every step)
MIN_LOG_INTERVAL = 10.0


class StatsReporter:
    """Exports a counter every ``interval`` seconds of drafting (0: every step) and logs it.

    Log lines come at most every :data:`MIN_LOG_INTERVAL` seconds, and only when a count
    changed, so a server's log is not flooded.
    """

    def __init__(
        self,
        counters: Counter[str],
        *,
        method: str,
        path: str | None = None,
        interval: float = 30.0,
        logger: logging.Logger | None = None,
        details: dict[str, object] | None = None,
    ) -> None:
        self.counters = counters
        self.method = method
        self.details = details or {}  # fixed facts for the file: options, the plugin's state
        # "{pid}" lets each worker of a tensor-parallel group write its own file
        self.path = Path(path.format(pid=os.getpid())) if path else None
        self.interval = interval
        self.log = logger or logging.getLogger(LOGGER_NAME)
        self.steps = 0
        self._last = self._last_log = time.monotonic()
        self._reported: dict[str, int] = {}

    def step(self) -> None:
        """Count a drafting step; report when the interval has passed."""
        self.steps += 1
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            self.report()

    def snapshot(self) -> dict[str, object]:
        """The counters as a JSON-ready dict."""
        return {
            "method": self.method,
            "pid": os.getpid(),
            "steps": self.steps,
            "counters": dict(sorted(self.counters.items())),
            **self.details,
        }

    def report(self, *, force_log: bool = False) -> None:
        """Write the JSON file (atomically), and log the counters when they changed."""
        current = dict(self.counters)
        now = time.monotonic()
        if current != self._reported and (force_log or now - self._last_log >= MIN_LOG_INTERVAL):
            self._reported, self._last_log = current, now
            parts = " ".join(f"{key}={value}" for key, value in sorted(current.items()))
            self.log.info("specplug %s: steps=%d %s", self.method, self.steps, parts or "(no drafts yet)")
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
            partial.write_text(json.dumps(self.snapshot(), indent=1) + "\n")
            os.replace(partial, self.path)


def stats_details(settings: object) -> dict[str, object]:
    """What a stats file records besides counts: the method's options and the plugin's state here."""
    from specplug_adapters.vllm._plugin import installed

    options = {key: value for key, value in getattr(settings, "options", {}).items() if _is_json(value)}
    return {"options": options, "vllm_plugin": sorted(installed())}


def reporter_for(settings: Any, counters: Counter[str]) -> StatsReporter:
    """The stats reporter of a drafter or overlay, configured from its specplug settings."""
    return StatsReporter(
        counters,
        method=settings.method,
        path=settings.stats_file,
        interval=settings.stats_interval,
        details=stats_details(settings),
    )


def _is_json(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def read_stats(path: str | os.PathLike[str]) -> dict[str, object]:
    """Read a stats file that a drafter wrote."""
    return json.loads(Path(path).read_text())
