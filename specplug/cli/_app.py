"""Building the Typer app: built-in commands, then the ``specplug_add_commands`` hook."""

from __future__ import annotations

import importlib

import typer
from rich.console import Console
from rich.table import Table

from specplug._catalog import default_catalog
from specplug._errors import SpecplugError
from specplug._version import __version__


#: the CLI's own command modules, each adding its commands as a plugin would; the core's
#: plugin manager does not load them (the core knows nothing of the CLI)
_BUILTIN_COMMANDS = (
    "specplug.cli._bench", "specplug.cli._perf", "specplug.cli._trace",
    "specplug.cli._calibrate", "specplug.cli._preset", "specplug.cli._tune",
)  # fmt: skip


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

    app.command("methods")(methods_command)
    for module in _BUILTIN_COMMANDS:
        importlib.import_module(module).specplug_add_commands(app=app)
    builtin = {command.name for command in app.registered_commands}
    default_catalog().manager.hook.specplug_add_commands(app=app)
    names = [command.name or command.callback.__name__ for command in app.registered_commands]
    names += [group.name for group in app.registered_groups]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise SpecplugError(f"CLI command name(s) {duplicates} added twice (built-ins: {sorted(builtin)})")
    return app
