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
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from llama_cpp.llama_speculative import LlamaDraftModel

import specplug
from specplug import GuardedProposer, Proposer
from specplug.cost import OnlineCostModel

__all__ = ["SpecplugDraftModel"]

_CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


class SpecplugDraftModel(LlamaDraftModel):
    """Drafts with a specplug proposer inside ``llama_cpp.Llama(..., draft_model=...)``.

    ``method`` is a method name (created with ``options``) or a ready :class:`specplug.Proposer`
    (e.g. a ``hybrid`` whose neural part is :class:`LlamaModelProposer`). The proposer runs
    behind :class:`specplug.GuardedProposer`: a fault costs one draft, not the generation.
    ``stats`` counts calls, drafts, drafted and accepted tokens and new generations.

    Step times go to ``step_costs`` (an :class:`~specplug.cost.OnlineCostModel`, measured with
    ``clock``: ``"wall"`` or ``"cpu"``, the CPU time of this process). ``adaptive`` created here
    by name without a ``cost`` option uses it as its cost model, so it drafts only as long as
    pays on this machine and this model.

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
        self.step_costs = step_costs if step_costs is not None else OnlineCostModel()
        if method == "adaptive" and "cost" not in options:
            options["cost"] = self.step_costs
        if isinstance(method, Proposer):
            if options:
                raise specplug.InvalidOptionError(
                    f"options {sorted(options)} were given with a ready proposer {method.name!r}; "
                    "pass them when creating it, or pass a method name"
                )
            proposer = method
        else:
            proposer = specplug.create(method, **options)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise specplug.InvalidOptionError(f"max_tokens = {max_tokens!r} is not valid; it must be an int >= 1")
        self.proposer = proposer
        self.guard = GuardedProposer(proposer)
        self.max_tokens = max_tokens
        self.stats: Counter[str] = Counter()
        self._history = np.empty(0, dtype=np.intc)
        self._request: int | None = None
        self._generations = 0
        self._clock = _CLOCKS[clock]
        self._returned_at: float | None = None  # when the last draft went back to llama-cpp-python
        self._last_draft = 0

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **kwargs: Any) -> npt.NDArray[np.intc]:
        # input_ids is a view of llama-cpp-python's reusable buffer: keep a copy, never the view
        called_at = self._clock()
        ids = np.array(input_ids, dtype=np.intc, copy=True)
        self.stats["calls"] += 1
        if self._request is not None and self._continues(ids):
            if self._returned_at is not None:  # the step that verified our last draft
                self.step_costs.observe(1 + self._last_draft, called_at - self._returned_at)
            new = ids[len(self._history) :]
            if len(new):
                self.stats["accepted"] += self.guard.extend(self._request, new)
        else:
            self._restart(ids)
        self._history = ids
        draft = self.guard.propose(self._request, self.max_tokens)
        if draft.tokens:
            self.stats["drafts"] += 1
            self.stats["drafted"] += len(draft.tokens)
        self._last_draft = len(draft.tokens)
        tokens = np.fromiter(draft.tokens, dtype=np.intc, count=len(draft.tokens))
        self._returned_at = self._clock()
        # adaptive marks a lookup's draft needs_neural=False: time it as a lookup, the rest as neural
        kind = "neural" if draft.tokens and draft.needs_neural else "lookup"
        self.step_costs.observe_draft(kind, self._returned_at - called_at)
        return tokens

    def _continues(self, ids: np.ndarray) -> bool:
        known = len(self._history)
        return len(ids) >= known and np.array_equal(ids[:known], self._history)

    def _restart(self, ids: np.ndarray) -> None:
        self.close()
        self._generations += 1
        self._request = self._generations
        self.stats["generations"] += 1
        self.guard.start(self._request, ids)

    def close(self) -> None:
        """Stop the running request (a finished generation goes to the proposer's caches)."""
        if self._request is not None:
            self.guard.stop(self._request)
            self._request = None
            self._history = np.empty(0, dtype=np.intc)
            self._returned_at = None

    @property
    def acceptance(self) -> float | None:
        """Accepted / drafted tokens so far (the last draft of each generation is never resolved)."""
        return self.stats["accepted"] / self.stats["drafted"] if self.stats["drafted"] else None
