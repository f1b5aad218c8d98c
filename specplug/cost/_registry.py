"""Named cost models: the registrar handed to ``specplug_register_cost_models`` and the lookup."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from pathlib import Path

import pluggy

from specplug._errors import DuplicateNameError
from specplug.cost._errors import CostModelError
from specplug.cost._files import load_cost_model
from specplug.cost._linear import CostModel

__all__ = ["CostModelRegistrar", "CostModelSpec", "cost_model", "cost_models"]

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.\-]{0,63}$")


@dataclass(frozen=True)
class CostModelSpec:
    """One named cost model with a one-line summary and the plugin that registered it."""

    name: str
    summary: str
    model: CostModel
    origin: str


class CostModelRegistrar:
    """Collects named cost models; rejects bad names, non-models and duplicates."""

    def __init__(self) -> None:
        self._specs: dict[str, CostModelSpec] = {}

    def add(self, name: str, model: CostModel | str | Path, *, summary: str, origin: str = "?") -> None:
        """Register ``model`` (a :class:`CostModel`, or the path of a TOML file) under ``name``."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise CostModelError(
                f"cost model name {name!r} is not valid; use 1-64 lower-case letters, digits, '_', '.' or '-'"
            )
        if isinstance(model, (str, Path)):
            model = load_cost_model(model)
        if not isinstance(model, CostModel):
            raise CostModelError(
                f"cost model {name!r}: {model!r:.60} has no verify_time/draft_time/step_overhead; "
                "pass a specplug.cost.CostModel or the path of a TOML file"
            )
        if not isinstance(summary, str) or not summary.strip() or "\n" in summary.strip():
            raise CostModelError(f"cost model {name!r}: summary must be one non-empty line, got {summary!r}")
        if name in self._specs:
            raise DuplicateNameError(
                f"cost model {name!r} is registered twice: by {self._specs[name].origin} and by {origin}; "
                "block one plugin with SPECPLUG_BLOCK_PLUGINS"
            )
        self._specs[name] = CostModelSpec(name, summary.strip(), model, origin)

    def specs(self) -> dict[str, CostModelSpec]:
        """The registered cost models by name, sorted."""
        return dict(sorted(self._specs.items()))


_lock = threading.Lock()
_cache: dict[int, dict[str, CostModelSpec]] = {}


def collect(manager: pluggy.PluginManager) -> dict[str, CostModelSpec]:
    """Call ``specplug_register_cost_models`` on every plugin of ``manager``."""
    registrar = CostModelRegistrar()
    manager.hook.specplug_register_cost_models(registrar=registrar)
    return registrar.specs()


def cost_models() -> dict[str, CostModelSpec]:
    """The named cost models that all plugins registered (built-in presets first)."""
    from specplug._catalog import default_catalog

    manager = default_catalog().manager
    with _lock:
        if id(manager) not in _cache:
            _cache.clear()
            _cache[id(manager)] = collect(manager)
        return dict(_cache[id(manager)])


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
    raise CostModelError(
        f"unknown cost model {spec!r:.60}; valid names: {', '.join(models) or '(none)'}, "
        "or the path of a .toml file"
    )
