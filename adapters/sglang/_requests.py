"""Per-request control in SGLang: a request's ``custom_params`` turn its drafts off, cap them, or name
the part of the server's method that drafts it.

OpenAI clients set them as ``extra_body={"custom_params": {"specplug_draft": "off"}}`` (or
``"sampling_params": {"custom_params": {...}}`` on ``/generate``); keys:
:mod:`specplug.engine`'s ``request_control``. The plugin checks them where SGLang checks a
request's sampling parameters (``SamplingParams.verify``, in the tokenizer manager: a bad value
is the client's HTTP 400); the ``SPECPLUG_*`` worker reads them per request each step.

A method name is checked against the server's own (``specplug.engine.note_served``): the launching process, where
the tokenizer manager runs, checks the server's arguments and notes there what its requests may
name (the specplug method, e.g. ``adaptive`` for ``SPECPLUG_ADAPTIVE``, and its parts).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from specplug.engine import EngineDrafting, noted_served, request_control

__all__ = ["check_request", "install_request_check", "request_controls"]

#: marks SGLang's verify as wrapped (a second register() leaves it alone)
_MARK = "__specplug_wraps__"


def check_request(custom_params: Any) -> None:
    """Raise ``ValueError`` (SGLang's bad request) for a bad control."""
    if isinstance(custom_params, dict):
        request_control(custom_params, noted_served())  # InvalidOptionError is a ValueError


def install_request_check() -> None:
    """Check every request's controls after SGLang's own checks of its sampling parameters."""
    from sglang.srt.sampling.sampling_params import SamplingParams

    original = SamplingParams.verify
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def verify(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        check_request(self.custom_params)
        return result

    setattr(verify, _MARK, True)
    SamplingParams.verify = verify


def request_controls(
    drafting: EngineDrafting, reqs: Sequence[Any], limit: int
) -> tuple[list[int], list[str | None] | None]:
    """Per request of the batch, its draft limit this step (``limit``, or less where it asks) and the
    part of the server's method it names (None for every row where none names one)."""
    limits = [limit] * len(reqs)
    methods: list[str | None] | None = None
    for row, req in enumerate(reqs):
        params = getattr(getattr(req, "sampling_params", None), "custom_params", None)
        if params:
            control = drafting.control_of(params)
            limits[row] = control.limit(limit)
            if control.method is not None:
                if methods is None:
                    methods = [None] * len(reqs)
                methods[row] = control.method
    return limits, methods
