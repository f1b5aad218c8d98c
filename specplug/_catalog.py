"""The catalog of methods: ``methods()`` and ``create()`` over the plugin manager."""

from __future__ import annotations

import threading
from typing import Any, TypeVar

import pluggy
from pydantic import BaseModel, ValidationError

from specplug._contract import Proposer
from specplug._errors import InvalidOptionError, UnknownMethodError
from specplug._manager import build_plugin_manager
from specplug._registry import MethodRegistrar, MethodSpec

__all__ = ["Catalog", "create", "default_catalog", "method_specs", "methods", "reset", "validate_options"]

ModelT = TypeVar("ModelT", bound=BaseModel)


class Catalog:
    """The methods that the plugins of one plugin manager registered."""

    def __init__(self, manager: pluggy.PluginManager) -> None:
        self.manager = manager
        registrar = MethodRegistrar()
        manager.hook.specplug_register_methods(registrar=registrar)
        self.specs: dict[str, MethodSpec] = registrar.specs()

    def methods(self) -> list[str]:
        return list(self.specs)

    def spec(self, name: object) -> MethodSpec:
        if not isinstance(name, str) or name not in self.specs:
            raise UnknownMethodError(name, self.methods())
        return self.specs[name]

    def create(self, name: str, **options: Any) -> Proposer:
        spec = self.spec(name)
        validated = validate_options(f"method {name!r}", spec.options, options)
        proposer = spec.factory(validated)
        if not isinstance(proposer, Proposer):
            raise TypeError(f"method {name!r} ({spec.origin}) returned {proposer!r}, not a specplug.Proposer")
        return proposer


def _describe(subject: str, options: type[BaseModel], error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        option = ".".join(str(part) for part in item["loc"]) or "(options)"
        if item["type"] == "extra_forbidden":
            problems.append(f"unknown option {option!r}")
        else:
            problems.append(f"option {option} = {item.get('input')!r:.60}: {item['msg']}")
    valid = ", ".join(options.model_fields) or "(none)"
    return f"{subject}: " + "; ".join(problems) + f". Valid options: {valid}"


def validate_options(subject: str, options: type[ModelT], values: dict[str, Any]) -> ModelT:
    """``options`` validated from ``values``, or an InvalidOptionError naming ``subject`` and each problem.

    >>> from specplug.proposers.ngram import NgramOptions
    >>> validate_options("method 'ngram'", NgramOptions, {"min_n": 0})
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: method 'ngram': option min_n = 0: Input should be greater than or equal to 1. Valid options: ...
    """
    try:
        return options.model_validate(values)
    except ValidationError as error:
        raise InvalidOptionError(_describe(subject, options, error)) from None


_lock = threading.Lock()
_default: Catalog | None = None


def default_catalog() -> Catalog:
    """The process-wide catalog, built on first use (built-ins, then entry points)."""
    global _default
    with _lock:
        if _default is None:
            _default = Catalog(build_plugin_manager())
        return _default


def reset() -> None:
    """Forget the process-wide catalog, so the next use rebuilds it (plugins changed)."""
    global _default
    with _lock:
        _default = None


def methods() -> list[str]:
    """The names of all registered methods, sorted.

    >>> {"ngram", "suffix"} <= set(methods())
    True
    """
    return default_catalog().methods()


def method_specs() -> dict[str, MethodSpec]:
    """The registered methods with their summaries and options."""
    return dict(default_catalog().specs)


def create(name: str, **options: Any) -> Proposer:
    """Create a proposer of method ``name`` with its options.

    >>> proposer = create("ngram", min_n=1, max_n=2)
    >>> proposer.start("r", [1, 2, 3, 1, 2])
    >>> proposer.propose("r", 2).tokens
    (3, 1)
    """
    return default_catalog().create(name, **options)
