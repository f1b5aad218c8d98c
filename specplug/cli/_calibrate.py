"""``specplug calibrate``: fit a cost model from real llama-server runs on this machine."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from specplug._errors import InvalidOptionError
from specplug._outputs import check_output, write_text_atomic
from specplug.cli._lists import comma_ints


def calibrate_command(
    out: Path = typer.Option(..., "--out", "-o", help="cost-model file to write (.toml)"),
    model: str = typer.Option("smollm2", "--model", help="GGUF path, or smollm2 / gemma3 (under .models/)"),
    neural_model: str = typer.Option(None, "--neural-model", help="draft model that prices a neural draft (default: the model itself)"),
    name: str = typer.Option(None, "--name", help="name of the cost model (default: the file's stem)"),
    threads: int = typer.Option(1, "--threads", "-t", min=1, max=1024),
    contexts: str = typer.Option("128,512,1024", "--contexts", help="KV-cache lengths measured"),
    batched: str = typer.Option("1,2,4,8,16,32", "--batched", help="batched-token counts measured"),
    repeats: int = typer.Option(3, "--repeats", min=1, max=50, help="runs per point (the median is used)"),
) -> None:
    """Fit a linear cost model (verify, draft, step overhead) from llama-server runs here."""
    from specplug.lab.bench._calibrate import calibrate
    from specplug.lab.bench.llama_server import find_model
    from specplug.cost import dump_cost_model

    if out.suffix != ".toml":
        raise InvalidOptionError(f"--out {out} must end in .toml")
    check_output("--out", out)
    # every cheap check before a model is looked for or a server started
    context_sizes = comma_ints("--contexts", contexts, example="128,512,1024")
    batched_sizes = comma_ints("--batched", batched, example="1,2,4,8,16,32", maximum=4096)
    console = Console(stderr=True)
    with console.status("calibrating") as status:
        model_path = find_model(model)
        fitted, diagnostics = calibrate(
            str(model_path),
            name=name or out.stem,
            neural_model=str(find_model(neural_model)) if neural_model else None,
            threads=threads,
            contexts=context_sizes,
            batched=batched_sizes,
            repeats=repeats,
            progress=status.update,
        )
    write_text_atomic(out, dump_cost_model(fitted))
    typer.echo(dump_cost_model(fitted))
    console.print(f"wrote {out} (median relative error of the verify fit {100 * diagnostics['median_relative_error']:.1f}%)")
