"""Which engine version is installed, and whether it is inside the range an adapter was tested with.

Every adapter gates itself the same way: outside its range it still loads (engines move faster
than their interfaces break) but says so once, naming the range and what to check.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import metadata

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["installed_version", "range_problem"]


def installed_version(distributions: Iterable[str]) -> str | None:
    """The version of the first of ``distributions`` that is installed, or None.

    >>> installed_version(["no-such-distribution"]) is None
    True
    """
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def range_problem(engine: str, version: str | None, tested: SpecifierSet, advice: str, *, missing: str) -> str | None:
    """A sentence saying why ``version`` of ``engine`` is outside ``tested``, or None when it is inside.

    Pre-releases and local builds count by their base version (``1.3.0rc5`` and ``0.33.1+cpu`` are
    ``1.3.0`` and ``0.33.1``): a release candidate of a tested line is what users run.

    >>> tested = SpecifierSet(">=0.32,<0.34")
    >>> range_problem("vLLM", "0.33.1+cpu", tested, "check it", missing="none") is None
    True
    >>> range_problem("vLLM", "0.40.0", tested, "check it", missing="none")
    'vLLM 0.40.0 is outside the range the specplug adapter was tested with (<0.34,>=0.32); check it'
    """
    if version is None:
        return missing
    try:
        parsed = Version(version)
    except InvalidVersion:
        return f"{engine} version {version!r} cannot be parsed"
    if Version(parsed.base_version) in tested:
        return None
    return f"{engine} {version} is outside the range the specplug adapter was tested with ({tested}); {advice}"
