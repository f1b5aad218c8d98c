"""``hybrid``: the model's own neural drafter (MTP/EAGLE) or a lookup, whichever should accept more.

At each step the lookup drafts first (it is cheap). Its expected accepted tokens -- its
``Draft.score`` (or its length) times a per-request calibration learned from acceptance --
is compared with a per-request running estimate of the neural drafter's accepted length.
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
from specplug.proposers._parts import resolve_part

__all__ = ["HybridOptions", "HybridProposer"]


class HybridOptions(MethodOptions):
    neural: Proposer = Field(description="the engine's neural drafter (MTP/EAGLE head, draft model) as a Proposer")
    lookup: Proposer | str = Field("suffix", description="lookup proposer, or the name of a method")
    neural_max_tokens: int | None = Field(
        None, ge=1, le=1024, description="tokens the neural head drafts per step (None: the step's max_tokens)"
    )
    neural_prior: float = Field(1.5, ge=0, description="expected neural accepted tokens before any is observed")
    lookup_prior: float = Field(0.7, ge=0, le=1, description="lookup calibration (accepted / score) before any is observed")
    margin: float = Field(0.0, description="the lookup wins when its expectation >= the neural one - margin")
    smoothing: float = Field(0.25, gt=0, le=1, description="weight of the newest observation in the running estimates")
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
    neural: float  # running estimate of the neural drafter's accepted tokens
    calibration: float  # running estimate of lookup accepted / lookup expected
    neural_called: bool = False
    lookup_expected: float = 0.0


class HybridProposer(Proposer):
    """Chooses per step between a neural drafter and a lookup by expected accepted tokens.

    >>> import specplug
    >>> neural = specplug.create("ngram", min_n=1, max_n=1)   # any Proposer stands in for MTP here
    >>> hybrid = specplug.create("hybrid", neural=neural, lookup="ngram", neural_prior=0.0)
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
        self._global_neural = options.neural_prior
        self._global_calibration = options.lookup_prior

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self.lookup.start(request_id, prompt)
        try:
            self.neural.start(request_id, prompt)
        except Exception:
            self.lookup.stop(request_id)
            raise
        self._states[request_id] = _State(self._global_neural, self._global_calibration)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        state = self._states[request_id]
        lookup = self.lookup.propose(request_id, max_tokens)
        base = lookup.score if lookup.score is not None else float(len(lookup.tokens))
        lookup_expected = min(base * state.calibration, float(len(lookup.tokens)))
        state.lookup_expected = lookup_expected if lookup.tokens else 0.0
        neural_tokens = min(max_tokens, self.options.neural_max_tokens or max_tokens)
        neural_expected = min(state.neural, float(neural_tokens))
        if lookup.tokens and lookup_expected >= neural_expected - self.options.margin:
            state.neural_called = False
            return Draft(lookup.tokens, lookup.source, lookup_expected, needs_neural=False)
        state.neural_called = True
        neural = self.neural.propose(request_id, neural_tokens)
        tokens, source = neural.tokens, neural.source
        if (
            self.options.continue_with_lookup
            and len(lookup.tokens) > len(tokens)
            and lookup.tokens[: len(tokens)] == tokens
        ):
            tokens, source = lookup.tokens[:max_tokens], f"{neural.source}+{lookup.source}"
        return Draft(tokens, source, max(neural_expected, lookup_expected), needs_neural=True)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        state = self._states[request_id]
        lookup_accepted = self.lookup.extend(request_id, tokens)
        neural_accepted = self.neural.extend(request_id, tokens)
        alpha = self.options.smoothing
        if state.neural_called:
            state.neural += alpha * (neural_accepted - state.neural)
            self._global_neural += 0.05 * (neural_accepted - self._global_neural)
        if state.lookup_expected > 0:
            # censored at len(tokens) when the lookup did not draft: a lower bound, so the
            # calibration errs towards the neural drafter, the safe side
            ratio = min(lookup_accepted / state.lookup_expected, 1.5)
            state.calibration += alpha * (ratio - state.calibration)
            self._global_calibration += 0.05 * (ratio - self._global_calibration)
        state.neural_called = False
        state.lookup_expected = 0.0

    def _stop(self, request_id: RequestId) -> None:
        del self._states[request_id]
        try:
            self.lookup.stop(request_id)
        finally:
            self.neural.stop(request_id)

    def estimates(self, request_id: RequestId) -> tuple[float, float]:
        """The request's running neural accepted-length estimate and lookup calibration."""
        state = self._states[request_id]
        return state.neural, state.calibration


@hookimpl
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    registrar.add(
        "hybrid",
        HybridProposer,
        options=HybridOptions,
        summary="neural drafter (MTP/EAGLE) or lookup per step, by expected accepted tokens; skips the neural pass when the lookup wins",
    )
