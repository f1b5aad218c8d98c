"""A :class:`specplug.BatchStep` from each row's new tokens, built in as few numpy calls as can be.

Every engine step builds one, on the critical path between two GPU steps: at batch 1 the
general build (``np.zeros`` + ``np.cumsum`` over a list) cost about as much as the lookup
itself, so a single row takes its array as it is and the offsets are summed by
``itertools.accumulate`` (in C) straight into one ``np.fromiter``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate, chain

import numpy as np

from specplug import BatchStep, RequestId

__all__ = ["step_of_pieces"]

_NO_TOKENS = np.empty(0, dtype=np.int64)
_NO_OFFSETS = np.zeros(1, dtype=np.int64)
_NO_TOKENS.setflags(write=False)  # shared by every empty step
_NO_OFFSETS.setflags(write=False)


def step_of_pieces(
    request_ids: Sequence[RequestId],
    pieces: Sequence[np.ndarray],
    limits: np.ndarray,
    started: Sequence[tuple[RequestId, np.ndarray]] = (),
    stopped: Sequence[RequestId] = (),
) -> BatchStep:
    """The step of rows ``request_ids`` whose new tokens are ``pieces`` (int arrays or lists of ints, one per row).

    >>> step = step_of_pieces(["a", "b"], [np.array([5, 6]), np.array([7])], np.array([4, 4]))
    >>> step.new_tokens.tolist(), step.offsets.tolist()
    ([5, 6, 7], [0, 2, 3])
    >>> step_of_pieces(["a", "b", "c"], [[5], [], [6, 7]], np.array([1, 1, 1])).offsets.tolist()
    [0, 1, 1, 3]
    """
    rows = len(pieces)
    if rows == 1:
        tokens = np.asarray(pieces[0], dtype=np.int64)
        offsets = np.array((0, len(tokens)), dtype=np.int64)
    elif rows:
        offsets = np.fromiter(accumulate(map(len, pieces), initial=0), dtype=np.int64, count=rows + 1)
        if pieces[0].__class__ is np.ndarray:
            tokens = np.concatenate(pieces)
        else:  # lists of ints (vLLM's sampled tokens): one pass in C, no array per row
            tokens = np.fromiter(chain.from_iterable(pieces), dtype=np.int64, count=int(offsets[-1]))
        if tokens.dtype != np.int64:
            tokens = tokens.astype(np.int64)
    else:
        tokens, offsets = _NO_TOKENS, _NO_OFFSETS
    return BatchStep(request_ids, tokens, offsets, limits, started, stopped)
