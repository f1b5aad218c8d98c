"""``specplug bench``: replay traces against methods and peers, report per workload."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specplug._errors import InvalidOptionError
from specplug._outputs import check_output
from specplug.cli._lists import comma_ints, comma_names


def bench_command(
    traces: list[Path] = typer.Argument(None, help="trace files (.jsonl); default: the traces shipped with specplug"),
    method: list[str] = typer.Option(
        None, "--method", "-m",
        help="method spec, repeatable: NAME[:key=value,...], neural, peer:NAME; composites take parts by name, "
        "e.g. hybrid:lookup=ngram, adaptive:candidates=suffix+neural (default: ngram, suffix, neural, hybrid, "
        "adaptive:candidates=suffix+neural)",
    ),
    peers: bool = typer.Option(True, "--peers/--no-peers", help="also replay every peer that specplug.lab.peers can create"),
    cost: str = typer.Option("llama-3.1-8b-h100", "--cost", help="cost model: preset name or .toml file"),
    k: int = typer.Option(8, "--k", min=1, max=64, help="most draft tokens per step"),
    batch_sizes: str = typer.Option("1,2,4,8,16,32,64,128", "--batch-sizes", help="batch sizes for the modeled speedup"),
    workload: list[str] = typer.Option(None, "--workload", "-w", help="only these workloads (repeatable)"),
    oracle: bool = typer.Option(True, "--oracle/--no-oracle", help="add the per-position oracle"),
    best_fixed: bool = typer.Option(
        True, "--best-fixed/--no-best-fixed", help="add the best fixed (drafter, draft length) per batch size, chosen with hindsight"
    ),
    split: str = typer.Option(
        "all", "--split", help="all, or half of each workload's conversations: tune (even ones) or validation (odd ones)"
    ),
    synthetic: bool = typer.Option(
        False, "--synthetic", help="also replay the synthetic stress workloads (stress-selective, stress-drift, stress-long-neural)"
    ),
    llamacpp_model: str = typer.Option(
        None, "--llamacpp-model", help="measure llama.cpp's n-gram types live with this GGUF (else use those recorded in the traces)"
    ),
    llamacpp_types: str = typer.Option("ngram-simple,ngram-map-k,ngram-mod", "--llamacpp-types", help="types measured with --llamacpp-model"),
    engine_runs: bool = typer.Option(
        True, "--engine-runs/--no-engine-runs",
        help="also report the engine methods recorded in the traces (llama.cpp's n-gram types, at the draft length they were recorded with)",
    ),
    neural: str = typer.Option(
        "draft-model", "--neural",
        help="the traces' neural column the neural drafter replays: draft-model (the neural column; the shipped traces' "
        "stand-in draft model) or head (the neural_head column: the EAGLE head trained here)",
    ),
    neural_alpha: float = typer.Option(0.6, "--neural-alpha", min=0.0, max=0.99, help="acceptance of the simulated neural drafter where a trace has none"),
    engine_rules: bool = typer.Option(
        False, "--engine-rules", help="also replay every engine rule (rule:NAME) with its shipped defaults"
    ),
    tune_rules: bool = typer.Option(
        False, "--tune-rules",
        help="also replay every engine rule with its knobs tuned per batch size on the traces' tune split",
    ),
    tuned_rules_path: Path = typer.Option(
        None, "--tuned-rules",
        help="with --tune-rules: keep the tuned settings in this JSON file and reuse them while the traces, cost model, "
        "k and batch sizes are the same",
    ),
    warm: bool = typer.Option(
        False, "--warm",
        help="with --split tune or validation: also replay each composite warm (a row NAME (warm)), starting from the "
        "statistics it learnt over the other split's requests of the same workload, as a server that kept them in "
        "learnt_state does",
    ),
    batch_tables_path: Path = typer.Option(
        None, "--batch-tables", help="write one Markdown table per batch size (every row by workload, targets checked) here"
    ),
    json_path: Path = typer.Option(None, "--json", help="write the results as JSON here"),
    plots: Path = typer.Option(None, "--plots", help="write PNG plots into this folder"),
    markdown: Path = typer.Option(None, "--markdown", help="write the tables as Markdown here"),
    lookup_bound: str = typer.Option(
        None, "--lookup-bound",
        help="instead of replaying methods, print the tokens/step bound of any lookup proposer at these draft lengths "
        "(e.g. 5,8,16) per workload, as Markdown (--markdown writes it too)",
    ),
) -> None:
    """Replay traces against methods and peers: acceptance, proposer time and modeled speedup per workload."""
    from specplug.lab.bench import (
        DEFAULT_METHODS, default_traces, parse_method, print_table, run_benchmark, write_json, write_markdown, write_plots,
    )  # fmt: skip
    from specplug.lab.bench._peers import peer_names
    from specplug.cost import cost_model
    from specplug.lab.trace import read_traces

    if not 0.0 <= neural_alpha <= 0.99:  # NaN passes click's range check
        raise InvalidOptionError(f"--neural-alpha {neural_alpha}: give a number from 0 to 0.99")
    # every output is checked before the replay, so a bad path never costs a finished run
    if json_path:
        check_output("--json", json_path)
    if batch_tables_path:
        check_output("--batch-tables", batch_tables_path)
    if warm and split not in ("tune", "validation"):
        raise InvalidOptionError(f"--warm learns over the other split, and --split is {split!r}; give --split tune or --split validation")
    if tuned_rules_path and not tune_rules:
        raise InvalidOptionError("--tuned-rules keeps the settings of --tune-rules; give --tune-rules too")
    if markdown:
        check_output("--markdown", markdown)
    if plots:
        check_output("--plots", plots, folder=True)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise InvalidOptionError("--plots needs matplotlib, which is not installed: pip install matplotlib, or leave --plots out") from None
    files = list(traces or default_traces())
    if not files:
        raise InvalidOptionError("no trace files given and none shipped; make some with `specplug trace`")
    from specplug.lab.bench._split import split_records
    from specplug.lab.bench._synthetic import synthetic_traces

    from specplug.lab.bench._neural import with_neural_column

    with_neural_column([], neural)  # a bad choice fails before any file is read
    # the synthetic workloads (added below) keep their generated drafter: it stands for any head
    records = [record for path in files for record in with_neural_column(read_traces(path), neural, str(path))]
    if synthetic:
        records += synthetic_traces()
    tune_half = split_records(records, "tune")  # engine rules are tuned on it whatever --split replays
    # --warm: what the composites learn from before replaying the split
    other_half = split_records(records, "validation" if split == "tune" else "tune") if warm else None
    records = split_records(records, split)
    if workload:
        known = sorted({record.workload for record in records})
        missing = [name for name in workload if name not in known]
        if missing:
            raise InvalidOptionError(f"workload(s) {missing} are not in the traces; workloads: {', '.join(known)}")
        records = [record for record in records if record.workload in workload]
        tune_half = [record for record in tune_half if record.workload in workload]
        other_half = None if other_half is None else [record for record in other_half if record.workload in workload]
    if lookup_bound is not None:
        _print_lookup_bound(records, comma_ints("--lookup-bound", lookup_bound, example="5,8,16", maximum=64), markdown)
        return
    specs = list(method or DEFAULT_METHODS)
    if peers and not method:
        specs += [f"peer:{name}" for name in peer_names()]
    methods = [parse_method(spec) for spec in specs]
    if engine_rules:
        from specplug.lab.bench._rules import default_rules

        methods += [rule for rule in default_rules() if rule.label not in {m.label for m in methods}]
    model = cost_model(cost)
    sizes = comma_ints("--batch-sizes", batch_sizes, example="1,8,32,128", maximum=1 << 16)
    console = Console(width=max(Console().width, 160))
    tuned = None
    if tune_rules:
        tuned = _tuned_rules(tuned_rules_path, files, cost, k, sizes, neural, workload, tune_half, model, neural_alpha, console)
    if llamacpp_model:
        from specplug.lab.bench._llamacpp import LLAMACPP_TYPES, measure_llamacpp
        from specplug.lab.bench.llama_server import find_model

        types = comma_names("--llamacpp-types", llamacpp_types, valid=LLAMACPP_TYPES)
        with console.status("measuring llama.cpp through llama-server") as status:
            runs = measure_llamacpp(str(find_model(llamacpp_model)), records, types, draft_max=k, progress=status.update)
        records = [record.model_copy(update={"engine_runs": runs[record.id]}) for record in records]
    groups = len({record.workload for record in records})
    total = (groups + (groups > 1)) * (len(methods) + int(oracle) + int(best_fixed))
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("replaying", total=total)

        def tick(label: str) -> None:
            progress.update(task, advance=1, description=label)

        result = run_benchmark(
            records, methods, model, k=k, batch_sizes=sizes, oracle=oracle, best_fixed=best_fixed, engine_runs=engine_runs,
            neural_alpha=neural_alpha, neural=neural, progress=tick, tuned_rules=tuned, warm_records=other_half,
        )
    print_table(result, console)
    failed = [row for row in result.rows if row.status != "ok"]
    for row in failed:
        console.print(f"[red]failed[/red]: {row.method} on {row.workload}: {row.error}")
    if json_path:
        write_json(result, json_path)
        console.print(f"wrote {json_path}")
    if markdown:
        write_markdown(result, markdown)
        console.print(f"wrote {markdown}")
    if batch_tables_path:
        from specplug._outputs import write_text_atomic
        from specplug.lab.bench._rules_report import batch_tables

        write_text_atomic(batch_tables_path, batch_tables(result))
        console.print(f"wrote {batch_tables_path}")
    if plots:
        for path in write_plots(result, plots):
            console.print(f"wrote {path}")
    if failed:
        # the benchmark ran to the end; the exit status still tells a script that a row failed
        raise typer.Exit(1)


def _print_lookup_bound(records: list, ks: list[int], markdown: Path | None) -> None:
    from specplug._outputs import write_text_atomic
    from specplug.lab.bench import workloads_of
    from specplug.lab.bench._lookup_bound import bound_table

    table = bound_table(workloads_of(records), ks)
    typer.echo(table)
    if markdown:
        write_text_atomic(markdown, table + "\n")
        typer.echo(f"wrote {markdown}", err=True)


def _tuned_rules(path, files, cost, k, sizes, neural, workloads, tune_half, model, neural_alpha, console):
    """The engine rules' settings tuned on ``tune_half``: read from ``path`` when it was tuned on
    the same traces and settings, else tuned now (and written there)."""
    from specplug.lab.bench._rules import load_tuned, save_tuned, tune_rules

    about = {
        "traces": [Path(file).name for file in files], "cost": cost, "k": k, "batch_sizes": list(sizes),
        "neural": neural, "workloads": sorted(workloads or []),
    }
    tuned = load_tuned(path, about) if path else None
    if tuned is None:
        with console.status("tuning the engine rules on the tune split") as status:
            tuned = tune_rules(tune_half, model, k, sizes, neural_alpha=neural_alpha, progress=status.update)
        if path:
            save_tuned(tuned, path, about)
            console.print(f"wrote {path}")
    return tuned
