"""The engines' draft-length policies: how many tokens a drafter drafts at a batch size.

- ``trtllm-schedule``: TensorRT-LLM's ``draft_len_schedule`` (a batch size -> draft length map,
  each key a lower bound, ``{1: max_draft_len}`` required; 0 turns speculation off) and
  ``max_concurrency`` (no speculation above that many requests) over the MTP/EAGLE-3 head.
  Drafts are padded to the scheduled length (CUDA graphs).
- ``trtllm-auto``: ``decoding_type: AUTO`` (``auto_heuristic.py``): its n-gram drafter with
  ``max_draft_len`` 5 and patterns up to 3 tokens when the server's batch is at most 4, else
  3 and 5, and ``max_concurrency`` 32. It drafts without the neural head.
- ``vllm-per-batch``: vLLM's ``num_speculative_tokens_per_batch_size`` ranges
  ``(start, end, k)`` over EAGLE-3, ``num_speculative_tokens`` elsewhere; a gap keeps the
  previous range's k (``build_dynamic_sd_schedule_lookup``).
- ``sglang-adaptive``: SGLang's ``--speculative-adaptive`` over EAGLE-3 with top-k 1: per batch
  size slot, candidate step counts and an EMA of accepted tokens (``AdaptiveStepSlot``: alpha
  0.2, 10 warm-up batches, a decision every 5, down and up thresholds at ``step - 0.5`` with
  hysteresis), or with ``strategy: throughput_aware`` a sliding window of 20 batches of
  acceptance per position scored as expected tokens over the profiled step cost, switching only
  for a 10 % better score. Its state is the server's: it carries over from request to request.

The batch size is the engine's running batch (the server's maximum for AUTO, sized here to
the load it serves).
"""

from __future__ import annotations

from collections import deque

from pydantic import Field

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug.cost import CostModel, spec_step_time
from specplug.lab.peers._common import PeerOptions
from specplug.lab.rules._hybrid import EngineRule, padded

__all__ = [
    "SGLANG_DEFAULT_SLOTS",
    "SglangAdaptive",
    "SglangAdaptiveOptions",
    "TrtllmAuto",
    "TrtllmAutoOptions",
    "TrtllmSchedule",
    "TrtllmScheduleOptions",
    "VllmPerBatch",
    "VllmPerBatchOptions",
    "auto_settings",
]


class TrtllmScheduleOptions(PeerOptions):
    max_draft_len: int = Field(3, ge=1, le=64, description="tokens the head drafts (the schedule's entry at batch size 1)")
    draft_len_schedule: dict[int, int] | None = Field(None, description="batch size (lower bound) -> draft length; 0: off")
    max_concurrency: int | None = Field(None, ge=1, description="no speculation above this many requests")


def scheduled_length(schedule: dict[int, int] | None, default: int, batch: int) -> int:
    """The draft length a ``draft_len_schedule`` gives at ``batch``: the entry of the largest key
    not above it.

    >>> scheduled_length({1: 4, 4: 2, 8: 0}, 4, 6), scheduled_length({1: 4, 4: 2, 8: 0}, 4, 8)
    (2, 0)
    """
    if not schedule:
        return default
    keys = [key for key in sorted(schedule) if key <= batch]
    return schedule[keys[-1]] if keys else default


class TrtllmSchedule(EngineRule):
    """TensorRT-LLM's draft length by batch size over the neural head."""

    name = "trtllm-schedule"
    takes_batch_size = True

    def __init__(self, options: TrtllmScheduleOptions, neural: Proposer) -> None:
        super().__init__([neural])
        self.options, self.neural = options, neural

    def length(self) -> int:
        options = self.options
        if options.max_concurrency is not None and self.batch_size > options.max_concurrency:
            return 0
        return scheduled_length(options.draft_len_schedule, options.max_draft_len, self.batch_size)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        width = min(self.length(), max_tokens)
        if width <= 0:
            return self.empty_draft()
        head = self.neural.propose(request_id, width)
        return Draft(padded(head.tokens, width), head.source)


class TrtllmAutoOptions(PeerOptions):
    max_concurrency: int | None = Field(32, ge=1, description="no drafting above this many requests (AUTO: 32)")
    max_draft_len: int | None = Field(None, ge=0, le=64, description="None: AUTO's choice by batch size; 0: off")
    max_matching_ngram_size: int | None = Field(None, ge=1, le=64, description="None: AUTO's choice by batch size")

    def settings(self, batch: int) -> tuple[int, int]:
        """(max_draft_len, max_matching_ngram_size) at ``batch``: AUTO's unless set."""
        length, size = auto_settings(batch)
        return (length if self.max_draft_len is None else self.max_draft_len,
                size if self.max_matching_ngram_size is None else self.max_matching_ngram_size)


def auto_settings(max_batch_size: int) -> tuple[int, int]:
    """AUTO's (max_draft_len, max_matching_ngram_size) for a server of ``max_batch_size``.

    >>> auto_settings(4), auto_settings(8)
    ((5, 3), (3, 5))
    """
    return (5, 3) if max_batch_size <= 4 else (3, 5)


class TrtllmAuto(EngineRule):
    """TensorRT-LLM's ``AUTO``: its n-gram drafter, sized by the batch, off above 32 requests
    (with the sizes set, its ``NGram`` decoding type; the lookup is built with them)."""

    name = "trtllm-auto"
    draft_kind = "lookup"
    takes_batch_size = True

    def __init__(self, options: TrtllmAutoOptions, lookup: Proposer) -> None:
        super().__init__([lookup])
        self.options, self.lookup = options, lookup

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        limit = self.options.max_concurrency
        width = min(self.options.settings(self.batch_size)[0], max_tokens)
        if (limit is not None and self.batch_size > limit) or width <= 0:
            return self.empty_draft()
        found = self.lookup.propose(request_id, width)
        return Draft(padded(found.tokens, width), found.source)


class VllmPerBatchOptions(PeerOptions):
    num_speculative_tokens: int = Field(3, ge=1, le=64, description="EAGLE-3's k")
    num_speculative_tokens_per_batch_size: list[tuple[int, int, int]] | None = Field(
        None, description="(start, end, k) ranges of batch sizes, inclusive, the first starting at 1"
    )


def per_batch_length(ranges: list[tuple[int, int, int]] | None, default: int, batch: int) -> int:
    """vLLM's k at ``batch``: its range's, a gap the previous range's, never above ``default``.

    >>> per_batch_length([(1, 16, 3), (32, 128, 2)], 5, 20), per_batch_length([(1, 8, 4)], 3, 64)
    (3, 3)
    """
    if not ranges:
        return default
    k = default
    for start, end, value in sorted(ranges):
        if start > batch:
            break
        k = value
        if batch <= end:
            break
    return min(default, k)


class VllmPerBatch(EngineRule):
    """vLLM's EAGLE-3 with its draft length per batch size."""

    name = "vllm-per-batch"
    takes_batch_size = True

    def __init__(self, options: VllmPerBatchOptions, neural: Proposer) -> None:
        super().__init__([neural])
        self.options, self.neural = options, neural

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        options = self.options
        width = min(per_batch_length(options.num_speculative_tokens_per_batch_size, options.num_speculative_tokens, self.batch_size), max_tokens)
        return self.neural.propose(request_id, width) if width > 0 else self.empty_draft()


#: SGLang's DEFAULT_ADAPTIVE_CONFIG: candidate step counts per batch size (lower bounds)
SGLANG_DEFAULT_SLOTS: dict[int, dict[str, object]] = {
    1: {"candidate_steps": [1, 3, 5, 7], "up_hysteresis": 0.0, "down_hysteresis": -0.25},
    8: {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
    32: {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
    64: {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0},
}
#: the throughput-aware strategy's default: one slot for every batch size
SGLANG_THROUGHPUT_SLOTS: dict[int, dict[str, object]] = {1: {"candidate_steps": [1, 3, 5, 7]}}


class SglangAdaptiveOptions(PeerOptions):
    strategy: str = Field("ema", pattern="^(ema|throughput_aware)$", description="ema (the default) or throughput_aware")
    slots: dict[int, dict[str, object]] | None = Field(None, description="per batch size (lower bound): candidate_steps and hysteresis; None: SGLang's default")
    initial_steps: int | None = Field(None, ge=0, le=64, description="--speculative-num-steps (None: the middle of all candidate steps)")
    ema_alpha: float = Field(0.2, gt=0, le=1)
    warmup_batches: int = Field(10, ge=0)
    update_interval: int = Field(5, ge=1)
    window_size: int = Field(20, ge=1, description="throughput_aware: batches per position window")
    switch_hysteresis: float = Field(0.1, ge=0, description="throughput_aware: a challenger must score this share better")
    profile_seq_len: int = Field(128, ge=1, description="throughput_aware: the context length its step costs are profiled at")


class _EmaSlot:
    """One batch-size slot of SGLang's EMA controller (``AdaptiveStepSlot``)."""

    def __init__(self, initial: int, config: dict[str, object], options: SglangAdaptiveOptions) -> None:
        self.candidates = sorted(set(config["candidate_steps"]))  # type: ignore[arg-type]
        self.down = float(config.get("down_hysteresis", -0.25))  # type: ignore[arg-type]
        self.up = float(config.get("up_hysteresis", 0.0))  # type: ignore[arg-type]
        self.options = options
        self.steps = initial if initial in self.candidates else self.candidates[len(self.candidates) // 2]
        self.ema = float(self.steps - 1)
        self.batches = 0

    def update(self, accepted: int) -> None:
        options = self.options
        if self.steps > 0:
            self.ema = (1 - options.ema_alpha) * self.ema + options.ema_alpha * accepted
        self.batches += 1
        if self.batches <= options.warmup_batches or (self.batches - options.warmup_batches) % options.update_interval:
            return
        index = self.candidates.index(self.steps)
        if self.steps == 0:
            index = min(index + 1, len(self.candidates) - 1)
            target = self.candidates[index]
            if target > 0 and self.ema < 0:
                self.ema = float(target - 1)
            self.steps = target
            return
        start = index
        while index > 0:
            below = self.candidates[index - 1]
            threshold = (0.5 if below == 0 else below - 0.5) + self.down
            if self.ema <= threshold:
                index -= 1
            else:
                break
        if index == start:
            while index < len(self.candidates) - 1 and self.ema > self.candidates[index] - 0.5 + self.up:
                index += 1
        self.steps = self.candidates[index]


class _ThroughputPolicy:
    """SGLang's ``throughput_aware`` strategy: per-position windows scored against step costs."""

    def __init__(self, slots: dict[int, dict[str, object]], initial: int, options: SglangAdaptiveOptions, cost: CostModel) -> None:
        self.slots = {bound: sorted(set(config["candidate_steps"])) for bound, config in slots.items()}  # type: ignore[arg-type]
        longest = max(step for steps in self.slots.values() for step in steps)
        self.windows: list[deque[float]] = [deque(maxlen=options.window_size) for _ in range(longest)]
        self.options, self.cost = options, cost
        everything = sorted({step for steps in self.slots.values() for step in steps})
        first = self.slots[min(self.slots)]
        self.steps = initial if initial in everything else first[len(first) // 2]
        self.since = 0

    def candidates(self, batch: int) -> list[int]:
        bounds = [bound for bound in sorted(self.slots) if bound <= batch]
        return self.slots[bounds[-1] if bounds else min(self.slots)]

    def _rates(self, steps: int) -> list[float] | None:
        rates: list[float] = []
        for position in range(steps):
            window = self.windows[position]
            if window:
                rates.append(sum(window) / len(window))
            elif not rates:
                return None
            elif len(rates) == 1:
                rates.append(rates[0])
            else:
                if rates[0] <= 0:
                    return None
                ratio = (rates[-1] / rates[0]) ** (1.0 / (len(rates) - 1))
                rates.append(rates[-1] * ratio)
        return rates

    def _score(self, steps: int, batch: int) -> float | None:
        rates = self._rates(steps)
        if rates is None:
            return None
        seconds = spec_step_time(self.cost, batch, self.options.profile_seq_len, steps, ("neural",))
        return (1.0 + sum(rates)) / seconds

    def _best(self, candidates: list[int], batch: int) -> int | None:
        scored = [(score, steps) for steps in candidates if (score := self._score(steps, batch)) is not None]
        return max(scored)[1] if scored else None

    def steps_for(self, batch: int) -> int:
        candidates = self.candidates(batch)
        if self.steps not in candidates:
            target = self._best(candidates, batch)
            target = candidates[len(candidates) // 2] if target is None else target
            self._shrunk(target)
        if self.since >= self.options.update_interval:
            warmed = all(len(self.windows[k]) >= self.options.window_size for k in range(self.steps))
            if warmed:
                current = self._score(self.steps, batch)
                target = self._best(candidates, batch)
                challenger = self._score(target, batch) if target is not None else None
                if (
                    target is not None and target != self.steps and challenger is not None
                    and (current is None or challenger > current * (1.0 + self.options.switch_hysteresis))
                ):
                    self._shrunk(target)
            self.since = 0
        return self.steps

    def _shrunk(self, target: int) -> None:
        if target < self.steps:
            for window in self.windows[target:]:
                window.clear()
        self.steps = target

    def update(self, accepted: int, steps: int) -> None:
        for position in range(min(steps, len(self.windows))):
            self.windows[position].append(1.0 if accepted > position else 0.0)
        self.since += 1


class SglangAdaptive(EngineRule):
    """SGLang's adaptive step count over EAGLE-3 (top-k 1): a chain of ``steps`` tokens."""

    name = "sglang-adaptive"
    takes_batch_size = True

    def __init__(self, options: SglangAdaptiveOptions, neural: Proposer, cost: CostModel) -> None:
        super().__init__([neural])
        self.options, self.neural = options, neural
        throughput = options.strategy == "throughput_aware"
        slots = options.slots or (SGLANG_THROUGHPUT_SLOTS if throughput else SGLANG_DEFAULT_SLOTS)
        everything = sorted({step for config in slots.values() for step in config["candidate_steps"]})  # type: ignore[attr-defined]
        initial = options.initial_steps if options.initial_steps is not None else everything[len(everything) // 2]
        self._policy = _ThroughputPolicy(slots, initial, options, cost) if throughput else None
        self._slots = {bound: _EmaSlot(initial, config, options) for bound, config in slots.items()}
        self._drafted: dict[RequestId, int] = {}

    def _slot(self) -> _EmaSlot:
        bounds = [bound for bound in sorted(self._slots) if bound <= self.batch_size]
        return self._slots[bounds[-1] if bounds else min(self._slots)]

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        steps = self._policy.steps_for(self.batch_size) if self._policy else self._slot().steps
        width = min(steps, max_tokens)
        self._drafted[request_id] = width
        return self.neural.propose(request_id, width) if width > 0 else self.empty_draft()

    def _observe(self, request_id: RequestId, draft: Draft, accepted: int) -> None:
        steps = self._drafted.pop(request_id, 0)
        if self._policy is not None:
            if steps > 0:
                self._policy.update(accepted, steps)
        else:
            self._slot().update(accepted)

    def _stop(self, request_id: RequestId) -> None:
        self._drafted.pop(request_id, None)
        super()._stop(request_id)
