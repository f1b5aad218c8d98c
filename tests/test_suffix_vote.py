"""suffix's vote (``_suffix_kernels.vote_found``), linear in its voters, equals the quadratic vote it
replaced: the same draft, score and match, bit for bit.

The quadratic vote is kept here, not in the package, as the reference: for each draft position and
each voter whose token was not seen at an earlier voter, it counts the later voters with the same
token; the first to reach the highest count wins. The chains are drawn to tie often: small
vocabularies, many voters, sequence ends (SEP), continuations running into the index's end, rings
whose window wraps around, and ``min_token_prob`` cutting drafts short.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import specplug
from specplug import BatchStep
from specplug.proposers.lookup import _suffix_kernels as kernels

SEP = kernels.SEP
END = kernels.END


def _quadratic_vote(tokens, state, found, ends, lengths, max_tokens, spec_factor, spec_offset, min_token_prob, out):
    """The vote as it was first written, quadratic in the voters: the reference the linear vote must match."""
    mask = tokens.shape[0] - 1
    end = state[END]
    best = 0
    for i in range(found):
        if lengths[i] > best:
            best = lengths[i]
    if found == 0:
        return 0, 0.0, 0
    budget = min(max_tokens, int(np.floor(spec_factor * best + spec_offset)))
    alive = 0
    for i in range(found):
        if lengths[i] == best:
            ends[alive] = ends[i]
            alive += 1
    n_out = 0
    score = 0.0
    cumulative = 1.0
    for d in range(budget):
        best_token = -1
        best_count = 0
        for i in range(alive):
            gi = ends[i] + 1 + d
            if gi >= end:
                continue
            ti = tokens[gi & mask]
            if ti == SEP:
                continue
            seen = False
            for j in range(i):
                gj = ends[j] + 1 + d
                if gj < end and tokens[gj & mask] == ti:
                    seen = True
                    break
            if seen:
                continue
            count = 1
            for j in range(i + 1, alive):
                gj = ends[j] + 1 + d
                if gj < end and tokens[gj & mask] == ti:
                    count += 1
            if count > best_count:
                best_count = count
                best_token = ti
        if best_count == 0:
            break
        cumulative *= best_count / alive
        if cumulative < min_token_prob:
            break
        out[n_out] = best_token
        n_out += 1
        score += cumulative
        kept = 0
        for i in range(alive):
            gi = ends[i] + 1 + d
            if gi < end and tokens[gi & mask] == best_token:
                ends[kept] = ends[i]
                kept += 1
        alive = kept
    return n_out, score, best


_quadratic_vote_compiled = njit(_quadratic_vote)  # the same code compiled: 1024 voters in Python take too long

#: one scratch for every example, as a batch step shares one across rows: its stamps are never cleared
_TALLY = kernels.vote_scratch(1024)


def _chain(seed, capacity_bits, vocab, sep_rate, voters, wrap, max_length):
    """A ring (tokens as a request's index holds them), its state, and ``voters`` candidate ends with
    match lengths drawn from a few values, so that many share the longest."""
    rng = np.random.default_rng(seed)
    capacity = 1 << capacity_bits
    tokens = rng.integers(0, vocab, size=capacity).astype(np.int32)
    tokens[rng.random(capacity) < sep_rate] = SEP
    live = int(rng.integers(1, capacity + 1))
    end = wrap * capacity + int(rng.integers(0, capacity)) + live  # past the ring's length: the window wraps
    start = end - live
    state = np.array([start, end, 0, 0], dtype=np.int64)
    ends = rng.integers(start, end, size=voters).astype(np.int64)
    lengths = rng.integers(max(0, max_length - 2), max_length + 1, size=voters).astype(np.int64)
    return tokens, state, ends, lengths


def _both(tokens, state, ends, lengths, max_tokens, spec_factor, spec_offset, min_token_prob, tally):
    found = len(ends)
    old_out = np.full(max_tokens + 1, -7, dtype=np.int32)
    new_out = old_out.copy()
    old = _quadratic_vote_compiled(tokens, state, found, ends.copy(), lengths, max_tokens, spec_factor, spec_offset,
                                   min_token_prob, old_out)
    new = kernels.vote_found(tokens, state, found, ends.copy(), lengths, max_tokens, spec_factor, spec_offset,
                             min_token_prob, new_out, tally)
    return (old, old_out.tolist()), (new, new_out.tolist())


@settings(max_examples=300, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    capacity_bits=st.integers(3, 12),
    vocab=st.integers(1, 5),
    sep_rate=st.sampled_from([0.0, 0.05, 0.3]),
    voters=st.integers(0, 1024),
    wrap=st.integers(0, 3),
    max_length=st.integers(0, 5),
    max_tokens=st.integers(1, 24),
    spec=st.sampled_from([(4.0, 0.0), (1.0, 2.0), (0.5, -1.0), (1024.0, 0.0)]),
    min_token_prob=st.sampled_from([0.0, 0.01, 0.1, 0.4, 1.0]),
)
def test_linear_vote_equals_the_quadratic_vote(seed, capacity_bits, vocab, sep_rate, voters, wrap, max_length,
                                               max_tokens, spec, min_token_prob):
    tokens, state, ends, lengths = _chain(seed, capacity_bits, vocab, sep_rate, voters, wrap, max_length)
    old, new = _both(tokens, state, ends, lengths, max_tokens, *spec, min_token_prob, _TALLY)
    assert new == old  # drafts, scores (bit for bit: == on floats) and matches; out untouched past the draft


def test_a_tie_goes_to_the_most_recent_voter_and_counts_are_not_carried_between_positions():
    """Voters most recent first: 7 7 5 5 9 -> 7 and 5 tie at two, the earlier voter's 7 wins; then
    the two 7-voters' next tokens 3 and 4 tie at one, 3 wins. With a scratch reused many times."""
    tokens = np.array([7, 3, 7, 4, 5, 1, 5, 1, 9, 2, 0, 0, 0, 0, 0, 0], dtype=np.int32)
    state = np.array([0, 10, 0, 0], dtype=np.int64)
    ends = np.array([-1, 1, 3, 5, 7], dtype=np.int64)  # each voter's next token at ends + 1
    lengths = np.full(5, 2, dtype=np.int64)
    tally = kernels.vote_scratch(5)
    for _ in range(3):
        old, new = _both(tokens, state, ends, lengths, 2, 4.0, 0.0, 0.0, tally)
        assert new == old
        (taken, score, match), out = new
        assert (taken, out[:2], match) == (2, [7, 3], 2)
        assert score == 2 / 5 + 2 / 5 * 1 / 2


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), max_candidates=st.sampled_from([1, 3, 64, 1024]),
       min_token_prob=st.sampled_from([0.0, 0.1, 0.3]))
def test_batch_kernels_and_per_request_calls_vote_alike_with_many_candidates(seed, max_candidates, min_token_prob):
    """Many tying voters through the batch kernels (serial and one run per thread, each sharing one
    scratch across its rows) and the per-request path, with the global cache voting too."""
    options = {"max_candidates": max_candidates, "min_token_prob": min_token_prob, "min_match": 1, "long_match": 3}
    serial, runs, single = (specplug.create("suffix", **options) for _ in range(3))
    serial.batch_kernel_from = runs.batch_kernel_from = runs.parallel_from = 0
    rng = np.random.default_rng(seed)
    batch = 19
    for generation in range(2):  # the second generation votes in the first one's outputs (the cache) too
        ids = [f"{generation}-{row}" for row in range(batch)]
        prompts = [rng.integers(0, 3, size=int(rng.integers(1, 200))).tolist() for _ in ids]
        for proposer in (serial, runs):
            proposer.step_batch(BatchStep.of([], [], [], started=list(zip(ids, prompts))))
        for rid, prompt in zip(ids, prompts):
            single.start(rid, prompt)
        for _ in range(8):
            tokens = [rng.integers(0, 3, size=int(rng.integers(0, 6))).tolist() for _ in ids]
            limits = rng.integers(0, 9, size=batch).tolist()
            a = serial.step_batch(BatchStep.of(ids, tokens, limits))
            b = runs.step_batch(BatchStep.of(ids, tokens, limits))
            assert a.tokens.tolist() == b.tokens.tolist() and a.scores.tolist() == b.scores.tolist()
            for row, rid in enumerate(ids):
                if tokens[row]:
                    single.extend(rid, tokens[row])
                if limits[row]:
                    expected = single.propose(rid, limits[row])
                    assert a.draft(row).tokens == expected.tokens and a.draft(row).score == expected.score
        for proposer in (serial, runs):
            proposer.step_batch(BatchStep.of([], [], [], stopped=ids))
        for rid in ids:
            single.stop(rid)
