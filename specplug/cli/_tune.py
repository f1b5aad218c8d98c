"""``specplug tune ENGINE``: measure speculative settings on sample prompts, write the fastest as a preset."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from specplug._errors import InvalidOptionError
from specplug.cli._lists import comma_ints, comma_names

#: engines that ``tune`` can drive
TUNABLE_ENGINES = ("llama-server",)


def tune_command(
    engine: str = typer.Argument(..., help="engine to tune: llama-server"),
    model: Path = typer.Option(..., "--model", "-m", help="GGUF model file"),
    prompts: Path = typer.Option(..., "--prompts", "-p", help='JSONL file, one {"prompt": ...} or {"messages": [...]} a line'),
    name: str = typer.Option("tuned", "--name", help="preset name (the INI section)"),
    out: Path = typer.Option(None, "--out", "-o", help="preset file to write (default: NAME.ini)"),
    n_predict: int = typer.Option(128, "--n-predict", "-n", min=1, max=1 << 20, help="tokens generated per prompt"),
    rounds: int = typer.Option(3, "--rounds", "-r", min=1, max=1000, help="rounds (fresh servers) per setting; speedups are medians"),
    threads: int = typer.Option(1, "--threads", "-t", min=1, max=1024, help="llama-server threads (1 gives comparable timings)"),
    ctx_size: int = typer.Option(4096, "--ctx-size", "-c", min=1, max=1 << 24, help="context size"),
    summary: str = typer.Option(None, "--summary", help="first comment line of the preset"),
    candidates: str = typer.Option(
        None, "--candidates",
        help="comma-separated settings to try (default: all; a bad name lists them); with --draft, the lookups chained first",
    ),
    presets: str = typer.Option(
        None, "--presets",
        help="comma-separated shipped llama-server presets to measure too (e.g. mtp-ngram,code-edit); "
             "given alone, only they are measured",
    ),
    draft: Path = typer.Option(
        None, "--draft", help="draft GGUF: tune chains of a lookup (tried first) and this drafter, and its draft length"
    ),
    draft_type: str = typer.Option(
        None, "--draft-type",
        help="llama-server drafter of the chain (--spec-type draft-*; default draft-simple; draft-mtp needs no --draft)",
    ),
    draft_lengths: str = typer.Option(
        None, "--draft-lengths", help="comma-separated draft lengths (--spec-draft-n-max) to try with --draft (default 2,4,8)"
    ),
) -> None:
    """Run llama-server over sample prompts with candidate settings; write the fastest as a preset."""
    if engine not in TUNABLE_ENGINES:
        raise InvalidOptionError(f"cannot tune engine {engine!r}; valid engines: {', '.join(TUNABLE_ENGINES)}")
    # imported here: the lab (and the adapter under it) is only needed by this command
    from specplug.lab.llamacpp import (
        CHAIN_LOOKUPS, DRAFT_LENGTHS, chain_settings, check_drafter, preset_settings, select_candidates, tune,
        with_drafter,
    )  # fmt: skip

    from specplug._presets import list_presets

    shipped: tuple = ()
    if presets is not None:
        shipped = preset_settings(comma_names("--presets", presets, valid=[p.name for p in list_presets("llama-server")]))
    chaining = draft is not None or draft_type is not None
    if draft_lengths is not None and not chaining:
        raise InvalidOptionError("--draft-lengths needs --draft DRAFT.gguf (or --draft-type draft-mtp): it sets the drafter's length")
    drafter = check_drafter(draft_type, draft) if chaining else None
    lookups = comma_names("--candidates", candidates) if candidates is not None else None
    if shipped and candidates is None and draft_lengths is None:
        grid: tuple = ()  # --presets alone: only they are measured
    elif drafter is not None:  # every lookup candidate chained before the drafter, at each draft length
        lengths = comma_ints("--draft-lengths", draft_lengths, example="2,4,8", maximum=256) if draft_lengths is not None else DRAFT_LENGTHS
        grid = chain_settings(drafter, select_candidates(lookups or CHAIN_LOOKUPS), lengths)
    else:
        grid = select_candidates(lookups)
    if drafter is not None:  # a shipped chain preset is measured with this drafter's file
        shipped = tuple(with_drafter(setting, drafter) for setting in shipped)
    grid = (*grid, *shipped)

    console = Console(stderr=True)
    with console.status("tuning") as status:
        # a spinner on a terminal; plain lines in a log (tuning runs for minutes)
        progress = status.update if console.is_terminal else (lambda message: typer.echo(message, err=True))
        measurements, path = tune(
            model, prompts, name=name, out=out, n_predict=n_predict, rounds=rounds, threads=threads,
            ctx_size=ctx_size, summary=summary, command=shlex.join(["specplug", "tune", *sys.argv[2:]]), candidates=grid,
            progress=progress, drafter=drafter,
        )  # fmt: skip
    table = Table(title=f"llama-server on {model.name}: {rounds} rounds, {threads} thread(s); speedup from CPU time")
    for column in ("setting", "tok/CPU-s", "speedup (range)", "wall tok/s", "acceptance", "identical"):
        table.add_column(column)
    for m in sorted(measurements, key=lambda m: -m.speedup):
        low, high = m.spread
        acceptance = "-" if m.acceptance is None else f"{100 * m.acceptance:.0f}%"
        table.add_row(
            m.setting.name, f"{m.median_cpu_tps:.1f}", f"{m.speedup:.2f}x ({low:.2f}-{high:.2f})",
            f"{m.median_tps:.1f}", acceptance, f"{m.identical}/{m.compared}",
        )  # fmt: skip
    Console().print(table)
    typer.echo(f"wrote {path}")
