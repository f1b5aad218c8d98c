"""The TensorRT-LLM adapter: specplug methods as a user-provided drafter, and model.yaml presets.

TensorRT-LLM users configure speculation in a model.yaml (``trtllm-serve MODEL --config
model.yaml``). specplug meets them there:

- ``specplug trtllm serve MODEL --config model.yaml`` runs trtllm-serve with a top-level
  ``specplug:`` block (method and options) as TensorRT-LLM's ``User_Provided`` drafter;
- :func:`speculative_config` is the same for ``tensorrt_llm.LLM(...)`` in Python;
- ``specplug preset trtllm NAME`` prints model.yaml snippets for TensorRT-LLM's native methods
  (NGram, SA, MTP/Eagle3 with ``sa_config``, a ``draft_len_schedule``), tuned by replaying
  specplug's traces, and checked against TensorRT-LLM's own config schema (:func:`check_model_yaml`).

Importing this package imports no TensorRT-LLM; :class:`SpecplugDrafter` subclasses
TensorRT-LLM's ``Drafter`` when it imports (see docs/trtllm.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplug.engine._lazy import lazy_attributes
from specplug_adapters.trtllm._compat import (
    INSTALL_HINT,
    SOURCE_COMMIT,
    TRTLLM_RANGE,
    MissingEngineError,
    installed_trtllm_version,
    version_problem,
)
from specplug_adapters.trtllm._schema import check_model_yaml, check_speculative_config, load_schema, schema_origin
from specplug_adapters.trtllm._settings import BLOCK, DrafterSettings, TrtllmConfigError, read_settings

if TYPE_CHECKING:
    from specplug_adapters.trtllm._config import speculative_config, speculative_config_dict
    from specplug_adapters.trtllm._drafter import SpecplugDrafter
    from specplug_adapters.trtllm._launcher import serve
    from specplug_adapters.trtllm._resources import SpecplugResourceManager

__all__ = [
    "BLOCK",
    "INSTALL_HINT",
    "SOURCE_COMMIT",
    "TRTLLM_RANGE",
    "DrafterSettings",
    "MissingEngineError",
    "SpecplugDrafter",
    "SpecplugResourceManager",
    "TrtllmConfigError",
    "check_model_yaml",
    "check_speculative_config",
    "installed_trtllm_version",
    "load_schema",
    "read_settings",
    "schema_origin",
    "serve",
    "speculative_config",
    "speculative_config_dict",
    "version_problem",
]

# the drafter module imports TensorRT-LLM (when installed) to subclass its Drafter: only on use
__getattr__ = lazy_attributes(__name__, {
    "SpecplugDrafter": "specplug_adapters.trtllm._drafter",
    "SpecplugResourceManager": "specplug_adapters.trtllm._resources",
    "serve": "specplug_adapters.trtllm._launcher",
    "speculative_config": "specplug_adapters.trtllm._config",
    "speculative_config_dict": "specplug_adapters.trtllm._config",
})
