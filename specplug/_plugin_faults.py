"""Broken plugins: each found, reported once, and kept away from everything else.

A plugin is broken when its entry point cannot be imported or registered, when it implements a
hook that does not exist (a misspelled name), when its name is already taken (an entry point
named like a built-in plugin, or a second distribution with the same entry-point name), when a
registration hook raises or registers something a registrar rejects, or when it registers a name
another plugin registered first. Such a plugin is left out whole (none of its registrations is
kept) with one :class:`PluginWarning` that names its entry point, its distribution and the
exact ``SPECPLUG_BLOCK_PLUGINS`` value that blocks it; the built-in methods and every other plugin
keep working. Asking for one of its methods later raises :class:`PluginError` with the same text.

The plugin manager (``_plugins``) and the CLI collect registrations through :func:`collect`,
one plugin at a time, which is what makes the fault one plugin's alone.
"""

from __future__ import annotations

import difflib
import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import pluggy

from specplug._errors import SpecplugError

__all__ = [
    "BLOCK_ENV", "PluginError", "PluginFault", "PluginFaults", "PluginSource", "PluginWarning", "blocked_plugins",
]  # fmt: skip

#: comma-separated plugin names that are not loaded (built-in or entry-point names, or
#: ``NAME@DISTRIBUTION`` for one distribution's entry point)
BLOCK_ENV = "SPECPLUG_BLOCK_PLUGINS"

T = TypeVar("T")


class PluginWarning(UserWarning):
    """A plugin was left out because it is broken; the message says how to block it."""


class PluginError(SpecplugError, RuntimeError):
    """A method, cost model, peer or command of a broken plugin was asked for; the message names the plugin."""


def blocked_plugins(environ: Mapping[str, str] | None = None) -> set[str]:
    """The plugin names blocked through ``SPECPLUG_BLOCK_PLUGINS``.

    >>> sorted(blocked_plugins({BLOCK_ENV: "echo, specplug.suffix,"}))
    ['echo', 'specplug.suffix']
    """
    value = (os.environ if environ is None else environ).get(BLOCK_ENV, "")
    return {name.strip() for name in value.split(",") if name.strip()}


@dataclass(frozen=True)
class PluginSource:
    """Where a plugin came from: its name, its module (or object) and its distribution."""

    name: str
    value: str
    distribution: str | None = None  # None: a built-in plugin, or one handed in by code
    #: its name is another plugin's too, so only ``NAME@DISTRIBUTION`` blocks it alone
    shares_name: bool = False

    @property
    def block_token(self) -> str:
        """What ``SPECPLUG_BLOCK_PLUGINS`` needs to hold to block this plugin and no other."""
        return f"{self.name}@{self.distribution}" if self.shares_name else self.name

    def block_value(self, environ: Mapping[str, str] | None = None) -> str:
        """The whole ``SPECPLUG_BLOCK_PLUGINS`` value that blocks this plugin on top of those blocked now.

        >>> PluginSource("echo", "pkg.mod", "specplug-echo").block_value({BLOCK_ENV: "other"})
        'echo,other'
        >>> PluginSource("specplug.suffix", "pkg.mod", "evil", shares_name=True).block_value({})
        'specplug.suffix@evil'
        """
        return ",".join(sorted(blocked_plugins(environ) | {self.block_token}))

    def describe(self) -> str:
        """``plugin 'echo' (entry point echo = pkg.mod, distribution specplug-echo)``."""
        if self.distribution is None:
            return f"plugin {self.name!r} ({self.value})"
        return f"plugin {self.name!r} (entry point {self.name} = {self.value}, distribution {self.distribution})"


@dataclass(frozen=True)
class PluginFault:
    """One broken plugin: where it came from and what is wrong with it."""

    source: PluginSource
    problem: str

    def __str__(self) -> str:
        return (
            f"specplug {self.source.describe()} is broken and was left out: {self.problem}. "
            f"Fix or uninstall it, or block it with {BLOCK_ENV}={self.source.block_value()}"
        )


class PluginFaults:
    """The broken plugins of one plugin manager, each reported once as it is found."""

    def __init__(self) -> None:
        self._faults: dict[str, PluginFault] = {}
        #: (kind, name) -> the broken plugin that registered it ("method", "ngram-x") -> fault
        self._owners: dict[tuple[str, str], PluginFault] = {}

    def add(self, source: PluginSource, problem: str, names: Mapping[str, Iterable[str]] | None = None) -> PluginFault:
        """Record (and warn once about) a broken plugin; ``names``: what it registered, by kind."""
        fault = PluginFault(source, problem)
        self._faults[source.block_token] = fault  # not the name alone: a plugin may take a working one's
        for kind, found in (names or {}).items():
            self.claim(source.block_token, kind, found)
        warnings.warn(str(fault), PluginWarning, stacklevel=3)
        return fault

    def claim(self, plugin: str, kind: str, names: Iterable[str]) -> None:
        """Note ``names`` (of ``kind``) as registered by broken ``plugin``: asking for one names it."""
        for name in names:
            self._owners[(kind, name)] = self._faults[plugin]

    def __contains__(self, plugin: object) -> bool:
        """Whether the plugin of this name (or ``NAME@DISTRIBUTION``) is broken."""
        return plugin in self._faults

    def __iter__(self):
        return iter(self._faults.values())

    def __len__(self) -> int:
        return len(self._faults)

    def owner_of(self, kind: str, name: object) -> PluginFault | None:
        """The broken plugin that registered ``name`` (a ``kind``: method, peer, ...), if one did."""
        return self._owners.get((kind, name)) if isinstance(name, str) else None

    def unknown(self, kind: str, name: object, error: SpecplugError) -> SpecplugError:
        """The error for ``name`` that no working plugin registered: the broken plugin's when one
        registered it, else ``error`` with a note on the plugins left out (the name may be theirs)."""
        fault = self.owner_of(kind, name)
        if fault is not None:
            return PluginError(f"{kind} {name!r} is not available: {fault}")
        if self._faults:
            error.args = (f"{error} (plugins left out as broken: {', '.join(sorted(self._faults))}; see their warnings)",)
        return error


def unknown_hooks(manager: pluggy.PluginManager) -> dict[str, list[str]]:
    """Plugin name -> the hooks it implements that no specification defines (a misspelled name)."""
    found: dict[str, list[str]] = {}
    for name, caller in vars(manager.hook).items():
        if not isinstance(caller, pluggy.HookCaller) or caller.has_spec():
            continue
        for impl in caller.get_hookimpls():
            if not impl.optionalhook:
                found.setdefault(impl.plugin_name, []).append(name)
    return found


def unknown_hook_problem(names: list[str], valid: Iterable[str]) -> str:
    """``implements 'specplug_register_method', which is not a specplug hook (did you mean ...?)``."""
    valid = sorted(valid)
    parts = []
    for name in names:
        close = difflib.get_close_matches(name, valid, n=1)
        parts.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"implements {', '.join(parts)}, which no specplug hook is called; hooks: {', '.join(valid)}"


def collect(
    manager: pluggy.PluginManager,
    hook: str,
    staged: Callable[[], T],
    keep: Callable[[T, PluginSource], str | None],
    sources: Mapping[str, PluginSource],
    faults: PluginFaults,
    names: Callable[[T], Mapping[str, Iterable[str]]],
) -> None:
    """Call ``hook`` one plugin at a time, each with a fresh ``staged()`` argument.

    ``keep(staged, source)`` merges a plugin's registrations into the result, or returns the
    problem (a clash with an earlier plugin) without merging anything. A plugin whose hook
    raises, or whose registrations clash, is recorded in ``faults`` (with ``names`` of what it
    registered) and unregistered, so no later hook calls it. Plugins run in registration order:
    built-ins first, so a third-party plugin cannot take a built-in name.
    """
    for impl in list(getattr(manager.hook, hook).get_hookimpls()):
        source = sources.get(impl.plugin_name, PluginSource(impl.plugin_name, repr(impl.plugin)))
        if impl.plugin_name in faults:
            continue
        into = staged()
        try:
            impl.function(**{name: into for name in impl.argnames})  # pluggy checked them against the spec
        except Exception as error:  # noqa: BLE001 - a plugin's fault, reported with the plugin named
            problem = f"its {hook} raised {type(error).__name__}: {error}"
        else:
            problem = keep(into, source)
            if problem is None:
                continue
        faults.add(source, problem, names(into))
        manager.unregister(name=impl.plugin_name)

