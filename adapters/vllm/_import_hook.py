"""Run a function on a module right after it is first imported (a post-import hook).

The hybrid overlay wraps one method of vLLM's model runner. The runner module is heavy (it
imports the model executor), and vLLM loads general plugins in every process, most of which
(API server, front end) never build a runner: importing it there only to patch it would cost
start-up time for nothing. So the patch waits for the module's own first import.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Callable
from types import ModuleType

__all__ = ["when_imported"]

_lock = threading.Lock()
_pending: dict[str, list[Callable[[ModuleType], None]]] = {}


def when_imported(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` now if ``name`` is imported, else right after its import."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _pending.setdefault(name, []).append(callback)
            if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
                sys.meta_path.insert(0, _Finder())
            return
    callback(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds nothing itself; wraps the real loader of a watched module."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname not in _pending:
            return None
        # the real spec, from the finders after this one
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        with _lock:
            callbacks = _pending.pop(module.__name__, [])
        for callback in callbacks:
            callback(module)

    def __getattr__(self, name: str) -> object:  # get_source, is_package, ... of the real loader
        return getattr(self.loader, name)
