"""The llama.cpp adapter: llama-server with measured presets, and an in-process drafter.

Two ways in:

- **llama-server** (a separate process): :class:`LlamaServer` runs it hermetically on the
  loopback interface; :func:`tune` measures llama.cpp's own n-gram drafters on sample
  prompts and writes the fastest as a preset (``specplug tune llama-server``).
- **llama-cpp-python** (in process): :class:`SpecplugDraftModel` is a
  ``llama_cpp.llama_speculative.LlamaDraftModel`` that runs any specplug method;
  :class:`LlamaModelProposer` turns a second ``Llama`` into the neural part of a hybrid.

The llama-cpp-python parts are imported on first use, so the server side works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specplug_adapters.llamacpp._binary import check_flags, find_server, help_options, server_help
from specplug_adapters.llamacpp._errors import (
    BinaryNotFoundError,
    FlagRejectedError,
    LlamaCppError,
    ModelNotFoundError,
    ServerError,
)
from specplug_adapters.llamacpp._measure import (
    Agreement,
    Measurement,
    Setting,
    agreement,
    first_divergence,
    measure_settings,
)
from specplug_adapters.llamacpp._prompts import Prompt, load_prompts, shipped_prompts
from specplug_adapters.llamacpp._server import Completion, LlamaServer, check_model
from specplug_adapters.llamacpp._tune import DEFAULT_CANDIDATES, tune

if TYPE_CHECKING:
    from specplug_adapters.llamacpp._drafter import SpecplugDraftModel
    from specplug_adapters.llamacpp._neural import LlamaModelProposer

__all__ = [
    "DEFAULT_CANDIDATES",
    "Agreement",
    "BinaryNotFoundError",
    "Completion",
    "FlagRejectedError",
    "LlamaCppError",
    "LlamaModelProposer",
    "LlamaServer",
    "Measurement",
    "ModelNotFoundError",
    "Prompt",
    "ServerError",
    "Setting",
    "SpecplugDraftModel",
    "agreement",
    "check_flags",
    "check_model",
    "find_server",
    "first_divergence",
    "help_options",
    "load_prompts",
    "measure_settings",
    "server_help",
    "shipped_prompts",
    "tune",
]

_LAZY = {
    "SpecplugDraftModel": "specplug_adapters.llamacpp._drafter",
    "LlamaModelProposer": "specplug_adapters.llamacpp._neural",
}


def __getattr__(name: str) -> Any:
    # llama-cpp-python loads its shared library on import: only when these are used
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
