"""Reference verification: what an engine does with a draft, so losslessness can be tested.

Greedy: the draft is accepted while it equals the target's argmax; the first mismatch (or the
position after the draft) yields the target's own token. Sampling: speculative sampling
(Leviathan et al. 2023; Chen et al. 2023): draft token ``x`` drawn from ``q`` is accepted with
probability ``min(1, p(x) / q(x))``; on rejection the token is resampled from the normalised
``max(0, p - q)``. Lookup drafts are one-hot (``q(x) = 1``): ``x`` is accepted with probability
``p(x)`` and a rejection resamples from ``p`` without ``x``. Either way the emitted tokens are
distributed exactly as sampling from the target alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specplug._drafts import accepted_prefix, as_token_array
from specplug._errors import InvalidOptionError

__all__ = ["Verdict", "verify_greedy", "verify_sampled"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of verifying one draft: how many draft tokens were accepted and the tokens emitted
    (the accepted prefix followed by one token of the target's own)."""

    accepted: int
    tokens: tuple[int, ...]


def verify_greedy(draft: Sequence[int], target_argmax: Sequence[int]) -> Verdict:
    """Greedy verification against the target's argmax at each of ``len(draft) + 1`` positions.

    >>> verify_greedy([5, 6, 7], [5, 6, 9, 4])
    Verdict(accepted=2, tokens=(5, 6, 9))
    """
    draft = as_token_array(draft, "draft").tolist()  # negative or float ids are errors, never truncated
    target_argmax = as_token_array(target_argmax, "target_argmax").tolist()
    if len(target_argmax) != len(draft) + 1:
        raise InvalidOptionError(
            f"target_argmax has {len(target_argmax)} positions; a draft of {len(draft)} needs {len(draft) + 1}"
        )
    accepted = accepted_prefix(draft, target_argmax)
    return Verdict(accepted, tuple(draft[:accepted]) + (target_argmax[accepted],))


def _check_distribution(name: str, rows: np.ndarray, count: int) -> None:
    if rows.ndim != 2 or rows.shape[0] != count:
        raise InvalidOptionError(f"{name} must have shape ({count}, vocab); got {rows.shape}")
    if (rows < 0).any() or not np.allclose(rows.sum(axis=1), 1.0, atol=1e-6):
        raise InvalidOptionError(f"{name}: every row must be a probability distribution (>= 0, summing to 1)")


def verify_sampled(
    draft: Sequence[int],
    target_probs: np.ndarray,
    rng: np.random.Generator,
    draft_probs: np.ndarray | None = None,
) -> Verdict:
    """Speculative sampling over ``len(draft) + 1`` target distributions.

    ``draft_probs`` (one row per draft token) are the distributions the draft tokens were
    sampled from; None means a lookup draft, i.e. one-hot rows.

    >>> rng = np.random.default_rng(0)
    >>> verify_sampled([1], np.array([[0.0, 1.0], [1.0, 0.0]]), rng)
    Verdict(accepted=1, tokens=(1, 0))
    """
    draft = as_token_array(draft, "draft").tolist()
    target = np.asarray(target_probs, dtype=np.float64)
    _check_distribution("target_probs", target, len(draft) + 1)
    vocab = target.shape[1]
    if draft_probs is not None:
        proposal = np.asarray(draft_probs, dtype=np.float64)
        _check_distribution("draft_probs", proposal, len(draft))
        if proposal.shape[1] != vocab:  # up front: else a broadcast error only when a token is rejected
            raise InvalidOptionError(
                f"draft_probs has a vocabulary of {proposal.shape[1]}; target_probs has {vocab}, and they must match"
            )
    emitted: list[int] = []
    for position, token in enumerate(draft):
        if not 0 <= token < vocab:
            raise InvalidOptionError(f"draft[{position}] = {token} is outside the vocabulary [0, {vocab})")
        p = target[position]
        q = np.zeros(vocab) if draft_probs is None else proposal[position]
        if draft_probs is None:
            q[token] = 1.0
        if q[token] <= 0:
            raise InvalidOptionError(f"draft[{position}] = {token} has probability 0 under draft_probs")
        if rng.random() < min(1.0, p[token] / q[token]):
            emitted.append(int(token))
            continue
        residual = np.maximum(p - q, 0.0)
        total = residual.sum()
        # total is 0 only when p == q up to rounding; then p itself is the residual's limit
        emitted.append(int(rng.choice(vocab, p=residual / total if total > 0 else p)))
        return Verdict(position, tuple(emitted))
    emitted.append(int(rng.choice(vocab, p=target[len(draft)])))
    return Verdict(len(draft), tuple(emitted))
