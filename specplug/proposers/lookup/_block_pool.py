"""One int32 buffer holding a block per live request: what the lookups' batch kernels read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

import numpy as np

__all__ = ["BlockPool"]

Owner = TypeVar("Owner")


class BlockPool(Generic[Owner]):
    """Every live request's block of one proposer in one int32 buffer, each at an aligned offset.

    Why: a batch kernel reaches a row's arrays from the buffer and the row's offset (no list of
    per-request arrays to unbox: about 38 ns each, several a row), and one large buffer sits on
    huge pages, so the random reads of 128 rows miss the TLB far less than hundreds of small
    arrays do. A request that outgrows its block moves to a bigger one (its owner copies itself
    over); a freed block is reused by the next of its size. When the buffer grows it moves, and
    ``repoint(owner, memory)`` makes every live owner's arrays views into the new one.
    """

    GROWTH = 1.5
    MIN_WORDS = 1 << 16  # the smallest buffer (a test lowers it, to move the buffer often)

    def __init__(self, align: int, repoint: Callable[[Owner, np.ndarray], None]) -> None:
        self.memory = np.empty(0, dtype=np.int32)
        self.used = 0
        self._align = align
        self._repoint = repoint
        self._free: dict[int, list[int]] = {}  # block words -> offsets of free blocks
        self._owners: dict[int, Owner] = {}  # offset -> the owner there (re-pointed when the buffer moves)

    def take(self, owner: Owner, words: int) -> int:
        """The offset of a block of ``words`` for ``owner`` (a freed one of that size first)."""
        free = self._free.get(words)
        if free:
            offset = free.pop()
        else:
            offset = -(-self.used // self._align) * self._align
            if offset + words > len(self.memory):
                self._grow(offset + words)
            self.used = offset + words
        self._owners[offset] = owner
        return offset

    def give(self, offset: int, words: int) -> None:
        del self._owners[offset]
        self._free.setdefault(words, []).append(offset)

    def nbytes(self) -> int:
        """Bytes reserved (live and free blocks; the buffer's untouched tail is not counted)."""
        return self.used * self.memory.itemsize

    def _grow(self, needed: int) -> None:
        # np.empty: the tail past what is copied stays untouched, so it takes no memory until used
        memory = np.empty(max(needed, int(len(self.memory) * self.GROWTH), self.MIN_WORDS), dtype=np.int32)
        memory[: self.used] = self.memory[: self.used]
        self.memory = memory
        for owner in self._owners.values():
            self._repoint(owner, memory)
