"""The base of the composite methods (hybrid, adaptive): proposers built from other proposers.

What they share: every part sees every request (started, extended and stopped together, so
each learns as if it drafted alone); each request's length (its KV footprint, which prices a
step); and acceptance statistics per *track* (a part, or a kind of draft), score band and draft
position, kept per request and pooled over all requests. Every draft a part makes is scored
against the tokens verified after it, each position as soon as they reach it, over as many
later steps as they take to cover or contradict it (``_pending``): a step verifies only what was
drafted, so a draft that was not chosen, or was cut short, would otherwise teach nothing about
its later positions, and estimates for long drafts would stay at their prior.

Per-request state lives in arrays by slot, and a step's work is done for the whole batch: the
lookups draft in one batch call each, one kernel scores every row's waiting drafts and makes
every row's choice (``_choice``), each neural part drafts in one batch call for the rows that
chose it, and one kernel finishes the drafts (without a neural part, adaptive's default, the
choice and the drafts are one kernel call: ``_choose_step.choose_and_finish``). The per-request
hooks run the same kernels with one row, so the two paths give the same drafts and learn the
same. Subclasses declare their parts and how they choose (:class:`Choosing`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specplug._batch import NEURAL_METHOD, BatchDrafts, BatchStep, check_batch_drafts
from specplug._errors import InvalidOptionError
from specplug._drafts import Draft, RequestId, check_draft, draft_accepted
from specplug._proposer import Proposer
from specplug._cost._linear import CostModel, LinearCostModel
from specplug._cost._steps import _draft_coefficients, _verify_coefficients, spec_step_times
from specplug.proposers import _row_drafts
from specplug.proposers.composite import _choice
from specplug.proposers.composite._choose_step import choose_and_finish, choose_batch
from specplug.proposers.composite._parts import BANDS, PositionStats, checked_batch_size, estimate, optimism, score_bands_of_rows
from specplug.proposers.composite._learnt import LearntState
from specplug.proposers.composite._pending import PendingTable
from specplug.proposers._row_drafts import KernelLookup, RowDraft, RowDrafts, RowSlots
from specplug.proposers.composite._step_times import linear_step_times

__all__ = ["Choosing", "CompositeProposer"]

#: finished requests before their spread sets a neural part's weight, and the largest weight it sets
_SPREAD_REQUESTS, _MOST_WEIGHT = 8, 1024.0
#: the drafters of a step, by the step-time table's rows (_choice.KIND_*)
_KINDS: tuple[tuple[str, ...], ...] = ((), ("lookup",), ("neural",), ("lookup", "neural"))


@dataclass(frozen=True)
class Choosing:
    """How a composite chooses. Each part's statistics track is its index in ``parts``.

    ``lookups``: indices of the parts that draft at every step (cheap; scored whether chosen or
    not); ``neurals``: those called only when chosen. ``cost``: choose by expected tokens per
    second (None: the hybrid's choice by expected accepted tokens, lookup against neural, the
    lookup winning when it expects at least the neural part's expectation - ``margin``).
    ``confirmed``: the track of neural drafts that a lookup's longer draft continues (None:
    never continue, with a cost model; without one ``continue_with_lookup`` says).
    ``calibrated``: by cost, per lookup (in ``lookups`` order) the track of its drafts that the
    choice would take alone (the next track holds what their estimates expected): what they
    realised over what was expected, each with ``calibration_weight`` tokens more, scales the
    lookup's estimate where it is taken alone (empty: the lookup's estimate as it is).
    """

    lookups: tuple[int, ...]
    neurals: tuple[int, ...]
    cost: CostModel | None
    confirmed: int | None
    min_gain: float = 0.0
    margin: float = 0.0
    continue_with_lookup: bool = True
    calibrated: tuple[int, ...] = ()
    calibration_weight: float = 0.0


def _part_step(part: Proposer, step: BatchStep) -> BatchDrafts:
    """A part's batch step. The composite checked the step already (the same rows, tokens and
    offsets, limits it derived, every request started in every part), so a part that keeps the
    base class's ``step_batch`` is not checked again: each check is O(rows) set operations."""
    if type(part).step_batch is Proposer.step_batch:
        with part._lock:
            got = part._step_batch(step)
    else:
        got = part.step_batch(step)
    # The composite's kernels index per-position arrays and its rows of last drafts by these
    # lengths: a row longer than asked (a part's own batch path) is refused, as check_draft
    # refuses such a draft on the per-request path (one comparison; the guard checks the rest).
    if step.rows and (got.lengths > step.limits).any():
        check_batch_drafts(got, step.limits, part.name)
    return got


def _drafts_into(part: Proposer) -> bool:
    """Whether a lookup part's step is its own kernel's call alone, for the batches its kernel takes
    (``KernelLookup.kernel_takes``): a :class:`KernelLookup` whose step hooks no subclass replaced,
    which writes the drafts into the composite's arrays, so the part allocates no arrays of its own
    and nothing is copied. Its kernel writes at most each row's limit, so the lengths need no check
    either (``_part_step``)."""
    cls = type(part)
    return (
        isinstance(part, KernelLookup) and cls.step_batch is Proposer.step_batch
        and cls._step_batch is KernelLookup._step_batch
    )


class CompositeProposer(Proposer):
    """Parts' lifecycle, request lengths, later-step scoring, pooled per-position statistics, and
    the step for the whole batch.

    A subclass passes its parts, how many statistics tracks it keeps and how it chooses;
    :meth:`estimate` and :meth:`optimism` read the statistics.
    """

    takes_batch_size = True

    def __init__(
        self,
        parts: Sequence[Proposer],
        *,
        choosing: Choosing,
        tracks: int,
        positions: int,
        prior: float,
        prior_weight: float,
        explore: float,
        batch_size: int,
        half_life: float = 0.0,
        probe: bool = False,
        lookup_prior_weight: float | None = None,
        call_bound: float = 0.0,
        neural_request_weight: float | None = None,
        learnt_state: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__()
        self.parts = list(parts)
        self.choosing = choosing
        self.positions = positions  # the longest draft considered, and the positions tracked
        self.prior, self.prior_weight, self.explore = prior, prior_weight, explore
        # a request's own counts halve in weight every ``half_life`` drafts of a track and band
        # (0: never), so its estimates follow acceptance that drifts within the request
        self._decay = 0.5 ** (1.0 / half_life) if half_life > 0 else 1.0
        self.probe = probe
        self.batch_size = batch_size
        self._tracks = tracks
        self._lookup_tracks = np.array(choosing.lookups, dtype=np.int64)
        self._neural_tracks = np.array(choosing.neurals, dtype=np.int64)
        # the cost-aware choice shrinks a request's lookup counts with a weight of their own (_choice)
        lookup_weight = prior_weight if lookup_prior_weight is None else lookup_prior_weight
        # call_bound > 0: a neural part is declined where a bound on its calls' tokens cannot pay for its pass (_choice)
        self._params = np.array([
            prior, prior_weight, explore, self._decay, choosing.min_gain, choosing.margin, lookup_weight, call_bound,
            choosing.calibration_weight, prior_weight if neural_request_weight is None else neural_request_weight,
        ])  # fmt: skip
        # None: a neural part's pooled estimate is worth as many observations against a request's own
        # counts as the spread of the finished requests' acceptance says (_learn_spread)
        self._learns_spread = neural_request_weight is None and len(choosing.neurals) > 0
        self._spread = np.zeros(5)  # over finished requests: sum n, sum a, sum a^2/n, sum n^2, requests
        self._flags = np.array([
            choosing.cost is not None, -1 if choosing.confirmed is None else choosing.confirmed, probe,
            choosing.continue_with_lookup,
            # exploration of a neural part weighed by its pass's share of a step (_choice._kept_share):
            # only with costs learnt online on this hardware (OnlineCostModel; docs/vllm.md says why not with a preset)
            getattr(choosing.cost, "learnt_online", False) is True,
            # the lookups' calibration tracks (_choice._calibrated), in lookups order
            *(choosing.calibrated or (-1,) * len(choosing.lookups)),
        ], dtype=np.int64)  # fmt: skip
        # per request, by slot: statistics [slot, track, band, position], length, waiting drafts
        self._slot: dict[RequestId, int] = {}
        self._free: list[int] = []
        self._own_drafted = np.zeros((0, tracks, BANDS, positions))
        self._own_accepted = np.zeros((0, tracks, BANDS, positions))
        self._lengths = np.zeros(0, dtype=np.int64)
        self._waiting = PendingTable(0, positions)
        # each request's last draft, by slot, for the batch path's acceptance count (see _row_drafts)
        self._drafts = RowDrafts(positions, self.name, rows=0)
        self._pooled_drafted = np.zeros((tracks, BANDS, positions))
        self._pooled_accepted = np.zeros((tracks, BANDS, positions))
        # the pooled counts an earlier run learnt, and where this one keeps them (_learnt)
        self._learnt = None if learnt_state is None else LearntState(
            learnt_state, self.name, [part.name for part in self.parts], self._pooled_drafted.shape
        )
        if self._learnt is not None:
            if (counts := self._learnt.read()) is not None:
                self._pooled_drafted[...], self._pooled_accepted[...] = counts
            self._learnt.keep_at_the_end(self, self._pooled_drafted, self._pooled_accepted)
        self._no_times = np.zeros((1, len(_KINDS), 1))
        self._no_neurals = np.zeros(0, dtype=np.int64)
        self._no_pricing = (1, *_linear_coefficients(None, 1))  # without a cost model, or priced in Python: never read
        # the longest limit the kernels have seen: no draft, so no count, reaches past it (_pending.score_pending)
        self._widest = np.zeros(1, dtype=np.int64)
        self._chosen = _ChoiceArrays(len(choosing.lookups), positions)  # the batch step's arrays, kept between steps
        self._kernel_lookups = [_drafts_into(self.parts[index]) for index in choosing.lookups]
        self._times_key: tuple[object, int] | None = None  # (cost model, batch size) of _times_args
        self._times_args: tuple[np.ndarray, ...] = ()
        self._pricing: tuple[object, ...] = self._no_pricing  # the batch kernels' (batch size, *_times_args)
        # without a neural part and with the linear cost model (adaptive's default), the choice and the
        # drafts are made in one kernel call (_choose_step.choose_and_finish)
        self._one_call = not choosing.neurals and isinstance(choosing.cost, LinearCostModel)
        # the last batch step's rows' slots, reused while the rows stay the same (forgotten by every
        # start and stop: a slot may then change)
        self._rows = RowSlots()
        # neural parts whose one pass drafts every row of a step: priced once per batch (_price_shared_passes)
        self._shared_passes = np.array([bool(getattr(self.parts[index], "shared_pass", False))
                                        for index in choosing.neurals], dtype=np.bool_)
        self.shared_pass_declined = 0  # steps on which the batch check sent a neural part's takers back
        self._step_count = np.zeros(1, dtype=np.int64)  # drafting steps, all requests: the exploration bonus grows with it
        # each row's source by its choice (see _sources), kept while the parts name their drafts alike
        self._source_key: tuple[str, ...] | None = None
        self._source_names, self._source_table = np.empty(0, dtype=object), np.empty((0, 0), dtype=object)
        # per row of the batch step being made, the parts it may be drafted by (_choice.choose_rows's
        # ``allowed``); empty, as on the per-request path, where no request names its method
        self._no_allowed = np.zeros(0, dtype=np.int64)
        self._allowed = self._no_allowed
        self._method_bits: dict[str, int] = {}
        for li, index in enumerate(choosing.lookups):
            name = self.parts[index].name
            self._method_bits[name] = self._method_bits.get(name, 0) | 1 << li
        if choosing.neurals:
            self._method_bits[NEURAL_METHOD] = sum(1 << (len(choosing.lookups) + ni) for ni in range(len(choosing.neurals)))

    @property
    def request_methods(self) -> tuple[str, ...]:
        """The names a request may restrict its drafts to (``BatchStep.methods``): each lookup's
        method name, and ``neural`` for the neural parts."""
        return tuple(self._method_bits)

    def _allowed_of(self, methods: Sequence[str | None]) -> np.ndarray:
        """Per row, the parts ``methods`` allow as ``choose_rows`` reads them (None, or a name that is
        not one of :attr:`request_methods`: every part)."""
        bits = self._method_bits
        return np.fromiter((bits.get(method, -1) if method is not None else -1 for method in methods),
                           dtype=np.int64, count=len(methods))

    @property
    def _steps(self) -> int:
        return int(self._step_count[0])

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
        slot = self._free.pop() if self._free else self._new_slot()
        self._rows.forget()
        self._slot[request_id] = slot
        self._own_drafted[slot] = 0.0
        self._own_accepted[slot] = 0.0
        self._lengths[slot] = len(prompt)
        self._waiting.clear(slot)
        self._drafts.start(request_id, slot)

    def _new_slot(self) -> int:
        slot = len(self._lengths)
        grown = max(8, 2 * slot)
        extra = (grown - slot, self._tracks, BANDS, self.positions)
        self._own_drafted = np.concatenate([self._own_drafted, np.zeros(extra)])
        self._own_accepted = np.concatenate([self._own_accepted, np.zeros(extra)])
        self._lengths = np.concatenate([self._lengths, np.zeros(grown - slot, dtype=np.int64)])
        self._waiting.grow_slots(grown)
        self._drafts.grow(grown)
        self._free.extend(range(grown - 1, slot, -1))
        return slot

    def _stop(self, request_id: RequestId) -> None:
        slot = self._slot.pop(request_id)
        if self._learns_spread:
            self._learn_spread(slot)
        self._rows.forget()
        self._drafts.stop(request_id, slot)
        self._free.append(slot)
        if self._learnt is not None:
            self._learnt.finished(self._pooled_drafted, self._pooled_accepted)
        errors = []
        for part in self.parts:
            try:
                part.stop(request_id)
            except Exception as error:  # noqa: BLE001 - stop every part, then report the first
                errors.append(error)
        if errors:
            raise errors[0]

    @property
    def keeps_learnt_state(self) -> bool:
        """Whether this composite was built with a ``learnt_state`` file."""
        return self._learnt is not None

    def save_learnt_state(self) -> None:
        """Write the pooled counts to the ``learnt_state`` file now (as finished requests do every
        ``SAVE_EVERY``); a composite built without one has nowhere to write them."""
        if self._learnt is None:
            raise InvalidOptionError(f"this {self.name} has no learnt_state file to write; build it with learnt_state=PATH")
        with self._lock:
            self._learnt.write(self._pooled_drafted, self._pooled_accepted)

    def _learn_spread(self, slot: int) -> None:
        """Count a finished request's neural acceptance (first draft position, its counts as the
        choice weighed them) and set how much a request's own counts are trusted from how much
        requests differ: empirical Bayes with a beta prior, whose concentration (observations the
        pooled estimate is worth) is ``p(1 - p) / spread - 1``, the spread between requests being
        what their rates vary by beyond binomial noise (a method-of-moments estimate). An engine's
        head accepts alike across requests of one kind of text and far apart across a mix: the
        weight follows the traffic the composite sees."""
        drafted = float(self._own_drafted[slot, self._neural_tracks, 0, 0].sum())
        accepted = float(self._own_accepted[slot, self._neural_tracks, 0, 0].sum())
        if drafted < 1.0:
            return
        self._spread += (drafted, accepted, accepted * accepted / drafted, drafted * drafted, 1.0)
        total, hits, squares, sizes, requests = self._spread.tolist()
        if requests < _SPREAD_REQUESTS:
            return
        rate = hits / total
        noise = rate * (1.0 - rate)
        spread = (squares - rate * hits - (requests - 1.0) * noise) / max(total - sizes / total, 1e-9)
        weight = noise / spread - 1.0 if spread > 0 else _MOST_WEIGHT
        self._params[9] = min(max(weight, 1.0), _MOST_WEIGHT)

    # ---------------------------------------------------------------- per request: the batch machinery, one row
    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._drafts.touch(request_id)
        for part in self.parts:
            part.extend(request_id, tokens)
        waiting = self._waiting
        _choice.score_row(
            self._slot[request_id], tokens, self._lengths, self._own_drafted, self._own_accepted,
            self._pooled_drafted, self._pooled_accepted, waiting.meta, waiting.tokens, waiting.count, self._decay,
            self._widest,
        )  # fmt: skip

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        self._drafts.touch(request_id)
        limit = min(max_tokens, self.positions)
        slots = np.array([self._slot[request_id]], dtype=np.int64)
        limits = np.array([limit], dtype=np.int64)
        lookups = self._lookup_arrays(1)
        tokens, lengths, scores, matches = lookups
        sources: list[list[str]] = []
        for li, index in enumerate(self.choosing.lookups):
            # parts' drafts are checked here too: a part that overrides propose() skips its own check
            part = self.parts[index]
            draft = check_draft(part.propose(request_id, limit), limit, part.name)
            tokens[li, 0, : len(draft.tokens)] = draft.tokens
            lengths[li, 0] = len(draft.tokens)
            scores[li, 0] = np.nan if draft.score is None else draft.score
            matches[li, 0] = draft.match or 0
            sources.append([draft.source])
        none = np.zeros(0, dtype=np.int64)
        chosen = self._choose(slots, none, np.zeros(2, dtype=np.int64), np.zeros(1, dtype=np.bool_), limits, tokens, lengths,
                              self._bands(scores, lengths, limits, matches))  # fmt: skip
        choice, asked = int(chosen[0][0]), int(chosen[2][0])
        neural_tokens = np.zeros((len(self.choosing.neurals), 1, self.positions), dtype=np.int64)
        neural_lengths = np.zeros((len(self.choosing.neurals), 1), dtype=np.int64)
        neural_sources: list[list[str]] = [[""] for _ in self.choosing.neurals]
        ni = choice - len(self.choosing.lookups)
        if ni >= 0:
            part = self.parts[self.choosing.neurals[ni]]
            draft = check_draft(part.propose(request_id, asked), asked, part.name)
            neural_tokens[ni, 0, : len(draft.tokens)] = draft.tokens
            neural_lengths[ni, 0] = len(draft.tokens)
            neural_sources[ni][0] = draft.source
        out_tokens, out_lengths, out_scores, out_neural, continued_by = self._finish(
            slots, chosen, tokens, lengths, neural_tokens, neural_lengths, limit
        )
        source = self._sources(chosen[0], continued_by, sources, neural_sources)[0]
        drafted = tuple(out_tokens[0, : int(out_lengths[0])].tolist())
        return Draft(drafted, source, float(out_scores[0]), needs_neural=bool(out_neural[0]))

    # ---------------------------------------------------------------- the whole batch
    def _step_batch(self, step: BatchStep) -> BatchDrafts:
        methods = step.methods
        if methods is None:
            return self._step_rows(step)
        self._allowed = self._allowed_of(methods)
        try:
            return self._step_rows(step)
        finally:
            self._allowed = self._no_allowed

    def _step_rows(self, step: BatchStep) -> BatchDrafts:
        self._step_lifecycle(step)
        rows = step.rows
        ids, new_tokens, offsets = step.request_ids, step.new_tokens, step.offsets
        limits = np.minimum(step.limits, self.positions)
        pending, slot_of, drafts = self._pending, self._slot, self._drafts
        if drafts.dirty:  # drafts that per-request calls made: into the arrays first
            drafts.sync(pending, slot_of)
        slots = self._rows.of(ids, self._slot)
        observed = self._observed_rows(ids, new_tokens, offsets) if self._observes else ()
        # acceptance of each row's last draft, as extend() counts it: in arrays, no Python per row
        accepted = np.zeros(rows, dtype=np.int64)
        _row_drafts.resolve_rows(drafts.tokens, drafts.lengths, slots, new_tokens, offsets, accepted)
        if drafts.trees:
            drafts.settle_trees(pending, ids, new_tokens, offsets, step.limits, accepted)
        tokens, lengths, scores, matches = self._chosen.drafts(rows)
        sources: list[str | Sequence[str]] = []
        part_step = BatchStep(ids, new_tokens, offsets, limits)
        for li, index in enumerate(self.choosing.lookups):
            part = self.parts[index]
            if self._kernel_lookups[li] and part.kernel_takes(rows):
                # its kernel writes this lookup's rows of the arrays itself (_drafts_into)
                with part._lock:
                    part._draft_rows(part_step, tokens[li], lengths[li], scores[li], matches[li])
                sources.append(part.name)  # every row's
                continue
            got = _part_step(part, part_step)
            width = got.tokens.shape[1] if rows else 0
            tokens[li, :, :width] = got.tokens
            lengths[li] = got.lengths
            scores[li] = got.scores
            matches[li] = got.matches
            sources.append(got.sources)
        width = int(step.limits.max()) if rows else 0
        if self._one_call:  # no neural part: the choice and the drafts in one kernel call
            chosen, out = self._choose_finished(slots, new_tokens, offsets, limits, tokens, lengths, scores, matches, width)
            choice, neural_sources = chosen[0], []
        else:
            chosen, out, neural_sources = self._choose_then_finish(step, slots, limits, tokens, lengths, scores, matches,
                                                                   width)
            choice = chosen[0]
        for request_id, last, count in observed:  # as extend() does, once the tokens are in
            self._observe(request_id, last, count)
        out_tokens, out_lengths, out_scores, out_neural, continued_by = out
        # what the next step's acceptance count reads (and extend(), through each request's RowDraft)
        _row_drafts.remember_rows(drafts.tokens, drafts.lengths, drafts.scores, slots, step.limits, out_tokens,
                                  out_lengths, out_scores)
        sources_of_rows = self._sources(choice, continued_by, sources, neural_sources)
        return BatchDrafts(out_tokens, out_lengths, accepted, sources_of_rows, out_scores, out_neural)

    def _choose_then_finish(
        self, step: BatchStep, slots: np.ndarray, limits: np.ndarray, tokens: np.ndarray, lengths: np.ndarray,
        scores: np.ndarray, matches: np.ndarray, width: int,
    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...], list[Sequence[str]]]:
        """The choice, the chosen neural parts' drafts (a batch call each) and every row's draft."""
        ids, new_tokens, offsets, rows = step.request_ids, step.new_tokens, step.offsets, len(slots)
        chosen = self._choose_batch(slots, new_tokens, offsets, limits, tokens, lengths, scores, matches)
        if self._shared_passes.any() and self.choosing.cost is not None and rows:
            self._price_shared_passes(slots, lengths, chosen)
        choice, _, asked = chosen[0], chosen[1], chosen[2]
        n_neurals, n_lookups = len(self.choosing.neurals), len(self.choosing.lookups)
        neural_tokens = np.zeros((n_neurals, rows, self.positions), dtype=np.int64)
        neural_lengths = np.zeros((n_neurals, rows), dtype=np.int64)
        neural_sources: list[Sequence[str]] = []
        for ni, index in enumerate(self.choosing.neurals):
            # every row's tokens go in; a draft comes out only where this part was chosen
            asking = np.where(choice == n_lookups + ni, asked, 0)
            got = _part_step(self.parts[index], BatchStep(ids, new_tokens, offsets, asking))
            drafted = got.tokens.shape[1] if rows else 0
            neural_tokens[ni, :, :drafted] = got.tokens
            neural_lengths[ni] = got.lengths
            neural_sources.append(got.sources)
        out = self._finish(slots, chosen, tokens, lengths, neural_tokens, neural_lengths, width)
        return chosen, out, neural_sources

    def _choose_finished(
        self, slots: np.ndarray, new_tokens: np.ndarray, offsets: np.ndarray, limits: np.ndarray, tokens: np.ndarray,
        lengths: np.ndarray, scores: np.ndarray, matches: np.ndarray, width: int,
    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
        """What :meth:`_choose_batch` then :meth:`_finish` give a composite with no neural part and
        the linear cost model, in one kernel call (``_choose_step.choose_and_finish``)."""
        rows = len(slots)
        out = (np.zeros((rows, width), dtype=np.int64), np.zeros(rows, dtype=np.int64), np.zeros(rows),
               np.zeros(rows, dtype=np.bool_), np.empty(rows, dtype=np.int64))
        chosen = self._run_choice(choose_and_finish, slots, new_tokens, offsets, limits, tokens, lengths, scores, matches,
                                  *out)
        return chosen, out

    def _price_shared_passes(self, slots: np.ndarray, lookup_lengths: np.ndarray, chosen: tuple[np.ndarray, ...]) -> None:
        """Each row chose as if the whole batch drafted alike, so a neural part whose one pass serves
        every row (``shared_pass``: an engine's MTP/EAGLE head) was charged that pass against the
        gains of all rows. Here the pass is priced once against the rows that actually chose it: when
        the step's expected tokens per second are higher with none of them taking it (each on its
        best other choice, or plain decoding), they fall back and the pass is not run."""
        choice, cut, asked, expected, _, _, _, fallback, hopeful = chosen
        cost = self.choosing.cost
        lookups = len(self.choosing.lookups)
        kv = int(self._lengths[slots].sum())
        drafting = choice >= 0
        base_kinds = ("lookup",) if lookup_lengths.any() else ()
        for ni in np.flatnonzero(self._shared_passes).tolist():
            takers = choice == lookups + ni
            if not takers.any():
                continue
            others = drafting & ~takers
            other_tokens = float(cut[others].sum())
            other_gain = float(expected[others].sum())
            rows = len(choice)
            with_tokens = rows + other_tokens + float(hopeful[takers, 0].sum())
            with_gain = rows + other_gain + float(hopeful[takers, 1].sum())
            without_tokens = rows + other_tokens + float(fallback[takers, 1].sum())
            without_gain = rows + other_gain + float(fallback[takers, 2].sum())
            with_time = _step_time(cost, int(with_tokens), kv, (*base_kinds, "neural"), int(asked[takers].sum()))
            without_time = _step_time(cost, int(without_tokens), kv, base_kinds, 0)
            if without_gain * with_time >= with_gain * without_time:  # the pass does not pay for the batch
                choice[takers] = fallback[takers, 0].astype(np.int64)
                cut[takers] = fallback[takers, 1].astype(np.int64)
                expected[takers] = fallback[takers, 2]
                asked[takers] = 0
                self.shared_pass_declined += 1

    @property
    def _observes(self) -> bool:
        """A subclass that learns from acceptance (``_observe``) gets the per-request calls' arguments."""
        return type(self)._observe is not Proposer._observe

    def _observed_rows(self, ids, new_tokens: np.ndarray, offsets: np.ndarray) -> list[tuple[RequestId, object, int]]:
        """(request, last draft, accepted) of every row with new tokens and a last draft, before they resolve."""
        pending, bounds, flat = self._pending, offsets.tolist(), new_tokens.tolist()
        out = []
        for row, request_id in enumerate(ids):
            last = pending[request_id]
            if bounds[row + 1] > bounds[row] and last is not None:
                if isinstance(last, RowDraft):  # a row of the arrays, copied (it is about to change); empty: none
                    if not len(last):
                        continue
                    last = last.draft()
                out.append((request_id, last, draft_accepted(last, flat[bounds[row] : bounds[row + 1]])))
        return out

    # ---------------------------------------------------------------- the kernels' arguments
    def _lookup_arrays(self, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        lookups = len(self.choosing.lookups)
        return (
            np.zeros((lookups, rows, self.positions), dtype=np.int64),
            np.zeros((lookups, rows), dtype=np.int64),
            np.full((lookups, rows), np.nan),
            np.zeros((lookups, rows), dtype=np.int64),
        )

    @staticmethod
    def _bands(scores: np.ndarray, lengths: np.ndarray, limits: np.ndarray, matches: np.ndarray) -> np.ndarray:
        return score_bands_of_rows(scores, lengths, limits, matches) if len(scores) else lengths.copy()

    def _choose_batch(
        self, slots: np.ndarray, new_tokens: np.ndarray, offsets: np.ndarray, limits: np.ndarray, tokens: np.ndarray,
        lengths: np.ndarray, scores: np.ndarray, matches: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        """What :meth:`_choose` gives for a batch step, in one kernel (``_choose_step``) with the
        linear cost model or none; any other model prices its steps in Python, so :meth:`_choose`."""
        cost = self.choosing.cost
        if cost is not None and not isinstance(cost, LinearCostModel):
            extended = offsets[1:] > offsets[:-1]
            bands = self._bands(scores, lengths, limits, matches)
            return self._choose(slots, new_tokens, offsets, extended, limits, tokens, lengths, bands)
        return self._run_choice(choose_batch, slots, new_tokens, offsets, limits, tokens, lengths, scores, matches)

    def _run_choice(
        self, kernel, slots: np.ndarray, new_tokens: np.ndarray, offsets: np.ndarray, limits: np.ndarray,
        tokens: np.ndarray, lengths: np.ndarray, scores: np.ndarray, matches: np.ndarray, *finished: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        """``kernel`` (``_choose_step``'s ``choose_batch``, or ``choose_and_finish`` with its outputs
        ``finished``) with the composite's state, until the waiting-draft table had room (the kernel
        changes nothing while it has not: it says what room it wants, the table grows, it runs again)."""
        cost, rows = self.choosing.cost, len(slots)
        if cost is not None:
            self._linear_args(cost, self.batch_size)
        longest = np.array([self._neural_longest(index) for index in self.choosing.neurals], dtype=np.int64) \
            if len(self.choosing.neurals) else self._no_neurals
        arrays = self._chosen
        chosen = arrays.rows(rows)
        logs = arrays.logs(scores)
        waiting = self._waiting
        while True:
            wanted = kernel(
                slots, new_tokens, offsets, limits, tokens, lengths, scores, matches, logs, self._lookup_tracks,
                self._neural_tracks, longest, self._pricing, self._params, self._flags, self._lengths, self._step_count,
                self._widest, self._own_drafted, self._own_accepted, self._pooled_drafted, self._pooled_accepted,
                waiting.meta, waiting.tokens, waiting.count, *arrays.scratch(rows), self._no_times, *chosen,
                self._allowed, *finished,
            )  # fmt: skip
            if not wanted:
                return chosen
            waiting.make_room(wanted)

    def _choose(
        self, slots: np.ndarray, new_tokens: np.ndarray, offsets: np.ndarray, extended: np.ndarray, limits: np.ndarray,
        tokens: np.ndarray, lengths: np.ndarray, bands: np.ndarray,
    ) -> tuple[np.ndarray, ...]:
        rows = len(slots)
        waiting = self._waiting
        if rows:  # room for what this step may add per row: each lookup's draft, a neural one, a confirmed one,
            # a calibrated one
            waiting.make_room(int(waiting.count[slots].max()) + len(self.choosing.lookups) + 3)
        longest = np.array([self._neural_longest(index) for index in self.choosing.neurals], dtype=np.int64)
        if limits.any():
            times = self._step_times(self._lengths[slots] + (offsets[1:] - offsets[:-1]) * extended)
        else:  # only new tokens: nothing to price
            times = self._no_times
        choice = np.empty(rows, dtype=np.int64)
        cut = np.zeros(rows, dtype=np.int64)
        asked = np.zeros(rows, dtype=np.int64)
        expected = np.zeros(rows)
        other_expected = np.zeros(rows)
        lookups = len(self.choosing.lookups)
        confirmed_cut = np.zeros((rows, lookups), dtype=np.int64)
        confirmed_expected = np.zeros((rows, lookups))
        fallback = np.zeros((rows, 3))
        hopeful = np.zeros((rows, 2))
        _choice.choose_rows(
            slots, new_tokens, offsets, extended, limits, tokens, lengths, bands, self._lookup_tracks,
            self._neural_tracks, longest, times, self._params, self._flags, self._lengths, self._step_count,
            self._own_drafted, self._own_accepted, self._pooled_drafted, self._pooled_accepted,
            waiting.meta, waiting.tokens, waiting.count,
            choice, cut, asked, expected, other_expected, confirmed_cut, confirmed_expected, fallback, hopeful,
            self._widest, False, self._no_pricing, self._allowed,
        )  # fmt: skip
        return choice, cut, asked, expected, other_expected, confirmed_cut, confirmed_expected, fallback, hopeful

    def _finish(
        self, slots: np.ndarray, chosen: tuple[np.ndarray, ...], tokens: np.ndarray, lengths: np.ndarray,
        neural_tokens: np.ndarray, neural_lengths: np.ndarray, width: int,
    ) -> tuple[np.ndarray, ...]:
        rows = len(slots)
        out = np.zeros((rows, max(width, self.positions)), dtype=np.int64)
        out_lengths = np.zeros(rows, dtype=np.int64)
        out_scores = np.zeros(rows)
        out_neural = np.zeros(rows, dtype=np.bool_)
        continued_by = np.zeros(rows, dtype=np.int64)
        choice, cut, _, expected, other_expected, confirmed_cut, confirmed_expected = chosen[:7]
        waiting = self._waiting
        _choice.finish_rows(
            slots, choice, cut, expected, other_expected, confirmed_cut, confirmed_expected, tokens, lengths,
            neural_tokens, neural_lengths, self._neural_tracks, self._flags, self._lengths,
            waiting.meta, waiting.tokens, waiting.count, out, out_lengths, out_scores, out_neural, continued_by,
            self._allowed,
        )  # fmt: skip
        out_neural[choice == _choice.NOT_DRAFTED] = True  # as empty_draft()
        return out[:, :width], out_lengths, out_scores, out_neural, continued_by

    def _sources(
        self, choice: np.ndarray, continued_by: np.ndarray, sources: Sequence[str | Sequence[str]],
        neural_sources: Sequence[Sequence[str]],
    ) -> list[str]:
        """Each row's ``Draft.source``: the chosen part's, ``neural+lookup`` where a lookup continued
        a neural draft, the composite's name for no draft. A column of ``sources`` is a part's name
        per row, or one name (a str) for every row."""
        lookups, name, rows = len(sources), self.name, len(choice)
        columns = [*sources, *neural_sources]
        single = tuple(_one_name(column, name) for column in columns)
        if None not in single:
            # each part names every row alike (the usual case): a row's source is read from a table
            # [choice, continued_by + 1] built once per set of names, in one fancy index (its
            # column 0 alone where there is no neural part). Column 0 is the chosen part's name,
            # column 1 + l "neural+lookup" for lookup l continuing a neural draft (continued_by is
            # -1 on every other row: _choice.finish_rows); the choices -1 and -2 (EMPTY,
            # NOT_DRAFTED) read the last two rows, the composite's name.
            if single != self._source_key:
                table = np.empty((len(single) + 2, lookups + 1), dtype=object)
                for at, part in enumerate((*single, name, name)):
                    table[at, 0] = part
                    table[at, 1:] = [f"{part}+{lookup}" for lookup in single[:lookups]]
                self._source_key, self._source_names, self._source_table = single, table[:, 0].copy(), table
            if not neural_sources:  # nothing continued: a 1-d index is the cheaper
                return self._source_names[choice].tolist()
            return self._source_table[choice, continued_by + 1].tolist()
        columns = [[column] * rows if isinstance(column, str) else column for column in columns]
        continued = (continued_by >= 0) & (choice >= lookups)
        out = [columns[chosen][row] if chosen >= 0 else name for row, chosen in enumerate(choice.tolist())]
        for row in np.flatnonzero(continued).tolist():
            out[row] = f"{out[row]}+{columns[continued_by[row]][row]}"
        return out

    def _neural_longest(self, index: int) -> int:
        """The most tokens neural part ``index`` is asked for (0: the step's limit)."""
        return self.parts[index].max_draft_tokens or 0

    def _step_times(self, contexts: np.ndarray) -> np.ndarray:
        """Step times [row, drafters (_KINDS), draft length 0..positions] at each row's context."""
        cost, rows = self.choosing.cost, len(contexts)
        if cost is None:
            return np.zeros((rows, len(_KINDS), 1))
        batch, positions = self.batch_size, self.positions
        whole_step = getattr(cost, "spec_step_times", None)  # a model whose times do not depend on the context
        if callable(whole_step):  # (OnlineCostModel): one row serves all
            one = np.array([whole_step(batch, positions, kinds) for kinds in _KINDS])
            return np.broadcast_to(one, (rows, len(_KINDS), positions + 1))
        if not isinstance(cost, LinearCostModel):  # any other model prices each step itself
            return np.array([
                [spec_step_times(cost, batch, context, positions, kinds) for kinds in _KINDS] for context in contexts.tolist()
            ]).reshape(rows, len(_KINDS), positions + 1)  # fmt: skip
        # spec_step_times of the linear model, every row at once (the same operations, in one numba pass)
        self._linear_args(cost, batch)
        out = np.empty((rows, len(_KINDS), positions + 1))
        linear_step_times(contexts.astype(np.int64), batch, *self._times_args, out)
        return out

    def _linear_args(self, cost: LinearCostModel, batch: int) -> None:
        """``_times_args`` and ``_pricing`` for ``cost`` at ``batch`` (they change only with those)."""
        key = (cost, batch)
        if self._times_key != key:
            self._times_key, self._times_args = key, _linear_coefficients(cost, batch)
            self._pricing = (batch, *self._times_args)

    # ---------------------------------------------------------------- statistics
    def estimate(self, request_id: RequestId, track: int, band: int = 0, prior: float | np.ndarray | None = None) -> np.ndarray:
        """Acceptance per draft position in ``track`` (and ``band``) for this request: its counts shrunk
        towards the pooled ones, those towards ``prior`` (default: the composite's)."""
        slot = self._slot[request_id]
        own = PositionStats(self._own_drafted[slot, track], self._own_accepted[slot, track])
        pooled = PositionStats(self._pooled_drafted[track], self._pooled_accepted[track])
        return estimate(own, pooled, band, self.prior if prior is None else prior, self.prior_weight)

    def optimism(self, track: int, band: int = 0) -> np.ndarray:
        """The exploration bonus per position of ``track``: a part observed only when it is
        called, judged on a few unlucky steps, would otherwise never be called again."""
        pooled = PositionStats(self._pooled_drafted[track], self._pooled_accepted[track])
        return optimism(pooled, band, self._steps, self.explore, self.prior_weight)

    def statistics(self) -> tuple[np.ndarray, np.ndarray, dict[RequestId, tuple[np.ndarray, np.ndarray, int]]]:
        """Copies of what the composite learned: pooled drafted and accepted counts [track, band,
        position], and per live request its own counts and length (for tests and inspection)."""
        own = {
            request_id: (self._own_drafted[slot].copy(), self._own_accepted[slot].copy(), int(self._lengths[slot]))
            for request_id, slot in self._slot.items()
        }
        return self._pooled_drafted.copy(), self._pooled_accepted.copy(), own


class _ChoiceArrays:
    """The batch step's arrays, kept between steps and grown with the batch: the lookups' drafts
    (each lookup's kernel writes every row's length and score, and no draft is read past its
    length), the choice's outputs (as :meth:`CompositeProposer._choose` returns them) and scratch.
    A step's views of them are valid until the next step (``choose_batch`` zeroes each row of
    its outputs before it writes). Each array is flat, its views of a step's rows reshaped from
    its head, so they stay contiguous (one compiled layout per kernel)."""

    def __init__(self, lookups: int, positions: int) -> None:
        self.lookups, self.positions, self.capacity = lookups, positions, 0
        self._views: dict[int, tuple[tuple[np.ndarray, ...], ...]] = {}
        self._grow(8)

    def _grow(self, rows: int) -> None:
        self.capacity, lookups = rows, self.lookups
        self._views.clear()
        self.choice, self.cut, self.asked = (np.zeros(rows, dtype=np.int64) for _ in range(3))
        self.expected, self.other_expected = np.zeros(rows), np.zeros(rows)
        self.confirmed_cut, self.confirmed_expected = np.zeros((rows, lookups), dtype=np.int64), np.zeros((rows, lookups))
        self.fallback, self.hopeful = np.zeros((rows, 3)), np.zeros((rows, 2))
        self._bands = np.zeros(lookups * rows, dtype=np.int64)
        self.extended = np.zeros(rows, dtype=np.bool_)
        self._tokens = np.zeros(lookups * rows * self.positions, dtype=np.int64)
        self._lengths = np.zeros(lookups * rows, dtype=np.int64)
        self._scores = np.full(lookups * rows, np.nan)
        self._matches = np.zeros(lookups * rows, dtype=np.int64)
        self._logs = np.zeros(lookups * rows)

    def _of(self, rows: int) -> tuple[tuple[np.ndarray, ...], ...]:
        views = self._views.get(rows)
        if views is None:
            if rows > self.capacity:
                self._grow(max(rows, 2 * self.capacity))
            lookups, size = self.lookups, self.lookups * rows
            chosen = (self.choice[:rows], self.cut[:rows], self.asked[:rows], self.expected[:rows],
                      self.other_expected[:rows], self.confirmed_cut[:rows], self.confirmed_expected[:rows],
                      self.fallback[:rows], self.hopeful[:rows])
            scratch = (self._bands[:size].reshape(lookups, rows), self.extended[:rows])
            drafts = (self._tokens[: size * self.positions].reshape(lookups, rows, self.positions),
                      self._lengths[:size].reshape(lookups, rows), self._scores[:size].reshape(lookups, rows),
                      self._matches[:size].reshape(lookups, rows))
            views = self._views[rows] = (chosen, scratch, drafts, (self._logs[:size].reshape(lookups, rows),))
        return views

    def rows(self, rows: int) -> tuple[np.ndarray, ...]:
        """The choice's outputs for ``rows`` rows."""
        return self._of(rows)[0]

    def scratch(self, rows: int) -> tuple[np.ndarray, ...]:
        """The score bands [lookup, row], which rows gained tokens."""
        return self._of(rows)[1]

    def drafts(self, rows: int) -> tuple[np.ndarray, ...]:
        """The lookups' drafts: tokens [lookup, row, position], lengths, scores and match lengths [lookup, row]."""
        return self._of(rows)[2]

    def logs(self, scores: np.ndarray) -> np.ndarray:
        """log2(1 + max(score, 0)) of the lookups' ``scores`` (as ``score_bands_of_rows`` takes
        them, with the same ufuncs: equal to the last bit), into a kept array."""
        logs = self._of(scores.shape[1])[3][0]
        np.fmax(scores, 0.0, out=logs)
        logs += 1.0
        return np.log2(logs, out=logs)


def _one_name(column: str | Sequence[str], default: str) -> str | None:
    """The name every row of a sources column has (``default`` for no rows), None where they differ."""
    if isinstance(column, str):
        return column
    if not isinstance(column, list):
        return None
    if not column:
        return default
    return column[0] if column.count(column[0]) == len(column) else None


def _step_time(cost: CostModel, batched_tokens: int, kv_tokens: int, kinds: tuple[str, ...], draft_tokens: int) -> float:
    """One step of the batch as it would run: ``batched_tokens`` verified, each drafter in ``kinds`` run once."""
    verify = cost.verify_time(batched_tokens, kv_tokens)
    drafting = sum(cost.draft_time(kind, max(draft_tokens, 1), kv_tokens, verify) for kind in kinds)
    return verify + drafting + cost.step_overhead()


def _linear_coefficients(cost: LinearCostModel | None, batch: int) -> tuple[np.ndarray, ...]:
    """:func:`linear_step_times`'s arguments after ``batch``: the verify terms, and per drafter
    kind (_KINDS) its drafters' KV and fixed terms, their count, its verify fraction and its per
    draft token × batch, summed in the order ``spec_step_times`` sums them."""
    kinds = len(_KINDS)
    if cost is None:  # no cost model: the arguments' shapes, for a kernel that prices nothing
        no_terms = np.zeros(kinds, dtype=np.int64)
        return np.zeros(4), np.zeros((kinds, 2)), np.zeros((kinds, 2)), no_terms, np.ones(kinds), np.zeros(kinds)
    v_kv, v_tok, v_fixed, overhead = _verify_coefficients(cost)
    kind_kv, kind_fixed = np.zeros((kinds, 2)), np.zeros((kinds, 2))
    kind_terms, fractions, per_token = np.zeros(kinds, dtype=np.int64), np.ones(kinds), np.zeros(kinds)
    for at, names in enumerate(_KINDS):
        fraction, slope = 1.0, 0.0
        for term, name in enumerate(names):
            d_kv, d_tok, d_fixed, d_frac = _draft_coefficients(cost, name)
            fraction += d_frac
            slope += d_tok
            kind_kv[at, term], kind_fixed[at, term] = d_kv, d_fixed
        kind_terms[at], fractions[at], per_token[at] = len(names), fraction, slope * batch
    verify = np.array([v_kv, v_tok * batch, v_fixed, overhead])
    return verify, kind_kv, kind_fixed, kind_terms, fractions, per_token
