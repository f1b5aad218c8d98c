"""``hybrid``: the model's own neural drafter (MTP/EAGLE) or a lookup, whichever should pay more.

At each step the lookup drafts first (it is cheap). Both parts' expected accepted tokens
come from running per-request estimates of acceptance at each draft position (shrunk
towards estimates pooled over all requests): the lookup's kept per band of its
``Draft.score``, so a long, often-seen match counts for more than a two-token guess; the
neural drafter's learned from the steps it drafted. The lookup's expectation for its draft
is compared with the neural drafter's for its ``k`` tokens.
When the lookup wins, the neural drafter is not called and the draft says
``needs_neural=False``, so an adapter may skip the MTP/EAGLE pass. When the neural drafter
wins and the lookup's draft starts with the same tokens, the lookup's longer continuation
extends it (both agree so far; the lookup has seen this text before).

With a cost model (``cost=``, and the engine's batch size through ``batch_size`` or
:meth:`HybridProposer.set_batch_size`) the hybrid compares expected tokens per second
instead: ``(1 + E(k)) / step_time(k)`` for the lookup's draft cut to each length ``k``
(a lookup step costs the lookup only), for the neural draft of each length (a neural step
costs the neural drafter, plus the lookup when it had drafted), and for plain decoding. The
neural drafter is asked for the length that pays best; when the lookup's draft starts with
all of those tokens, the longer agreeing draft is priced with its own acceptance statistics
("confirmed" drafts: two drafters that agree are right more often than either alone) and
drafted at the length that pays best. When no choice is expected to beat plain decoding --
at large batch on text that neither part predicts -- the draft is empty. A cut draft and an
empty one are both goodput decisions: the hybrid never drops a draft that its estimates say
would pay. Without a cost model it compares expected accepted tokens, as above, and always
drafts when a part has a draft.

Two of its estimates are learnt from the traffic it serves: how far a request's own neural counts
are trusted against the pooled ones (``neural_request_weight``, by default from how much the
finished requests differ), and what a lookup's draft taken alone brings (``calibration_weight``:
such drafts, taken or not, are scored apart, and what they realised over what was expected scales
the lookup's estimate for that choice). docs/proposers.md says why. All it learns pools into
per-position counts, which ``learnt_state = PATH`` keeps in a file, so that a restarted server
starts from them rather than from the prior (``_learnt``).

The cost-aware choice is the composite base's (``_choice.choose_rows``), shared with ``adaptive``;
the base also runs the step for a whole batch at once (one kernel call for every row's choice).

Both parts see every request's tokens (``start``/``extend``/``stop`` go to both), so each
learns as if it drafted alone. Every draft a part makes is scored against the tokens
verified after it, over as many later steps as they take to reach its end: a lookup draft
that was not chosen, or was cut short, still teaches what its later positions would have
done (scored on the next step alone, the positions past a cut would never be observed).
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

__all__ = ["HybridOptions", "HybridProposer"]


class HybridOptions(MethodOptions):
    neural: Proposer = Field(description="the engine's neural drafter (MTP/EAGLE head, draft model) as a Proposer")
    lookup: Proposer | str = Field("suffix", description="lookup proposer, or the name of a method")
    neural_max_tokens: int | None = Field(
        None, ge=1, le=1024, description="tokens the neural head drafts per step (None: the step's max_tokens)"
    )
    prior: float = Field(0.6, gt=0, lt=1, allow_inf_nan=False, description="acceptance per draft position before any is observed")
    prior_weight: float = Field(4.0, gt=0, le=1e6, allow_inf_nan=False, description="observations the pooled estimate is worth for a new request")
    explore: float = Field(0.3, ge=0, le=100, allow_inf_nan=False, description="optimism for the neural drafter's rarely observed positions (UCB scale; by cost, each position's bonus weighed by how often it is reached); with costs learnt online (the engine adapters' default), weighed by the share of a step a failed neural draft keeps")
    neural_probe: NeuralProbe = None
    lookup_prior_weight: LookupPriorWeight = 1.0
    call_bound: CallBound = 0.0
    half_life: float = Field(
        16.0, ge=0, le=1e6, allow_inf_nan=False, description="a request's own counts halve in weight every this many drafts of a part (0: never)"
    )
    margin: float = Field(0.0, ge=-1024, le=1024, allow_inf_nan=False, description="without a cost model: the lookup wins when its expectation >= the neural one - margin")
    calibration_weight: CalibrationWeight = 16.0
    neural_request_weight: NeuralRequestWeight = None
    learnt_state: LearntStatePath = None
    max_positions: int = Field(32, ge=1, le=1024, description="draft positions tracked")
    continue_with_lookup: bool = Field(True, description="extend a neural draft with the lookup's continuation where they agree")
    cost: CostModel | str | None = Field(
        None, description="cost model, preset name or .toml path: choose by expected tokens/s (None: by expected accepted tokens)"
    )
    batch_size: int = Field(1, ge=1, le=65536, description="requests the engine batches per step (set_batch_size() updates it)")

    @field_validator("lookup", mode="before")
    @classmethod
    def _lookup_name(cls, value: object) -> object:
        if isinstance(value, str) and value in ("hybrid", "adaptive"):
            raise ValueError(f"lookup = {value!r} is a composite method; use a lookup such as 'suffix' or 'ngram'")
        return value

    @model_validator(mode="after")
    def _two_parts(self) -> HybridOptions:
        if self.neural is self.lookup:
            raise ValueError("neural and lookup are the same proposer object; pass two proposers")
        return self


#: the hybrid's statistics tracks: the lookup's drafts (per score band), the neural drafter's,
#: lookup drafts whose start the neural drafter drafted too ("confirmed"), and, by cost, the
#: lookup's drafts that the choice would take alone (per score band: "calibrated"; the track after it
#: holds what their estimates expected)
LOOKUP, NEURAL, CONFIRMED, CALIBRATED = 0, 1, 2, 3


class HybridProposer(CompositeProposer):
    """Chooses per step between a neural drafter and a lookup by expected accepted tokens (or tokens/s).

    >>> import specplug
    >>> neural = specplug.create("ngram", min_n=1, max_n=1)   # any Proposer stands in for MTP here
    >>> hybrid = specplug.create("hybrid", neural=neural, lookup="ngram", prior=0.9, explore=0.0)
    >>> hybrid.start("r", [1, 2, 3, 4, 1, 2])
    >>> draft = hybrid.propose("r", 2)
    >>> draft.tokens, draft.source, draft.needs_neural
    ((3, 4), 'ngram', False)

    With a cost model it drafts what pays most per second, and nothing where nothing pays:

    >>> costed = specplug.create("hybrid", neural=specplug.create("ngram", min_n=1, max_n=1), lookup="ngram",
    ...                          cost="llama-3.1-8b-h100", batch_size=1, explore=0.0)
    >>> costed.start("r", [1, 2, 3, 4, 1, 2])
    >>> costed.propose("r", 2).tokens
    (3, 4)
    >>> costed.set_batch_size(4096)    # verification is no longer free: plain decoding wins
    >>> costed.propose("r", 2).tokens
    ()
    """

    name = "hybrid"
    draft_kind = "neural"

    def __init__(self, options: HybridOptions) -> None:
        self.options = options
        self.neural = options.neural
        self.lookup: Proposer = resolved(options.lookup, "lookup")
        cost = resolved(options.cost, "cost")
        self.cost: CostModel | None = None if cost is None else checked_step_times(cost)
        calibrated = self.cost is not None and options.calibration_weight > 0
        choosing = Choosing(
            lookups=(LOOKUP,), neurals=(NEURAL,), cost=self.cost,
            confirmed=CONFIRMED if options.continue_with_lookup else None,
            margin=options.margin, continue_with_lookup=options.continue_with_lookup,
            calibrated=(CALIBRATED,) if calibrated else (), calibration_weight=options.calibration_weight,
        )  # fmt: skip
        super().__init__(
            [self.lookup, self.neural],
            choosing=choosing,
            tracks=5 if calibrated else 3,
            positions=options.max_positions,
            prior=options.prior,
            prior_weight=options.prior_weight,
            explore=options.explore,
            batch_size=options.batch_size,
            half_life=options.half_life,
            probe=probes(options.neural_probe, [self.neural]),
            lookup_prior_weight=options.lookup_prior_weight,
            call_bound=options.call_bound,
            neural_request_weight=options.neural_request_weight,
            learnt_state=options.learnt_state,
        )

    def acceptance(self, request_id: RequestId, lookup_band: int, *, optimistic: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Estimated acceptance per draft position of a lookup draft in ``lookup_band`` and of a
        neural draft (``optimistic``: plus its exploration bonus, as it is observed only when called)."""
        lookup = self.estimate(request_id, LOOKUP, lookup_band)
        neural = self.estimate(request_id, NEURAL)
        if optimistic:
            neural = np.minimum(neural + self.optimism(NEURAL), 1.0)
        return lookup, neural

    def expected(self, request_id: RequestId, *, lookup_tokens: int, lookup_band: int, neural_tokens: int) -> tuple[float, float]:
        """Expected accepted tokens of a lookup draft (length, score band) and of a neural draft."""
        lookup, neural = self.acceptance(request_id, lookup_band)
        return _expected_tokens(lookup[:lookup_tokens]), _expected_tokens(neural[:neural_tokens])

    def _neural_longest(self, index: int) -> int:
        return self.options.neural_max_tokens or self.neural.max_draft_tokens or 0


def _expected_tokens(accepted: np.ndarray) -> float:
    # sum_j prod_{i<=j} p_i, summed in position order as the choice kernel sums it
    return float(np.cumsum(np.cumprod(accepted))[-1]) if len(accepted) else 0.0


@hookimpl
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    registrar.add(
        "hybrid",
        HybridProposer,
        options=HybridOptions,
        summary="neural drafter (MTP/EAGLE) or lookup per step, by expected accepted tokens; skips the neural pass when the lookup wins",
        capabilities=MethodCapabilities(
            kind="neural", engine_drafter_option="neural", part_options=("lookup",), cost_option="cost", takes_batch_size=True
        ),
    )
