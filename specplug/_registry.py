"""Registrars handed to registration hooks: they validate entries and reject duplicates."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel

from specplug._errors import DuplicateNameError, InvalidOptionError

__all__ = ["MethodRegistrar", "MethodSpec"]

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class MethodSpec:
    """One registered method: its name, a one-line summary, its options and its factory."""

    name: str
    summary: str
    options: type[BaseModel]
    factory: Callable[..., object]
    origin: str

    def option_lines(self) -> list[str]:
        """``name: type = default  description`` for each option, for help texts."""
        lines = []
        for option, info in self.options.model_fields.items():
            annotation = getattr(info.annotation, "__name__", None) or str(info.annotation)
            annotation = _QUALIFIED.sub(r"\1", annotation)  # specplug._contract.Proposer -> Proposer
            default = "required" if info.is_required() else f"= {info.get_default(call_default_factory=True)!r}"
            lines.append(f"{option}: {annotation} {default}  {info.description or ''}".rstrip())
        return lines


class MethodRegistrar:
    """Collects proposer methods from ``specplug_register_methods`` implementations."""

    def __init__(self) -> None:
        self._specs: dict[str, MethodSpec] = {}

    def add(
        self,
        name: str,
        factory: Callable[..., object],
        *,
        options: type[BaseModel],
        summary: str,
    ) -> None:
        """Register ``factory(options_model_instance) -> Proposer`` under ``name``.

        ``options`` is a pydantic model whose fields are the method's options (it should
        forbid extra keys); ``summary`` is one line shown by ``specplug methods``.
        """
        if not isinstance(name, str) or not _NAME.match(name):
            raise InvalidOptionError(
                f"method name {name!r} is not valid; use 1-64 lower-case letters, digits, '_', '.' "
                "or '-', starting with a letter"
            )
        if not callable(factory):
            raise InvalidOptionError(f"method {name!r}: factory {factory!r} is not callable")
        if not (isinstance(options, type) and issubclass(options, BaseModel)):
            raise InvalidOptionError(f"method {name!r}: options must be a pydantic model class, got {options!r}")
        if not isinstance(summary, str) or not summary.strip() or "\n" in summary.strip():
            raise InvalidOptionError(f"method {name!r}: summary must be one non-empty line, got {summary!r}")
        origin = getattr(factory, "__module__", None) or repr(factory)
        if name in self._specs:
            raise DuplicateNameError(
                f"method {name!r} is registered twice: by {self._specs[name].origin} and by {origin}; "
                "block one plugin with SPECPLUG_BLOCK_PLUGINS"
            )
        self._specs[name] = MethodSpec(name, summary.strip(), options, factory, origin)

    def specs(self) -> dict[str, MethodSpec]:
        """The registered methods by name, sorted."""
        return dict(sorted(self._specs.items()))
