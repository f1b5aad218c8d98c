"""The ``specplug:`` block of a model.yaml: which method drafts, its options and the draft length.

::

    specplug:
      method: suffix        # any registered method without an engine drafter part
      max_draft_len: 8      # TensorRT-LLM's max_draft_len for the user-provided drafter
      max_depth: 24         # every other key is an option of the method

Everything is checked by specplug (the method is created once) before TensorRT-LLM starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import specplug
from specplug._errors import InvalidOptionError, SpecplugError, UnknownMethodError
from specplug.engine import create_for_engine, no_drafter

__all__ = ["ADAPTER_KEYS", "BLOCK", "DEFAULT_DRAFT_LEN", "MAX_DRAFT_LEN", "DrafterSettings", "TrtllmConfigError", "read_settings"]

#: the top-level key of model.yaml that specplug reads and removes
BLOCK = "specplug"
#: keys of the block that configure the adapter; the others are the method's options
ADAPTER_KEYS = ("max_draft_len", "method")
DEFAULT_DRAFT_LEN = 8
#: the longest draft the block accepts (TensorRT-LLM pads every draft to this, on the GPU)
MAX_DRAFT_LEN = 64


#: what to do where a method composes the engine's own drafter, which User_Provided has not
_ENGINE_DRAFTER_HINT = "pass one from Python, speculative_config(METHOD, OPTION=<a specplug.Proposer>), or use MTP/Eagle3 with sa_config"


class TrtllmConfigError(SpecplugError, ValueError):
    """A model.yaml (or specplug block) that TensorRT-LLM or specplug would reject."""


@dataclass(frozen=True)
class DrafterSettings:
    """A validated specplug block: ``method``, its ``options`` and the draft length ``max_draft_len``."""

    method: str = "suffix"
    options: dict[str, Any] = field(default_factory=dict)
    max_draft_len: int = DEFAULT_DRAFT_LEN

    def create(self, **parts: Any) -> specplug.Proposer:
        """A fresh proposer of this method, by its declared capabilities (``parts``: objects such as the engine drafter part).

        TensorRT-LLM's ``User_Provided`` path runs no drafter of its own beside ours, so a method
        that composes one gets it only from ``parts`` (the Python form); without it, an error
        names the method and its option.
        """
        return create_for_engine(self.method, {**self.options, **parts}, engine="TensorRT-LLM's User_Provided path",
                                 hint=_ENGINE_DRAFTER_HINT)  # fmt: skip


def _where(source: str, key: str) -> str:
    return f"{source}: {BLOCK}.{key}"


def read_settings(block: object, source: str = "model.yaml", *, model: str | None = None, **parts: Any) -> DrafterSettings:
    """Validate a specplug block (a mapping), or raise :class:`TrtllmConfigError` naming the file and key.

    ``parts`` are objects a YAML file cannot hold (the Python form passes them): a method whose
    capabilities compose the engine's own drafter needs it here, and without it is refused in one
    line naming ``model`` (the served model, where known) and the ways out.

    >>> read_settings({"method": "ngram", "max_n": 3}).options
    {'max_n': 3}
    >>> read_settings({"method": "nope"})
    Traceback (most recent call last):
    ...
    specplug_adapters.trtllm._settings.TrtllmConfigError: model.yaml: specplug.method = 'nope' is not a method; valid methods: ...
    """
    if block is None:
        block = {}
    if not isinstance(block, Mapping):
        raise TrtllmConfigError(
            f"{source}: {BLOCK} = {block!r:.60} is not a mapping; write it as `{BLOCK}: {{method: suffix, max_draft_len: 8}}`"
        )
    values = dict(block)
    method = values.pop("method", "suffix")
    specs = specplug.method_specs()
    if not isinstance(method, str) or method not in specs:
        raise TrtllmConfigError(f"{_where(source, 'method')} = {method!r} is not a method; valid methods: {', '.join(specs)}")
    draft_len = values.pop("max_draft_len", DEFAULT_DRAFT_LEN)
    if isinstance(draft_len, bool) or not isinstance(draft_len, int) or not 1 <= draft_len <= MAX_DRAFT_LEN:
        raise TrtllmConfigError(
            f"{_where(source, 'max_draft_len')} = {draft_len!r} is not valid; use an int from 1 to {MAX_DRAFT_LEN}"
        )
    capabilities = specs[method].capabilities
    engine_part = capabilities.engine_drafter_option
    if engine_part is not None and capabilities.engine_drafter_required and engine_part not in parts:
        refusal = no_drafter(
            f"{_where(source, 'method')} = {method!r}",
            model or "the model",
            why=f"TensorRT-LLM's User_Provided path runs no MTP/EAGLE drafter beside specplug's, and a YAML file cannot "
                f"build one for its option {engine_part!r}",
            give="for MTP or Eagle3 with lookup drafts use TensorRT-LLM's own sa_config (`specplug preset trtllm "
                 f"mtp-sa`, `eagle3-sa`), or from Python speculative_config({method!r}, {engine_part}=<a specplug.Proposer>)",
            lookups=f"use a lookup method that needs none: `{BLOCK}: {{method: suffix}}`, or method: adaptive",
        )
        raise TrtllmConfigError(str(refusal))
    if capabilities.max_draft_tokens is not None and draft_len > capabilities.max_draft_tokens:
        raise TrtllmConfigError(
            f"{_where(source, 'max_draft_len')} = {draft_len} is longer than method {method!r} ever drafts "
            f"({capabilities.max_draft_tokens}); use at most {capabilities.max_draft_tokens}"
        )
    settings = DrafterSettings(method, values, draft_len)
    try:
        settings.create(**parts)  # options checked now, once, not in the executor
    except (InvalidOptionError, UnknownMethodError) as error:
        raise TrtllmConfigError(f"{source}: {BLOCK} block: {error}") from None
    return settings
