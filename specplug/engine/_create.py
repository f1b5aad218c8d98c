"""Creating a method for an engine from what the method declares, never from its name.

A method's :class:`specplug.MethodCapabilities` say what an adapter must hand it: the engine's
own neural drafter (an MTP/EAGLE head, a draft model) through ``engine_drafter_option``, a
cost model measured in the engine through ``cost_option``. So a composite published by a
plugin runs in every engine exactly as the built-in ones do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

import specplug
from specplug import BatchDrafts, BatchStep, Draft, DraftKind, InvalidOptionError, MethodCapabilities, Proposer, RequestId, UnknownMethodError
from specplug.engine._neural_batch import step_offered

__all__ = ["StandInDrafter", "capabilities_of", "create_for_engine", "methods_composing_engine_drafter"]


def capabilities_of(method: object) -> MethodCapabilities:
    """What ``method`` declared when it registered; UnknownMethodError listing the valid names.

    >>> capabilities_of("hybrid").engine_drafter_option, capabilities_of("suffix").composes_engine_drafter
    ('neural', False)
    """
    specs = specplug.method_specs()
    if not isinstance(method, str) or method not in specs:
        raise UnknownMethodError(method, sorted(specs))
    return specs[method].capabilities


def methods_composing_engine_drafter() -> list[str]:
    """The registered methods that run on the engine's own drafter, sorted.

    >>> "hybrid" in methods_composing_engine_drafter()
    True
    """
    return sorted(name for name, spec in specplug.method_specs().items() if spec.capabilities.composes_engine_drafter)


def create_for_engine(
    method: str,
    options: Mapping[str, Any] | None = None,
    *,
    engine_drafter: Proposer | None = None,
    step_costs: object | None = None,
    engine: str = "this engine",
    hint: str = "",
) -> Proposer:
    """Create ``method`` with ``options`` and what the engine has for it, by its capabilities.

    ``engine_drafter`` is the engine's own neural drafter as a Proposer; a method that
    composes one gets it through its ``engine_drafter_option`` (the user may instead give
    that option where the engine has none, as llama-cpp-python's second model). Methods that
    compose none ignore it, and one that only may compose it (``engine_drafter_required`` false:
    adaptive) runs without it. ``step_costs`` is a cost model the adapter measures in the
    engine; a method that takes one gets it through its ``cost_option`` unless the user gave
    that option. A composing method with no drafter from either side is refused, naming the
    method and the option; ``engine`` names the engine and ``hint`` says what to do there.

    >>> drafter = specplug.create("ngram", min_n=1, max_n=1)   # stands in for an MTP head
    >>> create_for_engine("hybrid", {"lookup": "suffix"}, engine_drafter=drafter).neural is drafter
    True
    >>> try:
    ...     create_for_engine("hybrid", {}, engine="llama-cpp-python")
    ... except specplug.InvalidOptionError as error:
    ...     print(error)
    method 'hybrid' composes the engine's own drafter through its option 'neural', but llama-cpp-python offers none here
    """
    capabilities = capabilities_of(method)
    given = dict(options or {})
    option = capabilities.engine_drafter_option
    if option is not None:
        if engine_drafter is not None:
            if option in given:
                raise InvalidOptionError(
                    f"method {method!r}: option {option!r} takes the engine's own drafter, which {engine} "
                    f"hands it; remove {option} = {given[option]!r:.60} from the options"
                )
            given[option] = engine_drafter
        elif option not in given and capabilities.engine_drafter_required:
            raise InvalidOptionError(
                f"method {method!r} composes the engine's own drafter through its option {option!r}, "
                f"but {engine} offers none here" + (f"; {hint}" if hint else "")
            )
    cost = capabilities.cost_option
    if cost is not None and step_costs is not None and cost not in given:
        given[cost] = step_costs
    return specplug.create(method, **given)


class StandInDrafter(Proposer):
    """A proposer that never drafts, standing in where a real one is not at hand.

    It takes the engine drafter's place while a composing method's options are checked (an
    adapter checks a configuration in the process that parses it, before the engine and its
    drafter exist: creating the method once around a stand-in reports bad options there), and a
    method's place where it failed to build inside the engine, so requests go on unspeculated.
    """

    #: batches of at least this many rows take the batch path (fewer: row by row; docs/performance.md)
    batch_from = 8

    def __init__(self, name: str = "stand-in", *, kind: DraftKind = "neural") -> None:
        super().__init__()
        self.name = name
        self.draft_kind = kind

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        pass

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        return self.empty_draft()

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        pass

    def _stop(self, request_id: RequestId) -> None:
        pass

    def _step_batch(self, step: BatchStep) -> BatchDrafts:
        # every row's draft is empty: no hook call per row (a subclass's hooks are called). Below
        # batch_from rows the per-row path costs less than the fast path's fixed dozen array calls.
        if type(self) is not StandInDrafter or step.rows < self.batch_from:
            return super()._step_batch(step)
        return step_offered(self, step, {}, self.empty_draft())
