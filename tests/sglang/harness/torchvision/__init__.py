"""TEST HARNESS: keeps PyPI's torchvision (a CUDA build, whose op registration fails on the CPU
torch) out of the test venv. SGLang imports it at module level for multimodal models only; here
every ``torchvision.*`` module imports and any use raises NotImplementedError naming it."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

STAND_IN = True
__version__ = "0.0+specplug-test-harness"


class _Unavailable:
    def __init__(self, name: str) -> None:
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"torchvision stand-in (tests/sglang/harness): {self._name} is not available")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unavailable(f"{self._name}.{name}")

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (object,)  # a class deriving from a torchvision class still defines


class _Submodule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Unavailable(f"{self.__name__}.{name}")


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _Unavailable(f"torchvision.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _Submodule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass


if not any(type(finder).__module__ == __name__ for finder in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
