"""A composite's batch step from the lookups' drafts to every row's choice, in one numba call.

Why: at batch 128 the composites' own work between the parts' kernels was three numba calls
(score bands, step times, choice) and a dozen numpy arrays made for them at each step. Here one
call computes the bands, every row's step times (the linear cost model's) and which rows gained
tokens, then runs ``_choice.choose_rows`` on them, into arrays the composite keeps between steps
(zeroed here, as the old call's fresh ones were). Each piece is the old function's arithmetic in
the same order (``_parts._bands_of_logs``, ``_step_times.row_step_times``), so choices, scores and
statistics are equal to the last bit; ``tests/test_composite_batch.py`` checks it element by element.
(The choice's row body stays in ``choose_rows``, called once: as a function called per row, its
~40 array arguments made the kernel twice as slow.)
"""

from __future__ import annotations

from numba import njit

from specplug.proposers._choice import choose_rows
from specplug.proposers._parts import _bands_of_logs
from specplug.proposers._step_times import row_step_times

__all__ = ["choose_batch"]


@njit(cache=True)
def choose_batch(
    slots, new_tokens, offsets, limits, lookup_tokens, lookup_lengths, lookup_scores, lookup_logs, lookup_tracks,
    neural_tracks, neural_longest, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, params, flags,
    lengths, steps, own_drafted, own_accepted, pooled_drafted, pooled_accepted, meta, waiting, count,
    bands, extended, times, choice, cut, asked, expected, other_expected, confirmed_cut, confirmed_expected, fallback,
    hopeful,
) -> None:  # pragma: no cover - compiled
    """``score_bands_of_rows`` into ``bands`` (from ``lookup_logs`` = log2(1 + max(score, 0)), taken
    by numpy), ``extended`` rows, ``times[row]`` by the linear cost model at the row's context (its
    length plus this step's tokens; only with a cost model and a row that drafts), the outputs
    zeroed, then ``choose_rows``."""
    _bands_of_logs(lookup_logs, lookup_scores, lookup_lengths, limits, bands)
    by_cost = flags[0] == 1
    for row in range(len(slots)):
        begin, end = offsets[row], offsets[row + 1]
        extended[row] = end > begin
        if by_cost and limits[row] > 0:
            context = lengths[slots[row]] + (end - begin if end > begin else 0)
            row_step_times(context, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, times[row])
        cut[row] = asked[row] = 0
        expected[row] = other_expected[row] = 0.0
        for li in range(confirmed_cut.shape[1]):
            confirmed_cut[row, li] = 0
            confirmed_expected[row, li] = 0.0
        fallback[row, 0] = fallback[row, 1] = fallback[row, 2] = 0.0
        hopeful[row, 0] = hopeful[row, 1] = 0.0
    choose_rows(
        slots, new_tokens, offsets, extended, limits, lookup_tokens, lookup_lengths, bands, lookup_tracks, neural_tracks,
        neural_longest, times, params, flags, lengths, steps, own_drafted, own_accepted, pooled_drafted, pooled_accepted,
        meta, waiting, count, choice, cut, asked, expected, other_expected, confirmed_cut, confirmed_expected, fallback,
        hopeful,
    )  # fmt: skip
