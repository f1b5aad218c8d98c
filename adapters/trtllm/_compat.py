"""Which TensorRT-LLM the adapter was written against, and importing it with one clear error."""

from __future__ import annotations

import importlib
from typing import Any

from packaging.specifiers import SpecifierSet

from specplug._errors import SpecplugError
from specplug.engine import installed_version, range_problem

__all__ = ["INSTALL_HINT", "SOURCE_COMMIT", "TRTLLM_RANGE", "MissingEngineError", "import_trtllm", "installed_trtllm_version", "version_problem"]

#: releases whose sources the adapter's interfaces were read from (Drafter with ``max_draft_len`` /
#: ``draft_len_schedule``, ``UserProvidedDecodingConfig``, ``launch_server(host, port, llm_args)``).
#: Exercised here against stand-ins shaped like those sources; docs/trtllm.md says what ran on a GPU.
TRTLLM_RANGE = SpecifierSet(">=1.2,<1.5")
#: the commit of ``tensorrt_llm/llmapi/llm_args.py`` the shipped schema was extracted from
SOURCE_COMMIT = "10ea1998dc06ea3cf695822d6756f1011672e9f0"
INSTALL_HINT = (
    "TensorRT-LLM is not installed (or does not import): install NVIDIA's wheel, e.g. "
    "`pip install tensorrt-llm` on a Linux machine with an NVIDIA GPU and CUDA "
    "(https://nvidia.github.io/TensorRT-LLM/installation/), then run this again"
)


class MissingEngineError(SpecplugError, ImportError):
    """TensorRT-LLM is needed for this and cannot be imported."""


def installed_trtllm_version() -> str | None:
    """The installed ``tensorrt-llm`` distribution's version, or None."""
    return installed_version(("tensorrt-llm", "tensorrt_llm"))


def version_problem(version: str | None) -> str | None:
    """A sentence saying why ``version`` is outside :data:`TRTLLM_RANGE`, or None.

    >>> version_problem("1.3.0rc5") is None, version_problem("0.20.0") is not None
    (True, True)
    """
    return range_problem(
        "TensorRT-LLM",
        version,
        TRTLLM_RANGE,
        "it runs anyway, but check docs/trtllm.md before relying on it",
        missing="no tensorrt-llm distribution is installed",
    )


def import_trtllm(module: str = "tensorrt_llm") -> Any:
    """Import a TensorRT-LLM module, or raise :class:`MissingEngineError` with how to install it.

    Any error counts, not only ImportError: a wheel without its CUDA libraries fails to import
    with OSError or RuntimeError, and the user's fix is the same.
    """
    try:
        return importlib.import_module(module)
    except Exception as error:  # noqa: BLE001 - reported as one line, the cause attached
        raise MissingEngineError(f"{INSTALL_HINT} ({module}: {type(error).__name__}: {error})") from error
