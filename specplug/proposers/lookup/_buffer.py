"""A growable int32 token array: the per-request history that the fast paths index."""

from __future__ import annotations

import numpy as np

__all__ = ["TokenBuffer"]


class TokenBuffer:
    """Tokens of one request in an int32 array that doubles when full (amortised O(1) append)."""

    __slots__ = ("array", "length")

    def __init__(self, tokens: np.ndarray, spare: int = 64) -> None:
        capacity = max(16, 1 << int(len(tokens) + spare - 1).bit_length())
        self.array = np.empty(capacity, dtype=np.int32)
        self.array[: len(tokens)] = tokens
        self.length = len(tokens)

    def reserve(self, extra: int) -> bool:
        """Make room for ``extra`` more tokens; True when the array was reallocated."""
        needed = self.length + extra
        if needed <= len(self.array):
            return False
        grown = np.empty(1 << (needed - 1).bit_length(), dtype=np.int32)
        grown[: self.length] = self.array[: self.length]
        self.array = grown
        return True

    def view(self) -> np.ndarray:
        return self.array[: self.length]
