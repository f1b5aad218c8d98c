"""``specplug trtllm``: serve with a specplug drafter, check model.yaml files, tune the native presets.

A built-in group of the CLI (:func:`specplug.cli._app.builtin_groups`); each command imports the
adapter or the lab only when it runs.
"""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["trtllm_group"]

#: trtllm-serve's own arguments pass through untouched; --help is this command's (trtllm-serve --help lists the rest)
_PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True}


def serve_command(ctx: typer.Context) -> None:
    """trtllm-serve MODEL --config model.yaml and its other options, with the file's `specplug:` block as the drafter.

    Every argument is trtllm-serve's (`trtllm-serve --help` lists them); the model.yaml is checked
    before TensorRT-LLM starts.
    """
    from specplug_adapters.trtllm._launcher import serve

    raise typer.Exit(serve(list(ctx.args)))


def check_command(
    files: list[Path] = typer.Argument(..., help="model.yaml files (trtllm-serve --config)"),
    backend: str = typer.Option("pytorch", "--backend", help="the backend trtllm-serve will run"),
) -> None:
    """Check model.yaml files against TensorRT-LLM's config schema and specplug's methods."""
    from specplug_adapters.trtllm._launcher import read_yaml
    from specplug_adapters.trtllm._schema import check_model_yaml, schema_origin

    for path in files:
        checked = check_model_yaml(read_yaml(path), str(path), backend=backend)
        what = f"specplug {checked.settings.method}" if checked.settings else "TensorRT-LLM native"
        typer.echo(f"{path}: ok ({what}; schema {schema_origin()})")


def tune_command(
    cost: str = typer.Option("llama-3.1-8b-h100", "--cost", help="cost model: preset name or .toml file"),
    write: Path = typer.Option(None, "--write", help="write the tuned presets into this folder (e.g. presets/trtllm)"),
) -> None:
    """Tune TensorRT-LLM's native knobs (sa_config threshold, draft_len_schedule, NGram, SA) by trace replay (modeled)."""
    from specplug._outputs import check_output, write_text_atomic
    from specplug.lab.trtllm import render_presets, tune

    if write is not None:
        check_output("--write", write, folder=True)  # before the replay
    report = tune(cost=cost, progress=lambda message: typer.echo(f"replaying: {message}", err=True))
    typer.echo(report.table())
    typer.echo(f"\nchosen: {report.chosen}")
    if write is not None:
        for name, text in render_presets(report).items():
            write_text_atomic(write / name, text)
            typer.echo(f"wrote {write / name}")



def trtllm_group() -> typer.Typer:
    """The ``specplug trtllm`` group, built afresh for each app."""
    group = typer.Typer(
        name="trtllm",
        help="TensorRT-LLM: trtllm-serve with a specplug drafter, model.yaml checks, tuned presets.",
        no_args_is_help=True,
    )
    group.command("serve", context_settings=_PASS_THROUGH)(serve_command)
    group.command("check")(check_command)
    group.command("tune")(tune_command)
    return group
