"""The base of the composite methods (hybrid, adaptive): proposers built from other proposers.

What they share: every part sees every request (started, extended and stopped together, so
each learns as if it drafted alone); each request's length (its KV footprint, which prices a
step); and acceptance statistics per *track* (a part, or a kind of draft) and draft position,
kept per request and pooled over all requests. A draft handed to :meth:`score_later` is
scored against the tokens verified after it, each position as soon as they reach it, over as
many later steps as they take to cover or contradict it: a step verifies only what was
drafted, so a draft that was not chosen, or was cut short, would otherwise teach nothing
about its later positions, and estimates for long drafts would stay at their prior. Subclasses keep only their choice: :meth:`_choose`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from specplug._contract import Draft, Proposer, RequestId
from specplug.proposers._parts import PositionStats, checked_batch_size, estimate, optimism, score_band
from specplug.proposers._pending import PendingDrafts

__all__ = ["CompositeProposer", "CompositeRequest"]


@dataclass
class CompositeRequest:
    """One request of a composite: its statistics per track, its length, its drafts waiting to be scored."""

    stats: list[PositionStats]
    length: int  # tokens so far (prompt + output)
    # drafts keyed (track, band), until the verified text decides them
    pending: PendingDrafts = field(default_factory=PendingDrafts)


class CompositeProposer(Proposer):
    """Parts' lifecycle, request lengths, later-step scoring and pooled per-position statistics.

    A subclass passes its parts and how many statistics tracks it keeps, and implements
    :meth:`_choose`; :meth:`estimate` and :meth:`optimism` read the statistics.
    """

    takes_batch_size = True

    def __init__(
        self,
        parts: Sequence[Proposer],
        *,
        tracks: int,
        positions: int,
        prior: float,
        prior_weight: float,
        explore: float,
        batch_size: int,
    ) -> None:
        super().__init__()
        self.parts = list(parts)
        self.positions = positions  # the longest draft considered, and the positions tracked
        self.prior, self.prior_weight, self.explore = prior, prior_weight, explore
        self.batch_size = batch_size
        self._tracks = tracks
        self._pooled = [PositionStats.empty(positions) for _ in range(tracks)]
        self._steps = 0  # drafting steps so far, all requests: the exploration bonus grows with it
        self._requests: dict[RequestId, CompositeRequest] = {}

    def set_batch_size(self, batch_size: int) -> None:
        """The engine's current batch size (an adapter calls this as its batch changes)."""
        self.batch_size = checked_batch_size(batch_size)

    # ---------------------------------------------------------------- lifecycle
    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        started: list[Proposer] = []
        try:
            for part in self.parts:
                part.start(request_id, prompt)
                started.append(part)
        except Exception:
            for part in started:  # undo, so that a failed start leaves no part holding the request
                part.stop(request_id)
            raise
        stats = [PositionStats.empty(self.positions) for _ in range(self._tracks)]
        self._requests[request_id] = CompositeRequest(stats, len(prompt))

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        request = self._requests[request_id]
        for part in self.parts:
            part.extend(request_id, tokens)
        for (track, band), draft, truth, scored in request.pending.extend(tokens, at=request.length):
            request.stats[track].observe(band, draft, truth, scored)
            self._pooled[track].observe(band, draft, truth, scored)
        request.length += len(tokens)

    def _stop(self, request_id: RequestId) -> None:
        del self._requests[request_id]
        errors = []
        for part in self.parts:
            try:
                part.stop(request_id)
            except Exception as error:  # noqa: BLE001 - stop every part, then report the first
                errors.append(error)
        if errors:
            raise errors[0]

    # ---------------------------------------------------------------- drafting
    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        self._steps += 1
        return self._choose(request_id, self._requests[request_id], min(max_tokens, self.positions))

    @abc.abstractmethod
    def _choose(self, request_id: RequestId, request: CompositeRequest, limit: int) -> Draft:
        """The draft of this step, at most ``limit`` tokens."""

    @staticmethod
    def band(draft: Draft, asked: int) -> int:
        """The statistics band of a part's ``draft`` when it was asked for ``asked`` tokens."""
        return score_band(draft.score, len(draft.tokens), asked)

    def score_later(
        self, request: CompositeRequest, track: int, band: int, tokens: Sequence[int], *, follow: bool = True
    ) -> None:
        """Score ``tokens``, drafted at this step, in ``track`` and ``band`` as the verified text reaches
        them (``follow=False``: on the tokens this step verifies only)."""
        request.pending.add((track, band), tuple(tokens), at=request.length, follow=follow)

    # ---------------------------------------------------------------- statistics
    def estimate(self, request_id: RequestId, track: int, band: int = 0, prior: float | np.ndarray | None = None) -> np.ndarray:
        """Acceptance per draft position in ``track`` (and ``band``) for this request: its counts shrunk
        towards the pooled ones, those towards ``prior`` (default: the composite's)."""
        own = self._requests[request_id].stats[track]
        return estimate(own, self._pooled[track], band, self.prior if prior is None else prior, self.prior_weight)

    def optimism(self, track: int, band: int = 0) -> np.ndarray:
        """The exploration bonus per position of ``track``: a part observed only when it is
        called, judged on a few unlucky steps, would otherwise never be called again."""
        return optimism(self._pooled[track], band, self._steps, self.explore, self.prior_weight)
