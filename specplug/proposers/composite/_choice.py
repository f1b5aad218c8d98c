"""The composites' per-step work for every row of a batch in two numba calls.

:func:`choose_rows` runs, row after row (in row order, so that each row sees the pooled
statistics the rows before it updated, as calls request by request would): the scoring of the
row's waiting drafts on its new tokens, then its choice -- estimates per track, band and
position, exploration bonuses, best cuts and cost comparisons -- and what a neural part is to be
asked for. The neural parts then draft for the rows that chose them (one batch call per part),
and :func:`finish_rows` turns every row's choice into its draft: the neural draft, continued by
an agreeing lookup's, or the lookup's cut. The per-request path runs the same two kernels with
one row: the batch and per-request paths share one implementation.

Both paths run the same arithmetic in the same order (sums in position order), so drafts do not
depend on the path.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from specplug.proposers.composite._pending import add_pending_of, score_pending_of
from specplug.proposers._prefetch import prefetch
from specplug.proposers.composite._step_times import kind_step_times_to

__all__ = [
    "EMPTY", "chained_estimate", "KIND_LOOKUP", "KIND_LOOKUP_NEURAL", "KIND_NEURAL", "KIND_PLAIN", "NOT_DRAFTED", "choose_rows",
    "copy_draft", "finish_rows", "score_row",
]  # fmt: skip

#: rows of a step-time table [row, kinds, draft length]: the drafters a step ran
KIND_PLAIN, KIND_LOOKUP, KIND_NEURAL, KIND_LOOKUP_NEURAL = range(4)
#: ``choice`` of a row: no draft asked for, or plain decoding; else a lookup's index, or
#: ``lookups + index`` of a neural part
NOT_DRAFTED, EMPTY = -2, -1

# params (float64): prior, prior_weight, explore, decay, min_gain, margin, lookup_prior_weight, call_bound,
#   calibration_weight, neural_weight (a neural part's pooled estimate against a request's counts)
# flags (int64): by_cost, confirmed track (-1: none), probe, continue_with_lookup, weigh_by_pass (costs learnt online),
#   then per lookup its calibration track (-1 or absent: none; see _calibration_ratio)


@njit(cache=True, inline="always")
def _expected(accepted: np.ndarray, count: int) -> float:  # pragma: no cover - compiled
    # expected accepted tokens of a draft of ``count`` tokens, sum_{j<count} prod_{i<=j} p_i,
    # summed in order as _best_cut sums it (the batch and per-request paths share this arithmetic)
    product = total = 0.0
    for j in range(count):
        product = accepted[j] if j == 0 else product * accepted[j]
        total = product if j == 0 else total + product
    return total


@njit(cache=True, inline="always")
def _best_cut(accepted: np.ndarray, count: int, times: np.ndarray, kind: int) -> tuple[float, int, float]:  # pragma: no cover
    # (rate, k, expected) of the cut with the most expected tokens per second, a draft of k tokens
    # taking times[kind, k] (times[kind, 0]: no draft): positions accepted with probabilities ``accepted``
    # (each given the ones before) give E(k) = sum_{j<=k} prod_{i<=j} p_i, the rate (1 + E(k)) / times[kind, k]
    if count == 0:
        return 0.0, 0, 0.0
    product = total = 0.0
    best_rate, best_k, best_expected = 0.0, 0, 0.0
    for j in range(count):
        product = accepted[j] if j == 0 else product * accepted[j]
        total = product if j == 0 else total + product
        rate = (1.0 + total) / times[kind, j + 1]
        if j == 0 or rate > best_rate:
            best_rate, best_k, best_expected = rate, j + 1, total
    return best_rate, best_k, best_expected


@njit(cache=True, inline="always")
def chained_estimate(
    own_drafted: np.ndarray, own_accepted: np.ndarray, drafted: np.ndarray, accepted: np.ndarray,
    prior: float, weight: float, out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Acceptance per position (into ``out``): pooled, each position shrunk towards the estimate of
    the one before it (the first towards ``prior``), the request's counts shrunk towards those.
    (The kernels' form, its arrays given as one request's track and band of the statistics tables.)"""
    n = len(drafted)
    _chained_estimate_weighted(own_drafted.reshape(1, 1, 1, n), own_accepted.reshape(1, 1, 1, n), drafted.reshape(1, 1, n),
                               accepted.reshape(1, 1, n), 0, 0, 0, prior, weight, weight, out, n)


@njit(cache=True, inline="always")
def _chained_estimate_weighted(
    own_drafted: np.ndarray, own_accepted: np.ndarray, drafted: np.ndarray, accepted: np.ndarray, slot: int,
    track: int, band: int, prior: float, weight: float, own_weight: float, out: np.ndarray, count: int,
) -> None:  # pragma: no cover - compiled
    # chained_estimate of request ``slot``'s ``track`` and ``band`` (own: [slot, track, band, position],
    # pooled: [track, band, position]; indexed, not sliced: a view per call costs a reference count
    # update each way, per row), its first ``count`` positions (each depends only on those before it,
    # so they are a longer scan's), with the pooled estimate worth ``own_weight`` observations against
    # the request's counts. A lookup is scored at every step, chosen or not, so a request's counts
    # grow fast and tell how much of this request's text repeats, which differs more between
    # requests than any pool shows
    previous = prior
    for j in range(count):
        previous = (accepted[track, band, j] + weight * previous) / (drafted[track, band, j] + weight)
        out[j] = (own_accepted[slot, track, band, j] + own_weight * previous) / (own_drafted[slot, track, band, j] + own_weight)


@njit(cache=True, inline="always")
def _estimate_towards(
    own_drafted: np.ndarray, own_accepted: np.ndarray, drafted: np.ndarray, accepted: np.ndarray, slot: int,
    track: int, prior: np.ndarray, weight: float, out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    # _parts.estimate with a prior per position, of request ``slot``'s ``track`` in band 0
    for j in range(drafted.shape[2]):
        pooled = (accepted[track, 0, j] + weight * prior[j]) / (drafted[track, 0, j] + weight)
        out[j] = (own_accepted[slot, track, 0, j] + weight * pooled) / (own_drafted[slot, track, 0, j] + weight)


@njit(cache=True, inline="always")
def _calibration_ratio(
    drafted: np.ndarray, accepted: np.ndarray, track: int, band: int, weight: float,
) -> float:  # pragma: no cover - compiled
    # What the lookup drafts the choice would take alone realised over what their estimates
    # expected (calibration ``track`` and ``band``: its accepted counts; ``track + 1``: the
    # expected ones, the sum of each draft's survival probabilities), each side with ``weight``
    # tokens more. A lookup's estimate is an average over all
    # of its drafts; the ones a choice takes alone are those it rates above the neural part's,
    # and they realise less where the rating was luck (a request's few lucky matches, a neural
    # estimate that happens to be low). Counted on exactly those drafts, taken or not, the ratio
    # says what taking one brings; it scales the request's own estimate, so that what tells one
    # request's text from another's is kept.
    # The band's ratio is shrunk towards the ratio over all bands (a band sees few such drafts
    # where the lookup seldom wins), that one towards 1.
    realised = expected = all_realised = all_expected = 0.0
    for b in range(drafted.shape[1]):
        for j in range(drafted.shape[2]):
            all_realised += accepted[track, b, j]
            all_expected += drafted[track + 1, b, j]
            if b == band:
                realised += accepted[track, b, j]
                expected += drafted[track + 1, b, j]
    overall = (all_realised + weight) / (all_expected + weight)
    return (realised + weight * overall) / (expected + weight)


@njit(cache=True, inline="always")
def _bonus(scale: float, grown: float, observed: float, weight: float) -> float:  # pragma: no cover - compiled
    # the UCB term: ``scale`` * sqrt(log(1 + steps) / (observations + weight)), ``grown`` the log
    return scale * math.sqrt(grown / (observed + weight))


@njit(cache=True, inline="always")
def _hopeful(
    own_drafted: np.ndarray, own_accepted: np.ndarray, drafted: np.ndarray, accepted: np.ndarray, slot: int,
    track: int, prior: float, weight: float, own_weight: float, explore: float, steps: int, out: np.ndarray,
) -> None:  # pragma: no cover - compiled
    # without a cost model: a neural part's estimate (request ``slot``'s ``track``, band 0; the pooled
    # estimate worth ``own_weight`` observations against the request's) plus its exploration bonus,
    # at most 1 (it is observed only when called); by cost, _hopeful_cut weighs the bonus by reach
    positions = drafted.shape[2]
    _chained_estimate_weighted(own_drafted, own_accepted, drafted, accepted, slot, track, 0, prior, weight, own_weight,
                               out, positions)
    grown = math.log1p(float(steps))
    for j in range(positions):
        out[j] = min(out[j] + _bonus(explore, grown, drafted[track, 0, j], weight), 1.0)


@njit(cache=True, inline="always")
def _call_bound(
    own_drafted: np.ndarray, own_accepted: np.ndarray, drafted: np.ndarray, accepted: np.ndarray, slot: int,
    track: int, prior: float, weight: float, scale: float, longest: int, steps: int,
) -> float:  # pragma: no cover - compiled
    # An upper confidence bound on the tokens a call of a neural part brings: its accepted tokens per
    # scored draft, the request's shrunk towards all requests' (those towards a draft of ``longest``
    # tokens accepted at ``prior`` each, untried), plus a UCB term on the count of calls. The
    # per-position bonus (_hopeful) stays large at positions a weak drafter seldom reaches; a call's
    # total has no such tail. The term grows with the steps taken without a call, so a part declined
    # is tried again now and then.
    # (request ``slot``'s ``track``, band 0)
    own = pooled = 0.0
    for j in range(drafted.shape[2]):
        own += own_accepted[slot, track, 0, j]
        pooled += accepted[track, 0, j]
    untried = product = 0.0
    for j in range(longest):
        product = prior if j == 0 else product * prior
        untried += product
    pooled_mean = (pooled + weight * untried) / (drafted[track, 0, 0] + weight)
    mean = (own + weight * pooled_mean) / (own_drafted[slot, track, 0, 0] + weight)
    return mean + _bonus(scale * longest, math.log1p(float(steps)), drafted[track, 0, 0], weight)


@njit(cache=True, inline="always")
def _kept_share(step_times: np.ndarray, ran: int, with_neural: int, longest: int) -> float:  # pragma: no cover
    # By cost, a neural part's exploration bonus is weighed by the share of a step that a draft of
    # it that fails keeps: the step without its pass over the step with it, at the same draft
    # length (so only the pass differs). Trying the part once more costs that pass: where it is a
    # few percent of a step (an EAGLE head on a GPU) the bonus stays almost whole; where it costs
    # about a step (the same head on a CPU) the bonus halves, and a part whose estimate is below
    # break-even stops being tried on optimism alone. Only where the costs are learnt on the engine's
    # own hardware (flags[4]): under a preset (the replay bench's H100 model) it lost on both halves.
    with_pass = step_times[with_neural, longest]
    if not with_pass > 0.0:
        return 1.0
    return min(max(step_times[ran, longest] / with_pass, 0.0), 1.0)


@njit(cache=True, inline="always")
def _hopeful_cut(
    plain: np.ndarray, drafted: np.ndarray, track: int, weight: float, explore: float, steps: int, count: int,
    times: np.ndarray, kind: int,
) -> tuple[float, int, float]:  # pragma: no cover - compiled
    # By cost: _best_cut of a neural part's draft with its exploration bonus (``plain``: its
    # estimate without one; ``drafted``: pooled counts, ``track``, band 0). Each position's bonus
    # (the UCB term of _hopeful) is added where the position is reached as the plain estimates
    # say, E(k) = sum_{j<k} reach_j * min(p_j + bonus_j, 1) with reach_j = prod_{i<j} p_i. Added
    # to each p_j instead, the bonuses compound: a weak drafter, whose later positions are seldom
    # reached and so stay unobserved, looks like a fair one long after its first positions are
    # known to fail. Weighed by reach, what is uncertain is priced by how much it could matter.
    grown = math.log1p(float(steps))
    total, reach = 0.0, 1.0
    best_rate, best_k, best_expected = 0.0, 0, 0.0
    for j in range(count):
        total += reach * min(plain[j] + _bonus(explore, grown, drafted[track, 0, j], weight), 1.0)
        reach *= plain[j]
        rate = (1.0 + total) / times[kind, j + 1]
        if j == 0 or rate > best_rate:
            best_rate, best_k, best_expected = rate, j + 1, total
    return best_rate, best_k, best_expected


@njit(cache=True)
def score_row(
    slot: int, new_tokens: np.ndarray, lengths: np.ndarray, own_drafted: np.ndarray, own_accepted: np.ndarray,
    pooled_drafted: np.ndarray, pooled_accepted: np.ndarray, meta: np.ndarray, waiting: np.ndarray, count: np.ndarray,
    decay: float, widest: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """What :func:`choose_rows` does for a row that gains tokens and drafts nothing (``extend``)."""
    score_pending_of(
        slot, new_tokens, 0, len(new_tokens), lengths[slot], meta, waiting, count,
        own_drafted, own_accepted, slot, pooled_drafted, pooled_accepted, decay, widest[0],
    )
    lengths[slot] += len(new_tokens)


@njit(cache=True, inline="always")
def _prefetch_row(slot, row, stored, lookup_tracks, lookup_bands, neural_tracks, confirmed, own_drafted, own_accepted,
                  meta, waiting, count):  # pragma: no cover - compiled
    # A later row's state, read before its turn so that its misses overlap this row's work (see
    # _prefetch.py; at batch 128 the lookups' batch steps have just evicted it): two rows ahead,
    # its waiting drafts; one row ahead (those now cached), the statistics rows they and its
    # drafts will score and be priced with. A hint only: it never changes a result. (Indexed by
    # tuples: a view of a row would cost a reference count update each way.)
    waiting_count = min(count[slot], meta.shape[1])
    if not stored:
        for w in range(waiting_count):
            prefetch(meta, (slot, w, 0))
            prefetch(waiting, (slot, w, 0))
        return
    for w in range(waiting_count):
        track, band = meta[slot, w, 0], meta[slot, w, 1]
        if 0 <= track < own_drafted.shape[1] and 0 <= band < own_drafted.shape[2]:
            _prefetch_stats(own_drafted, own_accepted, slot, track, band)
    for li in range(len(lookup_tracks)):
        band = lookup_bands[li, row]
        if 0 <= band < own_drafted.shape[2]:
            _prefetch_stats(own_drafted, own_accepted, slot, lookup_tracks[li], band)
    for ni in range(len(neural_tracks)):
        _prefetch_stats(own_drafted, own_accepted, slot, neural_tracks[ni], 0)
    if confirmed >= 0:
        _prefetch_stats(own_drafted, own_accepted, slot, confirmed, 0)


@njit(cache=True, inline="always")
def _prefetch_stats(own_drafted, own_accepted, slot, track, band):  # pragma: no cover - compiled
    for j in range(0, own_drafted.shape[3], 8):  # a cache line holds 8 float64
        prefetch(own_drafted, (slot, track, band, j))
        prefetch(own_accepted, (slot, track, band, j))


@njit(cache=True)
def choose_rows(
    slots: np.ndarray, new_tokens: np.ndarray, offsets: np.ndarray, extended: np.ndarray, limits: np.ndarray,
    lookup_tokens: np.ndarray, lookup_lengths: np.ndarray, lookup_bands: np.ndarray, lookup_tracks: np.ndarray,
    neural_tracks: np.ndarray, neural_longest: np.ndarray, times: np.ndarray, params: np.ndarray, flags: np.ndarray,
    lengths: np.ndarray, steps: np.ndarray, own_drafted: np.ndarray, own_accepted: np.ndarray,
    pooled_drafted: np.ndarray, pooled_accepted: np.ndarray, meta: np.ndarray, waiting: np.ndarray, count: np.ndarray,
    choice: np.ndarray, cut: np.ndarray, asked: np.ndarray, expected: np.ndarray, other_expected: np.ndarray,
    confirmed_cut: np.ndarray, confirmed_expected: np.ndarray, fallback: np.ndarray, hopeful: np.ndarray,
    widest: np.ndarray, price_here: bool, pricing: tuple, allowed: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Per row, in order: score its waiting drafts on its new tokens (where ``extended``), then,
    where ``limits`` > 0, choose: ``choice`` (see :data:`NOT_DRAFTED`), ``cut`` (tokens kept of
    the choice), ``asked`` (tokens to ask a chosen neural part for), ``expected`` (the draft's
    expected accepted tokens), and per lookup the confirmed cut and expectation should that
    lookup's draft continue the neural one.

    ``lookup_tokens`` [lookup, row, position] hold the lookups' drafts of this step, already
    made; each is queued for scoring here.

    By cost, a row that chose a neural part also gets, for a check over the whole batch (a
    drafter whose one pass serves every row, ``Proposer.shared_pass``): ``fallback[row]``, its
    best choice without the neural part (choice, cut, expected), and ``hopeful[row]``, the cut
    and the expectation, exploration bonus included, that the neural part won by.

    ``times[row]`` hold each row's step times [kind, draft length]; with ``price_here`` they are
    computed instead at the row (``pricing``: the batch size and the linear cost model's
    coefficients, ``_step_times``), for the lengths up to its limit only (no choice reads
    longer ones), into one small buffer. ``widest[0]``: the longest limit seen, kept up here
    (``score_pending`` decays the positions below it only).

    ``allowed`` (empty: no row is restricted) holds per row the parts it may be drafted by, as
    bits (``1 << li`` for lookup ``li``, ``1 << (lookups + ni)`` for neural part ``ni``): a request
    that names its method. Every lookup's draft is still scored, so what the parts learn does not
    depend on it; the choice is made among the allowed parts and plain decoding.
    """
    prior, weight, explore, decay = params[0], params[1], params[2], params[3]
    min_gain, margin = params[4], params[5]
    lookup_weight, call_bound = params[6], params[7]
    calibration_weight = params[8] if len(params) > 8 else 0.0
    neural_weight = params[9] if len(params) > 9 else weight  # a neural part's pooled estimate against a request's
    by_cost, confirmed, probe, continue_with_lookup = flags[0] == 1, flags[1], flags[2] == 1, flags[3] == 1
    weigh_by_pass = flags[4] == 1
    positions = own_drafted.shape[3]
    n_lookups, n_neurals = len(lookup_tracks), len(neural_tracks)
    p_lookup = np.empty(positions)
    p_neural = np.empty(positions)
    p_confirmed = np.empty(positions)
    p_calibrated = np.empty(positions)
    towards = np.empty(positions)
    row_times = np.empty((KIND_LOOKUP_NEURAL + 1, positions + 1))  # a row's step times, priced here [kind, length]
    batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token = pricing
    rows = len(slots)
    for row in range(min(rows, 2)):
        _prefetch_row(slots[row], row, False, lookup_tracks, lookup_bands, neural_tracks, confirmed, own_drafted,
                      own_accepted, meta, waiting, count)
    for row in range(rows):
        if row + 2 < rows:
            _prefetch_row(slots[row + 2], row + 2, False, lookup_tracks, lookup_bands, neural_tracks, confirmed,
                          own_drafted, own_accepted, meta, waiting, count)
        if row + 1 < rows:
            _prefetch_row(slots[row + 1], row + 1, True, lookup_tracks, lookup_bands, neural_tracks, confirmed,
                          own_drafted, own_accepted, meta, waiting, count)
        slot = slots[row]
        begin, end = offsets[row], offsets[row + 1]
        if extended[row]:
            score_pending_of(
                slot, new_tokens, begin, end, lengths[slot], meta, waiting, count,
                own_drafted, own_accepted, slot, pooled_drafted, pooled_accepted, decay, widest[0],
            )
            lengths[slot] += end - begin
        limit = limits[row]
        choice[row] = NOT_DRAFTED
        if limit <= 0:
            continue
        if limit > widest[0]:
            widest[0] = limit
        steps[0] += 1
        at = lengths[slot]
        # the parts this row may be drafted by (a request's own restriction): bit li for lookup li,
        # bit n_lookups + ni for neural part ni; no array: every part
        mask = allowed[row] if len(allowed) else -1
        drafted_any = False
        for li in range(n_lookups):  # lookups are cheap: each drafted, and is scored whether chosen or not
            n = lookup_lengths[li, row]
            add_pending_of(meta, waiting, count, slot, lookup_tracks[li], lookup_bands[li, row], lookup_tokens, li, row, n, at,
                           True)
            drafted_any = drafted_any or n > 0
        if not by_cost:  # the hybrid without a cost model: expected accepted tokens, lookup against neural
            track, band, n = lookup_tracks[0], lookup_bands[0, row], lookup_lengths[0, row]
            _chained_estimate_weighted(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, track, band,
                                       prior, weight, weight, p_lookup, n)
            track = neural_tracks[0]
            _hopeful(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, track, prior, weight, neural_weight,
                     explore, steps[0], p_neural)
            longest = min(limit, neural_longest[0]) if neural_longest[0] > 0 else limit
            lookup_expected = _expected(p_lookup, n)
            neural_expected = _expected(p_neural, longest)
            lookup_allowed, neural_allowed = mask & 1 != 0, (mask >> n_lookups) & 1 != 0
            if n > 0 and lookup_allowed and (lookup_expected >= neural_expected - margin or not neural_allowed):
                choice[row], cut[row], expected[row] = 0, n, lookup_expected
            elif not neural_allowed:  # restricted to the lookup, which has no draft
                choice[row], expected[row] = EMPTY, 0.0
            else:
                choice[row], asked[row], cut[row] = n_lookups, longest, longest
                expected[row], other_expected[row] = neural_expected, lookup_expected
            continue
        # by cost: the most expected tokens per second, plain decoding included (choose_by_cost)
        ran = KIND_LOOKUP if drafted_any else KIND_PLAIN
        with_neural = KIND_LOOKUP_NEURAL if drafted_any else KIND_NEURAL
        if price_here:  # the row's context: its length, this step's tokens in
            # only the kinds read below: the step as it ran, and with a neural pass (the confirmed
            # drafts' KIND_LOOKUP_NEURAL is that one, as a lookup drafted to be confirmed)
            kind_step_times_to(lengths[slot], batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token,
                               row_times, ran, limit + 1)
            if n_neurals:
                kind_step_times_to(lengths[slot], batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token,
                                   row_times, with_neural, limit + 1)
            step_times = row_times
        else:
            step_times = times[row]  # priced in Python (another cost model): a view per row
        best_rate = (1.0 + min_gain) / step_times[ran, 0]
        choice[row] = EMPTY
        expected[row] = 0.0
        for li in range(n_lookups):
            n = lookup_lengths[li, row]
            if n == 0 or (mask >> li) & 1 == 0:
                continue
            track, band = lookup_tracks[li], lookup_bands[li, row]
            _chained_estimate_weighted(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, track, band,
                                       prior, weight, lookup_weight, p_lookup, n)
            rate, k, value = _best_cut(p_lookup, n, step_times, ran)
            if rate > best_rate:
                best_rate, choice[row], cut[row], expected[row] = rate, li, k, value
        # the best neural part: its rate, and the cut and expectation (bonus included) it won by;
        # p_neural holds the estimate of part ``estimated``, the last one priced
        neural, neural_rate, hopeful_k, hopeful_value, estimated = -1, 0.0, 0, 0.0, -1
        for ni in range(n_neurals):
            if (mask >> (n_lookups + ni)) & 1 == 0:
                continue
            track = neural_tracks[ni]
            longest = min(limit, neural_longest[ni]) if neural_longest[ni] > 0 else limit
            kept = _kept_share(step_times, ran, with_neural, longest) if weigh_by_pass else 1.0
            _chained_estimate_weighted(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, track, 0, prior,
                                       weight * kept, neural_weight * kept, p_neural, positions)
            estimated = ni
            rate, part_k, part_value = _hopeful_cut(p_neural, pooled_drafted, track, weight * kept, explore * kept, steps[0],
                                                    longest, step_times, with_neural)
            if call_bound > 0.0:
                # not called where its calls' tokens, at an upper bound and in the shortest step, could
                # not beat plain decoding: its pass is not paid for, whatever the lookup drafts
                bound = _call_bound(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, track, prior, weight,
                                    call_bound, longest, steps[0])
                if (1.0 + bound) / step_times[with_neural, 1] <= (1.0 + min_gain) / step_times[ran, 0]:
                    rate = 0.0
            if neural < 0 or rate > neural_rate:
                neural, neural_rate, hopeful_k, hopeful_value = ni, rate, part_k, part_value
        taken = choice[row]
        if taken >= 0 and 5 + taken < len(flags) and flags[5 + taken] >= 0 and (neural < 0 or neural_rate <= best_rate):
            # the choice takes this lookup alone: its draft is queued on the calibration track (taken
            # or not, so the counts keep measuring what taking it would bring), and the choice is made
            # again with the calibrated estimate
            calibration, band, n = flags[5 + taken], lookup_bands[taken, row], lookup_lengths[taken, row]
            add_pending_of(meta, waiting, count, slot, calibration, band, lookup_tokens, taken, row, cut[row], at, True)
            _chained_estimate_weighted(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot,
                                       lookup_tracks[taken], band, prior, weight, lookup_weight, p_lookup, n)
            survival = 1.0
            for j in range(cut[row]):  # what this draft is expected to bring, position by position
                survival *= p_lookup[j]
                pooled_drafted[calibration + 1, band, j] += survival
            ratio = _calibration_ratio(pooled_drafted, pooled_accepted, calibration, band, calibration_weight)
            for j in range(n):
                p_calibrated[j] = p_lookup[j]
            p_calibrated[0] = min(p_lookup[0] * ratio, 1.0)  # every cut's expected tokens scale with it
            rate, k, value = _best_cut(p_calibrated, n, step_times, ran)
            best_rate = (1.0 + min_gain) / step_times[ran, 0]
            choice[row], cut[row], expected[row] = EMPTY, 0, 0.0
            if rate > best_rate:
                best_rate, choice[row], cut[row], expected[row] = rate, taken, k, value
        if neural < 0 or neural_rate <= best_rate:
            continue
        fallback[row, 0], fallback[row, 1], fallback[row, 2] = choice[row], cut[row], expected[row]
        track = neural_tracks[neural]
        longest = min(limit, neural_longest[neural]) if neural_longest[neural] > 0 else limit
        if neural != estimated:  # a later part was priced after it
            kept = _kept_share(step_times, ran, with_neural, longest) if weigh_by_pass else 1.0
            _chained_estimate_weighted(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, track, 0, prior,
                                       weight * kept, neural_weight * kept, p_neural, positions)
        hopeful[row, 0], hopeful[row, 1] = hopeful_k, hopeful_value
        rate, k, value = _best_cut(p_neural, longest, step_times, with_neural)
        # probing, the part drafts all it can and the tokens past the cut are scored too
        choice[row], cut[row], expected[row] = n_lookups + neural, k, value
        asked[row] = longest if probe else k
        if confirmed < 0:
            continue
        # should a lookup's longer draft continue the neural one: priced by what such confirmed
        # drafts have shown (before any: the better part per position)
        for li in range(n_lookups):
            n = lookup_lengths[li, row]
            confirmed_cut[row, li] = 0
            if n == 0 or (mask >> li) & 1 == 0:  # a lookup the row may not use continues nothing
                continue
            lookup_track, band = lookup_tracks[li], lookup_bands[li, row]
            _chained_estimate_weighted(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, lookup_track, band,
                                       prior, weight, lookup_weight, p_lookup, positions)
            for j in range(positions):
                towards[j] = max(p_lookup[j], p_neural[j])
            _estimate_towards(own_drafted, own_accepted, pooled_drafted, pooled_accepted, slot, confirmed, towards, weight,
                              p_confirmed)
            rate, k, value = _best_cut(p_confirmed, n, step_times, KIND_LOOKUP_NEURAL)
            confirmed_cut[row, li], confirmed_expected[row, li] = k, value


@njit(cache=True)
def finish_rows(
    slots: np.ndarray, choice: np.ndarray, cut: np.ndarray, expected: np.ndarray, other_expected: np.ndarray,
    confirmed_cut: np.ndarray, confirmed_expected: np.ndarray,
    lookup_tokens: np.ndarray, lookup_lengths: np.ndarray, neural_tokens: np.ndarray, neural_lengths: np.ndarray,
    neural_tracks: np.ndarray, flags: np.ndarray, lengths: np.ndarray, meta: np.ndarray, waiting: np.ndarray,
    count: np.ndarray, out: np.ndarray, out_lengths: np.ndarray, out_scores: np.ndarray, out_neural: np.ndarray,
    continued_by: np.ndarray, allowed: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Every row's draft from its choice: ``out``/``out_lengths``, ``out_scores``, ``out_neural``
    (needs the neural pass), ``continued_by`` (the lookup whose draft continues the neural one,
    else -1). ``neural_tokens`` [part, row, position] hold what the chosen neural parts drafted;
    their drafts (and the lookups' confirming them) are queued for scoring here. ``allowed`` is
    :func:`choose_rows`'s: a lookup a row may not use does not continue its neural draft."""
    by_cost, confirmed, continue_with_lookup = flags[0] == 1, flags[1], flags[3] == 1
    n_lookups = lookup_tokens.shape[0]
    for row in range(len(slots)):
        chosen = choice[row]
        continued_by[row] = -1
        out_neural[row] = False
        out_lengths[row] = 0
        out_scores[row] = expected[row] if chosen >= EMPTY else 0.0
        if chosen < 0:
            continue
        if chosen < n_lookups:
            k = cut[row]
            copy_draft(out, row, lookup_tokens, chosen, k)
            out_lengths[row] = k
            continue
        slot, ni = slots[row], chosen - n_lookups
        out_neural[row] = True
        drafted = neural_lengths[ni, row]
        add_pending_of(meta, waiting, count, slot, neural_tracks[ni], 0, neural_tokens, ni, row, drafted, lengths[slot], True)
        k = min(cut[row], drafted) if by_cost else drafted
        copy_draft(out, row, neural_tokens, ni, k)
        out_lengths[row] = k
        if not by_cost:
            if other_expected[row] > expected[row]:  # max(neural, lookup): the first when equal
                out_scores[row] = other_expected[row]
            n = lookup_lengths[0, row]
            lookup_allowed = not len(allowed) or allowed[row] & 1 != 0
            if continue_with_lookup and lookup_allowed and n > k and _agrees(lookup_tokens, 0, neural_tokens, ni, row, k):
                copy_draft(out, row, lookup_tokens, 0, n)
                out_lengths[row] = n
                continued_by[row] = 0
            continue
        if confirmed < 0 or k == 0:
            continue
        longest = -1  # the longest agreeing lookup draft, the first of equals
        for li in range(n_lookups):
            n = lookup_lengths[li, row]
            if n > k and _agrees(lookup_tokens, li, neural_tokens, ni, row, k):
                if longest < 0 or n > lookup_lengths[longest, row]:
                    longest = li
        if longest < 0:
            continue
        n = lookup_lengths[longest, row]
        add_pending_of(meta, waiting, count, slot, confirmed, 0, lookup_tokens, longest, row, n, lengths[slot], False)
        if confirmed_cut[row, longest] > k:
            k = confirmed_cut[row, longest]
            copy_draft(out, row, lookup_tokens, longest, k)
            out_lengths[row] = k
            out_scores[row] = confirmed_expected[row, longest]
            continued_by[row] = longest


@njit(cache=True, inline="always")
def _agrees(lookup_tokens, li, neural_tokens, ni, row, count):  # pragma: no cover - compiled
    # whether lookup li's draft of ``row`` begins with neural part ni's first ``count`` tokens
    for j in range(count):
        if lookup_tokens[li, row, j] != neural_tokens[ni, row, j]:
            return False
    return True


@njit(cache=True, inline="always")
def copy_draft(out, row, drafts, part, count):  # pragma: no cover - compiled
    """``out[row, :count] = drafts[part, row, :count]``, element by element (slices would be two
    views per row, each a reference count update each way)."""
    for j in range(count):
        out[row, j] = drafts[part, row, j]
