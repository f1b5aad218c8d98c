"""Which SGLang versions the adapter was tested against, and the check made when it registers."""

from __future__ import annotations

from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["TESTED_SGLANG", "installed_sglang_version", "version_problem"]

#: SGLang versions the adapter's tests ran against; its plugin and spec-worker interfaces move often
TESTED_SGLANG = SpecifierSet(">=0.5.23,<0.6")


def installed_sglang_version() -> str | None:
    """The installed ``sglang`` distribution's version, or None when none is installed."""
    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None


def version_problem(version: str | None) -> str | None:
    """A sentence saying why ``version`` is outside the tested range, or None when it is inside.

    >>> version_problem("0.5.23") is None
    True
    >>> version_problem("0.7.0").startswith("SGLang 0.7.0 is outside the range")
    True
    """
    if version is None:
        return "no sglang distribution is installed"
    try:
        parsed = Version(version)
    except InvalidVersion:
        return f"SGLang version {version!r} cannot be parsed"
    if Version(parsed.base_version) in TESTED_SGLANG:
        return None
    return (
        f"SGLang {version} is outside the range the specplug adapter was tested with ({TESTED_SGLANG}); "
        "it registers anyway, but run tests/sglang before relying on it"
    )
