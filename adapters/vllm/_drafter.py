"""The drafter vLLM runs for every specplug lookup method, through its ``custom_class`` path.

It needs no plugin: ``--spec-model specplug_adapters.vllm.SpecplugDrafter`` (a dotted path,
which vLLM takes as ``method = custom_class``) with the method and its options in
``--additional-config '{"specplug": {"method": "adaptive", ...}}'`` runs it on any vLLM in
the tested range. The plugin only adds the ``specplug.<method>`` names.

vLLM instantiates it as ``SpecplugDrafter(vllm_config)`` inside the model runner's
constructor and calls ``propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu,
slot_mappings=...)`` after each step's bookkeeping. That call carries neither request ids
nor the step's draft length, so the drafter takes both from the runner where it can:
request ids from ``runner.input_batch.req_ids`` (the rows' order), liveness from
``runner.requests`` (with each request's control: off, or a shorter draft, from its
``extra_args``), and the step's K from the config's batch-size schedule, the same lookup
vLLM's scheduler uses. Without a runner the engine layer keys requests by row,
recognising each row's request by its history.

Everything past reading vLLM's arrays (request lifecycle, batch size, fault isolation,
counters, stats) is the engine layer's :class:`specplug.engine.EngineDrafting`.
"""

from __future__ import annotations

import logging
import sys
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from specplug.engine import EngineDrafting
from specplug_adapters.vllm._config import create_method, read_settings
from specplug_adapters.vllm._requests import controlled_limits, controlled_methods, request_controls
from specplug_adapters.vllm._stats import LOGGER_NAME, stats_options

__all__ = ["SpecplugDrafter", "find_runner"]

log = logging.getLogger(LOGGER_NAME)


def find_runner(max_depth: int = 8) -> Any | None:
    """The vLLM model runner that is constructing the caller, found on the call stack.

    ``custom_class`` drafters are built as ``Class(vllm_config)`` from
    ``GPUModelRunner.__init__`` (which the CPU runner inherits) and are given no reference to
    it; its ``input_batch`` is the only source of request ids. The stack is read once, at
    construction, and only an instance of vLLM's own runner class is accepted.
    """
    try:
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner
    except Exception:  # noqa: BLE001 - no runner class, no runner
        return None
    frame = sys._getframe(1)
    for _ in range(max_depth):
        if frame is None:
            return None
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, GPUModelRunner):
            return candidate
        frame = frame.f_back
    return None


class SpecplugDrafter(EngineDrafting):
    """A vLLM ``custom_class`` drafter that runs a specplug method, faults isolated.

    ``counters`` holds drafts by source, empty drafts and faults (see :mod:`._stats`).
    """

    def __init__(self, vllm_config: Any, *, runner: Any | None = None) -> None:
        spec = vllm_config.speculative_config
        settings = read_settings(getattr(vllm_config, "additional_config", None))
        self.num_speculative_tokens = int(spec.num_speculative_tokens)
        self.max_model_len = int(vllm_config.model_config.max_model_len)
        self._schedule = _k_schedule(vllm_config)
        self.settings = settings
        super().__init__(create_method(settings), **stats_options(settings))
        found = runner if runner is not None else find_runner()
        self._runner = weakref.ref(found) if found is not None else None
        log.info(
            "specplug drafter: method %s, options %s, K=%d, request ids from %s",
            self.settings.method,
            self.settings.options,
            self.num_speculative_tokens,
            "the model runner" if found is not None else "row positions (no model runner found)",
        )

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to load (vLLM's runners call this on every drafter)."""

    def propose(
        self,
        sampled_token_ids: Sequence[Sequence[int]],
        num_tokens_no_spec: np.ndarray,
        token_ids_cpu: np.ndarray,
        slot_mappings: Any = None,
        **_: Any,
    ) -> list[list[int]]:
        """One draft per row of the batch (an empty list where none is worth verifying)."""
        try:
            return self._propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu)
        except Exception as error:  # noqa: BLE001 - the adapter's own bugs must not stop vLLM either
            self.guard.record_fault("the vLLM drafter", error, "no drafts this step")
            return [[] for _ in sampled_token_ids]

    def _propose(
        self, sampled_token_ids: Sequence[Sequence[int]], num_tokens_no_spec: np.ndarray, token_ids_cpu: np.ndarray
    ) -> list[list[int]]:
        request_ids, live = self._batch_ids(len(sampled_token_ids), token_ids_cpu)
        rows = len(sampled_token_ids)
        step_k = self._step_k(rows)
        # a draft must leave room for the target's own token within max_model_len
        room = self.max_model_len - 1 - np.asarray(num_tokens_no_spec[:rows], dtype=np.int64)
        controls = request_controls(self, request_ids, live)
        limits = controlled_limits(np.clip(room, 0, step_k), controls)
        # one call to the proposer for the whole step: starts, stops, new tokens and drafts
        return self.step_token_lists(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, limits, request_ids, live,
                                     methods=controlled_methods(controls))

    def _batch_ids(self, rows: int, token_ids_cpu: np.ndarray) -> tuple[list[str] | None, Any]:
        runner = self._runner() if self._runner is not None else None
        batch = getattr(runner, "input_batch", None)
        # the runner's batch is trusted only when it is the one these arrays belong to
        if batch is None or getattr(batch, "token_ids_cpu", None) is not token_ids_cpu:
            return None, None
        request_ids = list(batch.req_ids[:rows])
        if len(request_ids) != rows or any(request_id is None for request_id in request_ids):
            return None, None
        return request_ids, getattr(runner, "requests", None)

    def _step_k(self, batch: int) -> int:
        if self._schedule is not None and 0 < batch < len(self._schedule):
            return self._schedule[batch]
        return self.num_speculative_tokens


def _k_schedule(vllm_config: Any) -> list[int] | None:
    """vLLM's dense batch size -> K lookup when the config has a batch-size schedule."""
    spec = vllm_config.speculative_config
    schedule = getattr(spec, "num_speculative_tokens_per_batch_size", None)
    if not schedule:
        return None
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    return build_dynamic_sd_schedule_lookup(
        schedule, vllm_config.scheduler_config.max_num_seqs, spec.num_speculative_tokens
    )
