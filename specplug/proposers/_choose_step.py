"""A composite's batch step from the lookups' drafts to every row's choice, in one numba call.

Why: at batch 128 the composites' own work between the parts' kernels was three numba calls
(score bands, step times, choice) with a dozen numpy arrays made for them each step. Here the
bands, each row's step times (the linear cost model's, computed for the row just before its
choice) and the choice run in one pass, into output arrays the composite keeps between steps.
Each piece is the old function's arithmetic, in the same order (``_parts._bands_of_logs``,
``_step_times.row_step_times``, ``_choice._choose_row``), so choices, scores and statistics are
equal to the last bit; ``tests/test_composite_batch.py`` checks it element by element.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from specplug.proposers._choice import _choose_row, _prefetch_row
from specplug.proposers._parts import _bands_of_logs
from specplug.proposers._step_times import row_step_times

__all__ = ["choose_batch"]


@njit(cache=True)
def choose_batch(
    slots, new_tokens, offsets, limits, lookup_tokens, lookup_lengths, lookup_scores, lookup_logs, lookup_tracks,
    neural_tracks, neural_longest, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, params, flags,
    lengths, steps, own_drafted, own_accepted, pooled_drafted, pooled_accepted, meta, waiting, count,
    bands, times, choice, cut, asked, expected, other_expected, confirmed_cut, confirmed_expected, fallback, hopeful,
) -> None:  # pragma: no cover - compiled
    """``score_bands_of_rows`` (from ``lookup_logs`` = log2(1 + max(score, 0)), taken by numpy),
    then per row: its step times by the linear cost model at its context (its length before this
    step's tokens, plus them), into ``times[0]``, and ``choose_rows``'s work for the row, its
    outputs zeroed first (the old call's fresh arrays). ``bands`` and ``times`` are scratch."""
    _bands_of_logs(lookup_logs, lookup_scores, lookup_lengths, limits, bands)
    by_cost, confirmed, positions = flags[0] == 1, flags[1], own_drafted.shape[3]
    p_lookup = np.empty(positions)
    p_neural = np.empty(positions)
    p_confirmed = np.empty(positions)
    towards = np.empty(positions)
    lookup_bands, rows = bands, len(slots)
    for row in range(min(rows, 2)):
        _prefetch_row(slots[row], row, False, lookup_tracks, bands, neural_tracks, confirmed,
                      own_drafted, own_accepted, meta, waiting, count)
    for row in range(rows):
        if row + 2 < rows:
            _prefetch_row(slots[row + 2], row + 2, False, lookup_tracks, lookup_bands, neural_tracks, confirmed,
                          own_drafted, own_accepted, meta, waiting, count)
        if row + 1 < rows:
            _prefetch_row(slots[row + 1], row + 1, True, lookup_tracks, lookup_bands, neural_tracks, confirmed,
                          own_drafted, own_accepted, meta, waiting, count)
        cut[row] = asked[row] = 0
        expected[row] = other_expected[row] = 0.0
        confirmed_cut[row] = 0
        confirmed_expected[row] = 0.0
        fallback[row] = 0.0
        hopeful[row] = 0.0
        begin, end = offsets[row], offsets[row + 1]
        extended = end > begin
        if by_cost and limits[row] > 0:
            context = lengths[slots[row]] + (end - begin if extended else 0)
            row_step_times(context, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, times[0])
        _choose_row(
            row, extended, times, 0, slots, new_tokens, offsets, limits, lookup_tokens, lookup_lengths, lookup_bands,
            lookup_tracks, neural_tracks, neural_longest, params, flags, lengths, steps, own_drafted, own_accepted,
            pooled_drafted, pooled_accepted, meta, waiting, count, choice, cut, asked, expected, other_expected,
            confirmed_cut, confirmed_expected, fallback, hopeful, p_lookup, p_neural, p_confirmed, towards,
        )  # fmt: skip
