"""specplug's own counters inside an engine: logged through the engine's logger and exported as JSON.

Acceptance itself is the engine's to count (it verifies the drafts). What an engine cannot
know is specplug's side: drafts by source (which part of a composite drafted), empty drafts
and proposer faults -- the :class:`specplug.GuardedProposer` counters. They live in the
process that drafts, so they are logged there, under a logger the adapter names (a child of
the engine's own logger shows them in the server's output), and written to a JSON file when
a path is given.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from specplug import InvalidOptionError
from specplug._outputs import write_text_atomic

__all__ = ["DEFAULT_LOGGER", "MIN_LOG_INTERVAL", "StatsReporter", "read_stats"]

#: the logger used when an adapter names none
DEFAULT_LOGGER = "specplug.engine"
#: the fewest seconds between two log lines, whatever the file's interval (0 writes every step)
MIN_LOG_INTERVAL = 10.0


class StatsReporter:
    """Exports a counter every ``interval`` seconds of drafting (0: every step) and logs it.

    Log lines come at most every :data:`MIN_LOG_INTERVAL` seconds, and only when a count
    changed, so a server's log is not flooded. ``path`` may hold ``{pid}``, so that each
    worker process of one server writes its own file. ``details`` are fixed facts written
    into the file with the counts (the method's options, the adapter's state).

    >>> from collections import Counter
    >>> reporter = StatsReporter(Counter({"drafts.ngram": 2}), method="ngram", details={"engine": "test"})
    >>> reporter.step()
    >>> snapshot = reporter.snapshot()
    >>> snapshot["steps"], snapshot["counters"], snapshot["engine"]
    (1, {'drafts.ngram': 2}, 'test')
    """

    def __init__(
        self,
        counters: Counter[str],
        *,
        method: str,
        path: str | os.PathLike[str] | None = None,
        interval: float = 30.0,
        logger: logging.Logger | str = DEFAULT_LOGGER,
        details: Mapping[str, object] | None = None,
    ) -> None:
        if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
            raise InvalidOptionError(f"stats interval = {interval!r} is not valid; use seconds >= 0")
        self.counters = counters
        self.method = method
        self.details = dict(details or {})
        self.path = Path(str(path).format(pid=os.getpid())) if path else None
        self.interval = float(interval)
        self.log = logging.getLogger(logger) if isinstance(logger, str) else logger
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
            # written aside, then renamed: a reader never sees half a file
            write_text_atomic(self.path, json.dumps(self.snapshot(), indent=1) + "\n")


def read_stats(path: str | os.PathLike[str]) -> dict[str, object]:
    """Read a stats file that a :class:`StatsReporter` wrote."""
    return json.loads(Path(path).read_text())
