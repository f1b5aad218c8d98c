"""``SpecplugDraftModel``: any specplug method as llama-cpp-python's draft model.

llama-cpp-python calls its draft model as ``draft_model(input_ids) -> np.ndarray[intc]`` once
per step with the whole history: the tokens verified so far plus the target's own next
token. There is no request id and no acceptance callback, so this adapter keeps the last
history it saw and infers the rest: a history that extends the previous one is an
``extend`` of the running request (its new tokens are the accepted draft prefix plus the
target's token, which is exactly what the contract's ``extend`` takes); any other history
is a new generation, which stops the running request and starts a fresh one.

The time between two calls is one verification step of ``1 + len(draft)`` tokens (plus the
sampling of the tokens it accepted). The drafter times every step into an
:class:`~specplug.cost.OnlineCostModel`, so ``adaptive`` can choose draft lengths by what they
really cost here: on a CPU a step's time is far from linear in its tokens (llama.cpp switches
matrix kernels by batch size; a large vocabulary makes every verified position pay an output
projection, and llama-cpp-python copies the logits of each one).

Recognising the request, fault isolation, the batch size (always 1 here) and the counters are
the engine layer's (:class:`specplug.engine.SingleRequestSync`, :class:`specplug.engine.EngineDrafting`);
the method is created by its declared capabilities (:func:`specplug.engine.create_for_engine`),
so any method that takes a cost model gets ``step_costs`` there.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from llama_cpp.llama_speculative import LlamaDraftModel

import specplug
from specplug import Proposer
from specplug.cost import OnlineCostModel
from specplug.engine import EngineDrafting, SingleRequestSync, create_for_engine

__all__ = ["LOGGER_NAME", "SpecplugDraftModel"]

#: the logger of the drafter's faults and counters (a child of specplug's own)
LOGGER_NAME = "specplug.llamacpp"

_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class SpecplugDraftModel(LlamaDraftModel):
    """Drafts with a specplug proposer inside ``llama_cpp.Llama(..., draft_model=...)``.

    ``method`` is a method name (created with ``options``) or a ready :class:`specplug.Proposer`
    (e.g. a ``hybrid`` whose neural part is :class:`LlamaModelProposer`). The proposer runs
    behind :class:`specplug.GuardedProposer` (``guard``): a fault costs one draft, not the
    generation. ``stats`` counts calls, drafts, drafted and accepted tokens and new generations.

    Step times go to ``step_costs`` (an :class:`~specplug.cost.OnlineCostModel`, measured with
    ``clock``: ``"wall"`` or ``"cpu"``, the CPU time of this process). A method created here by
    name that takes a cost model (``adaptive``'s ``cost``, or any method's declared cost option)
    gets it unless the options give one, so it drafts only as long as pays on this machine and
    this model. A method that composes the engine's own drafter (``hybrid``'s ``neural``) needs
    it in its options: llama-cpp-python has no drafter of its own.

    >>> drafter = SpecplugDraftModel("ngram", max_tokens=4, min_n=1, max_n=2)
    >>> drafter(np.array([1, 2, 3, 1, 2], dtype=np.intc)).tolist()   # first call: a new generation
    [3, 1, 2]
    >>> drafter(np.array([1, 2, 3, 1, 2, 3, 1, 9], dtype=np.intc)).tolist()  # 3, 1 accepted, 9 is the target's
    []
    >>> drafter.stats["accepted"], drafter.stats["generations"]
    (2, 1)
    """

    def __init__(
        self,
        method: str | Proposer = "suffix",
        *,
        max_tokens: int = 8,
        clock: Literal["wall", "cpu"] = "wall",
        step_costs: OnlineCostModel | None = None,
        **options: Any,
    ) -> None:
        if clock not in _CLOCKS:
            raise specplug.InvalidOptionError(f"clock = {clock!r} is not valid; valid clocks: {', '.join(_CLOCKS)}")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise specplug.InvalidOptionError(f"max_tokens = {max_tokens!r} is not valid; it must be an int >= 1")
        self.step_costs = step_costs if step_costs is not None else OnlineCostModel()
        if isinstance(method, Proposer):
            if options:
                raise specplug.InvalidOptionError(
                    f"options {sorted(options)} were given with a ready proposer {method.name!r}; "
                    "pass them when creating it, or pass a method name"
                )
            proposer = method
        else:
            proposer = create_for_engine(
                method,
                options,
                step_costs=self.step_costs,
                engine="llama-cpp-python",
                hint="give one in that option, e.g. a LlamaModelProposer around a second Llama of the target's vocabulary",
            )
        self.proposer = proposer
        self.drafting = EngineDrafting(proposer, logger=LOGGER_NAME)
        self.guard = self.drafting.guard
        self.max_tokens = max_tokens
        self.stats: Counter[str] = Counter()
        self._sync = SingleRequestSync(self.guard)
        self._clock = _CLOCKS[clock]
        self._returned_at: float | None = None  # when the last draft went back to llama-cpp-python
        self._last_draft = 0

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        called_at = self._clock()
        self.stats["calls"] += 1
        try:
            return self._draft(input_ids, called_at)
        except Exception as error:  # noqa: BLE001 - the adapter's own bugs must not stop the generation either
            self.guard.record_fault("the llama.cpp drafter", error, "no draft this step; the next call starts afresh")
            with contextlib.suppress(Exception):  # counted above: a close that fails too changes nothing
                self.close()
            return np.empty(0, dtype=np.intc)

    def _draft(self, input_ids: npt.NDArray[np.intc], called_at: float) -> npt.NDArray[np.intc]:
        # input_ids is a view of llama-cpp-python's reusable buffer: the sync keeps a copy. The
        # request's new tokens (or its start) and its draft reach the proposer as one batch step
        # of one row: llama-cpp-python verifies one sequence at a time
        step, draft = self.drafting.step_history(self._sync, input_ids, self.max_tokens)
        if step.started:
            self.stats["generations"] += 1
        else:
            if self._returned_at is not None:  # the step that verified our last draft
                self.step_costs.observe(1 + self._last_draft, called_at - self._returned_at)
            self.stats["accepted"] += step.accepted
        if draft.tokens:
            self.stats["drafts"] += 1
            self.stats["drafted"] += len(draft.tokens)
        self._last_draft = len(draft.tokens)
        tokens = np.fromiter(draft.tokens, dtype=np.intc, count=len(draft.tokens))
        self._returned_at = self._clock()
        # a composite marks a lookup's draft needs_neural=False: time it as a lookup, the rest as neural
        kind = "neural" if draft.tokens and draft.needs_neural else "lookup"
        self.step_costs.observe_draft(kind, self._returned_at - called_at)
        return tokens

    def close(self) -> None:
        """Stop the running request (a finished generation goes to the proposer's caches)."""
        self._sync.close()
        self._returned_at = None

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens so far (the last draft of each generation is never resolved)."""
        return self.stats["accepted"] / self.stats["drafted"] if self.stats["drafted"] else None
