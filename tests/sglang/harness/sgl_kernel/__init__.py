"""TEST HARNESS: a stand-in for SGLang's kernel package on a CPU without AVX-512/AMX (see ../README.md).

Any ``sgl_kernel.X.Y`` module imports; its attributes are the pure-torch ops in ``_ops`` where
one is written, else a function raising NotImplementedError naming the op, so a code path this
stand-in does not cover fails loudly instead of computing something wrong.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

from sgl_kernel import _ops

STAND_IN = True


class _Missing:
    """An op (or a namespace of them, e.g. ``scalar_types.uint4b8``) this stand-in does not compute."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"sgl_kernel stand-in (tests/sglang/harness): {self._name} is not implemented")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self._name}.{name}")

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)


def _lookup(module: str, name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    found = getattr(_ops, name, None)
    return found if callable(found) else _Missing(f"{module}.{name}")


def __getattr__(name: str) -> Any:
    return _lookup(__name__, name)


class _Submodule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        return _lookup(self.__name__, name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith("sgl_kernel.") and fullname != "sgl_kernel._ops":
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Submodule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
