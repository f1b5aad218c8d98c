"""``SpecplugDrafter``: a TensorRT-LLM ``Drafter`` that runs any specplug method.

TensorRT-LLM calls ``prepare_draft_tokens(scheduled_requests, resource_manager)`` once per step
before the target's forward pass (the two-model path that ``User_Provided`` takes, sampled by
``TorchSampler``). For each generation request the drafter syncs the request's history into
the proposer (the engine layer's :class:`~specplug.engine.KeyedHistorySync`) and asks for at
most the step's draft length, for the whole step in one call to the method
(:meth:`specplug.engine.EngineDrafting.step_requests`, which also passes the batch size on and
counts) and writes ``py_draft_tokens``: a list as long as the method
likes, up to that length, possibly empty. The executor pads every list to the static ``max_draft_len``
itself (``pad_draft_tokens_for_cuda_graph``); padding is verified like any draft token, so
output is unchanged.

The class subclasses TensorRT-LLM's ``Drafter`` where it imports, else a fallback of the same
shape, so this module imports (and is tested) without TensorRT-LLM; :func:`drafter_class`
builds it on any base shaped like ``tensorrt_llm/_torch/speculative/drafter.py``.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable
from typing import Any

from specplug import Proposer
from specplug_adapters.trtllm._runtime import SpecplugRuntime
from specplug_adapters.trtllm._settings import DrafterSettings
from specplug_adapters.trtllm._sync import is_dummy, request_key

__all__ = ["SpecplugDrafter", "drafter_class", "engine_drafter_base"]


class _FallbackDrafter:
    """The attributes TensorRT-LLM's ``Drafter.__init__`` sets, for when TensorRT-LLM does not import."""

    def __init__(self, max_draft_len=None, max_total_draft_tokens=None, max_concurrency=None, draft_len_schedule=None) -> None:
        self.max_draft_len = max_draft_len
        self.max_total_draft_tokens = max_total_draft_tokens
        self._static_max_total_draft_tokens = max_total_draft_tokens
        self.max_concurrency = max_concurrency
        self.draft_len_schedule = draft_len_schedule

    def update_max_total_draft_tokens(self, new_max_total_draft_tokens: int) -> None:
        # what the executor calls each step when a draft_len_schedule is set
        self.max_total_draft_tokens = new_max_total_draft_tokens
        self.max_draft_len = new_max_total_draft_tokens


def engine_drafter_base() -> type:
    """TensorRT-LLM's ``Drafter`` where it imports (any failure counts), else the fallback."""
    try:
        from tensorrt_llm._torch.speculative.drafter import Drafter
    except Exception:  # noqa: BLE001 - absent or broken: the fallback keeps this importable
        return _FallbackDrafter
    return Drafter


def _state_name(request: Any) -> str:
    state = getattr(request, "state", None)
    return getattr(state, "name", str(state))


class _Drafting:
    """The drafter's behaviour, mixed into TensorRT-LLM's ``Drafter`` (or the fallback)."""

    # TorchSampler computes the KV rewind from the padded draft, so padding must extend the KV
    # capacity; TensorRT-LLM versions with this flag do it in the base class, newer ones call
    # _extend_kv_cache_for_padding (below). Either way only a draft_len_schedule shrinks a step.
    _needs_padding_kv_extension = True

    def __init__(
        self,
        settings: DrafterSettings | None = None,
        *,
        runtime: SpecplugRuntime | None = None,
        proposer: Proposer | None = None,
        max_concurrency: int | None = None,
        draft_len_schedule: dict[int, int] | None = None,
        **parts: Any,
    ) -> None:
        if runtime is None:
            runtime = SpecplugRuntime(settings or DrafterSettings(), proposer=proposer, parts=parts)
        self.runtime = runtime
        draft_len = runtime.settings.max_draft_len
        # call super().__init__ with the arguments this TensorRT-LLM's Drafter takes (they changed
        # across releases), by keyword; the attributes the executor reads are set either way
        wanted = {"max_draft_len": draft_len, "max_total_draft_tokens": draft_len,
                  "max_concurrency": max_concurrency, "draft_len_schedule": draft_len_schedule}  # fmt: skip
        accepted = inspect.signature(super().__init__).parameters
        super().__init__(**{key: value for key, value in wanted.items() if key in accepted})
        for key, value in wanted.items():
            if not hasattr(self, key):
                setattr(self, key, value)
        if not hasattr(self, "_static_max_total_draft_tokens"):
            self._static_max_total_draft_tokens = draft_len

    @property
    def counters(self):
        """Drafts by source, empty drafts and faults."""
        return self.runtime.counters

    def step_draft_len(self) -> int:
        """The most draft tokens a request may get this step: the executor's scheduled length."""
        scheduled = getattr(self, "max_total_draft_tokens", None)
        return int(self.runtime.settings.max_draft_len if scheduled is None else scheduled)

    def prepare_draft_tokens(self, scheduled_requests: Any, resource_manager: Any = None) -> None:
        """Write ``py_draft_tokens`` for every generation request of the step; never raises."""
        requests: list[Any] = []
        try:
            requests = list(scheduled_requests.generation_requests)
            live = sorted((request for request in requests if not is_dummy(request)), key=_batch_order)
            limit = self.step_draft_len()
            rows, ended = [], []
            for request in live:
                rows.append(self._row(request, limit, ended))
            # one call to the method for the whole step: ends, starts, new tokens and drafts; padding
            # requests are not part of the batch a method prices its drafts for
            drafts = self.runtime.drafting.step_requests(rows, stopping=ended, batch_size=len(live))
            for request, draft in zip(live, drafts):
                request.py_draft_tokens = [int(token) for token in draft.tokens]
            for request in requests:
                if is_dummy(request):
                    request.py_draft_tokens = []
        except Exception as error:  # noqa: BLE001 - the adapter's own faults cost drafts, never the executor
            self.runtime.guard.record_fault("prepare_draft_tokens", error, "no drafts this step")
            for request in requests:
                try:
                    request.py_draft_tokens = []
                except Exception:  # noqa: BLE001, S110 - a request that rejects even that keeps what it had
                    pass

    def _row(self, request: Any, limit: int, ended: list[Hashable]) -> tuple[Hashable, Any, int] | None:
        """``request``'s row of the step: (request id, its history, most tokens), or None (it ended,
        then its id goes to ``ended``, or it cannot be read)."""
        key = request_key(request)
        if _state_name(request) == "GENERATION_COMPLETE":
            ended.append(key)
            return None
        try:
            history = request.get_tokens(0)
            # a draft must leave room for the target's own token within the request's budget
            room = int(request.py_orig_prompt_len) + int(request.py_max_new_tokens) - len(history) - 1
            return key, history, min(limit, room)
        except Exception as error:  # noqa: BLE001 - this request's draft is lost, the others go on
            self.runtime.guard.record_fault("drafting a request", error, "that request drafts nothing this step")
            return None

    def _extend_kv_cache_for_padding(self, scheduled_requests: Any, resource_manager: Any, pre_padding_lens: Any = None) -> None:
        """Extend the KV capacity to the padded draft (TensorRT-LLM releases that ask the drafter)."""
        try:
            from tensorrt_llm._torch.pyexecutor.resource_manager import ResourceManagerType

            managers = [resource_manager.get_resource_manager(kind) for kind in
                        (ResourceManagerType.KV_CACHE_MANAGER, ResourceManagerType.DRAFT_KV_CACHE_MANAGER)]  # fmt: skip
            for request in scheduled_requests.generation_requests:
                for manager in managers:
                    if manager is not None and hasattr(manager, "extend_capacity_for_tokens"):
                        manager.extend_capacity_for_tokens(request)
        except Exception as error:  # noqa: BLE001
            self.runtime.guard.record_fault("extending the KV cache for padding", error, "KV capacity left as allocated")

    def __reduce_ex__(self, protocol: int):  # noqa: D105 - pickled by settings and runtime, rebuilt where unpickled
        return (_rebuild, (type(self), self.runtime, getattr(self, "max_concurrency", None), getattr(self, "draft_len_schedule", None)))


def _rebuild(cls: type, runtime: SpecplugRuntime, max_concurrency: int | None, schedule: dict[int, int] | None) -> Any:
    return cls(runtime=runtime, max_concurrency=max_concurrency, draft_len_schedule=schedule)


def _batch_order(request: Any) -> tuple[bool, Any]:
    # the order TensorRT-LLM's own n-gram drafter uses; cross-request caches see requests in a fixed order
    index = getattr(request, "py_batch_idx", None)
    return (index is None, index if index is not None else request_key(request))


def drafter_class(base: type) -> type:
    """``SpecplugDrafter`` built on ``base`` (TensorRT-LLM's ``Drafter`` or a class shaped like it)."""
    return type("SpecplugDrafter", (_Drafting, base), {"__doc__": _DOC, "__module__": __name__})


_DOC = """A TensorRT-LLM ``Drafter`` that runs a specplug method, faults contained.

``SpecplugDrafter(DrafterSettings("suffix", {"max_depth": 24}, max_draft_len=8))``, or with a
ready ``proposer=``; pair it with ``SpecplugResourceManager(drafter)`` in
``UserProvidedDecodingConfig`` (``specplug_adapters.trtllm.speculative_config`` does both).
"""


SpecplugDrafter = drafter_class(engine_drafter_base())
