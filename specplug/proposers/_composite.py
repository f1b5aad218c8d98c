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

from specplug._contract import Draft, Proposer, RequestId, check_draft
from specplug._cost._linear import CostModel
from specplug._cost._steps import spec_step_times
from specplug.proposers._parts import PositionStats, best_cut, checked_batch_size, estimate, optimism, score_band
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
        half_life: float = 0.0,
        probe: bool = False,
    ) -> None:
        super().__init__()
        self.parts = list(parts)
        self.positions = positions  # the longest draft considered, and the positions tracked
        self.prior, self.prior_weight, self.explore = prior, prior_weight, explore
        # a request's own counts halve in weight every ``half_life`` drafts of a track and band
        # (0: never), so its estimates follow acceptance that drifts within the request
        self._decay = 0.5 ** (1.0 / half_life) if half_life > 0 else 1.0
        self.probe = probe
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
            request.stats[track].observe(band, draft, truth, scored, self._decay)
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

    # ---------------------------------------------------------------- the cost-aware choice
    def choose_by_cost(
        self,
        request_id: RequestId,
        request: CompositeRequest,
        cost: CostModel,
        *,
        lookups: Sequence[tuple[int, Draft, int]],
        neurals: Sequence[tuple[int, Proposer, int]],
        confirmed: int | None,
        min_gain: float = 0.0,
    ) -> Draft:
        """The draft with the most expected tokens per second, or none when plain decoding wins
        (by less than the share ``min_gain``).

        ``lookups``: (track, draft, band) of the lookups that drafted this step (their drafts are
        scored already); ``neurals``: (track, part, longest) of neural parts, called only when
        chosen; ``confirmed``: the track of neural drafts that a lookup's longer draft continues
        (None: never continue). Each choice is priced ``(1 + E(k)) / step_time(k)`` at its best
        cut ``k``; earlier choices win ties. Sunk costs count: a lookup that found a draft has
        been charged for this step whatever is chosen, and after a neural pass both have.
        """
        batch, context = self.batch_size, request.length
        ran = ("lookup",) if any(draft.tokens for _, draft, _ in lookups) else ()
        with_neural = (*ran, "neural")

        def times(longest: int, kinds: tuple[str, ...]) -> np.ndarray:  # of a step drafting 1..longest tokens
            return spec_step_times(cost, batch, context, longest, kinds)[1:]

        best_rate = (1.0 + min_gain) / float(spec_step_times(cost, batch, context, 0, ran)[0])
        chosen: Draft | None = None
        chosen_neural: tuple[int, Proposer, int] | None = None
        for track, draft, band in lookups:
            if draft.tokens:
                rate, k, expected = best_cut(self.estimate(request_id, track, band)[: len(draft.tokens)], times(len(draft.tokens), ran))
                if rate > best_rate:
                    best_rate, chosen = rate, Draft(draft.tokens[:k], draft.source, expected, needs_neural=False)
        for track, part, longest in neurals:
            # whether to call a neural part is judged optimistically (it is observed only when
            # called, so one judged on a few unlucky steps would never be tried again)
            hopeful = np.minimum(self.estimate(request_id, track) + self.optimism(track), 1.0)
            rate = best_cut(hopeful[:longest], times(longest, with_neural))[0]
            if rate > best_rate:
                best_rate, chosen_neural = rate, (track, part, longest)
        if chosen_neural is None:
            return chosen if chosen is not None else Draft((), self.name, 0.0, needs_neural=False)
        return self._neural_draft(request_id, request, cost, chosen_neural, lookups, confirmed, times)

    def _neural_draft(
        self,
        request_id: RequestId,
        request: CompositeRequest,
        cost: CostModel,
        neural_part: tuple[int, Proposer, int],
        lookups: Sequence[tuple[int, Draft, int]],
        confirmed: int | None,
        times: object,
    ) -> Draft:
        track, part, longest = neural_part
        with_neural = ("lookup", "neural") if any(draft.tokens for _, draft, _ in lookups) else ("neural",)
        neural_p = self.estimate(request_id, track)
        _, k, expected = best_cut(neural_p[:longest], times(longest, with_neural))  # type: ignore[operator]
        # probing, the part drafts all it can and the tokens past the cut are scored too (they
        # cost nothing more where a head drafts its full length every step anyway)
        asked = longest if self.probe else k
        neural = check_draft(part.propose(request_id, asked), asked, part.name)
        self.score_later(request, track, 0, neural.tokens)
        tokens, source = neural.tokens[:k], neural.source
        if confirmed is None or not tokens:
            return Draft(tokens, source, expected, needs_neural=True)
        # a lookup that agrees with all the neural part drafted and goes on: price the longer
        # draft by what such confirmed drafts have shown (before any: the better part per
        # position). A part's drafts are followed over later steps (each learns as if it drafted
        # alone); this combination's statistics describe the steps that drafted it: it is scored
        # on what such a step verifies
        agreeing = [
            (draft, band) for lookup_track, draft, band in lookups
            if len(draft.tokens) > len(tokens) and draft.tokens[: len(tokens)] == tokens
        ]  # fmt: skip
        if not agreeing:
            return Draft(tokens, source, expected, needs_neural=True)
        lookup, band = max(agreeing, key=lambda item: len(item[0].tokens))
        lookup_track = next(t for t, draft, _ in lookups if draft is lookup)
        self.score_later(request, confirmed, 0, lookup.tokens, follow=False)
        lookup_p = self.estimate(request_id, lookup_track, band)
        confirmed_p = self.estimate(request_id, confirmed, prior=np.maximum(lookup_p, neural_p))
        longest_lookup = len(lookup.tokens)
        _, confirmed_k, confirmed_expected = best_cut(
            confirmed_p[:longest_lookup], times(longest_lookup, ("lookup", "neural"))  # type: ignore[operator]
        )
        if confirmed_k > len(tokens):
            return Draft(lookup.tokens[:confirmed_k], f"{source}+{lookup.source}", confirmed_expected, needs_neural=True)
        return Draft(tokens, source, expected, needs_neural=True)
