"""Registrars handed to the registration hooks, and the specs they collect.

Every registrar applies the same rules: a name is 1-64 lower-case letters, digits, '_', '.'
or '-' starting with a letter or digit; a summary is one non-empty line; a name registered
twice is a :class:`DuplicateNameError` naming both origins. They sit below the hook
specifications (which name them) and the plugin manager (which hands them out).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel

from specplug._drafts import DRAFT_KINDS, DraftKind
from specplug._cost._files import load_cost_model
from specplug._cost._linear import CostModel
from specplug._errors import CostModelError, DuplicateNameError, InvalidOptionError

__all__ = [
    "CostModelRegistrar", "CostModelSpec", "MethodCapabilities", "MethodRegistrar", "MethodSpec", "PeerRegistrar",
    "PeerSpec", "Registrar",
]  # fmt: skip

#: what every registered name must match (methods, cost models, peers)
NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
_QUALIFIED = re.compile(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)")


@dataclass(frozen=True)
class MethodCapabilities:
    """What a method is, declared when it registers, so adapters and the bench never branch on its name.

    ``kind``: what its drafts cost with its default options (each proposer also says its own
    ``draft_kind``). ``engine_drafter_option``: the option that takes the engine's own neural
    drafter (MTP/EAGLE head, draft model) as a Proposer, for methods that compose it (hybrid's
    ``neural``); None when it composes none. ``engine_drafter_required``: whether it needs that
    drafter (hybrid) or also runs without one (adaptive: the engine's drafter joins its candidates
    when the engine has one). ``part_options``: options that take other proposers
    (or method names) as parts. ``cost_option``: the option that takes a cost model, when it prices
    drafts by time; an adapter that measures its own step costs passes them there. ``takes_batch_size``:
    its drafts depend on the engine's batch size (``Proposer.set_batch_size``). ``max_draft_tokens``:
    the longest draft it makes whatever it is asked, or None.

    >>> MethodCapabilities(kind="neural", engine_drafter_option="neural").composes_engine_drafter
    True
    """

    kind: DraftKind = "lookup"
    engine_drafter_option: str | None = None
    engine_drafter_required: bool = True
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
    #: the plugin that registered it (set by the plugin manager; "" when registered by hand)
    plugin: str = ""

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
            annotation = _QUALIFIED.sub(r"\1", annotation)  # specplug._proposer.Proposer -> Proposer
            default = "required" if info.is_required() else f"= {info.get_default(call_default_factory=True)!r}"
            lines.append(f"{option}: {annotation} {default}  {info.description or ''}".rstrip())
        return lines


@dataclass(frozen=True)
class PeerSpec:
    """One registered peer (another engine's drafting code behind the contract): name, summary, options, factory."""

    name: str
    summary: str
    options: type[BaseModel]
    factory: Callable[..., object]
    origin: str
    #: the plugin that registered it (set by the plugin manager; "" when registered by hand)
    plugin: str = ""


@dataclass(frozen=True)
class CostModelSpec:
    """One named cost model with a one-line summary and the plugin that registered it."""

    name: str
    summary: str
    model: CostModel
    origin: str
    #: the plugin that registered it (set by the plugin manager; "" when registered by hand)
    plugin: str = ""


class _Named(Protocol):
    name: str
    origin: str
    plugin: str


SpecT = TypeVar("SpecT", bound=_Named)


class Registrar(Generic[SpecT]):
    """What every registrar shares: the name and summary rules and the duplicate check.

    >>> PeerRegistrar().add("Bad Name", dict, options=BaseModel, summary="x")
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: peer name 'Bad Name' is not valid; use 1-64 lower-case letters, digits, '_', '.' or '-', starting with a letter or digit
    """

    #: what is registered, as error messages name it
    kind: ClassVar[str]

    def __init__(self) -> None:
        self._specs: dict[str, SpecT] = {}

    def _checked(self, name: object, summary: object) -> tuple[str, str]:
        """``(name, summary stripped)``, or an error naming the bad one."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise InvalidOptionError(
                f"{self.kind} name {name!r} is not valid; use 1-64 lower-case letters, digits, '_', '.' or '-', "
                "starting with a letter or digit"
            )
        if not isinstance(summary, str) or not summary.strip() or "\n" in summary.strip():
            raise InvalidOptionError(f"{self.kind} {name!r}: summary must be one non-empty line, got {summary!r}")
        return name, summary.strip()

    def _checked_factory(self, name: str, factory: object, options: object) -> str:
        """The origin of a factory that takes a validated ``options`` model, or an error."""
        if not callable(factory):
            raise InvalidOptionError(f"{self.kind} {name!r}: factory {factory!r} is not callable")
        if not (isinstance(options, type) and issubclass(options, BaseModel)):
            raise InvalidOptionError(f"{self.kind} {name!r}: options must be a pydantic model class, got {options!r}")
        return getattr(factory, "__module__", None) or repr(factory)

    def _keep(self, spec: SpecT) -> None:
        if spec.name in self._specs:
            raise DuplicateNameError(
                f"{self.kind} {spec.name!r} is registered twice: by {self._specs[spec.name].origin} and by {spec.origin}; "
                "block one plugin with SPECPLUG_BLOCK_PLUGINS"
            )
        self._specs[spec.name] = spec

    def specs(self) -> dict[str, SpecT]:
        """The registered entries by name, sorted."""
        return dict(sorted(self._specs.items()))

    def taken(self, other: Registrar[SpecT]) -> SpecT | None:
        """The first of this registrar's entries whose name ``other`` registers too, or None."""
        return next((self._specs[name] for name in other._specs if name in self._specs), None)

    def merge(self, other: Registrar[SpecT], plugin: str) -> None:
        """Take ``other``'s entries (one plugin's, checked with :meth:`taken`) as registered by ``plugin``."""
        for name, spec in other._specs.items():
            self._specs[name] = replace(spec, plugin=plugin)


class MethodRegistrar(Registrar[MethodSpec]):
    """Collects proposer methods from ``specplug_register_methods`` implementations."""

    kind = "method"

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
        name, summary = self._checked(name, summary)
        origin = self._checked_factory(name, factory, options)
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
        self._keep(MethodSpec(name, summary, options, factory, origin, capabilities))


class PeerRegistrar(Registrar[PeerSpec]):
    """Collects peers from ``specplug_register_peers`` implementations."""

    kind = "peer"

    def add(self, name: str, factory: Callable[..., object], *, options: type[BaseModel], summary: str) -> None:
        """Register ``factory(options_model_instance) -> Proposer`` under ``name``.

        As for methods: ``options`` is a pydantic model (it should forbid extra keys) and
        ``summary`` one line. The factory should import the peer's engine, so that listing
        peers never imports an engine.
        """
        name, summary = self._checked(name, summary)
        self._keep(PeerSpec(name, summary, options, factory, self._checked_factory(name, factory, options)))


class CostModelRegistrar(Registrar[CostModelSpec]):
    """Collects named cost models; rejects bad names, non-models and duplicates."""

    kind = "cost model"

    def add(self, name: str, model: CostModel | str | Path, *, summary: str, origin: str | None = None) -> None:
        """Register ``model`` (a :class:`CostModel`, or the path of a TOML file, read at once) under ``name``.

        ``origin`` says where it came from in messages (default: the file, or the model's own name).
        """
        name, summary = self._checked(name, summary)
        if isinstance(model, (str, Path)):
            origin = origin or f"file {model}"
            model = load_cost_model(model)
        origin = origin or f"cost model {getattr(model, 'name', None) or type(model).__name__}"
        if not isinstance(model, CostModel):
            raise CostModelError(
                f"cost model {name!r}: {model!r:.60} has no verify_time/draft_time/step_overhead; "
                "pass a specplug.cost.CostModel or the path of a TOML file"
            )
        self._keep(CostModelSpec(name, summary, model, origin))
