"""The llama.cpp adapter: llama-server run hermetically, and an in-process drafter.

Two ways in:

- **llama-server** (a separate process): :class:`LlamaServer` runs it hermetically on the
  loopback interface, with its flags checked against the binary's ``--help``. Measuring
  and tuning its settings (``specplug tune llama-server``) is the lab's work, in
  :mod:`specplug.lab.llamacpp`.
- **llama-cpp-python** (in process): :class:`SpecplugDraftModel` is a
  ``llama_cpp.llama_speculative.LlamaDraftModel`` that runs any specplug method;
  :class:`LlamaModelProposer` turns a second ``Llama`` into the neural part of a hybrid.

The llama-cpp-python parts are imported on first use, so the server side works without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplug.engine._lazy import lazy_attributes
from specplug_adapters.llamacpp._binary import check_flags, find_server, help_options, server_help
from specplug_adapters.llamacpp._errors import (
    BinaryNotFoundError,
    FlagRejectedError,
    LlamaCppError,
    ModelNotFoundError,
    ServerError,
)
from specplug_adapters.llamacpp._server import Completion, LlamaServer, check_model

if TYPE_CHECKING:
    from specplug_adapters.llamacpp._drafter import SpecplugDraftModel
    from specplug_adapters.llamacpp._neural import LlamaModelProposer

__all__ = [
    "BinaryNotFoundError",
    "Completion",
    "FlagRejectedError",
    "LlamaCppError",
    "LlamaModelProposer",
    "LlamaServer",
    "ModelNotFoundError",
    "ServerError",
    "SpecplugDraftModel",
    "check_flags",
    "check_model",
    "find_server",
    "help_options",
    "server_help",
]

# llama-cpp-python loads its shared library on import: only when these are used
__getattr__ = lazy_attributes(__name__, {
    "SpecplugDraftModel": "specplug_adapters.llamacpp._drafter",
    "LlamaModelProposer": "specplug_adapters.llamacpp._neural",
})
