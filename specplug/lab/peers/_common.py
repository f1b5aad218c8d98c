"""What every peer wrapper shares: the not-installed error, option models, a token tail."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from specplug._errors import SpecplugError

__all__ = [
    "PeerNotInstalledError",
    "PeerOptions",
    "TokenTail",
    "leaf_paths",
]

#: the script that installs the peers, named in every not-installed error
SETUP_HINT = "scripts/setup_peers.sh"


class PeerNotInstalledError(SpecplugError, ImportError):
    """A peer's engine code is not importable here; the message names the setup script."""

    def __init__(self, peer: str, what: str, error: BaseException | str, setup: str = SETUP_HINT) -> None:
        reason = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
        super().__init__(
            f"peer {peer!r} needs {what}, which is not usable here ({reason}); "
            f"install it with `bash {setup}` from the repository root (Python: {sys.executable})"
        )


class PeerOptions(BaseModel):
    """Options of one peer: unknown keys and loose types are errors, as for methods."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)



class TokenTail:
    """The last ``depth`` tokens of a request and its total length: all a lookup peer is given.

    >>> tail = TokenTail([1, 2, 3], depth=4)
    >>> tail.append([4, 5]); tail.tokens.tolist(), tail.total
    ([2, 3, 4, 5], 5)
    """

    __slots__ = ("depth", "tokens", "total")

    def __init__(self, tokens: Sequence[int] | np.ndarray, depth: int) -> None:
        array = np.asarray(tokens, dtype=np.int32)
        self.depth = depth
        self.tokens = np.ascontiguousarray(array[-depth:]) if depth else array[:0]
        self.total = len(array)

    def append(self, tokens: Sequence[int] | np.ndarray) -> None:
        array = np.asarray(tokens, dtype=np.int32)
        self.total += len(array)
        self.tokens = np.ascontiguousarray(np.concatenate((self.tokens, array))[-self.depth :])


def leaf_paths(tokens: Sequence[int], mask: Sequence[Sequence[int]]) -> list[list[int]]:
    """Root-to-leaf token paths of a draft tree given as BFS tokens and an ancestor mask.

    ``tokens[0]`` is the root (the last verified token, not drafted); row ``i`` of ``mask``
    marks node ``i`` and its ancestors, so a node's parent is its deepest earlier ancestor.
    Single-token paths of token 0 are padding (SGLang pads a small tree that way) and dropped.

    >>> leaf_paths([7, 1, 2, 3], [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]])
    [[2], [1, 3]]
    """
    size = len(tokens)
    parent = [-1] * size
    has_child = [False] * size
    for node in range(1, size):
        for above in range(node - 1, -1, -1):
            if mask[node][above]:
                parent[node] = above
                has_child[above] = True
                break
    paths = []
    for leaf in range(1, size):
        if has_child[leaf]:
            continue
        path = []
        node = leaf
        while node > 0:
            path.append(int(tokens[node]))
            node = parent[node]
        path.reverse()
        if path != [0]:
            paths.append(path)
    return paths
