"""How much of a gap between two methods in one cell the sample of requests alone could make.

A cell's modeled speedup is its requests' plain decoding time over their speculative time,
each summed. Two methods replay the same requests, so their ratio is measured again over the
requests drawn with replacement (the same draws for both: a paired bootstrap); the central
``LEVEL`` of those ratios is the interval a miss is reported with. A workload of a few requests
(the shipped traces hold 5-6 per workload and split) gives a wide one: a gap inside it is one
that another sample of such requests could reverse. The draws are seeded, so a report is
reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specplug.cost import CostModel
from specplug.lab.bench._replay import StepLog, timed_requests

__all__ = ["LEVEL", "RESAMPLES", "ratio_interval", "speedup_of"]

LEVEL, RESAMPLES = 0.9, 2000


def speedup_of(logs: Sequence[StepLog], cost: CostModel, batch: int) -> tuple[float, np.ndarray]:
    """The modeled speedup of ``logs`` at ``batch`` and each request's (plain, speculative) time."""
    per_request, (plain, spec) = timed_requests(logs, cost, batch)
    return (plain / spec if spec else 0.0), per_request


def ratio_interval(
    mine: np.ndarray, bar: np.ndarray, level: float = LEVEL, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """The central ``level`` interval of speedup(``mine``) / speedup(``bar``) over the requests
    resampled with replacement, both from the same draws (each array: a request's plain and
    speculative time per row, as :func:`speedup_of` gives them). None where the two did not
    replay the same number of requests, or fewer than two."""
    if mine.shape != bar.shape or mine.ndim != 2 or len(mine) < 2:
        return None
    requests = len(mine)
    draws = np.random.default_rng(seed).integers(0, requests, size=(resamples, requests))
    counts = np.zeros((resamples, requests))
    np.add.at(counts, (np.arange(resamples)[:, None], draws), 1.0)  # how often each request was drawn
    mine_sums, bar_sums = counts @ mine, counts @ bar  # [resample, (plain, speculative)]
    if not (mine_sums[:, 1].all() and bar_sums[:, 1].all()):
        return None
    ratios = (mine_sums[:, 0] / mine_sums[:, 1]) / (bar_sums[:, 0] / bar_sums[:, 1])
    low, high = np.quantile(ratios, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(low), float(high)
