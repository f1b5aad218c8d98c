"""Reports of a benchmark: a terminal table, JSON, PNG plots."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from specplug._outputs import atomic_output, write_text_atomic
from specplug.lab.bench._result import BenchResult, Row

__all__ = ["markdown_tables", "print_table", "write_json", "write_markdown", "write_plots"]


def _num(value: float | None, digits: int = 2, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _neural_note(result: BenchResult) -> str:
    # named only off the default, so tables of draft-model runs read as they always did
    return f", neural drafter: {result.neural}" if result.neural != "draft-model" else ""


def print_table(result: BenchResult, console: Console | None = None) -> None:
    """One table per workload: acceptance figures, proposer time, modeled speedups."""
    console = console or Console()
    shown = [b for b in result.batch_sizes if b in (1, 8, 32, 128)] or result.batch_sizes[:4]
    first = result.batch_sizes[0]
    for workload in result.workloads:
        table = Table(title=f"{workload}  (cost model {result.cost_model}, k={result.k}{_neural_note(result)})", title_justify="left")
        table.add_column("method", style="bold")
        for name in ("tok/step", "acc/step", "acc rate", "drafted", "us/step"):
            table.add_column(name, justify="right")
        for batch in shown:
            table.add_column(f"x@{batch}", justify="right")
        table.add_column("min x", justify="right")
        table.add_column(f"oracle@{first}", justify="right")
        table.add_column("notes")
        for row in (r for r in result.rows if r.workload == workload):
            table.add_row(*_cells(row, shown, first))
        console.print(table)


def _cells(row: Row, shown: list[int], first: int) -> list[str]:
    if row.status != "ok":
        return [row.method, *["-"] * (5 + len(shown) + 2), f"[red]FAILED[/red] {row.error}"]
    low = min(row.speedup.values()) if row.speedup else None
    low_text = _num(low)
    if low is not None and low < 1.0:
        low_text = f"[red]{low_text}[/red]"
    return [
        row.method,
        _num(row.tokens_per_step),
        _num(row.accepted_per_step),
        _pct(row.acceptance_rate),
        _pct(row.drafted_share),
        _num(row.micros_per_step, 1),
        *[_num(row.speedup.get(batch)) for batch in shown],
        low_text,
        _pct(row.oracle_share.get(first)),
        row.notes,
    ]


def write_json(result: BenchResult, path: str | Path) -> None:
    """``result`` as JSON, replacing ``path`` whole."""
    write_text_atomic(path, json.dumps(result.to_json(), indent=1) + "\n")


def write_markdown(result: BenchResult, path: str | Path) -> None:
    """:func:`markdown_tables` of ``result``, replacing ``path`` whole."""
    write_text_atomic(path, markdown_tables(result))


def write_plots(result: BenchResult, folder: str | Path) -> list[Path]:
    """``speedup-<workload>.png`` (modeled speedup against batch size, one line per method)
    and ``tokens-per-step.png`` (bars per workload and method)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    colours = plt.get_cmap("tab20").colors
    colour_of = {method: colours[index % len(colours)] for index, method in enumerate(result.methods)}
    for workload in result.workloads:
        figure, axes = plt.subplots(figsize=(9.5, 4.6))
        for row in (r for r in result.rows if r.workload == workload and r.status == "ok" and r.speedup):
            batches = sorted(row.speedup)
            style = "--" if row.method == "oracle" else ("-." if row.source == "llama-server" else "-")
            axes.plot(
                batches, [row.speedup[b] for b in batches], style, marker="o", markersize=3,
                label=row.method, color=colour_of.get(row.method, "black"),
            )  # fmt: skip
        axes.axhline(1.0, color="grey", linewidth=0.8)
        axes.set_xscale("log", base=2)
        axes.set_xticks(result.batch_sizes, [str(b) for b in result.batch_sizes])
        axes.set_xlabel("batch size")
        axes.set_ylabel(f"modeled speedup ({result.cost_model})")
        axes.set_title(f"{workload}: modeled speedup over plain decoding")
        axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        figure.tight_layout()
        path = folder / f"speedup-{workload}.png"
        with atomic_output(path, "wb") as stream:
            figure.savefig(stream, format="png", dpi=110)
        plt.close(figure)
        written.append(path)
    figure, axes = plt.subplots(figsize=(11, 4.6))
    methods = [m for m in result.methods]
    width = 0.8 / max(len(methods), 1)
    for index, method in enumerate(methods):
        values = []
        for workload in result.workloads:
            try:
                row = result.row(workload, method)
                values.append(row.tokens_per_step if row.status == "ok" else 0.0)
            except KeyError:
                values.append(0.0)
        axes.bar(
            [w + index * width for w in range(len(result.workloads))], values, width, label=method,
            color=colour_of.get(method, "black"),
        )  # fmt: skip
    axes.set_xticks([w + 0.4 - width / 2 for w in range(len(result.workloads))], result.workloads)
    axes.set_ylabel("tokens per verification step")
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    path = folder / "tokens-per-step.png"
    with atomic_output(path, "wb") as stream:
        figure.savefig(stream, format="png", dpi=110)
    plt.close(figure)
    written.append(path)
    return written


def markdown_tables(result: BenchResult) -> str:
    """The same figures as :func:`print_table`, as Markdown (one table per workload)."""
    shown = [b for b in result.batch_sizes if b in (1, 8, 32, 128)] or result.batch_sizes[:4]
    first = result.batch_sizes[0]
    header = ["method", "tok/step", "acc/step", "acc rate", "drafted", "us/step"]
    header += [f"x@{b}" for b in shown] + ["min x", f"oracle@{first}", "notes"]
    lines = []
    for workload in result.workloads:
        lines += [f"**{workload}** (cost model `{result.cost_model}`, k={result.k}{_neural_note(result)})", ""]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for row in (r for r in result.rows if r.workload == workload):
            cells = [cell.replace("[red]", "").replace("[/red]", "") for cell in _cells(row, shown, first)]
            cells[0] = f"`{cells[0]}`"
            lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
        lines.append("")
    return "\n".join(lines)
