"""GPU check of ``specplug.hybrid`` over a real neural drafter in vLLM (a machine with an NVIDIA GPU).

vLLM's CPU build runs the overlay in CI over a trained EAGLE head and a draft model of a 135M model,
and over random-weight EAGLE-3, P-EAGLE, DFlash, Medusa and PARD drafters and a small random model
with its own MTP layer; drafts that are accepted on their own need trained drafters and real models.
This script checks it where it matters, in three runs of the same prompts:

1. no speculation (the reference output),
2. vLLM's own neural drafter alone (``--neural``: eagle3, eagle or mtp),
3. ``specplug.hybrid``: the same neural drafter with specplug's lookup overlaid per request.

It fails (exit 1) when the hybrid's greedy output differs from the reference other than at a
near-tie, when nothing was accepted, or when the overlay did not run. Usage, with vLLM (CUDA
wheel, in the tested range) and specplug installed and the weights available locally:

    python scripts/gpu_check_vllm_hybrid.py --model Qwen/Qwen3-8B \\
        --neural eagle3 --draft AngelSlim/Qwen3-8B_eagle3 --spec-tokens 4

For an MTP model leave out ``--draft`` (``--neural mtp --model XiaomiMiMo/MiMo-7B-RL``). The other
drafters, each with a trained head (none exists for the CPU test model's architecture):

    --neural dflash --model Qwen/Qwen3.5-9B --draft z-lab/Qwen3.5-9B-DFlash --spec-tokens <its block size>
    --neural eagle3 --parallel-drafting --model <target> --draft <its P-EAGLE head>
    --neural draft_model --parallel-drafting --model <target> --draft <its PARD draft model>
    --neural medusa --model lmsys/vicuna-7b-v1.3 --draft FasterDecoding/medusa-vicuna-7b-v1.3  (vLLM <= 0.32)

A DFlash head drafts a block of its own length: give ``--spec-tokens`` its block size.
``--executor ray`` runs the three engines on vLLM's Ray executor (``pip install ray``; a local cluster
is started), ``--tensor-parallel-size N`` across N GPUs: the plugin, its options and the stats file
must reach every worker (vLLM's CPU build refuses Ray, so this is where Ray is checked).
About 3-5 minutes on one H100/H200 with an 8B model (three engine builds, CUDA graphs off).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the neural methods specplug.hybrid overlays in vLLM (adapters/vllm/_neural.py)
NEURAL_METHODS = ("mtp", "eagle", "eagle3", "draft_model", "dflash", "medusa")
NEAR_TIE = 0.02  # nats between the top two tokens: a flip there is numerics, not the drafter


def load_prompts(count: int) -> list[list[dict[str, str]]]:
    """The code-edit prompt set's first ``count`` user turns (shipped with specplug's lab)."""
    from specplug.lab.bench._tracegen import first_user_turns

    return first_user_turns("code-edit", count)


def run(args, chats, speculative: dict | None, additional: dict | None, *, top2: bool = False) -> dict:
    from vllm import LLM, SamplingParams

    llm = LLM(model=args.model, max_model_len=args.max_model_len, enforce_eager=True, seed=0,
              gpu_memory_utilization=args.gpu_memory_utilization, disable_log_stats=False,
              tensor_parallel_size=args.tensor_parallel_size, distributed_executor_backend=args.executor,
              speculative_config=speculative, additional_config=additional or {})
    params = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, logprobs=2 if top2 else None)
    llm.chat(chats[:1], params, use_tqdm=False)  # warm-up
    before = spec_counts(llm)
    began = time.perf_counter()
    outputs = llm.chat(chats, params, use_tqdm=False)
    elapsed = time.perf_counter() - began
    # this run's counts: every engine of the process counts into one registry
    metrics = {name: value - before.get(name, 0.0) for name, value in spec_counts(llm).items()}
    tokens = [list(output.outputs[0].token_ids) for output in outputs]
    gaps = None
    if top2:
        gaps = [[_gap(position) for position in output.outputs[0].logprobs] for output in outputs]
    llm.llm_engine.engine_core.shutdown()
    del llm
    gc.collect()
    return {"tokens": tokens, "gaps": gaps, "tok_s": sum(map(len, tokens)) / elapsed, "metrics": metrics}


def spec_counts(llm) -> dict[str, float]:
    """vLLM's spec-decode counters, summed over the series of the process's registry."""
    counts: dict[str, float] = {}
    for metric in llm.get_metrics():
        if metric.name.startswith("vllm:spec_decode") and hasattr(metric, "value"):
            counts[metric.name] = counts.get(metric.name, 0.0) + float(metric.value)
    return counts


def _gap(position: dict) -> float:
    values = sorted((item.logprob for item in position.values()), reverse=True)
    return values[0] - values[1] if len(values) > 1 else float("inf")


def divergences(reference: dict, other: dict) -> list[str]:
    """Prompts whose output differs from the reference other than at a near-tie."""
    problems = []
    for index, (expected, got) in enumerate(zip(reference["tokens"], other["tokens"])):
        if expected == got:
            continue
        position = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
        gap = reference["gaps"][index][position] if position < len(reference["gaps"][index]) else float("inf")
        if gap >= NEAR_TIE:
            problems.append(f"prompt {index}: token {position} differs (top-2 gap {gap:.3f})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="target model (path or hub id, available locally)")
    parser.add_argument("--neural", choices=list(NEURAL_METHODS), required=True)
    parser.add_argument("--draft", help="the head or draft model (path or hub id); none for MTP")
    parser.add_argument("--parallel-drafting", action="store_true",
                        help="vLLM's parallel_drafting (P-EAGLE on eagle/eagle3, PARD on draft_model)")
    parser.add_argument("--spec-tokens", type=int, default=4)
    parser.add_argument("--lookup", default="suffix", help="specplug lookup method of the hybrid")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.85)
    parser.add_argument("--executor", choices=["mp", "ray"], help="vLLM's distributed_executor_backend (default: vLLM's choice)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    args = parser.parse_args(argv)
    if args.neural != "mtp" and not args.draft:
        parser.error(f"--neural {args.neural} needs --draft (the head's weights)")

    chats = load_prompts(args.prompts)
    neural = {"method": args.neural, "num_speculative_tokens": args.spec_tokens}
    if args.parallel_drafting:
        neural["parallel_drafting"] = True
    if args.draft:
        neural["model"] = args.draft
    # one stats file per worker process: under tensor parallelism every rank writes its own
    stats_dir = Path(tempfile.mkdtemp())
    stats = stats_dir / "hybrid-stats-{pid}.json"
    hybrid = {**neural, "method": "specplug.hybrid", "neural": args.neural, "lookup": args.lookup}

    plain = run(args, chats, None, None, top2=True)
    alone = run(args, chats, neural, None)
    mixed = run(args, chats, hybrid, {"specplug": {"stats_file": str(stats), "stats_interval": 0}})

    reports = [json.loads(path.read_text()) for path in sorted(stats_dir.glob("hybrid-stats-*.json"))]
    report = reports[0] if reports else {}
    print(json.dumps({
        "tok_s": {"none": plain["tok_s"], args.neural: alone["tok_s"], "specplug.hybrid": mixed["tok_s"]},
        "metrics": {args.neural: alone["metrics"], "specplug.hybrid": mixed["metrics"]},
        "specplug_counters": report.get("counters"),
        "overlay_steps": report.get("steps"),
    }, indent=1))
    problems = divergences(plain, mixed) + [f"{args.neural} alone: {p}" for p in divergences(plain, alone)]
    if not report.get("steps"):
        problems.append("the hybrid overlay never ran (no stats steps): is the plugin installed?")
    if len(reports) != args.tensor_parallel_size:
        problems.append(f"{len(reports)} stats files for {args.tensor_parallel_size} ranks: the options did not reach every worker")
    choices = [{key: value for key, value in r.get("counters", {}).items() if key.startswith(("neural_pass.", "drafts."))}
               for r in reports]
    if any(choice != choices[0] for choice in choices):
        problems.append(f"the ranks chose differently: {choices}")
    if not mixed["metrics"].get("vllm:spec_decode_num_accepted_tokens"):
        problems.append("specplug.hybrid: no draft token was accepted")
    for problem in problems:
        print("FAIL:", problem, file=sys.stderr)
    print("OK" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
