"""A cost model learnt from the step times an adapter observes, for engines with no fixed preset.

On a CPU the time of a verification step is not linear in its tokens: llama.cpp picks a
different matrix kernel by batch size, and with a 262k-token vocabulary each verified
position pays a full output projection. So instead of coefficients this model keeps the
recent step times seen at each batch size and answers with their median. A size not seen
yet is priced by interpolating the sizes around it, or, beyond the largest one, by a slope
that assumes each extra token costs ``prior_token_share`` of a one-token step: optimistic
enough that the adaptive layer tries it once and learns its real price.

>>> model = OnlineCostModel()
>>> model.observe(batched_tokens=1, seconds=0.020)
>>> model.observe(batched_tokens=4, seconds=0.050)
>>> round(model.verify_time(2, 0) * 1e3, 1), round(model.verify_time(8, 0) * 1e3, 1)   # interpolated, extrapolated
(30.0, 58.0)
"""

from __future__ import annotations

import statistics
from collections import deque
from typing import ClassVar

import numpy as np

from specplug._cost._linear import DRAFT_KINDS, LARGEST_COEFFICIENT, SMALLEST_COEFFICIENT, check_draft_kind
from specplug._errors import CostModelError, shown

__all__ = ["OnlineCostModel"]

#: the longest window of observations kept per batch size, and the largest batch priced
MAX_WINDOW = 10_000
MAX_BATCHED_TOKENS = 1 << 20


def _real(value: object) -> bool:
    return not isinstance(value, (bool, np.bool_)) and isinstance(value, (int, float, np.integer, np.floating))


def _int_option(name: str, value: object, most: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 1 <= value <= most:
        raise CostModelError(f"{name} = {shown(value)} is not valid; it must be an int from 1 to {most}")
    return int(value)


class OnlineCostModel:
    """Verification time per batch size as the median of the last ``window`` observations.

    ``observe()`` takes one step's time (forward pass plus sampling, whatever the adapter can
    time between two drafting calls); ``observe_draft()`` the drafter's own time (what drafting
    with it adds to a step); ``observe_overhead()`` what every step pays beside them. The
    ``CostModel`` methods then price any batch size, seen or not. A step time is the same
    whatever the KV cache holds: on one request the cache grows slowly next to the batch
    effect, and recent observations follow it. ``monotone``: a size is never priced below a
    smaller one (for an engine whose kernels do not change with the batch size).
    """

    #: costs measured on the engine's own hardware: the composites weigh a neural part's
    #: exploration by its pass's learnt share of a step only with such a model (_choice._kept_share)
    learnt_online: ClassVar[bool] = True

    def __init__(
        self,
        *,
        name: str = "online",
        window: int = 9,
        max_batched_tokens: int = 256,
        prior_token_share: float = 0.1,
        prior_step: float = 0.01,
        monotone: bool = False,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise CostModelError(f"name = {shown(name)} is not valid; it must be a non-empty str")
        window = _int_option("window", window, MAX_WINDOW)
        max_batched_tokens = _int_option("max_batched_tokens", max_batched_tokens, MAX_BATCHED_TOKENS)
        if not _real(prior_token_share) or not 0 < prior_token_share <= 1:
            raise CostModelError(f"prior_token_share = {shown(prior_token_share)} is not valid; it must be in (0, 1]")
        if not _real(prior_step) or not SMALLEST_COEFFICIENT <= prior_step <= LARGEST_COEFFICIENT:
            raise CostModelError(
                f"prior_step = {shown(prior_step)} is not valid; it must be in "
                f"[{SMALLEST_COEFFICIENT:g}, {LARGEST_COEFFICIENT:g}] seconds"
            )
        if not isinstance(monotone, (bool, np.bool_)):
            raise CostModelError(f"monotone = {shown(monotone)} is not valid; it must be True or False")
        prior_token_share, prior_step, monotone = float(prior_token_share), float(prior_step), bool(monotone)
        self.name = name
        self.prior_token_share = prior_token_share
        self.prior_step = prior_step
        self.monotone = monotone
        self._steps = [deque[float](maxlen=window) for _ in range(max_batched_tokens + 1)]
        self._drafts: dict[str, deque[float]] = {kind: deque(maxlen=window) for kind in DRAFT_KINDS}
        # medians kept as observations arrive (the cost model is read many times a step, written once)
        self._medians = np.full(max_batched_tokens + 1, np.nan)  # per batch size; NaN: not seen yet
        self._draft_medians = dict.fromkeys(DRAFT_KINDS, 0.0)
        self._overheads: deque[float] = deque(maxlen=window)
        self._overhead = 0.0
        self._table: np.ndarray | None = None  # per batch size, rebuilt after an observation

    # ------------------------------------------------------------------ learning
    def observe(self, batched_tokens: int, seconds: float) -> None:
        """One verification step over ``batched_tokens`` tokens took ``seconds`` (a time outside
        the range a step's time is priced in, NaN included, is not learnt)."""
        if 1 <= batched_tokens < len(self._steps) and SMALLEST_COEFFICIENT <= seconds <= LARGEST_COEFFICIENT:
            window = self._steps[batched_tokens]
            window.append(seconds)
            self._medians[batched_tokens] = statistics.median(window)
            self._table = None

    def observe_draft(self, kind: str, seconds: float) -> None:
        """Drafting one step with a drafter of ``kind`` took ``seconds``."""
        if kind in self._drafts and 0 <= seconds <= LARGEST_COEFFICIENT:
            self._drafts[kind].append(seconds)
            self._draft_medians[kind] = statistics.median(self._drafts[kind])

    def observe_overhead(self, seconds: float) -> None:
        """A step spent ``seconds`` outside the verification and the drafters that a choice adds or
        saves (an adapter's own work that every step pays, whatever is drafted)."""
        if 0 <= seconds <= LARGEST_COEFFICIENT:
            self._overheads.append(seconds)
            self._overhead = statistics.median(self._overheads)

    def observations(self, batched_tokens: int) -> int:
        """How many recent steps of this size the estimate rests on."""
        return len(self._steps[batched_tokens]) if 1 <= batched_tokens < len(self._steps) else 0

    # ------------------------------------------------------------------ CostModel
    def verify_time(self, batched_tokens: int, kv_tokens: int) -> float:
        table = self._estimates()
        return float(table[min(max(batched_tokens, 1), len(table) - 1)])

    def draft_time(self, kind: str, draft_tokens: int, kv_tokens: int, verify_time: float) -> float:
        check_draft_kind(self.name, kind)
        return self._draft_medians[kind] if draft_tokens else 0.0

    def step_overhead(self) -> float:
        return self._overhead

    def _estimates(self) -> np.ndarray:
        if self._table is not None:
            return self._table
        sizes = np.arange(len(self._steps), dtype=np.float64)
        seen = np.flatnonzero(~np.isnan(self._medians))
        if not len(seen):
            table = self.prior_step * (1.0 + self.prior_token_share * (sizes - 1.0))
        else:
            times = self._medians[seen]
            # between seen sizes: straight lines; below the smallest: its time; above the
            # largest: an optimistic slope, so an untried longer draft gets tried once
            table = np.interp(sizes, seen, times)
            base = times[0] / (1.0 + self.prior_token_share * (seen[0] - 1))
            beyond = sizes > seen[-1]
            table[beyond] = times[-1] + base * self.prior_token_share * (sizes[beyond] - seen[-1])
        table[0] = table[1]
        if self.monotone:
            # an engine whose step runs the same kernels at every size (vLLM) never verifies more tokens
            # in less time: on a loaded machine the medians of nearby sizes differ by more than the true
            # slope (a CPU verifies 1 to 9 tokens in nearly the same time), and a size that happened to run
            # fast would make drafting to it look free. Not llama.cpp's default: its kernels change by size.
            np.maximum.accumulate(table, out=table)
        self._table = table
        return table

    def spec_step_times(self, batch: int, longest: int, kinds: tuple[str, ...]) -> np.ndarray:
        """``specplug._cost._steps.spec_step_times`` for this model, the same sums in one pass: the
        verification read from the table at ``batch * (k + 1)`` tokens, each drafter's time where
        ``k`` > 0, the overhead. No KV term: this model's times do not depend on the context, so
        one row of step times serves every request of a step."""
        table = self._estimates()
        sizes = np.minimum(np.maximum(batch * (np.arange(longest + 1) + 1), 1), len(table) - 1)
        drafting = 0.0
        for kind in sorted(set(kinds)):
            check_draft_kind(self.name, kind)
            drafting = drafting + self._draft_medians[kind]
        out = table[sizes] + drafting
        out[0] = table[sizes[0]] + 0.0  # no draft: no drafter runs (draft_time of 0 tokens)
        return out + self._overhead
