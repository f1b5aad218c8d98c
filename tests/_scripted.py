"""Scripted proposers for tests of the composite methods: exact, inspectable behaviour."""

from __future__ import annotations

import numpy as np

from specplug import Draft, Proposer


class Oracle(Proposer):
    """Knows the true continuation of every request and drafts ``correct`` right tokens then a wrong one.

    ``correct`` is a function of the output position, and so are ``score`` and ``match`` (the
    draft's :attr:`Draft.match`) where given; ``calls`` counts propose() calls.
    """

    def __init__(
        self, outputs: dict, correct, *, name: str = "neural", kind: str = "neural", score=None, match=None, pad=False
    ):
        super().__init__()
        self.name = name
        self.draft_kind = kind
        self.outputs = outputs
        self.correct = correct
        self.score = score
        self.match = match
        self.pad = pad  # fill the draft up to max_tokens (a drafter that always drafts K)
        self.calls = 0
        self.pos: dict = {}

    def _start(self, rid, prompt):
        self.pos[rid] = 0

    def _propose(self, rid, max_tokens):
        self.calls += 1
        out = self.outputs[rid]
        pos = self.pos[rid]
        good = min(self.correct(pos), max_tokens, len(out) - pos)
        tokens = list(out[pos : pos + good])
        if good < max_tokens and pos + good < len(out):
            tokens.append(out[pos + good] + 1)  # a wrong token ends the draft
        if self.pad:
            tokens += [0] * (max_tokens - len(tokens))
        score = self.score(pos) if callable(self.score) else None
        match = self.match(pos) if callable(self.match) else None
        return Draft(tuple(int(t) for t in tokens), self.name, score, match=match)

    def _extend(self, rid, tokens: np.ndarray):
        self.pos[rid] += len(tokens)

    def _stop(self, rid):
        del self.pos[rid]


class Failing(Proposer):
    """Raises in propose() after ``after`` calls."""

    name = "failing"

    def __init__(self, after: int = 0):
        super().__init__()
        self.after = after

    def _start(self, rid, prompt):
        pass

    def _propose(self, rid, max_tokens):
        self.after -= 1
        if self.after < 0:
            raise RuntimeError("scripted failure")
        return Draft((), self.name)

    def _extend(self, rid, tokens):
        pass

    def _stop(self, rid):
        pass


def drive(proposer, rid, prompt, output, k, start_at=0):
    """Replay ``output`` through ``proposer`` with greedy verification; return the drafts and steps."""
    proposer.start(rid, prompt)
    pos, drafts = start_at, []
    if start_at:
        proposer.extend(rid, output[:start_at])
    while pos < len(output):
        draft = proposer.propose(rid, k)
        accepted = 0
        while accepted < len(draft.tokens) and pos + accepted < len(output) and draft.tokens[accepted] == output[pos + accepted]:
            accepted += 1
        step = output[pos : pos + accepted + 1]
        proposer.extend(rid, step)
        drafts.append((draft, accepted))
        pos += len(step)
    proposer.stop(rid)
    return drafts


def with_room(drafts, output, k):
    """The steps of a :func:`drive` run that had more than ``k`` output tokens left (a drafter asked
    for ``k`` tokens could draft them all; the last steps have only short drafts left)."""
    left, kept = len(output), []
    for draft, accepted in drafts:
        if left > k:
            kept.append((draft, accepted))
        left -= accepted + 1
    return kept


def geometric(alpha: float, seed: int = 0):
    """Accepted length at each position drawn with acceptance ``alpha`` per token (fixed by the seed):
    the ``correct`` argument of :class:`Oracle` for a drafter of that quality."""
    rng = np.random.default_rng(seed)
    table = rng.geometric(1 - alpha, size=5000) - 1
    return lambda pos: int(table[pos])


def late_mean_length(drafts) -> float:
    """Mean draft length over the second half of a :func:`drive` run (after the estimates settle)."""
    return float(np.mean([len(draft.tokens) for draft, _ in drafts[len(drafts) // 2 :]]))


def late_lengths_by_batch(make, prompt, output, k, batches=(1, 64)) -> dict[int, float]:
    """:func:`late_mean_length` of a :func:`drive` run of ``make(batch)`` at each batch size."""
    return {batch: late_mean_length(drive(make(batch), "r", prompt, output, k)) for batch in batches}
