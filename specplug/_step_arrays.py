"""A batch step's arrays checked in one compiled pass (``Proposer._check_step``, steps of many rows).

Why: checked as Python ints (``tolist``, then ``sorted``, ``min`` and ``max``), a step of 128
rows made some 700 int objects; on caches that other work has evicted, as an engine's own work
between two steps does, that cost about 100 µs, a quarter of suffix's step at 64k tokens of
context. One pass over the three contiguous arrays costs about 2 µs warm and 15 cold.
It only says whether
all is well; where it is not, the checks in Python run and name what is wrong.

Imported when a proposer first checks a step of many rows, so ``import specplug`` stays free
of numba.
"""

from __future__ import annotations

from numba import njit

__all__ = ["step_arrays_ok"]


@njit(cache=True)
def step_arrays_ok(offsets, limits, tokens, max_token, max_limit):
    """Whether ``offsets`` rise from 0 to ``len(tokens)``, every limit is in ``0 .. max_limit`` and
    every token is in ``0 .. max_token`` (the checks ``_check_step`` makes in Python, in one pass)."""
    if offsets[0] != 0 or offsets[offsets.shape[0] - 1] != tokens.shape[0]:
        return False
    for row in range(offsets.shape[0] - 1):
        if offsets[row + 1] < offsets[row]:
            return False
    for row in range(limits.shape[0]):
        if limits[row] < 0 or limits[row] > max_limit:
            return False
    for at in range(tokens.shape[0]):
        if tokens[at] < 0 or tokens[at] > max_token:
            return False
    return True
