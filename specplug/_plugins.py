"""The plugin manager and what its plugins registered: methods, cost models and peers.

Nothing here runs at import time. The process-wide :class:`Catalog` is built the first time a
name is looked up (``specplug.create()``, ``specplug.cost.cost_model()``, ``create_peer()``,
the CLI): the hook specifications, then the core's built-in plugins, then entry points, then
a check that no plugin implements a hook that does not exist. So importing specplug never
imports a third-party plugin. Methods are collected when the catalog is built; cost models
and peers on their first lookup. A broken plugin is left out with one warning and the rest
keeps working (``_plugin_faults``).
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import replace
from importlib import metadata
from pathlib import Path
from collections.abc import Callable
from typing import Any, TypeVar

import pluggy
from pydantic import BaseModel, ValidationError

from specplug import hookspecs
from specplug._proposer import Proposer
from specplug._cost._files import load_cost_model
from specplug._cost._linear import CostModel
from specplug._errors import CostModelError, InvalidOptionError, SpecplugError, UnknownMethodError, UnknownPeerError
from specplug._plugin_faults import (
    BLOCK_ENV, PluginError, PluginFaults, PluginSource, PluginWarning, blocked_plugins, collect, unknown_hook_problem,
    unknown_hooks,
)  # fmt: skip
from specplug._registry import (
    CostModelRegistrar, CostModelSpec, MethodRegistrar, MethodSpec, PeerRegistrar, PeerSpec, Registrar, SpecT,
)  # fmt: skip

__all__ = [
    "BLOCK_ENV", "BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "Catalog", "PluginError", "PluginWarning",
    "SpecplugPluginManager", "blocked_plugins", "build_plugin_manager", "cost_model", "cost_models", "create",
    "create_peer", "default_catalog", "method_specs", "methods", "peer_specs", "reset", "validate_options",
]  # fmt: skip

ModelT = TypeVar("ModelT", bound=BaseModel)

#: entry-point group that third-party plugins publish under
ENTRY_POINT_GROUP = "specplug"
#: the core's built-in plugins (its methods and cost presets), by name and module, registered
#: before any entry point; adapters, engines and the CLI register their own, never here
BUILTIN_PLUGINS: dict[str, str] = {
    "specplug.ngram": "specplug.proposers.lookup.ngram",
    "specplug.suffix": "specplug.proposers.lookup.suffix",
    "specplug.cost": "specplug._builtin_cost_models",
    "specplug.hybrid": "specplug.proposers.composite.hybrid",
    "specplug.adaptive": "specplug.proposers.composite.adaptive",
}


# ----------------------------------------------------------------------- the manager


class SpecplugPluginManager(pluggy.PluginManager):
    """A pluggy plugin manager that knows where each plugin came from and which ones are broken."""

    def __init__(self) -> None:
        super().__init__(ENTRY_POINT_GROUP)
        #: plugin name -> where it came from (built-in module, code, or entry point and distribution)
        self.sources: dict[str, PluginSource] = {}
        self.faults = PluginFaults()

    def source(self, name: str) -> PluginSource:
        return self.sources.get(name) or PluginSource(name, "?")

    def collect(self, hook: str, registrar: Registrar[Any]) -> Registrar[Any]:
        """``registrar`` filled through ``hook``, one plugin at a time; broken plugins left out."""

        def keep(staged: Registrar[Any], source: PluginSource) -> str | None:
            first = registrar.taken(staged)
            if first is not None:
                return f"it registers {registrar.kind} {first.name!r}, which {self.source(first.plugin).describe()} registered first"
            registrar.merge(staged, source.name)
            return None

        collect(
            self, hook, type(registrar), keep, self.sources, self.faults, lambda staged: {staged.kind: list(staged.specs())}
        )
        return registrar


def build_plugin_manager(
    *,
    entry_points: bool = True,
    extra_plugins: dict[str, object] | None = None,
) -> SpecplugPluginManager:
    """A plugin manager with the hookspecs, built-ins, extra plugins and entry points.

    ``extra_plugins`` (name -> plugin object) are registered after the built-ins;
    tests use it for in-process plugins. A plugin that cannot be loaded or implements a hook
    that does not exist is left out with a :class:`PluginWarning` (``manager.faults``).
    """
    manager = SpecplugPluginManager()
    manager.add_hookspecs(hookspecs)
    blocked = blocked_plugins()
    for name in sorted(blocked):
        manager.set_blocked(name)
    for name, module in BUILTIN_PLUGINS.items():
        if not manager.is_blocked(name):
            # a built-in that fails to import is specplug's own bug: let it raise
            manager.register(importlib.import_module(module), name=name)
            manager.sources[name] = PluginSource(name, module)
    for name, plugin in (extra_plugins or {}).items():
        if not manager.is_blocked(name):
            _register(manager, PluginSource(name, getattr(plugin, "__name__", type(plugin).__qualname__)), lambda: plugin)
    if entry_points:
        _load_entry_points(manager, blocked)
    hooks = [name for name in vars(hookspecs) if name.startswith("specplug_")]
    for name, unknown in unknown_hooks(manager).items():
        # instead of pluggy's check_pending(), which raises for the first one and takes every plugin down
        manager.faults.add(manager.source(name), unknown_hook_problem(unknown, hooks))
        manager.unregister(name=name)
    return manager


def _register(manager: SpecplugPluginManager, source: PluginSource, load: Callable[[], object]) -> None:
    taken = manager.sources.get(source.name)
    if taken is not None:
        # pluggy would skip it without a word; its name alone would block the other plugin too
        source = replace(source, shares_name=True)
        manager.faults.add(source, f"its name is taken by {taken.describe()}; each plugin needs a name of its own")
        return
    try:
        manager.register(load(), name=source.name)
    except Exception as error:  # noqa: BLE001 - reported with the plugin named, and the rest loads
        manager.faults.add(source, f"it failed to load: {type(error).__name__}: {error}")
        return
    manager.sources[source.name] = source


def _load_entry_points(manager: SpecplugPluginManager, blocked: set[str]) -> None:
    # Our own loop rather than pluggy's load_setuptools_entrypoints: a plugin that fails to
    # import, or takes a name already taken, is reported with its entry point and distribution.
    for entry_point in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        source = PluginSource(entry_point.name, entry_point.value, getattr(entry_point.dist, "name", None) or "?")
        if entry_point.name in blocked or f"{source.name}@{source.distribution}" in blocked:
            continue
        _register(manager, source, entry_point.load)


# -------------------------------------------------------------------- option checks


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

    >>> from specplug.proposers.lookup.ngram import NgramOptions
    >>> validate_options("method 'ngram'", NgramOptions, {"min_n": 0})
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: method 'ngram': option min_n = 0: Input should be greater than or equal to 1. Valid options: ...
    """
    try:
        return options.model_validate(values)
    except ValidationError as error:
        raise InvalidOptionError(_describe(subject, options, error)) from None


def _built(manager: SpecplugPluginManager, subject: str, spec: MethodSpec | PeerSpec, options: BaseModel) -> Proposer:
    """``spec.factory(options)``, checked: a factory that raises or returns no Proposer is its plugin's fault, named."""
    source = manager.source(spec.plugin) if spec.plugin else PluginSource(spec.origin, spec.origin)
    try:
        proposer = spec.factory(options)
    except SpecplugError:
        raise
    except Exception as error:  # noqa: BLE001 - re-raised with the plugin named
        raise PluginError(
            f"{subject} of {source.describe()} failed to build: {type(error).__name__}: {error}"
            f"{_blocking_hint(source)}"
        ) from error
    if not isinstance(proposer, Proposer):
        raise PluginError(
            f"{subject} of {source.describe()} returned {proposer!r:.60}, not a specplug.Proposer{_blocking_hint(source)}"
        )
    return proposer


def _blocking_hint(source: PluginSource) -> str:
    return "" if source.distribution is None else f"; block the plugin with {BLOCK_ENV}={source.block_value()}"


# ---------------------------------------------------------------------- the catalog


class Catalog:
    """What the plugins of one plugin manager registered: methods now, cost models and peers when first asked for."""

    def __init__(self, manager: SpecplugPluginManager) -> None:
        self.manager = manager
        self.specs: dict[str, MethodSpec] = manager.collect("specplug_register_methods", MethodRegistrar()).specs()
        self._lock = threading.RLock()  # re-entrant: a plugin's hook may look a cost model up (and be told it cannot)
        self._collecting: set[str] = set()
        self._cost_models: dict[str, CostModelSpec] | None = None
        self._peers: dict[str, PeerSpec] | None = None

    # -------------------------------------------------------------- methods
    def methods(self) -> list[str]:
        return list(self.specs)

    @property
    def faults(self) -> PluginFaults:
        """The plugins left out as broken."""
        return self.manager.faults

    def spec(self, name: object) -> MethodSpec:
        if not isinstance(name, str) or name not in self.specs:
            raise self.faults.unknown("method", name, UnknownMethodError(name, self.methods()))
        return self.specs[name]

    def create(self, name: str, **options: Any) -> Proposer:
        spec = self.spec(name)
        validated = validate_options(f"method {name!r}", spec.options, options)
        return _built(self.manager, f"method {name!r}", spec, self._resolved(spec, validated))

    def _resolved(self, spec: MethodSpec, options: BaseModel) -> BaseModel:
        """``options`` with the parts and the cost model its capabilities declare resolved from
        names: a composite's factory receives objects, so no method module looks the registries
        up itself (which would make the registry and the methods it loads import each other)."""
        capabilities = spec.capabilities
        updates: dict[str, Any] = {}
        for option in capabilities.part_options:
            value = getattr(options, option)
            if isinstance(value, str):
                updates[option] = self.create(value)
            elif isinstance(value, (list, tuple)) and any(isinstance(item, str) for item in value):
                updates[option] = type(value)(self.create(item) if isinstance(item, str) else item for item in value)
        option = capabilities.cost_option
        if option is not None and isinstance(getattr(options, option), (str, Path)):
            updates[option] = cost_model(getattr(options, option))
        return options.model_copy(update=updates) if updates else options

    # ---------------------------------------------------------- cost models
    def cost_models(self) -> dict[str, CostModelSpec]:
        """The named cost models, collected through ``specplug_register_cost_models`` on first use."""
        with self._lock:
            if self._cost_models is None:
                self._cost_models = self._collect_once("cost models", "specplug_register_cost_models", CostModelRegistrar())
            return dict(self._cost_models)

    def _collect_once(self, what: str, hook: str, registrar: Registrar[SpecT]) -> dict[str, SpecT]:
        # a hook that looks up what it is registering would start the collection again, without end
        if hook in self._collecting:
            raise PluginError(f"{what} are being registered; a {hook} hook cannot look one up by name")
        self._collecting.add(hook)
        try:
            specs = self.manager.collect(hook, registrar).specs()
        finally:
            self._collecting.discard(hook)
        self.drop_broken()
        return {name: spec for name, spec in specs.items() if spec.plugin not in self.faults}

    def drop_broken(self) -> None:
        """Forget what plugins found broken since registered (a later hook of theirs failed), so
        a broken plugin is left out whole; asking for one of those names then names the plugin."""
        for kind, specs in (("method", self.specs), ("cost model", self._cost_models), ("peer", self._peers)):
            for name, spec in list((specs or {}).items()):
                if spec.plugin in self.faults:
                    del specs[name]
                    self.faults.claim(spec.plugin, kind, [name])

    # ---------------------------------------------------------------- peers
    def peers(self) -> dict[str, PeerSpec]:
        """The peers, collected through ``specplug_register_peers`` on first use."""
        with self._lock:
            if self._peers is None:
                self._peers = self._collect_once("peers", "specplug_register_peers", PeerRegistrar())
            return dict(self._peers)

    def create_peer(self, name: str, **options: Any) -> Proposer:
        peers = self.peers()
        if not isinstance(name, str) or name not in peers:
            raise self.faults.unknown("peer", name, UnknownPeerError(name, list(peers)))
        spec = peers[name]
        validated = validate_options(f"peer {name!r}", spec.options, options)
        return _built(self.manager, f"peer {name!r}", spec, validated)


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


# ------------------------------------------------------------- the public lookups


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


def peer_specs() -> dict[str, PeerSpec]:
    """The registered peers (other engines' drafting code behind the contract) by name, sorted."""
    return default_catalog().peers()


def create_peer(name: str, **options: Any) -> Proposer:
    """Create peer ``name`` with its options; an unknown name or option is an error listing the valid ones.

    >>> create_peer("nope")
    Traceback (most recent call last):
    ...
    specplug._errors.UnknownPeerError: unknown peer 'nope'; valid peers: ...
    """
    return default_catalog().create_peer(name, **options)


def cost_models() -> dict[str, CostModelSpec]:
    """The named cost models that all plugins registered, sorted by name."""
    return default_catalog().cost_models()


def cost_model(spec: CostModel | str | Path) -> CostModel:
    """A cost model from a :class:`CostModel`, a registered name or the path of a TOML file.

    >>> cost_model("llama-3.1-8b-h100").verify.fixed
    0.00588590713
    """
    if isinstance(spec, CostModel) and not isinstance(spec, (str, Path)):
        return spec
    if isinstance(spec, Path) or (isinstance(spec, str) and spec.endswith(".toml")):
        return load_cost_model(spec)
    models = cost_models()
    if isinstance(spec, str) and spec in models:
        return models[spec].model
    raise default_catalog().faults.unknown(
        "cost model",
        spec,
        CostModelError(
            f"unknown cost model {spec!r:.60}; valid names: {', '.join(models) or '(none)'}, or the path of a .toml file"
        ),
    )
