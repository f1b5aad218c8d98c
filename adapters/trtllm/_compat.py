"""Which TensorRT-LLM the adapter was written against, and importing it with one clear error."""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import Any

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from specplug._errors import SpecplugError

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
    for name in ("tensorrt-llm", "tensorrt_llm"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def version_problem(version: str | None) -> str | None:
    """A sentence saying why ``version`` is outside :data:`TRTLLM_RANGE`, or None.

    >>> version_problem("1.3.0rc5") is None, version_problem("0.20.0") is not None
    (True, True)
    """
    if version is None:
        return "no tensorrt-llm distribution is installed"
    try:
        parsed = Version(version)
    except InvalidVersion:
        return f"TensorRT-LLM version {version!r} cannot be parsed"
    if Version(parsed.base_version) in TRTLLM_RANGE:
        return None
    return (
        f"TensorRT-LLM {version} is outside the range the specplug adapter was written against ({TRTLLM_RANGE}); "
        "it runs anyway, but check docs/trtllm.md before relying on it"
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
