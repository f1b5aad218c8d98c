"""The hash both kernel files key their tables with: FNV-1a over a window of tokens, then an
avalanche, keyed by :data:`HASH_KEY`.

Why keyed: the tables are open-addressed, so windows that share a slot are probed one after the
other. With a fixed hash, a prompt made of windows that collide (found offline, once) would make
every insert and look-up walk all of them: a 50k-token prompt of such windows costs quadratic
time. The key is drawn per process and passed to every kernel as an argument (a numba global
would be frozen into the on-disk cache of compiled kernels, the same in every process), so the
colliding windows of one process are not those of another, and cannot be found without it.
"""

from __future__ import annotations

import secrets

import numpy as np
from numba import njit

__all__ = ["HASH_KEY", "NO_RING", "window_hash"]

#: this process's hash key: a random int below 2**31 (it fits the int32 words of a ring's state)
HASH_KEY = secrets.randbits(31)

#: ``mask`` for arrays that are not rings: ``i & NO_RING == i``
NO_RING = -1


@njit(cache=True, inline="always")
def window_hash(tokens, last, n, mask, key):
    """Hash of the ``n`` tokens ending at index ``last``, read as ``tokens[i & mask]`` (``NO_RING``
    for a plain array), under ``key`` (:data:`HASH_KEY`). FNV-1a from a basis the key spreads over
    all 64 bits, then a final avalanche so that the low bits that pick a table slot depend on
    every token and on the key; int64 wraps."""
    h = np.int64(-3750763034362895579) ^ (np.int64(key) * np.int64(-7046029254386353131))
    for i in range(last - n + 1, last + 1):
        h = (h ^ np.int64(tokens[i & mask])) * np.int64(1099511628211)
    h ^= h >> 29
    h *= np.int64(-4658895280553007687)
    h ^= h >> 32
    return h
