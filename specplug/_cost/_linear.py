"""The linear cost model: every time is ``per_kv_token * kv + per_token * tokens + fixed``."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specplug._drafts import DRAFT_KINDS  # the drafter kinds a cost model prices: those proposers declare
from specplug._errors import CostModelError

__all__ = ["DRAFT_KINDS", "CostModel", "DraftTable", "DraftTerm", "LinearCostModel", "VerifyTerm", "check_draft_kind"]


def check_draft_kind(model: str, kind: str) -> None:
    """Raise naming the valid kinds unless cost model ``model`` prices drafters of ``kind``."""
    if kind not in DRAFT_KINDS:
        raise CostModelError(f"cost model {model!r} has no draft kind {kind!r}; valid kinds: {', '.join(DRAFT_KINDS)}")


@runtime_checkable
class CostModel(Protocol):
    """What the adaptive layer and the benchmark need to know about a step's time.

    Times are seconds for one engine step of the whole batch. ``batched_tokens`` and
    ``kv_tokens`` are summed over the batch, as an engine schedules them.
    """

    name: str

    def verify_time(self, batched_tokens: int, kv_tokens: int) -> float:
        """One forward pass of the target over ``batched_tokens`` new tokens."""
        ...

    def draft_time(self, kind: str, draft_tokens: int, kv_tokens: int, verify_time: float) -> float:
        """Drafting ``draft_tokens`` tokens (summed over the batch) with a drafter of ``kind``."""
        ...

    def step_overhead(self) -> float:
        """Per-step time outside the forward passes (scheduling, sampling, bookkeeping)."""
        ...


#: the range of a nonzero coefficient (seconds, seconds per token, or a share of the verify time):
#: outside it a step's time is denormal or overflows, and no speedup computed from it is finite
SMALLEST_COEFFICIENT = 1e-12
LARGEST_COEFFICIENT = 1e4


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False, frozen=True)

    @model_validator(mode="after")
    def _finite_steps(self) -> _Strict:
        for name, value in self:
            if isinstance(value, float) and value and not SMALLEST_COEFFICIENT <= value <= LARGEST_COEFFICIENT:
                raise ValueError(
                    f"{name} = {value!r} gives no finite speedup; a coefficient is 0 or in "
                    f"[{SMALLEST_COEFFICIENT:g}, {LARGEST_COEFFICIENT:g}]"
                )
        return self


class VerifyTerm(_Strict):
    """Target forward pass: ``per_kv_token * kv + per_batched_token * tokens + fixed``."""

    per_kv_token: float = Field(ge=0, allow_inf_nan=False, description="seconds per token in the KV cache")
    per_batched_token: float = Field(ge=0, allow_inf_nan=False, description="seconds per token in the batch")
    fixed: float = Field(ge=0, allow_inf_nan=False, description="seconds per forward pass")


class DraftTerm(_Strict):
    """A drafter's time per step: linear terms plus a share of the verify time.

    A lookup is usually priced as a share of verification (``verify_fraction``); a neural
    drafter by its own forward passes. Missing terms are zero, but at least one is needed.
    """

    per_kv_token: float = Field(0.0, ge=0, allow_inf_nan=False, description="seconds per KV token")
    per_draft_token: float = Field(0.0, ge=0, allow_inf_nan=False, description="seconds per drafted token")
    fixed: float = Field(0.0, ge=0, allow_inf_nan=False, description="seconds per drafting step")
    verify_fraction: float = Field(0.0, ge=0, allow_inf_nan=False, description="share of the verify time")

    @model_validator(mode="before")
    @classmethod
    def _not_empty(cls, data: object) -> object:
        if isinstance(data, dict) and not data:
            raise ValueError("no coefficient given; set at least one of " + ", ".join(cls.model_fields))
        return data

    def time(self, draft_tokens: int, kv_tokens: int, verify_time: float) -> float:
        return (
            self.per_kv_token * kv_tokens
            + self.per_draft_token * draft_tokens
            + self.fixed
            + self.verify_fraction * verify_time
        )


class DraftTable(_Strict):
    """The drafting time of each kind of drafter."""

    lookup: DraftTerm = Field(description="n-gram / suffix lookups")
    neural: DraftTerm = Field(description="MTP / EAGLE heads and draft models")


class LinearCostModel(_Strict):
    """A cost model whose times are linear in the batched and the cached tokens.

    >>> model = LinearCostModel(
    ...     name="toy",
    ...     verify=VerifyTerm(per_kv_token=0.0, per_batched_token=0.001, fixed=0.01),
    ...     draft=DraftTable(lookup=DraftTerm(verify_fraction=0.01), neural=DraftTerm(fixed=0.002)),
    ...     step_overhead=0.0,
    ... )
    >>> round(model.verify_time(batched_tokens=5, kv_tokens=100), 6)
    0.015
    """

    name: str = Field(min_length=1, description="preset name")
    description: str = Field("", description="where the coefficients come from")
    verify: VerifyTerm
    draft: DraftTable
    step_overhead_s: float = Field(0.0, ge=0, allow_inf_nan=False, alias="step_overhead")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _steps_take_time(self) -> LinearCostModel:
        if self.step_overhead_s and not SMALLEST_COEFFICIENT <= self.step_overhead_s <= LARGEST_COEFFICIENT:
            raise ValueError(
                f"step_overhead = {self.step_overhead_s!r} gives no finite speedup; it is 0 or in "
                f"[{SMALLEST_COEFFICIENT:g}, {LARGEST_COEFFICIENT:g}] seconds"
            )
        # goodput is tokens per step time: a step that takes no time divides by zero
        verify = self.verify
        if verify.per_batched_token + verify.fixed + self.step_overhead_s <= 0:
            raise ValueError(
                "a step of one token takes no time (verify.per_batched_token, verify.fixed and step_overhead "
                "are all 0); set at least one above 0"
            )
        return self

    def verify_time(self, batched_tokens: int, kv_tokens: int) -> float:
        term = self.verify
        return term.per_kv_token * kv_tokens + term.per_batched_token * batched_tokens + term.fixed

    def draft_time(self, kind: str, draft_tokens: int, kv_tokens: int, verify_time: float) -> float:
        check_draft_kind(self.name, kind)
        term: DraftTerm = getattr(self.draft, kind)
        return term.time(draft_tokens, kv_tokens, verify_time)

    def step_overhead(self) -> float:
        return self.step_overhead_s
