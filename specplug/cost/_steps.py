"""Step times of a homogeneous batch: ``batch`` requests that each hold ``context`` tokens."""

from __future__ import annotations

from collections.abc import Iterable

from specplug.cost._linear import CostModel

__all__ = ["plain_step_time", "spec_step_time"]


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
