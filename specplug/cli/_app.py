"""Building the Typer app: the CLI's own commands and groups, then the ``specplug_add_commands`` hook.

The built-in commands and groups are registered here, by the CLI itself, not as plugins of the core:
the core knows nothing of the CLI. Each command imports what it measures (the lab, an
adapter) only when it runs, so building the app stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from specplug._plugin_faults import PluginSource, collect
from specplug._plugins import default_catalog
from specplug._version import __version__
from specplug.cli._bench import bench_command
from specplug.cli._calibrate import calibrate_command
from specplug.cli._perf import perf_command
from specplug.cli._preset import preset_command
from specplug.cli._trace import trace_command
from specplug.cli._trtllm import trtllm_group
from specplug.cli._tune import tune_command


def _version(value: bool) -> None:
    if value:
        typer.echo(f"specplug {__version__}")
        raise typer.Exit()


def methods_command(
    verbose: bool = typer.Option(True, "--options/--no-options", help="Show each method's options."),
) -> None:
    """List the registered methods, each with a one-line summary and its options."""
    catalog = default_catalog()
    table = Table(title="specplug methods", show_lines=verbose)
    table.add_column("method", style="bold")
    table.add_column("summary")
    if verbose:
        table.add_column("options (name: type = default)")
    for name, spec in catalog.specs.items():
        row = [name, spec.summary]
        if verbose:
            row.append("\n".join(spec.option_lines()))
        table.add_row(*row)
    Console(width=max(Console().width, 140)).print(table)


def builtin_commands() -> dict[str, Callable[..., Any]]:
    """The CLI's own commands by name, in the order ``--help`` lists them."""
    return {
        "methods": methods_command,
        "bench": bench_command,
        "perf": perf_command,
        "trace": trace_command,
        "calibrate": calibrate_command,
        "preset": preset_command,
        "tune": tune_command,
    }


def builtin_groups() -> dict[str, Callable[[], typer.Typer]]:
    """The CLI's own command groups by name, each a function that builds the group."""
    return {
        "trtllm": trtllm_group,
    }


def build_app() -> typer.Typer:
    """The root app with the built-in commands and every plugin's commands."""
    app = typer.Typer(
        name="specplug",
        help="Speculative-decoding proposers for vLLM, SGLang, TensorRT-LLM and llama.cpp.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def root(
        version: bool = typer.Option(
            False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ) -> None:
        """Speculative-decoding proposers for vLLM, SGLang, TensorRT-LLM and llama.cpp."""

    for name, command in builtin_commands().items():
        app.command(name)(command)
    for name, group in builtin_groups().items():
        app.add_typer(group(), name=name)
    _add_plugin_commands(app)
    return app


def _command_names(app: typer.Typer) -> list[str]:
    names = [command.name or getattr(command.callback, "__name__", "?") for command in app.registered_commands]
    return names + [group.name or "?" for group in app.registered_groups]


def _add_plugin_commands(app: typer.Typer) -> None:
    """Each plugin's commands, added after the built-ins one plugin at a time: a plugin whose hook
    raises, or that takes a name already taken, is left out with a warning, never a silent override."""
    catalog = default_catalog()
    manager = catalog.manager

    def keep(staged: typer.Typer, source: PluginSource) -> str | None:
        names, taken = _command_names(staged), set(_command_names(app))
        clashes = sorted({name for name in names if name in taken or names.count(name) > 1})
        if clashes:
            return f"it adds CLI command(s) {clashes}, which are taken (taken: {', '.join(sorted(taken))})"
        app.registered_commands += staged.registered_commands
        app.registered_groups += staged.registered_groups
        return None

    collect(
        manager, "specplug_add_commands", typer.Typer, keep, manager.sources, manager.faults,
        lambda staged: {"command": _command_names(staged)},
    )  # fmt: skip
    catalog.drop_broken()  # a plugin whose commands failed loses its methods too
