"""Shared pieces of the composite proposers (hybrid, adaptive): parts, score bands, per-position statistics."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from specplug._contract import check_batch_size
from specplug._errors import InvalidOptionError

__all__ = [
    "BANDS", "SCORE_BANDS", "PositionStats", "best_cut", "checked_batch_size", "estimate", "optimism",
    "resolved", "score_band",
]  # fmt: skip


def resolved(value: object, option: str) -> Any:
    """``value`` of a part or cost option, which ``specplug.create`` resolves from a name before
    the method's factory runs (the option is declared in the method's capabilities); a name here
    means the factory was called directly, which cannot look names up."""
    if isinstance(value, (str, Path)):
        raise InvalidOptionError(
            f"option {option} = {value!r} is a name; create the method with specplug.create(), which "
            "resolves method and cost-model names, or pass the object"
        )
    return value


#: score bands of a lookup's drafts, 1.5 per doubling of 1 + score: None, [0, 0.59), [0.59, 1.52),
#: [1.52, 3), [3, 5.35), [5.35, inf). Finer than one per doubling: with every position of every
#: draft scored, each band holds enough observations, and a draft's estimate then tracks its score
SCORE_BANDS = 6
_BANDS_PER_DOUBLING = 1.5
#: each score band twice: drafts as long as asked for, and drafts the lookup ended sooner itself
BANDS = 2 * SCORE_BANDS


def score_band(score: float | None, length: int, asked: int) -> int:
    """The statistics band of a draft of ``length`` tokens with this score (0 when the drafter gives
    none), when ``asked`` tokens were asked for.

    A draft the lookup ended sooner than asked (its match was short, or its continuation grew
    uncertain) has bands of its own: on the shipped traces such drafts are accepted far less
    often than full-length ones of the same score.

    >>> score_band(None, 8, 8), score_band(0.5, 8, 8), score_band(2.0, 8, 8), score_band(5.0, 8, 8), score_band(5.0, 4, 8)
    (0, 1, 3, 4, 10)
    """
    if score is None:
        band = 0
    else:
        band = min(1 + int(_BANDS_PER_DOUBLING * np.log2(1.0 + max(score, 0.0))), SCORE_BANDS - 1)
    return band + SCORE_BANDS if length < asked else band


@dataclass
class PositionStats:
    """Per band and position: ``drafted[b, j]`` times position j+1 was reached, ``accepted[b, j]`` times it matched."""

    drafted: np.ndarray
    accepted: np.ndarray

    @classmethod
    def empty(cls, positions: int) -> PositionStats:
        return cls(np.zeros((BANDS, positions)), np.zeros((BANDS, positions)))

    def observe(
        self, band: int, draft: tuple[int, ...], truth: np.ndarray | list[int], start: int = 0, decay: float = 1.0
    ) -> None:
        """Score ``draft`` against the verified tokens ``truth`` as far as they reach, from position
        ``start`` on (the positions before it matched and were scored before). ``decay`` < 1: the
        band's earlier counts are first worth that much less (once per draft), so the counts
        follow acceptance that drifts."""
        drafted, accepted = self.drafted[band], self.accepted[band]
        if decay < 1.0 and start == 0:
            drafted *= decay
            accepted *= decay
        for j in range(start, min(len(draft), len(truth), len(drafted))):
            drafted[j] += 1
            if draft[j] != truth[j]:
                return
            accepted[j] += 1


def estimate(own: PositionStats, pooled: PositionStats, band: int, prior: float | np.ndarray, weight: float) -> np.ndarray:
    """Acceptance per draft position: a request's counts shrunk towards the pooled ones.

    Pooled, each position is shrunk towards the estimate of the position before it, the first
    towards ``prior`` (each worth ``weight`` observations): a position a drafter is seldom or never
    asked for (a neural head asked for fewer tokens shows no more) takes the acceptance its drafts
    showed up to there, not a fixed prior that would keep it from ever being drafted. Given
    ``prior`` per position (an array), each position is shrunk towards its own.

    >>> seen = PositionStats.empty(4)
    >>> for _ in range(50):
    ...     seen.observe(0, (1, 2), [1, 2])          # two positions shown, both always right
    >>> [round(float(p), 2) for p in estimate(PositionStats.empty(4), seen, 0, 0.5, 4.0)]
    [0.96, 1.0, 1.0, 1.0]
    """
    if np.ndim(prior):
        pooled_p = (pooled.accepted[band] + weight * prior) / (pooled.drafted[band] + weight)
        return (own.accepted[band] + weight * pooled_p) / (own.drafted[band] + weight)
    return _chained(own.accepted[band], own.drafted[band], pooled.accepted[band], pooled.drafted[band], float(prior), float(weight))


@njit(cache=True)
def _chained(
    own_accepted: np.ndarray, own_drafted: np.ndarray, accepted: np.ndarray, drafted: np.ndarray, prior: float, weight: float
) -> np.ndarray:  # pragma: no cover - compiled
    # one pass over the positions (this runs for every candidate at every step; a numpy
    # expression of the same scan takes several temporaries and about 3x the time)
    out = np.empty(len(drafted))
    previous = prior
    for j in range(len(drafted)):
        previous = (accepted[j] + weight * previous) / (drafted[j] + weight)
        out[j] = (own_accepted[j] + weight * previous) / (own_drafted[j] + weight)
    return out


def optimism(pooled: PositionStats, band: int, steps: int, scale: float, weight: float) -> np.ndarray:
    """UCB bonus per position: ``scale * sqrt(log(1 + steps) / (n + weight))`` for a position
    seen ``n`` times, so a drafter judged on a few unlucky steps is retried now and then."""
    return scale * np.sqrt(np.log1p(steps) / (pooled.drafted[band] + weight))


def best_cut(accepted: np.ndarray, times: np.ndarray) -> tuple[float, int, float]:
    """The cut of a draft with the most expected tokens per second: (tokens/s, length, expected
    accepted tokens), for positions accepted with probabilities ``accepted`` (each given the ones
    before) when a draft of ``k`` tokens makes a step of ``times[k - 1]`` seconds; (0, 0, 0) for
    an empty draft.

    >>> best_cut(np.array([0.9, 0.9, 0.1]), np.array([1.0, 1.1, 1.2]))   # the third token is not worth it
    (2.4636363636363634, 2, 1.71)
    """
    if not len(accepted):
        return 0.0, 0, 0.0
    expected = np.cumsum(np.cumprod(accepted))
    rates = (1.0 + expected) / times[: len(accepted)]
    k = int(np.argmax(rates))
    return float(rates[k]), k + 1, float(expected[k])


def checked_batch_size(batch_size: object) -> int:
    """``batch_size`` if it is an int >= 1 (what ``set_batch_size()`` accepts), else a clear error."""
    return check_batch_size(batch_size)
