"""A composite's batch step from the lookups' drafts to every row's choice, in one numba call.

Why: at batch 128 the composites' own work between the parts' kernels was three numba calls
(score bands, step times, choice) and a dozen numpy arrays made for them at each step. Here one
call computes the bands and which rows gained tokens, then runs ``_choice.choose_rows`` on them,
which prices each row's step (the linear cost model's, ``_step_times.kind_step_times_to``, for
the drafter kinds it reads) where it chooses, into arrays the composite keeps between steps
(zeroed here, as the old call's fresh ones were). Each piece is the old function's arithmetic in the same order
(``_parts._bands_of_logs``, ``_step_times.row_step_times``), so choices, scores and statistics
are equal to the last bit; ``tests/test_composite_batch.py`` checks it element by element.
(The choice's row body stays in ``choose_rows``, called once: as a function called per row, its
~40 array arguments made the kernel twice as slow.)

:func:`choose_and_finish` is the whole step after the lookups for a composite with no neural
part (adaptive's default): the choice, then each row's draft (``_choice.finish_rows`` with
lookups only: the chosen lookup's cut), so no neural call sits between the two and Python makes
one call, not two.

Both kernels first check that the waiting-draft table has room for what the step may add (as
``PendingTable.make_room`` wants it) and, if not, change nothing and return the room wanted:
the caller grows the table and calls again.
"""

from __future__ import annotations

from numba import njit

from specplug.proposers.composite._choice import EMPTY, NOT_DRAFTED, choose_rows, copy_draft
from specplug.proposers.composite._parts import _bands_of_logs
from specplug.proposers.composite._pending import room_wanted

__all__ = ["choose_and_finish", "choose_batch"]


@njit(cache=True)
def choose_batch(
    slots, new_tokens, offsets, limits, lookup_tokens, lookup_lengths, lookup_scores, lookup_matches, lookup_logs,
    lookup_tracks, neural_tracks, neural_longest, pricing, params, flags, lengths, steps, widest, own_drafted,
    own_accepted, pooled_drafted, pooled_accepted, meta, waiting, count, bands, extended, times, choice, cut, asked,
    expected, other_expected, confirmed_cut, confirmed_expected, fallback, hopeful, allowed,
):  # pragma: no cover - compiled
    """0 once done, else the room the waiting-draft table wants first (nothing changed). Done:
    ``score_bands_of_rows`` into ``bands`` (from ``lookup_logs`` = log2(1 + max(score, 0)), taken
    by numpy), ``extended`` rows, the outputs zeroed, then ``choose_rows``, pricing each drafting
    row by the linear cost model (``pricing``: batch size and coefficients) at its context when
    there is a cost model. ``times`` is not read (its shape only). ``allowed``: the parts each row
    may be drafted by (``choose_rows``; empty: every part)."""
    # each lookup's draft, a neural one, a confirmed one and a calibrated one (_choice)
    wanted = room_wanted(slots, count, meta.shape[1], len(lookup_tracks) + 3)
    if wanted:
        return wanted
    _bands_of_logs(lookup_logs, lookup_scores, lookup_lengths, lookup_matches, limits, bands)
    for row in range(len(slots)):
        extended[row] = offsets[row + 1] > offsets[row]
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
        hopeful, widest, True, pricing, allowed,
    )  # fmt: skip
    return 0


@njit(cache=True)
def choose_and_finish(
    slots, new_tokens, offsets, limits, lookup_tokens, lookup_lengths, lookup_scores, lookup_matches, lookup_logs,
    lookup_tracks, neural_tracks, neural_longest, pricing, params, flags, lengths, steps, widest, own_drafted,
    own_accepted, pooled_drafted, pooled_accepted, meta, waiting, count, bands, extended, times, choice, cut, asked,
    expected, other_expected, confirmed_cut, confirmed_expected, fallback, hopeful, allowed, out, out_lengths, out_scores,
    out_neural, continued_by,
):  # pragma: no cover - compiled
    """:func:`choose_batch`, then every row's draft as ``_choice.finish_rows`` makes it when there
    is no neural part: ``out`` (zeroed by the caller) and ``out_lengths`` hold the chosen lookup's
    cut, ``out_scores`` its expectation (0 where no draft was asked for), ``out_neural`` is set
    where no draft was asked for (as ``empty_draft()``), ``continued_by`` is -1."""
    wanted = choose_batch(
        slots, new_tokens, offsets, limits, lookup_tokens, lookup_lengths, lookup_scores, lookup_matches, lookup_logs,
        lookup_tracks, neural_tracks, neural_longest, pricing, params, flags, lengths, steps, widest, own_drafted,
        own_accepted, pooled_drafted, pooled_accepted, meta, waiting, count, bands, extended, times, choice, cut, asked,
        expected, other_expected, confirmed_cut, confirmed_expected, fallback, hopeful, allowed,
    )  # fmt: skip
    if wanted:
        return wanted
    for row in range(len(slots)):
        chosen = choice[row]
        continued_by[row] = -1
        out_neural[row] = chosen == NOT_DRAFTED
        out_scores[row] = expected[row] if chosen >= EMPTY else 0.0
        out_lengths[row] = 0
        if chosen >= 0:  # a lookup's cut (there is no neural part)
            k = cut[row]
            copy_draft(out, row, lookup_tokens, chosen, k)
            out_lengths[row] = k
    return 0
