"""Fitting a linear cost model to measured forward-pass times."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specplug._errors import CostModelError

__all__ = ["fit_verify"]


def fit_verify(samples: Sequence[tuple[int, int, float]]) -> tuple[float, float, float, float]:
    """Least squares ``seconds = per_kv * kv + per_token * batched + fixed`` with every
    coefficient >= 0 (a negative one is dropped and the rest refitted).

    ``samples`` are ``(kv_tokens, batched_tokens, seconds)``. Returns the three
    coefficients and the median relative error of the fit.

    >>> fit_verify([(kv, n, 1e-8 * kv + 2e-4 * n + 3e-3) for kv in (0, 500, 1000) for n in (1, 4, 16)])[:3]
    (1e-08, 0.0002, 0.003)
    """
    data = np.asarray(samples, dtype=np.float64)
    if data.ndim != 2 or data.shape[0] < 3 or data.shape[1] != 3:
        raise CostModelError(f"need at least 3 (kv, batched, seconds) samples to fit, got {len(samples)}")
    design = np.column_stack([data[:, 0], data[:, 1], np.ones(len(data))])
    keep = [0, 1, 2]
    while True:
        coefficients, *_ = np.linalg.lstsq(design[:, keep], data[:, 2], rcond=None)
        negative = [keep[i] for i, value in enumerate(coefficients) if value < 0]
        if not negative:
            break
        keep.remove(negative[0])
        if not keep:
            raise CostModelError("the measured times do not fit a non-negative linear model")
    full = np.zeros(3)
    full[keep] = coefficients
    predicted = design @ full
    error = float(np.median(np.abs(predicted - data[:, 2]) / np.maximum(data[:, 2], 1e-12)))
    rounded = [float(f"{value:.6g}") for value in full]
    return rounded[0], rounded[1], rounded[2], error
