"""Attributes of an adapter package that import their module on first use.

An adapter package must import cheaply: the engine loads it in every process (a plugin entry point),
often before the engine's own modules are wanted, and some of its names subclass engine classes.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that imports ``modules[name]`` when ``name`` is first read.

    >>> getattr_ = lazy_attributes("pkg", {"dumps": "json"})
    >>> getattr_("dumps").__name__
    'dumps'
    >>> getattr_("nope")
    Traceback (most recent call last):
    ...
    AttributeError: module 'pkg' has no attribute 'nope'
    """

    def __getattr__(name: str) -> Any:
        if name in modules:
            return getattr(importlib.import_module(modules[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
