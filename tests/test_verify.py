"""Verification reference: greedy is exact, sampling keeps the target distribution (chi-square)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chisquare

from specplug import InvalidOptionError
from specplug.verify import verify_greedy, verify_sampled

VOCAB = 6
DRAWS = 20_000


def _target(seed: int, rows: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(VOCAB) * 0.7, size=rows)
    return p


def test_greedy_accepts_matching_prefix_then_target_token():
    assert verify_greedy([1, 2, 3], [1, 2, 3, 4]).tokens == (1, 2, 3, 4)
    assert verify_greedy([1, 2, 3], [1, 5, 3, 4]).accepted == 1
    assert verify_greedy([], [7]).tokens == (7,)


def test_greedy_rejects_wrong_number_of_positions():
    with pytest.raises(InvalidOptionError, match="needs 3"):
        verify_greedy([1, 2], [1, 2])


def _first_and_second(draft_fn, target, draws=DRAWS, seed=1):
    """Histogram of the first emitted token and of the second given the first is 0."""
    rng = np.random.default_rng(seed)
    first = np.zeros(VOCAB)
    second = np.zeros(VOCAB)
    for _ in range(draws):
        tokens, q = draft_fn(rng)
        verdict = verify_sampled(tokens, target, rng, q)
        emitted = list(verdict.tokens)
        # Past the verdict the engine samples the target itself: complete the 2-token sample.
        if len(emitted) < 2:
            emitted.append(int(rng.choice(VOCAB, p=target[1])))
        first[emitted[0]] += 1
        if emitted[0] == tokens[0] if tokens else False:
            second[emitted[1]] += 1
    return first, second


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_neural_draft_keeps_target_distribution(seed):
    target = _target(seed, 3)
    proposal = _target(seed + 100, 2)

    def draft(rng):
        tokens = [int(rng.choice(VOCAB, p=proposal[i])) for i in range(2)]
        return tokens, proposal

    first, _ = _first_and_second(draft, target, seed=seed)
    assert chisquare(first, DRAWS * target[0]).pvalue > 1e-3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sampled_lookup_draft_keeps_target_distribution(seed):
    target = _target(seed, 3)
    fixed = [int(np.argmin(target[0])), 2]  # a poor draft token makes rejection frequent

    def draft(rng):
        return fixed, None

    first, second = _first_and_second(draft, target, seed=seed)
    assert chisquare(first, DRAWS * target[0]).pvalue > 1e-3
    # given the first draft token was accepted, the next token is again distributed as the target's
    observed = second.sum()
    if observed > 200:
        assert chisquare(second, observed * target[1]).pvalue > 1e-3


def test_chi_square_has_power_against_a_common_bug():
    """Resampling from p instead of the residual (a classic bug) is caught by the same test."""
    target = _target(0, 2)
    draft_token = int(np.argmax(target[0]))
    rng = np.random.default_rng(5)
    first = np.zeros(VOCAB)
    for _ in range(DRAWS):
        if rng.random() < target[0][draft_token]:
            first[draft_token] += 1
        else:
            first[rng.choice(VOCAB, p=target[0])] += 1
    assert chisquare(first, DRAWS * target[0]).pvalue < 1e-6


def test_sampled_bad_inputs_name_the_problem():
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidOptionError, match="shape"):
        verify_sampled([1], np.ones((1, VOCAB)) / VOCAB, rng)
    with pytest.raises(InvalidOptionError, match="outside the vocabulary"):
        verify_sampled([99], np.ones((2, VOCAB)) / VOCAB, rng)
    with pytest.raises(InvalidOptionError, match="probability distribution"):
        verify_sampled([1], np.ones((2, VOCAB)), rng)
