"""The hash both kernel files key their tables with: FNV-1a over a window of tokens, then an avalanche."""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["NO_RING", "window_hash"]

#: ``mask`` for arrays that are not rings: ``i & NO_RING == i``
NO_RING = -1


@njit(cache=True, inline="always")
def window_hash(tokens, last, n, mask):
    """Hash of the ``n`` tokens ending at index ``last``, read as ``tokens[i & mask]`` (``NO_RING``
    for a plain array). FNV-1a, then a final avalanche so that the low bits that pick a table
    slot depend on every token; int64 wraps."""
    h = np.int64(-3750763034362895579)
    for i in range(last - n + 1, last + 1):
        h = (h ^ np.int64(tokens[i & mask])) * np.int64(1099511628211)
    h ^= h >> 29
    h *= np.int64(-4658895280553007687)
    h ^= h >> 32
    return h
