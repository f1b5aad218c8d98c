"""``specplug trace``: make traces with llama-server from prompt sets, or refill their neural column."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from specplug._errors import InvalidOptionError
from specplug._outputs import check_output
from specplug.cli._lists import comma_names


def trace_command(
    prompt_sets: list[str] = typer.Argument(
        None, help="prompt sets: spec-bench, humaneval, code-edit, agentic, or .jsonl files (default: all four)"
    ),
    out: Path = typer.Option(..., "--out", "-o", help="trace file to write (.jsonl)"),
    model: str = typer.Option("smollm2", "--model", help="GGUF path, or smollm2 / gemma3 (under .models/)"),
    threads: int = typer.Option(1, "--threads", "-t", min=1, max=1024, help="llama-server threads (torch threads for --neural-head)"),
    max_tokens: int = typer.Option(None, "--max-tokens", min=1, max=1 << 20, help="cap on generated tokens per request"),
    limit: int = typer.Option(None, "--limit", min=1, max=1 << 30, help="only the first N scripts of each set"),
    neural_model: str = typer.Option(None, "--neural-model", help="draft model (same vocabulary) whose acceptance at every position is recorded (the neural column)"),
    neural_head: Path = typer.Option(
        None, "--neural-head",
        help="EAGLE-1 head folder (vLLM's eagle layout) whose acceptance at every position is recorded (the neural_head column)",
    ),
    target_hf: Path = typer.Option(
        Path(".models/smollm2-135m-fp32"), "--target-hf", help="the target as a Hugging Face folder (fp32), for --neural-head"
    ),
    neural_k: int = typer.Option(6, "--neural-k", min=1, max=64, help="tokens the neural drafter drafts per step"),
    refill_neural: Path = typer.Option(
        None, "--refill-neural",
        help="existing trace file: only (re)compute its neural column (--neural-model) and/or its neural_head column "
        "(--neural-head); no llama-server for the target",
    ),
    llamacpp_types: str = typer.Option(
        "", "--llamacpp-types", help="also record llama.cpp's n-gram types on the same prompts, e.g. ngram-simple,ngram-mod"
    ),
    specdecode: list[Path] = typer.Option(
        None, "--specdecode",
        help="convert SpecDecode-Bench's profiled data instead (a checkout of SpecDecode-Bench/simulator, its "
        "data/llama3.1-8B folder or a combined_<dataset>.jsonl file; repeatable): real EAGLE-3 acceptance as the "
        "neural_head column, its n-gram drafter's as the lookup column; no model is run",
    ),
) -> None:
    """Make traces with llama-server from prompt sets.

    Records the greedy outputs, optionally a neural drafter's acceptance at every position
    (a draft model, --neural-model, into the neural column; or an EAGLE head over the fp32
    target, --neural-head with --target-hf, into the neural_head column beside it) and
    llama.cpp's own n-gram drafters' counters (--llamacpp-types).
    Both may be given. --refill-neural IN.jsonl --out OUT.jsonl recomputes only the column(s)
    asked for in an existing trace and keeps the rest. --specdecode DIR converts a copy of
    SpecDecode-Bench's profiled Llama-3.1-8B data (see docs/benchmarks.md).
    """
    from specplug.lab.bench._llamacpp import LLAMACPP_TYPES, measure_llamacpp
    from specplug.lab.bench._tracegen import PROMPT_SETS, generate_records, load_prompt_sets
    from specplug.lab.bench.llama_server import LlamaServer, find_model
    from specplug.lab.trace import write_traces

    if out.suffix != ".jsonl":
        raise InvalidOptionError(f"--out {out} must end in .jsonl")
    check_output("--out", out)  # before the model runs
    if specdecode:
        if prompt_sets or refill_neural is not None or neural_model or neural_head is not None or llamacpp_types:
            raise InvalidOptionError(
                "--specdecode converts recorded data: it takes no prompt sets, --refill-neural, --neural-model, "
                "--neural-head or --llamacpp-types"
            )
        _convert_specdecode(specdecode, out)
        return
    types = comma_names("--llamacpp-types", llamacpp_types, valid=LLAMACPP_TYPES, allow_empty=True)
    if refill_neural is not None:
        if prompt_sets or types:
            raise InvalidOptionError(
                "--refill-neural takes no prompt sets and no --llamacpp-types: it only refills a neural column"
            )
        if not (neural_model or neural_head):
            raise InvalidOptionError(
                "--refill-neural needs a drafter: --neural-head DIR (the neural_head column), --neural-model GGUF "
                "(the neural column), or both"
            )
        _refill(refill_neural, out, neural_model, neural_head, target_hf, neural_k, threads)
        return
    names = list(prompt_sets or PROMPT_SETS)
    scripts = load_prompt_sets(names)
    if limit:
        kept, seen = [], {}
        for script in scripts:
            seen[script["workload"]] = seen.get(script["workload"], 0) + 1
            if seen[script["workload"]] <= limit:
                kept.append(script)
        scripts = kept
    path = find_model(model)
    console = Console(stderr=True)
    with console.status("starting llama-server") as status:
        with LlamaServer(path, threads=threads, ctx_size=8192) as server:
            records = list(generate_records(server, scripts, model_name=path.name, max_tokens=max_tokens, progress=status.update))
        write_traces(out, records)  # after each phase (each write whole), so an interrupted run keeps what it made
        if neural_model or neural_head:
            records = _with_neural(records, neural_model, neural_head, target_hf, neural_k, threads, status.update)
            write_traces(out, records)
        if types:
            runs = measure_llamacpp(str(path), records, types, threads=threads, progress=status.update)
            records = [record.model_copy(update={"engine_runs": runs[record.id]}) for record in records]
    write_traces(out, records)
    tokens = sum(len(record.output_ids) for record in records)
    console.print(f"wrote {out}: {len(records)} requests, {tokens} output tokens")


def _with_neural(records, neural_model, neural_head, target_hf, k, threads, progress):
    """``records`` with the neural column of a draft model (llama-server) and/or the neural_head
    column of an EAGLE head (torch); a column not asked for is kept as it was."""
    from specplug.lab.bench._tracegen import head_acceptance, neural_acceptance
    from specplug.lab.bench.llama_server import LlamaServer, find_model

    if neural_model:
        draft_path = find_model(neural_model)
        traces = []
        with LlamaServer(draft_path, threads=threads, ctx_size=8192) as draft:
            for record in records:
                progress(f"neural acceptance: {record.id}")
                traces.append(neural_acceptance(draft, record, k, drafter=draft_path.name))
        records = [record.model_copy(update={"neural": trace}) for record, trace in zip(records, traces, strict=True)]
    if neural_head is not None:
        traces = head_acceptance(records, neural_head, target_hf, k, threads=threads, progress=progress)
        # written as format version 2: dump_record derives the version from the columns present
        records = [record.model_copy(update={"neural_head": trace}) for record, trace in zip(records, traces, strict=True)]
    return records


def _refill(source, out, neural_model, neural_head, target_hf, k, threads) -> None:
    """Write ``out``: the records of trace ``source`` with the neural column(s) asked for recomputed."""
    from specplug.lab.trace import read_traces, write_traces

    records = read_traces(source)
    console = Console(stderr=True)
    with console.status("neural acceptance") as status:
        records = _with_neural(records, neural_model, neural_head, target_hf, k, threads, status.update)
    write_traces(out, records)
    for column, asked in (("neural", neural_model), ("neural_head", neural_head)):
        if asked:
            accepted = [count for record in records for count in getattr(record, column).accepted]
            mean = sum(accepted) / len(accepted) if accepted else 0.0
            console.print(
                f"wrote {out}: {len(records)} requests, {column} mean accepted {mean:.2f} of {k} over {len(accepted)} positions"
            )


def _convert_specdecode(sources: list[Path], out: Path) -> None:
    from specplug.lab.specdecode import read_specdecode
    from specplug.lab.trace import write_traces

    records = read_specdecode(sources)
    write_traces(out, records)
    workloads = sorted({record.workload for record in records})
    tokens = sum(len(record.output_ids) for record in records)
    Console(stderr=True).print(
        f"wrote {out}: {len(records)} requests ({', '.join(workloads)}), {tokens} output tokens"
    )
