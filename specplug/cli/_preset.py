"""``specplug preset``: print a shipped preset in its engine's format, or list them all."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from specplug._presets import list_presets, load_preset


def preset_command(
    engine: str = typer.Argument(None, help="engine, e.g. llama-server (omit with --list to list every engine)"),
    name: str = typer.Argument(None, help="preset name, e.g. code-edit"),
    fmt: str = typer.Option(None, "--format", "-f", help="output format, e.g. flags or ini for llama-server"),
    list_: bool = typer.Option(False, "--list", "-l", help="list presets (of ENGINE, or of all engines)"),
) -> None:
    """Print preset NAME of ENGINE (e.g. `specplug preset llama-server code-edit --format flags`)."""
    if list_ or name is None:
        table = Table(title="specplug presets")
        for column in ("engine", "preset", "formats", "summary"):
            table.add_column(column, overflow="fold")
        for preset in list_presets(engine):
            table.add_row(preset.engine, preset.name, ", ".join(preset.formats), preset.summary)
        Console(width=max(Console().width, 140)).print(table)
        return
    typer.echo(load_preset(engine, name).render(fmt))
