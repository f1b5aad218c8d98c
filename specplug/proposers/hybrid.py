"""``hybrid``: the model's own neural drafter (MTP/EAGLE) or a lookup, whichever should accept more.

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

Both parts see every request's tokens (``start``/``extend``/``stop`` go to both), so each
learns as if it drafted alone; acceptance of the part that did not draft is inferred from
the verified tokens where they reach.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import Field, field_validator, model_validator

from specplug._contract import Draft, Proposer, RequestId
from specplug._hookimpl import hookimpl
from specplug._registry import MethodRegistrar
from specplug.proposers._options import MethodOptions
from specplug.proposers._parts import PositionStats, estimate, optimism, resolve_part, score_band

__all__ = ["HybridOptions", "HybridProposer"]


class HybridOptions(MethodOptions):
    neural: Proposer = Field(description="the engine's neural drafter (MTP/EAGLE head, draft model) as a Proposer")
    lookup: Proposer | str = Field("suffix", description="lookup proposer, or the name of a method")
    neural_max_tokens: int | None = Field(
        None, ge=1, le=1024, description="tokens the neural head drafts per step (None: the step's max_tokens)"
    )
    prior: float = Field(0.6, gt=0, lt=1, description="acceptance per draft position before any is observed")
    prior_weight: float = Field(4.0, gt=0, description="observations the pooled estimate is worth for a new request")
    explore: float = Field(0.3, ge=0, description="optimism for the neural drafter's rarely observed positions (UCB scale)")
    margin: float = Field(0.0, description="the lookup wins when its expectation >= the neural one - margin")
    max_positions: int = Field(32, ge=1, le=1024, description="draft positions tracked")
    continue_with_lookup: bool = Field(True, description="extend a neural draft with the lookup's continuation where they agree")

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


@dataclass
class _State:
    lookup: PositionStats
    neural: PositionStats
    lookup_draft: tuple[int, ...] = ()
    lookup_band: int = 0
    neural_draft: tuple[int, ...] = ()


class HybridProposer(Proposer):
    """Chooses per step between a neural drafter and a lookup by expected accepted tokens.

    >>> import specplug
    >>> neural = specplug.create("ngram", min_n=1, max_n=1)   # any Proposer stands in for MTP here
    >>> hybrid = specplug.create("hybrid", neural=neural, lookup="ngram", prior=0.9)
    >>> hybrid.start("r", [1, 2, 3, 4, 1, 2])
    >>> draft = hybrid.propose("r", 2)
    >>> draft.tokens, draft.source, draft.needs_neural
    ((3, 4), 'ngram', False)
    """

    name = "hybrid"

    def __init__(self, options: HybridOptions) -> None:
        super().__init__()
        self.options = options
        self.neural = options.neural
        self.lookup = resolve_part(options.lookup, "lookup")
        self._states: dict[RequestId, _State] = {}
        # across requests: a new request starts from what earlier ones showed
        positions = options.max_positions
        self._pooled_lookup = PositionStats.empty(positions)
        self._pooled_neural = PositionStats.empty(positions)
        self._steps = 0

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self.lookup.start(request_id, prompt)
        try:
            self.neural.start(request_id, prompt)
        except Exception:
            self.lookup.stop(request_id)
            raise
        positions = self.options.max_positions
        self._states[request_id] = _State(PositionStats.empty(positions), PositionStats.empty(positions))

    def expected(self, request_id: RequestId, *, lookup_tokens: int, lookup_band: int, neural_tokens: int) -> tuple[float, float]:
        """Expected accepted tokens of a lookup draft (length, score band) and of a neural draft."""
        state, options = self._states[request_id], self.options
        lookup = estimate(state.lookup, self._pooled_lookup, lookup_band, options.prior, options.prior_weight)
        neural = estimate(state.neural, self._pooled_neural, 0, options.prior, options.prior_weight)
        neural = np.minimum(neural + optimism(self._pooled_neural, 0, self._steps, options.explore, options.prior_weight), 1.0)
        lookup_expected = float(np.cumprod(lookup[:lookup_tokens]).sum())
        neural_expected = float(np.cumprod(neural[:neural_tokens]).sum())
        return lookup_expected, neural_expected

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        state = self._states[request_id]
        self._steps += 1
        limit = min(max_tokens, self.options.max_positions)
        lookup = self.lookup.propose(request_id, limit)
        band = score_band(lookup.score)
        state.lookup_draft, state.lookup_band, state.neural_draft = lookup.tokens, band, ()
        neural_tokens = min(limit, self.options.neural_max_tokens or getattr(self.neural, "max_draft_tokens", None) or limit)
        lookup_expected, neural_expected = self.expected(
            request_id, lookup_tokens=len(lookup.tokens), lookup_band=band, neural_tokens=neural_tokens
        )
        if lookup.tokens and lookup_expected >= neural_expected - self.options.margin:
            return Draft(lookup.tokens, lookup.source, lookup_expected, needs_neural=False)
        neural = self.neural.propose(request_id, neural_tokens)
        state.neural_draft = neural.tokens
        tokens, source = neural.tokens, neural.source
        if (
            self.options.continue_with_lookup
            and len(lookup.tokens) > len(tokens)
            and lookup.tokens[: len(tokens)] == tokens
        ):
            tokens, source = lookup.tokens, f"{neural.source}+{lookup.source}"
        return Draft(tokens, source, max(neural_expected, lookup_expected), needs_neural=True)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        state = self._states[request_id]
        self.lookup.extend(request_id, tokens)
        self.neural.extend(request_id, tokens)
        # each part's draft is scored as far as the verified tokens reach, chosen or not
        if state.lookup_draft:
            state.lookup.observe(state.lookup_band, state.lookup_draft, tokens)
            self._pooled_lookup.observe(state.lookup_band, state.lookup_draft, tokens)
        if state.neural_draft:
            state.neural.observe(0, state.neural_draft, tokens)
            self._pooled_neural.observe(0, state.neural_draft, tokens)
        state.lookup_draft, state.neural_draft = (), ()

    def _stop(self, request_id: RequestId) -> None:
        del self._states[request_id]
        try:
            self.lookup.stop(request_id)
        finally:
            self.neural.stop(request_id)


@hookimpl
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    registrar.add(
        "hybrid",
        HybridProposer,
        options=HybridOptions,
        summary="neural drafter (MTP/EAGLE) or lookup per step, by expected accepted tokens; skips the neural pass when the lookup wins",
    )
