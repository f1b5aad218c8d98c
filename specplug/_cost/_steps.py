"""Step times of a homogeneous batch: ``batch`` requests that each hold ``context`` tokens."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from specplug._cost._linear import CostModel, LinearCostModel, check_draft_kind
from specplug._errors import CostModelError

__all__ = ["checked_step_times", "plain_step_time", "spec_step_time", "spec_step_times"]


def checked_step_times(model: CostModel) -> CostModel:
    """``model`` if its steps take a finite, positive time, else a :class:`CostModelError`.

    Goodput is tokens per step time: a model whose steps take no time (or nan, or inf) would
    divide by zero, or compare nothing, at every step. Probed on a one-token step, where the
    times are smallest.

    >>> from specplug.cost import cost_model
    >>> checked_step_times(cost_model("llama-3.1-8b-h100")).name
    'llama-3.1-8b-h100'
    """
    try:
        plain = float(plain_step_time(model, 1, 1))
        drafted = float(spec_step_times(model, 1, 1, 1, ("lookup",))[1])
    except Exception as error:  # noqa: BLE001 - a model that cannot price a step is unusable
        raise CostModelError(f"cost model {getattr(model, 'name', model)!r:.60} cannot price a step: {error}") from None
    for what, seconds in (("a plain step", plain), ("a one-token draft step", drafted)):
        if not math.isfinite(seconds) or seconds <= 0:
            raise CostModelError(
                f"cost model {getattr(model, 'name', model)!r:.60} gives {what} {seconds!r} seconds; "
                "step times must be finite and above 0"
            )
    return model


def plain_step_time(model: CostModel, batch: int, context: int) -> float:
    """One step of plain decoding: every request verifies its one next token."""
    return model.verify_time(batch, batch * context) + model.step_overhead()


def spec_step_time(model: CostModel, batch: int, context: int, draft_tokens: int, kinds: Iterable[str]) -> float:
    """One speculative step: each request verifies ``draft_tokens`` + 1 tokens after drafting
    with the drafters in ``kinds`` (a kind may appear once; a lookup and a neural head both
    run in a hybrid step that needed the neural draft).

    >>> from specplug.cost import cost_model
    >>> model = cost_model("llama-3.1-8b-h100")
    >>> spec_step_time(model, 1, 1000, 0, []) == plain_step_time(model, 1, 1000)
    True
    """
    verify = model.verify_time(batch * (draft_tokens + 1), batch * context)
    drafting = sum(model.draft_time(kind, batch * draft_tokens, batch * context, verify) for kind in set(kinds))
    return verify + drafting + model.step_overhead()


def spec_step_times(model: CostModel, batch: int, context: int, longest: int, kind: str | Iterable[str]) -> np.ndarray:
    """``spec_step_time`` for draft lengths ``0..longest`` with the drafter ``kind`` (or the
    drafters in an iterable of kinds: a hybrid step that ran both), as an array.

    The linear model is evaluated in one vectorised expression over coefficients read once
    per model (this runs at every step of the adaptive and hybrid proposers); any other cost
    model is called once per length.

    >>> from specplug.cost import cost_model
    >>> model = cost_model("llama-3.1-8b-h100")
    >>> both = spec_step_times(model, 8, 1000, 4, ("lookup", "neural"))
    >>> bool(abs(both[3] - spec_step_time(model, 8, 1000, 3, ("lookup", "neural"))) < 1e-12)
    True
    """
    kinds = (kind,) if isinstance(kind, str) else tuple(sorted(set(kind)))
    if not isinstance(model, LinearCostModel):
        return np.array([spec_step_time(model, batch, context, k, kinds) for k in range(longest + 1)])
    kv = float(batch * context)
    lengths = _LENGTHS[: longest + 1] if longest < len(_LENGTHS) else np.arange(longest + 1, dtype=np.float64)
    v_kv, v_tok, v_fixed, overhead = _verify_coefficients(model)
    verify = (v_kv * kv + v_fixed) + (v_tok * batch) * (lengths + 1.0)
    fraction, fixed, per_token = 1.0, overhead, 0.0
    for name in kinds:
        d_kv, d_tok, d_fixed, d_frac = _draft_coefficients(model, name)
        fraction += d_frac
        fixed += d_kv * kv + d_fixed
        per_token += d_tok
    return verify * fraction + fixed + (per_token * batch) * lengths


_LENGTHS = np.arange(257, dtype=np.float64)
_VERIFY: dict[int, tuple[LinearCostModel, tuple[float, ...]]] = {}
_DRAFT: dict[tuple[int, str], tuple[LinearCostModel, tuple[float, ...]]] = {}


def _verify_coefficients(model: LinearCostModel) -> tuple[float, ...]:
    cached = _VERIFY.get(id(model))
    if cached is None or cached[0] is not model:
        verify = model.verify
        values = (verify.per_kv_token, verify.per_batched_token, verify.fixed, model.step_overhead_s)
        cached = _VERIFY[id(model)] = (model, values)
    return cached[1]


def _draft_coefficients(model: LinearCostModel, kind: str) -> tuple[float, ...]:
    key = (id(model), kind)
    cached = _DRAFT.get(key)
    if cached is None or cached[0] is not model:
        check_draft_kind(model.name, kind)
        term = getattr(model.draft, kind)
        values = (term.per_kv_token, term.per_draft_token, term.fixed, term.verify_fraction)
        cached = _DRAFT[key] = (model, values)
    return cached[1]
