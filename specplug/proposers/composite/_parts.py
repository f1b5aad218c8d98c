"""Shared pieces of the composite proposers (hybrid, adaptive): parts, score bands, per-position statistics.

The step's arithmetic runs in numba for every row at once (``_choice``); :func:`estimate` and
:func:`optimism` are its numpy form, for reading a request's estimates.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from specplug._batch import check_batch_size
from specplug._errors import InvalidOptionError
from specplug.proposers.composite._choice import chained_estimate

__all__ = [
    "BANDS", "SCORE_BANDS", "PositionStats", "checked_batch_size", "estimate", "optimism", "probes", "resolved", "score_band",
    "score_bands",
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
#: a lookup's draft copied after a match of at least this many tokens has statistics of its own
LONG_MATCH = 4
#: each score band four times: drafts as long as asked for or ended sooner by the lookup itself,
#: each after a shorter match or after one of at least ``LONG_MATCH`` tokens
BANDS = 4 * SCORE_BANDS


def probes(neural_probe: bool | None, neural_parts: list[Any]) -> bool:
    """Whether a composite asks its neural parts for their whole draft: ``neural_probe`` as given,
    or by default unless a part declares that shorter drafts save it work (a draft model)."""
    if neural_probe is not None:
        return neural_probe
    return not any(getattr(part, "shorter_drafts_save", False) for part in neural_parts)


def score_bands(
    scores: np.ndarray, lengths: np.ndarray, asked: np.ndarray, matches: np.ndarray | None = None
) -> np.ndarray:
    """The statistics band of each draft of ``lengths`` tokens with these ``scores`` (NaN: the
    drafter gives none, band 0), when ``asked`` tokens were asked for, copied after a match of
    ``matches`` tokens (0 or None: not known).

    A draft the lookup ended sooner than asked (its match was short, or its continuation grew
    uncertain) has bands of its own: on the shipped traces such drafts are accepted far less
    often than full-length ones of the same score. So has a draft after a match of at least
    ``LONG_MATCH`` tokens: a vote of one occurrence scores alike after a one-token match and after
    a long one, and the long one is right far more often (the engines' lookup rules, TensorRT-LLM's
    ``sa_config`` threshold and vLLM's ``prompt_lookup_min``, draw the same line).

    >>> score_bands(np.array([np.nan, 0.5, 2.0, 5.0, 5.0]), np.array([8, 8, 8, 8, 4]), np.array(8)).tolist()
    [0, 1, 3, 4, 10]
    >>> score_bands(np.array([5.0, 5.0]), np.array([8, 8]), np.array(8), np.array([1, 6])).tolist()
    [4, 16]
    """
    positive = np.fmax(scores, 0.0)  # fmax: NaN gives 0 (nan_to_num costs several times more)
    # capped before the cast: an infinite score (a part's "certain") would cast to -2**63, a band
    # the kernels would index statistics with, out of bounds
    steps = np.minimum(_BANDS_PER_DOUBLING * np.log2(1.0 + positive), SCORE_BANDS)
    bands = np.minimum(1 + steps.astype(np.int64), SCORE_BANDS - 1)
    bands = np.where(np.isnan(scores), 0, bands)
    bands = bands + SCORE_BANDS * (lengths < asked)
    return bands if matches is None else bands + 2 * SCORE_BANDS * (matches >= LONG_MATCH)


def score_bands_of_rows(
    scores: np.ndarray, lengths: np.ndarray, limits: np.ndarray, matches: np.ndarray | None = None
) -> np.ndarray:
    """:func:`score_bands` of a batch step's lookup drafts (``scores``, ``lengths`` and ``matches``:
    [lookup, row]; ``limits``: [row]), equal to it element by element: numpy takes the logarithm (so
    it is the same to the last bit), one numba pass the rest, instead of eight numpy calls over the batch."""
    logs = np.log2(1.0 + np.fmax(scores, 0.0))
    out = np.empty(scores.shape, dtype=np.int64)
    matches = np.zeros(scores.shape, dtype=np.int64) if matches is None else matches
    _bands_of_logs(logs, scores, lengths, matches, limits, out)
    return out


@njit(cache=True)
def _bands_of_logs(logs, scores, lengths, matches, limits, out):
    for i in range(logs.shape[0]):
        for row in range(logs.shape[1]):
            if scores[i, row] != scores[i, row]:  # NaN: no score, band 0
                band = 0
            else:
                # capped before the cast, as in score_bands: an infinite score casts to -2**63
                band = min(1 + np.int64(min(_BANDS_PER_DOUBLING * logs[i, row], SCORE_BANDS)), SCORE_BANDS - 1)
            if lengths[i, row] < limits[row]:
                band += SCORE_BANDS
            if matches[i, row] >= LONG_MATCH:
                band += 2 * SCORE_BANDS
            out[i, row] = band


def score_band(score: float | None, length: int, asked: int, match: int | None = None) -> int:
    """The band of one draft (:func:`score_bands` of one row; None: no score, or no match known).

    >>> score_band(None, 8, 8), score_band(0.5, 8, 8), score_band(5.0, 4, 8), score_band(5.0, 4, 8, match=4)
    (0, 1, 10, 22)
    """
    scores = np.array([np.nan if score is None else score])
    return int(score_bands(scores, np.array([length]), np.array(asked), np.array([match or 0]))[0])


@dataclass
class PositionStats:
    """Per band and position: ``drafted[b, j]`` times position j+1 was reached, ``accepted[b, j]`` times it matched."""

    drafted: np.ndarray
    accepted: np.ndarray

    @classmethod
    def empty(cls, positions: int) -> PositionStats:
        return cls(np.zeros((BANDS, positions)), np.zeros((BANDS, positions)))


def estimate(own: PositionStats, pooled: PositionStats, band: int, prior: float | np.ndarray, weight: float) -> np.ndarray:
    """Acceptance per draft position: a request's counts shrunk towards the pooled ones.

    Pooled, each position is shrunk towards the estimate of the position before it, the first
    towards ``prior`` (each worth ``weight`` observations): a position a drafter is seldom or never
    asked for (a neural head asked for fewer tokens shows no more) takes the acceptance its drafts
    showed up to there, not a fixed prior that would keep it from ever being drafted. Given
    ``prior`` per position (an array), each position is shrunk towards its own.

    >>> seen = PositionStats.empty(4)
    >>> seen.drafted[0, :2] = seen.accepted[0, :2] = 50   # two positions shown, both always right
    >>> [round(float(p), 2) for p in estimate(PositionStats.empty(4), seen, 0, 0.5, 4.0)]
    [0.96, 1.0, 1.0, 1.0]
    """
    if np.ndim(prior):
        pooled_p = (pooled.accepted[band] + weight * prior) / (pooled.drafted[band] + weight)
        return (own.accepted[band] + weight * pooled_p) / (own.drafted[band] + weight)
    out = np.empty(len(pooled.drafted[band]))
    # the kernel a step's choice uses (one pass over the positions)
    chained_estimate(
        own.drafted[band], own.accepted[band], pooled.drafted[band], pooled.accepted[band], float(prior), float(weight), out
    )
    return out


def optimism(pooled: PositionStats, band: int, steps: int, scale: float, weight: float) -> np.ndarray:
    """UCB bonus per position: ``scale * sqrt(log(1 + steps) / (n + weight))`` for a position
    seen ``n`` times, so a drafter judged on a few unlucky steps is retried now and then."""
    return scale * np.sqrt(np.log1p(steps) / (pooled.drafted[band] + weight))


def checked_batch_size(batch_size: object) -> int:
    """``batch_size`` if it is an int >= 1 (what ``set_batch_size()`` accepts), else a clear error."""
    return check_batch_size(batch_size)
