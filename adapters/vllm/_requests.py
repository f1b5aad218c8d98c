"""Per-request control in vLLM: a request's ``SamplingParams.extra_args`` turn its drafts off, cap them,
or name the part of the server's method that drafts it.

OpenAI clients set them as ``extra_body={"vllm_xargs": {"specplug_draft": "off"}}``,
``{"specplug_max_draft_tokens": 2}`` or ``{"specplug_method": "suffix"}`` (keys: :mod:`specplug.engine`'s
``request_control``). The plugin checks them where vLLM checks a request's sampling parameters
(``SamplingParams.verify``, in the API server, so a bad value is the client's HTTP 400); the
drafter and the overlay read them per row from the model runner's requests each step.

A method name is checked against the server's own (``specplug.engine.note_served``): the process that builds the
server's config from a ``specplug.*`` method (the API server of ``vllm serve``, or the process
that makes an ``LLM``) notes what its requests may name. A process that built none (an extra API
server process) checks only that the name is a string; the engine then counts a name it cannot
honour as a fault, and the request drafts as the server is set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from specplug import InvalidOptionError
from specplug.engine import EngineDrafting, RequestControl, noted_served, request_control

__all__ = ["check_request", "controlled_limits", "controlled_methods", "request_controls"]


def check_request(extra_args: Mapping[str, Any] | None) -> None:
    """Raise vLLM's own validation error (HTTP 400 through its OpenAI server) for a bad control."""
    try:
        request_control(extra_args, noted_served())
    except InvalidOptionError as error:
        from vllm.exceptions import VLLMValidationError

        raise VLLMValidationError(str(error), parameter="extra_args") from None


def request_controls(
    drafting: EngineDrafting, request_ids: Sequence[Any] | None, requests: Any
) -> list[RequestControl] | None:
    """Per row, its request's control; None when no row asks for one (the common case: nothing to do)."""
    if request_ids is None or not isinstance(requests, Mapping):
        return None
    controls: list[RequestControl] | None = None
    for row, request_id in enumerate(request_ids):
        extra = getattr(getattr(requests.get(request_id), "sampling_params", None), "extra_args", None)
        if not extra:
            continue
        control = drafting.control_of(extra)
        if control.default:
            continue
        if controls is None:
            controls = [RequestControl()] * len(request_ids)
        controls[row] = control
    return controls


def controlled_limits(limits: np.ndarray, controls: list[RequestControl] | None) -> np.ndarray:
    """The step's per-row draft limits with each request's control applied."""
    if controls is None:
        return limits
    return np.array([control.limit(int(limit)) for control, limit in zip(controls, limits)], dtype=np.int64)


def controlled_methods(controls: list[RequestControl] | None) -> list[str | None] | None:
    """Per row, the part its request names (``BatchStep.methods``); None when no row names one."""
    if controls is None or all(control.method is None for control in controls):
        return None
    return [control.method for control in controls]
