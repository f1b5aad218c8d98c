"""Hook specifications of specplug: what a plugin may implement.

A plugin is a module or object with functions named like the hooks below, each
decorated with :data:`specplug.hookimpl`, published under the entry-point group
``specplug``::

    [project.entry-points.specplug]
    myplugin = "mypackage.specplug_plugin"

Every hook is called for every registered plugin (none is first-result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # the registrars sit below this module; the plugin manager above it imports it
    import typer

    from specplug._registry import CostModelRegistrar, MethodRegistrar, PeerRegistrar

hookspec = pluggy.HookspecMarker("specplug")

# --------------------------------------------------------------------------- methods


@hookspec
def specplug_register_methods(registrar: MethodRegistrar) -> None:
    """Register proposer methods.

    Called once per plugin manager, when the catalog of methods is first needed
    (``specplug.methods()``, ``specplug.create()`` or the CLI), never at import time.

    :param registrar: call ``registrar.add(name, factory, options=Model, summary=...)``
        for each method. ``factory`` receives a validated instance of the pydantic
        ``options`` model and returns a :class:`specplug.Proposer`. The registrar rejects
        invalid names and a name that another plugin already registered.
    :return: nothing; results are ignored (all implementations are called).
    """


# ------------------------------------------------------------------------- cost models


@hookspec
def specplug_register_cost_models(registrar: CostModelRegistrar) -> None:
    """Register named cost models (presets for a model on a piece of hardware).

    Called once per plugin manager, the first time a cost model is looked up by name
    (``specplug.cost.cost_model(name)``, ``specplug.cost.cost_models()``, the ``adaptive``
    method's ``cost`` option, ``specplug bench --cost``), never at import time.

    :param registrar: call ``registrar.add(name, model, summary=...)`` for each preset;
        ``model`` is a :class:`specplug.cost.CostModel` (for example a
        ``LinearCostModel``) or the path of a TOML cost-model file, which is read and
        validated at once. The registrar rejects invalid names, objects that are not
        cost models, and a name that another plugin already registered.
    :return: nothing; results are ignored (all implementations are called).
    """


# ------------------------------------------------------------------------------ peers


@hookspec
def specplug_register_peers(registrar: PeerRegistrar) -> None:
    """Register peers: other engines' own drafting code behind the proposer contract, for benchmarks.

    Called once per plugin manager, the first time a peer is looked up by name
    (``specplug.lab.peers.peer_specs()``, ``specplug.lab.peers.create_peer()``, a benchmark's ``peer:NAME``),
    never at import time.

    :param registrar: call ``registrar.add(name, factory, options=Model, summary=...)`` for
        each peer. ``factory`` receives a validated instance of the pydantic ``options``
        model and returns a :class:`specplug.Proposer`; it should import the engine, so that
        listing peers never does. The registrar rejects invalid names and a name that
        another plugin already registered.
    :return: nothing; results are ignored (all implementations are called).
    """


# ------------------------------------------------------------------------------- CLI


@hookspec
def specplug_add_commands(app: typer.Typer) -> None:
    """Add sub-commands to the ``specplug`` command line.

    Called once when the CLI starts, after the built-in commands exist.

    :param app: the root ``typer.Typer``; add commands with ``@app.command()`` or
        groups with ``app.add_typer(...)``. A name that is already taken is an error
        reported by the CLI at start-up.
    :return: nothing; results are ignored (all implementations are called).
    """
