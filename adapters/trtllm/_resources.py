"""``SpecplugResourceManager``: where TensorRT-LLM tells a drafter that requests begin and end.

TensorRT-LLM calls every resource manager of the executor each step: ``prepare_resources``
before the forward pass, ``update_resources`` after it and ``free_resources(request)`` when a
request is done. This one owns no memory of the engine's (it reports 0 resources, so it never
gates the scheduler); it frees a request's specplug state when the request completes or is
freed, and forgets an id whose first context chunk arrives again (the id was reused).
"""

from __future__ import annotations

from itertools import chain
from typing import Any

from specplug_adapters.trtllm._runtime import SpecplugRuntime
from specplug_adapters.trtllm._sync import is_dummy, request_key

__all__ = ["SpecplugResourceManager", "engine_resource_manager_base", "resource_manager_class"]


class _FallbackResourceManager:
    """The shape of TensorRT-LLM's ``BaseResourceManager``, for when TensorRT-LLM does not import."""


def engine_resource_manager_base() -> type:
    """TensorRT-LLM's ``BaseResourceManager`` where it imports, else the fallback."""
    try:
        from tensorrt_llm._torch.pyexecutor.resource_manager import BaseResourceManager
    except Exception:  # noqa: BLE001 - absent or broken: the fallback keeps this importable
        return _FallbackResourceManager
    return BaseResourceManager


def _completed(request: Any) -> bool:
    state = getattr(request, "state", None)
    return getattr(state, "name", str(state)) == "GENERATION_COMPLETE"


class _Resources:
    """The resource manager's behaviour, mixed into TensorRT-LLM's ``BaseResourceManager``."""

    def __init__(self, drafter_or_runtime: Any) -> None:
        self.runtime: SpecplugRuntime = getattr(drafter_or_runtime, "runtime", drafter_or_runtime)

    def get_max_resource_count(self) -> int:
        return 0  # holds no KV blocks or slots: the scheduler must not count it

    def get_needed_resource_to_completion(self, request: Any) -> int:
        return 0

    def add_dummy_requests(self, request_ids: Any, *args: Any, **kwargs: Any) -> None:
        """Warm-up padding requests draft nothing, so there is nothing to add."""

    def prepare_resources(self, scheduled_batch: Any, *args: Any, **kwargs: Any) -> None:
        try:
            for request in scheduled_batch.context_requests:
                if getattr(request, "is_first_context_chunk", False) and not is_dummy(request):
                    self.runtime.sync.stop(request_key(request))  # a new request: an id seen before is stale
        except Exception as error:  # noqa: BLE001
            self.runtime.guard.record_fault("prepare_resources", error, "stale request state kept until its id is seen again")

    def update_resources(self, scheduled_batch: Any, *args: Any, **kwargs: Any) -> None:
        try:
            for request in chain(scheduled_batch.context_requests, scheduled_batch.generation_requests):
                if _completed(request):
                    self.runtime.sync.stop(request_key(request))
        except Exception as error:  # noqa: BLE001
            self.runtime.guard.record_fault("update_resources", error, "finished requests freed later")

    def free_resources(self, request: Any, *args: Any, **kwargs: Any) -> None:
        try:
            self.runtime.sync.stop(request_key(request))
        except Exception as error:  # noqa: BLE001
            self.runtime.guard.record_fault("free_resources", error, "that request's state freed when its id is reused")

    def shutdown(self) -> None:
        try:
            self.runtime.close()
        except Exception as error:  # noqa: BLE001
            self.runtime.guard.record_fault("shutdown", error, "request state left to the garbage collector")


def resource_manager_class(base: type) -> type:
    """``SpecplugResourceManager`` built on ``base`` (TensorRT-LLM's ``BaseResourceManager`` or alike)."""
    doc = "Frees a specplug drafter's per-request state as TensorRT-LLM's executor finishes requests."
    return type("SpecplugResourceManager", (_Resources, base), {"__doc__": doc, "__module__": __name__})


SpecplugResourceManager = resource_manager_class(engine_resource_manager_base())
