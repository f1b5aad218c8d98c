"""Registrars handed to registration hooks: they validate entries and reject duplicates."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from specplug._contract import DRAFT_KINDS, DraftKind
from specplug._errors import DuplicateNameError, InvalidOptionError

__all__ = ["MethodCapabilities", "MethodRegistrar", "MethodSpec"]

_NAME = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class MethodCapabilities:
    """What a method is, declared when it registers, so adapters and the bench never branch on its name.

    ``kind``: what its drafts cost with its default options (each proposer also says its own
    ``draft_kind``). ``engine_drafter_option``: the option that takes the engine's own neural
    drafter (MTP/EAGLE head, draft model) as a Proposer, for methods that compose it (hybrid's
    ``neural``); None when it composes none. ``part_options``: options that take other proposers
    (or method names) as parts. ``cost_option``: the option that takes a cost model, when it prices
    drafts by time; an adapter that measures its own step costs passes them there. ``takes_batch_size``:
    its drafts depend on the engine's batch size (``Proposer.set_batch_size``). ``max_draft_tokens``:
    the longest draft it makes whatever it is asked, or None.

    >>> MethodCapabilities(kind="neural", engine_drafter_option="neural").composes_engine_drafter
    True
    """

    kind: DraftKind = "lookup"
    engine_drafter_option: str | None = None
    part_options: tuple[str, ...] = ()
    cost_option: str | None = None
    takes_batch_size: bool = False
    max_draft_tokens: int | None = None

    @property
    def composes_engine_drafter(self) -> bool:
        return self.engine_drafter_option is not None

    @property
    def uses_cost_model(self) -> bool:
        return self.cost_option is not None

    @property
    def composite(self) -> bool:
        """Whether it is built from other proposers."""
        return bool(self.part_options) or self.composes_engine_drafter

    def option_names(self) -> list[str]:
        """Every option these capabilities name (each must be one of the method's options)."""
        named = [self.engine_drafter_option, self.cost_option, *self.part_options]
        return [name for name in named if name is not None]


@dataclass(frozen=True)
class MethodSpec:
    """One registered method: its name, a one-line summary, its options and its factory."""

    name: str
    summary: str
    options: type[BaseModel]
    factory: Callable[..., object]
    origin: str
    capabilities: MethodCapabilities = field(default_factory=MethodCapabilities)

    def default_options(self) -> dict[str, Any]:
        """The options that have defaults, with them (required options are left out)."""
        return {
            option: info.get_default(call_default_factory=True)
            for option, info in self.options.model_fields.items()
            if not info.is_required()
        }

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
        capabilities: MethodCapabilities | None = None,
    ) -> None:
        """Register ``factory(options_model_instance) -> Proposer`` under ``name``.

        ``options`` is a pydantic model whose fields are the method's options (it should
        forbid extra keys); ``summary`` is one line shown by ``specplug methods``;
        ``capabilities`` says what the method is (a plain lookup when left out).
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
        capabilities = MethodCapabilities() if capabilities is None else capabilities
        if not isinstance(capabilities, MethodCapabilities):
            raise InvalidOptionError(f"method {name!r}: capabilities must be a MethodCapabilities, got {capabilities!r}")
        if capabilities.kind not in DRAFT_KINDS:
            raise InvalidOptionError(
                f"method {name!r}: kind {capabilities.kind!r} is not valid; valid kinds: {', '.join(DRAFT_KINDS)}"
            )
        for option in capabilities.option_names():
            if option not in options.model_fields:
                raise InvalidOptionError(
                    f"method {name!r}: capabilities name option {option!r}, which its options model lacks; "
                    f"its options: {', '.join(options.model_fields) or '(none)'}"
                )
        origin = getattr(factory, "__module__", None) or repr(factory)
        if name in self._specs:
            raise DuplicateNameError(
                f"method {name!r} is registered twice: by {self._specs[name].origin} and by {origin}; "
                "block one plugin with SPECPLUG_BLOCK_PLUGINS"
            )
        self._specs[name] = MethodSpec(name, summary.strip(), options, factory, origin, capabilities)

    def specs(self) -> dict[str, MethodSpec]:
        """The registered methods by name, sorted."""
        return dict(sorted(self._specs.items()))
