"""Building the plugin manager: built-ins, then entry points, then a pending-hook check.

Nothing here runs at import time; :func:`build_plugin_manager` is called when the
catalog is first needed, so importing specplug never imports a third-party plugin.
"""

from __future__ import annotations

import importlib
import os
from importlib import metadata

import pluggy

from specplug import hookspecs
from specplug._errors import SpecplugError

__all__ = ["BLOCK_ENV", "BUILTIN_PLUGINS", "ENTRY_POINT_GROUP", "PluginLoadError", "build_plugin_manager"]

#: entry-point group that third-party plugins publish under
ENTRY_POINT_GROUP = "specplug"
#: comma-separated plugin names that are not loaded (built-in or entry-point names)
BLOCK_ENV = "SPECPLUG_BLOCK_PLUGINS"
#: built-in plugins, by name and module, registered before any entry point
BUILTIN_PLUGINS: dict[str, str] = {
    "specplug.ngram": "specplug.proposers.ngram",
    "specplug.suffix": "specplug.proposers.suffix",
    "specplug.cost": "specplug.cost._presets",
    "specplug.hybrid": "specplug.proposers.hybrid",
    "specplug.adaptive": "specplug.proposers.adaptive",
    "specplug.cli.bench": "specplug.cli._bench",
    "specplug.cli.perf": "specplug.cli._perf",
    "specplug.cli.trace": "specplug.cli._trace",
    "specplug.cli.calibrate": "specplug.cli._calibrate",
    "specplug.cli.preset": "specplug.cli._preset",
    "specplug.cli.tune": "specplug.cli._tune",
}


class PluginLoadError(SpecplugError, ImportError):
    """An entry point that could not be imported or does not implement valid hooks."""


def blocked_plugins(environ: dict[str, str] | None = None) -> set[str]:
    """The plugin names blocked through ``SPECPLUG_BLOCK_PLUGINS``."""
    value = (os.environ if environ is None else environ).get(BLOCK_ENV, "")
    return {name.strip() for name in value.split(",") if name.strip()}


def build_plugin_manager(
    *,
    entry_points: bool = True,
    extra_plugins: dict[str, object] | None = None,
) -> pluggy.PluginManager:
    """A plugin manager with the hookspecs, built-ins, extra plugins and entry points.

    ``extra_plugins`` (name -> plugin object) are registered after the built-ins;
    tests use it for in-process plugins.
    """
    manager = pluggy.PluginManager(ENTRY_POINT_GROUP)
    manager.add_hookspecs(hookspecs)
    for name in sorted(blocked_plugins()):
        manager.set_blocked(name)
    for name, module in BUILTIN_PLUGINS.items():
        if not manager.is_blocked(name):
            manager.register(importlib.import_module(module), name=name)
    for name, plugin in (extra_plugins or {}).items():
        if not manager.is_blocked(name):
            manager.register(plugin, name=name)
    if entry_points:
        _load_entry_points(manager)
    manager.check_pending()
    return manager


def _load_entry_points(manager: pluggy.PluginManager) -> None:
    # Our own loop rather than pluggy's load_setuptools_entrypoints: a plugin that fails
    # to import is reported with its entry point and distribution, not swallowed or bare.
    for entry_point in sorted(metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name):
        if manager.is_blocked(entry_point.name) or manager.has_plugin(entry_point.name):
            continue
        distribution = getattr(entry_point.dist, "name", "?")
        try:
            plugin = entry_point.load()
            manager.register(plugin, name=entry_point.name)
        except Exception as error:  # noqa: BLE001 - re-raised with the plugin named
            raise PluginLoadError(
                f"specplug plugin {entry_point.name!r} ({entry_point.value}, from distribution "
                f"{distribution}) failed to load: {type(error).__name__}: {error}. "
                f"Block it with {BLOCK_ENV}={entry_point.name}"
            ) from error
