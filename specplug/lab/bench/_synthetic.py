"""Synthetic replay workloads that stress a per-step choice, generated from a seed (no hand-written numbers).

Each request has a prompt of random token ids and an output made of segments: *copies* of a
span of the prompt (with a few tokens changed: what lookups draft well) and *novel* tokens
(nothing to look up). The neural drafter's record comes from a per-token chance ``alpha`` that
the drafter predicts the token: ``accepted[i]`` is the run of predicted tokens from ``i`` on,
capped at its draft length, so each draft position is accepted with chance ``alpha`` given the
ones before it, as a head with a flat acceptance would be.

- ``stress-selective``: a drafter good only on some requests. A third of the requests are novel
  text the neural drafter predicts well (alpha 0.85), a third novel text it predicts badly
  (0.15), a third copies of the prompt (neural 0.3). Pooled over requests, neither part is right.
- ``stress-drift``: acceptance drifting mid-request. The first half of every request is novel
  text the neural drafter predicts well (0.85); from the middle on it predicts badly (0.15) and
  the text turns to copies. Estimates that weigh the whole request alike keep the neural drafter.
- ``stress-long-neural``: long neural drafts that pay only at small batch. Novel text, a head
  of 8 tokens with alpha 0.75: all 8 pay at batch 1 (under the H100 preset); at batch 128
  verifying them costs more than the later ones bring, and 2-3 pay best. A proposer that starts with short drafts and never looks past them
  never learns that.

>>> records = synthetic_records("stress-drift", requests=2, length=64)
>>> [record.workload for record in records], len(records[0].output_ids), records[0].neural.k
(['stress-drift', 'stress-drift'], 64, 8)
>>> synthetic_records("stress-drift", requests=2, length=64) == records     # the same every time
True
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np

from specplug._errors import InvalidOptionError
from specplug.lab.trace import NeuralTrace, TraceRecord

__all__ = ["SYNTHETIC_WORKLOADS", "synthetic_records", "synthetic_traces"]

_VOCAB = (1000, 31000)  # token ids drawn uniformly from here: a random token rarely repeats
_PROMPT = 320
_HEAD = 8  # the neural drafter's draft length
#: (share of the output copied from the prompt, neural alpha) over a request's output, by position share
Regime = Callable[[int, float], tuple[float, float]]


def _selective(request: int, at: float) -> tuple[float, float]:
    return ((0.0, 0.85), (0.0, 0.15), (0.9, 0.3))[request % 3]


def _drift(request: int, at: float) -> tuple[float, float]:
    return (0.0, 0.85) if at < 0.5 else (0.8, 0.15)


def _long_neural(request: int, at: float) -> tuple[float, float]:
    return 0.0, 0.75


SYNTHETIC_WORKLOADS: dict[str, Regime] = {
    "stress-selective": _selective,
    "stress-drift": _drift,
    "stress-long-neural": _long_neural,
}


def _request(rng: np.random.Generator, regime: Regime, index: int, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    prompt = rng.integers(*_VOCAB, size=_PROMPT)
    output: list[int] = []
    alphas: list[float] = []
    while len(output) < length:
        copy_share, alpha = regime(index, len(output) / length)
        size = int(rng.integers(20, 60))
        if rng.random() < copy_share:
            start = int(rng.integers(0, _PROMPT - size))
            segment = prompt[start : start + size].copy()
            changed = rng.random(size) < 0.03
            segment[changed] = rng.integers(*_VOCAB, size=int(changed.sum()))
        else:
            segment = rng.integers(*_VOCAB, size=size)
        output += segment.tolist()
        alphas += [alpha] * size
    predicted = rng.random(length) < np.asarray(alphas[:length])
    # accepted[i]: the run of predicted tokens from i on, at most the head's length
    accepted = np.zeros(length, dtype=np.int64)
    run = 0
    for i in range(length - 1, -1, -1):
        run = run + 1 if predicted[i] else 0
        accepted[i] = min(run, _HEAD)
    return prompt, np.asarray(output[:length]), accepted


def synthetic_records(workload: str, *, requests: int = 9, length: int = 360, seed: int = 0) -> list[TraceRecord]:
    """``requests`` records of ``length`` output tokens of a synthetic ``workload``, from ``seed``."""
    if workload not in SYNTHETIC_WORKLOADS:
        raise InvalidOptionError(f"synthetic workload {workload!r} is not known; valid: {', '.join(SYNTHETIC_WORKLOADS)}")
    rng = np.random.default_rng([seed, zlib.crc32(workload.encode())])
    records = []
    for index in range(requests):
        prompt, output, accepted = _request(rng, SYNTHETIC_WORKLOADS[workload], index, length)
        records.append(
            TraceRecord(
                v=1,
                id=f"{workload}/{index}",
                workload=workload,
                prompt_ids=prompt.tolist(),
                output_ids=output.tolist(),
                neural=NeuralTrace(k=_HEAD, accepted=accepted.tolist(), drafter="synthetic"),
                meta={"synthetic": True, "seed": seed},
            )
        )
    return records


def synthetic_traces(*, seed: int = 0, requests: int = 9, length: int = 360) -> list[TraceRecord]:
    """Every synthetic workload's records, in the order of :data:`SYNTHETIC_WORKLOADS`."""
    return [record for name in SYNTHETIC_WORKLOADS for record in synthetic_records(name, requests=requests, length=length, seed=seed)]
