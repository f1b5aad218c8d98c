"""The vLLM adapter: every specplug method as a vLLM speculative method.

With specplug installed next to vLLM, its general plugin (:func:`register`, entry point
``vllm.general_plugins``) lets vLLM take ``specplug.<method>`` wherever it takes a method::

    vllm serve MODEL --spec-method specplug.suffix --spec-tokens 8
    vllm serve MODEL --speculative-config '{"method": "specplug.hybrid", "num_speculative_tokens": 4}'
    LLM(MODEL, speculative_config={"method": "specplug.adaptive", "num_speculative_tokens": 8})

Lookup methods run as :class:`SpecplugDrafter`, a vLLM ``custom_class`` drafter that also
works with no plugin (``--spec-model specplug_adapters.vllm.SpecplugDrafter``).
``specplug.hybrid``, and any method that composes the engine's own drafter, overlays lookup
drafts on the model's own MTP/EAGLE/draft-model drafts (:class:`HybridOverlay`). The request
lifecycle, fault isolation and counters are the engine layer's (:mod:`specplug.engine`);
this package holds vLLM's glue only. Importing it imports no vLLM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specplug.engine._lazy import lazy_attributes
from specplug_adapters.vllm._compat import TESTED_VLLM, installed_vllm_version, version_problem
from specplug_adapters.vllm._config import (
    DRAFTER_PATH,
    NEURAL_METHODS,
    PREFIX,
    SECTION,
    read_settings,
    specplug_method,
    translate,
    vllm_method_names,
)
from specplug_adapters.vllm._plugin import DISABLE_ENV, installed, register
from specplug_adapters.vllm._stats import LOGGER_NAME, read_stats

if TYPE_CHECKING:
    from specplug_adapters.vllm._drafter import SpecplugDrafter
    from specplug_adapters.vllm._hybrid import EngineDrafts, HybridOverlay

__all__ = [
    "DISABLE_ENV",
    "DRAFTER_PATH",
    "LOGGER_NAME",
    "NEURAL_METHODS",
    "PREFIX",
    "SECTION",
    "TESTED_VLLM",
    "EngineDrafts",
    "HybridOverlay",
    "SpecplugDrafter",
    "installed",
    "installed_vllm_version",
    "read_settings",
    "read_stats",
    "register",
    "specplug_method",
    "translate",
    "version_problem",
    "vllm_method_names",
]

# vLLM imports the drafter by its dotted path; importing the package stays cheap
__getattr__ = lazy_attributes(__name__, {
    "SpecplugDrafter": "specplug_adapters.vllm._drafter",
    "EngineDrafts": "specplug_adapters.vllm._hybrid",
    "HybridOverlay": "specplug_adapters.vllm._hybrid",
})
