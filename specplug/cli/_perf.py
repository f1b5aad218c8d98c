"""``specplug perf``: per-step time and memory of the proposers, beside vLLM's NgramProposer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from specplug._errors import InvalidOptionError
from specplug._outputs import check_output, write_text_atomic
from specplug.cli._lists import comma_ints, comma_names

#: the table's columns, in order (the smoke test checks them)
COLUMNS = (
    "proposer",
    "workload",
    "context",
    "median µs",
    "p90 µs",
    "spread",
    "× vLLM",
    "target",
    "acc/step",
    "drafted",
    "B/token",
    "cache / cap",
    "start ms",
)


def _mib(value: int | None) -> str:
    return "-" if value is None else f"{value / (1 << 20):.2f}M"


def _table(report) -> Table:
    settings = report.settings
    table = Table(
        title=f"specplug perf: propose + extend per request step ({settings['repeats']} repeats, "
        f"k = {settings['max_tokens']}, one thread)",
        caption="median and p90 over all steps of a run, then the median over repeats; spread = (max - min) / median "
        "of the repeats' medians; × vLLM = median / vLLM NgramProposer's median on the same steps",
    )
    for column in COLUMNS:
        table.add_column(column, justify="left" if column in ("proposer", "workload") else "right")
    for row in report.rows:
        target = "-" if row.meets_target is None else ("[green]ok[/]" if row.meets_target else "[red]over[/]")
        cache = "-" if row.cache_bytes is None else f"{_mib(row.cache_bytes)} / {_mib(row.cache_cap_bytes)}"
        table.add_row(
            row.proposer,
            row.workload,
            f"{row.context_tokens // 1024}k" if row.context_tokens % 1024 == 0 else str(row.context_tokens),
            f"{row.median_us:.1f}",
            f"{row.p90_us:.1f}",
            f"{row.spread_pct:.0f}%" if settings["repeats"] > 1 else "-",
            "-" if row.ratio_to_vllm is None else f"{row.ratio_to_vllm:.3f}",
            target if row.target_us is None else f"{target} ≤{row.target_us:g}",
            f"{row.accepted_per_step:.2f}",
            f"{100 * row.drafted_share:.0f}%",
            "-" if row.state_bytes_per_token is None else f"{row.state_bytes_per_token:.1f}",
            cache,
            f"{row.start_ms:.1f}",
        )
    return table


#: the most context tokens a --batch run holds at once (its largest batch times its largest context):
#: past it the lookups' state alone would need gigabytes
MAX_BATCH_TOKENS = 1 << 26


def perf_command(
    contexts: str = typer.Option("8k,64k", "--contexts", help="context sizes in tokens, comma-separated (8k = 8192)"),
    steps: int = typer.Option(2000, "--steps", min=1, max=1_000_000, help="request steps timed per run"),
    repeats: int = typer.Option(3, "--repeats", min=1, max=1000, help="runs per proposer, workload and size"),
    max_tokens: int = typer.Option(8, "--max-tokens", "-k", min=1, max=64, help="k: most draft tokens per step"),
    workloads: str = typer.Option("code-edit,text", "--workloads", help="workloads, comma-separated: code-edit, text"),
    methods: str = typer.Option("ngram,suffix", "--methods", help="specplug methods, comma-separated"),
    peers: str = typer.Option(
        "vllm-ngram", "--peers", help="peers timed in the same run, comma-separated ('' for none; see specplug.lab.peers)"
    ),
    cap_check: bool = typer.Option(True, "--cap-check/--no-cap-check", help="also push outputs through a 1 MiB suffix cache"),
    cpu: int = typer.Option(None, "--cpu", min=0, max=65535, help="pin this process to one CPU (less noise)"),
    batch: str = typer.Option(
        None,
        "--batch",
        help="batch sizes, comma-separated (e.g. 1,32,128): time one engine step for the whole batch "
        "(Proposer.step_batch) beside vLLM's NgramProposer on the same batch, instead of per request steps",
    ),
    interleave: bool = typer.Option(
        False,
        "--interleave",
        help="with --batch: all subjects started, then stepping in turn (each step, the order rotated) instead of "
        "one after another: the ratios between them steady on a noisy machine, and every step finds the caches as "
        "the others left them",
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of the table"),
    json_out: Path = typer.Option(None, "--json-out", help="also write the JSON here"),
) -> None:
    """Time propose + extend per request step at long contexts, with memory, beside vLLM's NgramProposer."""
    from specplug.lab.perf import WORKLOADS, run_perf

    if json_out is not None:
        check_output("--json-out", json_out)  # before minutes of timing
    chosen = comma_names("--workloads", workloads, valid=WORKLOADS)
    sizes = comma_ints("--contexts", contexts, example="8k,64k", sizes=True, maximum=1 << 22)
    if cpu is not None:
        try:
            import os

            os.sched_setaffinity(0, {cpu})
        except (AttributeError, OSError) as error:
            raise InvalidOptionError(f"--cpu {cpu}: cannot pin to that CPU ({error})") from None
    if interleave and batch is None:
        raise InvalidOptionError("--interleave: it orders the subjects of a --batch run; give --batch too (e.g. 1,128)")
    console = Console(stderr=True)
    if batch is not None:
        batches = comma_ints("--batch", batch, example="1,32,128", maximum=4096)
        if max(batches) * max(sizes) > MAX_BATCH_TOKENS:
            raise InvalidOptionError(
                f"--batch {max(batches)} x --contexts {max(sizes)}: {max(batches) * max(sizes):,} tokens held at once; "
                f"at most {MAX_BATCH_TOKENS:,} (a smaller batch or context)"
            )
        _batch_perf(
            batches, sizes, chosen, methods, peers, steps, repeats,
            max_tokens, as_json, json_out, console, interleave,
        )
        return
    with console.status("measuring") as status:
        report = run_perf(
            sizes,
            workloads=chosen,
            methods=comma_names("--methods", methods),
            peers=comma_names("--peers", peers, allow_empty=True),
            steps=steps,
            repeats=repeats,
            max_tokens=max_tokens,
            cap_check=cap_check,
            progress=lambda message: status.update(message),
        )
    data = report.to_json()
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(data, indent=2) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    out = Console(width=max(Console().width, 150))
    out.print(_table(report))
    machine = report.machine
    out.print(f"machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}, specplug {machine['specplug']}")
    check = report.cache_check
    if check is not None:
        verdict = "[green]within the cap[/]" if check.within_cap else "[red]ABOVE THE CAP[/]"
        out.print(
            f"suffix cache cap check: {check.requests} requests x {check.tokens_per_request} output tokens into a "
            f"{_mib(check.cap_bytes)} cap: peak {_mib(check.peak_bytes)} ({check.peak_bytes} B), {verdict}; "
            f"{check.cached_requests} requests kept at the end"
        )


BATCH_COLUMNS = ("proposer", "workload", "context", "batch", "median µs/step", "µs/row", "spread", "× vLLM", "× suffix", "target", "acc/row-step")


def _suffix_ratio(row) -> str:
    """The "× suffix" cell: the ratio of the medians, and with repeats its range within a repeat."""
    if row.ratio_to_suffix is None:
        return "-"
    ratios = row.suffix_ratios or []
    spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
    return f"{row.ratio_to_suffix:.2f}{spread}"


def _batch_perf(batches, sizes, workloads, methods, peers, steps, repeats, max_tokens, as_json, json_out, console,
                interleave) -> None:
    from specplug.lab._perf_batch import (
        TARGET_COMPOSITE_RATIO,
        TARGET_US_PER_ROW,
        rows_to_json,
        run_batch_perf,
    )
    from specplug.lab.perf import _machine

    names = comma_names("--methods", methods)
    if names == ["ngram", "suffix"]:  # the default of the per-request table: here the composites too
        names = ["ngram", "suffix", "hybrid", "adaptive"]
    with console.status("measuring") as status:
        rows = run_batch_perf(
            batches,
            sizes,
            workloads=workloads,
            methods=names,
            vllm="vllm-ngram" in comma_names("--peers", peers, allow_empty=True),
            steps=min(steps, 400) if steps == 2000 else steps,  # the per-request default is long for a batch
            repeats=repeats,
            max_tokens=max_tokens,
            progress=lambda message: status.update(message),
            interleave=interleave,
        )
    largest = max(batches)
    data = {"rows": rows_to_json(rows), "machine": _machine(), "batches": list(batches), "interleaved": interleave}
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(data, indent=2) + "\n")
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    table = Table(
        title=f"specplug perf --batch: one engine step for the whole batch ({repeats} repeats, k = {max_tokens}"
        f"{', interleaved' if interleave else ''})",
        caption="median over a run's steps, then over repeats; targets at the largest batch: a lookup <= "
        f"{TARGET_US_PER_ROW:g} µs/row and <= vLLM's NgramProposer; a composite <= {TARGET_COMPOSITE_RATIO:g}x suffix "
        "(in brackets: the lowest and highest ratio within one repeat)",
    )
    for column in BATCH_COLUMNS:
        table.add_column(column, justify="left" if column in ("proposer", "workload") else "right")
    for row in sorted(rows, key=lambda r: (r.workload, r.context_tokens, r.batch, r.proposer)):
        target = "-"
        if row.batch == largest and row.proposer in ("ngram", "suffix"):
            ok = row.per_row_us <= TARGET_US_PER_ROW and (row.ratio_to_vllm is None or row.ratio_to_vllm <= 1.0)
            target = "[green]ok[/]" if ok else "[red]over[/]"
        elif row.batch == largest and row.ratio_to_suffix is not None and row.proposer != "vllm-ngram" and "/" not in row.proposer:
            target = "[green]ok[/]" if row.ratio_to_suffix <= TARGET_COMPOSITE_RATIO else "[red]over[/]"
        table.add_row(
            row.proposer,
            row.workload,
            f"{row.context_tokens // 1024}k",
            str(row.batch),
            f"{row.median_us:.1f}",
            f"{row.per_row_us:.2f}",
            f"{row.spread_pct:.0f}%" if repeats > 1 else "-",
            "-" if row.ratio_to_vllm is None else f"{row.ratio_to_vllm:.2f}",
            _suffix_ratio(row),
            target,
            f"{row.accepted_per_row_step:.2f}",
        )
    out = Console(width=max(Console().width, 150))
    out.print(table)
    machine = data["machine"]
    out.print(f"machine: {machine['cpu']}, {machine['cores']} cores, Python {machine['python']}, specplug {machine['specplug']}")
