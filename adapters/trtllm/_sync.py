"""What TensorRT-LLM's ``LlmRequest`` objects tell the engine layer: their id and whether they are padding.

TensorRT-LLM hands a drafter the step's scheduled requests; each generation request holds its
whole history (``get_tokens(0)``: prompt and every token accepted so far), never the step's
delta, and its end comes through the resource manager. That is the engine layer's keyed view
(:class:`specplug.engine.KeyedHistorySync`, kept by :class:`specplug.engine.EngineDrafting` as
``requests``): started on first sight, extended by what the history gained, stopped on
completion or free, restarted when a history does not continue (an id reused unseen). This
module only reads the two facts of TensorRT-LLM's own: the id and the padding flags.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

__all__ = ["is_dummy", "request_key"]

#: flags TensorRT-LLM sets on the padding requests it schedules (attention-DP and CUDA-graph warm-up)
_DUMMY_FLAGS = ("is_attention_dp_dummy", "is_cuda_graph_dummy", "is_dummy", "is_dummy_request")


def request_key(request: Any) -> Hashable:
    """The id a request is known by: ``py_request_id`` (the Python mirror), else ``request_id``.

    >>> from types import SimpleNamespace
    >>> request_key(SimpleNamespace(py_request_id=None, request_id=7)), request_key(SimpleNamespace(py_request_id=8, request_id=7))
    (7, 8)
    """
    key = getattr(request, "py_request_id", None)
    return request.request_id if key is None else key


def is_dummy(request: Any) -> bool:
    """Whether TensorRT-LLM scheduled ``request`` only as padding (it must not draft or be tracked).

    >>> from types import SimpleNamespace
    >>> is_dummy(SimpleNamespace(is_cuda_graph_dummy=True)), is_dummy(SimpleNamespace(is_attention_dp_dummy=False))
    (True, False)
    """
    return any(getattr(request, flag, False) is True for flag in _DUMMY_FLAGS)
