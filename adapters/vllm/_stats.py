"""specplug's counters inside vLLM: under vLLM's own logger, and what a stats file records here.

Acceptance itself needs nothing from here: vLLM verifies the drafts and counts them in its
own spec-decode metrics (``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
``..._num_accepted_tokens``). specplug's side (drafts by source, empty drafts, faults) is
reported by the engine layer's :class:`specplug.engine.StatsReporter` in the worker process
that drafts, through :data:`LOGGER_NAME`, so its lines show in the server's output with
vLLM's format and level.
"""

from __future__ import annotations

import json
from typing import Any

from specplug.engine import read_stats
from specplug_adapters.vllm._installed import installed

__all__ = ["LOGGER_NAME", "read_stats", "stats_details", "stats_options"]

#: a child of vLLM's own logger, so lines appear with vLLM's format and level
LOGGER_NAME = "vllm.specplug"


def stats_options(settings: Any) -> dict[str, Any]:
    """What the engine layer's reporter takes from a drafter's settings: method, file, interval, details."""
    return {
        "method": settings.method,
        "logger": LOGGER_NAME,
        "stats_file": settings.stats_file,
        "stats_interval": settings.stats_interval,
        "details": stats_details(settings),
    }


def stats_details(settings: Any) -> dict[str, object]:
    """What a stats file records besides counts: the method's options and the plugin's state here."""
    options = {key: value for key, value in getattr(settings, "options", {}).items() if _is_json(value)}
    return {"options": options, "vllm_plugin": sorted(installed())}


def _is_json(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
