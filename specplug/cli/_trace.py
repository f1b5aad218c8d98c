"""``specplug trace``: make traces with llama-server from prompt sets."""

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
    threads: int = typer.Option(1, "--threads", "-t", min=1, help="llama-server threads"),
    max_tokens: int = typer.Option(None, "--max-tokens", min=1, help="cap on generated tokens per request"),
    limit: int = typer.Option(None, "--limit", min=1, help="only the first N scripts of each set"),
    neural_model: str = typer.Option(None, "--neural-model", help="draft model (same vocabulary) whose acceptance at every position is recorded"),
    neural_k: int = typer.Option(6, "--neural-k", min=1, max=64, help="tokens the neural drafter drafts per step"),
    llamacpp_types: str = typer.Option(
        "", "--llamacpp-types", help="also record llama.cpp's n-gram types on the same prompts, e.g. ngram-simple,ngram-mod"
    ),
) -> None:
    """Make traces with llama-server from prompt sets.

    Records the greedy outputs, optionally a draft model's acceptance at every position
    (--neural-model) and llama.cpp's own n-gram drafters' counters (--llamacpp-types).
    """
    from specplug.lab.bench._llamacpp import LLAMACPP_TYPES, measure_llamacpp
    from specplug.lab.bench._tracegen import PROMPT_SETS, generate_records, load_prompt_sets, neural_acceptance
    from specplug.lab.bench.llama_server import LlamaServer, find_model
    from specplug.lab.trace import write_traces

    if out.suffix != ".jsonl":
        raise InvalidOptionError(f"--out {out} must end in .jsonl")
    check_output("--out", out)  # before the model runs
    types = comma_names("--llamacpp-types", llamacpp_types, valid=LLAMACPP_TYPES, allow_empty=True)
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
        if neural_model:
            draft_path = find_model(neural_model)
            with LlamaServer(draft_path, threads=threads, ctx_size=8192) as draft:
                for index, record in enumerate(records):
                    status.update(f"neural acceptance: {record.id}")
                    neural = neural_acceptance(draft, record, neural_k, drafter=draft_path.name)
                    records[index] = record.model_copy(update={"neural": neural})
            write_traces(out, records)
        if types:
            runs = measure_llamacpp(str(path), records, types, threads=threads, progress=status.update)
            records = [record.model_copy(update={"engine_runs": runs[record.id]}) for record in records]
    write_traces(out, records)
    tokens = sum(len(record.output_ids) for record in records)
    console.print(f"wrote {out}: {len(records)} requests, {tokens} output tokens")
