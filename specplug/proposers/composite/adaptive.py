"""``adaptive``: per step, the candidate and draft length that maximise expected tokens per second.

For every candidate and every length ``k`` the expected accepted tokens are
``E(k) = sum_{j<=k} prod_{i<=j} p_i``, where ``p_i`` is the probability that draft position
``i`` is accepted given that the positions before it were. ``p_i`` is estimated online
per request, per candidate and per position, shrunk towards the same estimate pooled over
all requests (a new request starts from what earlier ones showed). The goodput of a choice
is ``(1 + E(k)) / step_time(k)`` from the cost model at the current batch size; plain
decoding (``1 / plain_step_time``) is always a choice, so the draft is empty whenever
nothing beats it -- which is most steps at large batch, where verification stops being free.

Lookups are cheap, so they always draft and their positions are scored against the
verified tokens even when they were not chosen, as far as the text verified in later steps
reaches (so a long draft cut short still teaches what its later positions would have
done); a neural candidate is only called when it is chosen, and learns from the steps it
drafted. A lookup that scores its drafts (``Draft.score``, e.g. suffix decoding's expected
accepted tokens) has its statistics kept per score band, so a long, often-seen match is
trusted more than a two-token guess, apart for drafts it ended sooner than asked, and apart
for drafts copied after a match of at least four tokens (``Draft.match``).

The choice itself is the composite base's (``_choice.choose_rows``), the one the cost-aware hybrid
makes (given the hybrid's two parts and options, adaptive drafts what it drafts): a neural
draft that a lookup's longer draft continues is extended ("confirmed" drafts, with statistics
of their own), a position a drafter is seldom asked for leans on the positions before it, and
a request's own counts fade (``half_life``) so that its estimates follow acceptance that
drifts within it.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field, field_validator, model_validator

from specplug._drafts import RequestId
from specplug._proposer import Proposer
from specplug._hookimpl import hookimpl
from specplug._registry import MethodCapabilities, MethodRegistrar
from specplug._cost._linear import CostModel
from specplug._cost._steps import checked_step_times
from specplug.proposers.composite._composite import Choosing, CompositeProposer
from specplug.proposers._options import (
    CalibrationWeight, CallBound, LearntStatePath, LookupPriorWeight, MethodOptions, NeuralProbe, NeuralRequestWeight,
)
from specplug.proposers.composite._parts import probes, resolved

__all__ = ["AdaptiveOptions", "AdaptiveProposer"]


class AdaptiveOptions(MethodOptions):
    candidates: list[Proposer | str] = Field(
        ["suffix", "ngram"], min_length=1, description="proposers (or method names) to choose from"
    )
    neural: Proposer | str | None = Field(
        None, description="the engine's own drafter (MTP/EAGLE head, draft model), one more candidate; engines fill it"
    )
    cost: CostModel | str = Field("llama-3.1-8b-h100", description="cost model, preset name or .toml path")
    batch_size: int = Field(1, ge=1, le=65536, description="requests the engine batches per step (set_batch_size() updates it)")
    max_positions: int = Field(16, ge=1, le=256, description="draft positions tracked (longest draft considered)")
    prior: float = Field(0.6, gt=0, lt=1, allow_inf_nan=False, description="acceptance per position before any is observed")
    prior_weight: float = Field(4.0, gt=0, le=1e6, allow_inf_nan=False, description="observations the pooled estimate is worth for a new request")
    min_gain: float = Field(0.0, ge=0, le=100, allow_inf_nan=False, description="speculate only when goodput beats plain decoding by this share")
    explore: float = Field(
        0.3, ge=0, le=100, allow_inf_nan=False, description="optimism for rarely observed positions (UCB bonus scale; a neural candidate's weighed by how often each position is reached), so a candidate judged early is retried; with costs learnt online (the engine adapters' default), a neural candidate's is weighed by the share of a step its failed draft keeps"
    )
    neural_probe: NeuralProbe = None
    lookup_prior_weight: LookupPriorWeight = 1.0
    call_bound: CallBound = 0.0
    calibration_weight: CalibrationWeight = 16.0
    neural_request_weight: NeuralRequestWeight = None
    learnt_state: LearntStatePath = None
    half_life: float = Field(
        16.0, ge=0, le=1e6, allow_inf_nan=False, description="a request's own counts halve in weight every this many drafts of a candidate (0: never)"
    )

    @field_validator("candidates", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        if isinstance(value, (list, tuple)):
            for item in value:
                if isinstance(item, str) and item in ("adaptive",):
                    raise ValueError("'adaptive' cannot be a candidate of itself")
            objects = [id(item) for item in value if isinstance(item, Proposer)]
            if len(set(objects)) != len(objects):
                raise ValueError("the same proposer object is listed twice; pass one object per candidate")
        return value

    @model_validator(mode="after")
    def _neural_not_a_candidate_too(self) -> AdaptiveOptions:
        if self.neural is not None and any(self.neural is candidate for candidate in self.candidates):
            raise ValueError("the neural drafter is also listed among candidates; pass it once")
        return self


class AdaptiveProposer(CompositeProposer):
    """Goodput-maximising choice of candidate and draft length, empty when plain decoding wins.

    >>> import specplug
    >>> adaptive = specplug.create("adaptive", candidates=["ngram"], batch_size=1)
    >>> adaptive.start("r", [1, 2, 3, 4] * 8)
    >>> len(adaptive.propose("r", 4)) > 0
    True
    >>> adaptive.set_batch_size(4096)    # verification is no longer free: plain decoding wins
    >>> adaptive.propose("r", 4).tokens
    ()
    """

    name = "adaptive"

    def __init__(self, options: AdaptiveOptions) -> None:
        self.options = options
        self.candidates: list[Proposer] = [resolved(item, "candidates") for item in options.candidates]
        if options.neural is not None:  # the engine's own drafter, handed over as the hybrid's is
            self.candidates.append(resolved(options.neural, "neural"))
        # one statistics track per candidate, in the order given, and one for neural drafts that a
        # lookup's longer draft continues (as the hybrid's)
        self._confirmed = len(self.candidates)
        self.kinds = [candidate.draft_kind for candidate in self.candidates]
        self.cost: CostModel = checked_step_times(resolved(options.cost, "cost"))
        lookups = tuple(index for index, kind in enumerate(self.kinds) if kind == "lookup")
        # by cost, two calibration tracks per lookup after the confirmed one (as the hybrid's: realised, expected)
        calibrated = tuple(self._confirmed + 1 + 2 * at for at in range(len(lookups))) if options.calibration_weight > 0 else ()
        choosing = Choosing(
            lookups=lookups,
            neurals=tuple(index for index, kind in enumerate(self.kinds) if kind != "lookup"),
            cost=self.cost, confirmed=self._confirmed, min_gain=options.min_gain,
            calibrated=calibrated, calibration_weight=options.calibration_weight,
        )  # fmt: skip
        super().__init__(
            self.candidates,
            choosing=choosing,
            tracks=len(self.candidates) + 1 + 2 * len(calibrated),
            positions=options.max_positions,
            prior=options.prior,
            prior_weight=options.prior_weight,
            explore=options.explore,
            batch_size=options.batch_size,
            half_life=options.half_life,
            probe=probes(options.neural_probe, [part for part in self.candidates if part.draft_kind == "neural"]),
            lookup_prior_weight=options.lookup_prior_weight,
            call_bound=options.call_bound,
            neural_request_weight=options.neural_request_weight,
            learnt_state=options.learnt_state,
        )
        if "neural" in self.kinds:
            self.draft_kind = "neural"

    def acceptance(self, request_id: RequestId, index: int, band: int = 0) -> np.ndarray:
        """Estimated acceptance of each draft position for candidate ``index`` in this request
        (for drafts in score ``band``): the request's counts shrunk towards the pooled ones."""
        return self.estimate(request_id, index, band)


@hookimpl
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    registrar.add(
        "adaptive",
        AdaptiveProposer,
        options=AdaptiveOptions,
        summary="per step, the candidate and draft length with the best expected tokens/s under a cost model; empty when plain decoding wins",
        capabilities=MethodCapabilities(
            engine_drafter_option="neural", engine_drafter_required=False, part_options=("candidates",),
            cost_option="cost", takes_batch_size=True,
        ),
    )
