"""Whether the target model carries MTP layers, decided by vLLM's own mapping.

vLLM turns a target's config into its MTP drafter's config with
``SpeculativeConfig.hf_config_override`` (DeepSeek-V3 -> ``deepseek_mtp``, Qwen3-Next ->
``qwen3_next_mtp``, ...) and accepts ``method: mtp`` only when the result is one of its MTP model
types; any other target fails deep inside vLLM. Asking the same function here keeps the check in
step with the installed vLLM instead of a copied list of architectures.
"""

from __future__ import annotations

import copy
import logging
from typing import Any, get_args

from specplug_adapters.vllm._config import TargetModel
from specplug_adapters.vllm._stats import LOGGER_NAME

__all__ = ["target_model"]

log = logging.getLogger(LOGGER_NAME)


def target_model(model_config: Any) -> TargetModel:
    """The target as the config check sees it, from vLLM's ``ModelConfig`` (``has_mtp`` None when unknown)."""
    name = str(getattr(model_config, "model", None) or "the model")
    hf_config = getattr(model_config, "hf_config", None)
    architectures = getattr(hf_config, "architectures", None) or []
    architecture = str(architectures[0]) if architectures else None
    has_mtp = _has_mtp(hf_config)
    text_config = getattr(model_config, "hf_text_config", None) or hf_config
    if has_mtp is False and getattr(text_config, "num_mtp_layers", None):
        has_mtp = None  # vLLM 0.33's Transformers backend may build an MTP drafter from this field itself
    return TargetModel(name, architecture, has_mtp)


def _has_mtp(hf_config: Any) -> bool | None:
    if hf_config is None:
        return None
    try:
        from vllm.config.speculative import MTPModelTypes, SpeculativeConfig

        override = SpeculativeConfig.hf_config_override
        mtp_types = set(get_args(MTPModelTypes))
    except (ImportError, AttributeError):  # another vLLM layout: vLLM decides alone, as without specplug
        log.debug("specplug: vLLM's MTP mapping not found; the target's MTP layers are not checked")
        return None
    try:
        drafter = override(copy.deepcopy(hf_config))
    except ValueError:
        return False  # vLLM's own verdict on a checkpoint without MTP weights (Inkling)
    except Exception:  # noqa: BLE001 - an unexpected config shape: leave the verdict to vLLM
        log.debug("specplug: vLLM's MTP mapping failed on this config; not checked", exc_info=True)
        return None
    if getattr(drafter, "model_type", None) not in mtp_types:
        return False
    # a DeepSeek-V3-class config with 0 next-token layers maps to MTP but has no layers to run
    return getattr(drafter, "n_predict", None) != 0
