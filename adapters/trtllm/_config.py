"""The Python form: the ``speculative_config`` to pass to ``tensorrt_llm.LLM(...)``.

::

    from tensorrt_llm import LLM
    from specplug_adapters.trtllm import speculative_config

    llm = LLM(MODEL, speculative_config=speculative_config("suffix", max_draft_len=8, max_depth=24))

It is TensorRT-LLM's ``UserProvidedDecodingConfig`` holding a :class:`SpecplugDrafter` and the
:class:`SpecplugResourceManager` that frees its requests, options checked by specplug first.
"""

from __future__ import annotations

from typing import Any

from specplug import Proposer
from specplug_adapters.trtllm._compat import import_trtllm
from specplug_adapters.trtllm._settings import DEFAULT_DRAFT_LEN, DrafterSettings, read_settings

__all__ = ["build_pair", "speculative_config", "speculative_config_dict", "user_provided_config_class"]


def user_provided_config_class() -> type:
    """TensorRT-LLM's ``UserProvidedDecodingConfig`` (exported from ``tensorrt_llm.llmapi`` or only
    defined in ``llm_args``, depending on the release); MissingEngineError when it does not import."""
    llmapi = import_trtllm("tensorrt_llm.llmapi")
    found = getattr(llmapi, "UserProvidedDecodingConfig", None)
    if found is None:
        found = import_trtllm("tensorrt_llm.llmapi.llm_args").UserProvidedDecodingConfig
    return found


def build_pair(settings: DrafterSettings, *, proposer: Proposer | None = None, **parts: Any) -> tuple[Any, Any]:
    """A drafter and its resource manager sharing one runtime."""
    from specplug_adapters.trtllm._drafter import SpecplugDrafter
    from specplug_adapters.trtllm._resources import SpecplugResourceManager

    drafter = SpecplugDrafter(settings, proposer=proposer, **parts)
    return drafter, SpecplugResourceManager(drafter)


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    # objects (an engine drafter part, a cost model instance) are passed as they are, not validated as YAML
    parts = {key: value for key, value in options.items() if isinstance(value, Proposer)}
    return {key: value for key, value in options.items() if key not in parts}, parts


def speculative_config_dict(
    method: str = "suffix", *, max_draft_len: int = DEFAULT_DRAFT_LEN, proposer: Proposer | None = None, **options: Any
) -> dict[str, Any]:
    """The speculative config as a dict (``decoding_type: User_Provided`` with drafter and resource
    manager), which TensorRT-LLM's argument model validates into ``UserProvidedDecodingConfig``."""
    plain, parts = _split(options)
    settings = read_settings({"method": method, "max_draft_len": max_draft_len, **plain}, "speculative_config()", **parts)
    drafter, resources = build_pair(settings, proposer=proposer, **parts)
    return {"decoding_type": "User_Provided", "max_draft_len": max_draft_len, "drafter": drafter, "resource_manager": resources}


def speculative_config(
    method: str = "suffix",
    *,
    max_draft_len: int = DEFAULT_DRAFT_LEN,
    proposer: Proposer | None = None,
    config_class: type | None = None,
    **options: Any,
) -> Any:
    """TensorRT-LLM's ``UserProvidedDecodingConfig`` running specplug ``method`` with ``options``.

    ``proposer``: a ready Proposer to run instead of creating ``method``. Options that are
    Proposers (hybrid's ``neural``) are passed as parts. ``config_class`` replaces TensorRT-LLM's
    class (tests); without it TensorRT-LLM must import, else MissingEngineError says how to install it.
    """
    fields = speculative_config_dict(method, max_draft_len=max_draft_len, proposer=proposer, **options)
    fields.pop("decoding_type")
    cls = config_class or user_provided_config_class()
    return cls(**fields)
