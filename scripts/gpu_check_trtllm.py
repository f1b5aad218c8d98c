#!/usr/bin/env python3
"""GPU check of the TensorRT-LLM adapter (a machine with TensorRT-LLM and an NVIDIA GPU).

    python scripts/gpu_check_trtllm.py --model Qwen/Qwen3-0.6B [--mtp-model deepseek-ai/...] [--tokens 128]

Runs the same greedy prompts with: no speculation; native NGram (presets/trtllm/ngram.yaml);
native MTP + sa_config (mtp-sa.yaml, only with --mtp-model, a model with MTP layers); and the
specplug methods as the user-provided drafter (suffix, ngram, adaptive). For each it prints
tokens/s, the drafter's counters where specplug drafted, and whether every output equals the
plain run token for token. Exit status 1 when an output differs; 2 when TensorRT-LLM is missing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = [
    "Rewrite this function with type hints:\ndef add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n",
    "List the numbers from 1 to 40, one per line.",
    "Repeat this sentence three times: the quick brown fox jumps over the lazy dog.",
    "Explain what a suffix automaton is in two paragraphs.",
]


def _preset(name: str) -> dict:
    import yaml

    return yaml.safe_load((ROOT / "presets" / "trtllm" / f"{name}.yaml").read_text())["speculative_config"]


def _run(model: str, spec, tokens: int, **llm_kwargs):
    from tensorrt_llm import LLM, SamplingParams

    llm = LLM(model=model, speculative_config=spec, **llm_kwargs)
    params = SamplingParams(max_tokens=tokens, temperature=0.0)
    llm.generate(PROMPTS[:1], params)  # warm-up (CUDA graphs, numba)
    began = time.perf_counter()
    outputs = llm.generate(PROMPTS, params)
    elapsed = time.perf_counter() - began
    ids = [list(output.outputs[0].token_ids) for output in outputs]
    llm.shutdown()
    return ids, sum(len(row) for row in ids) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--mtp-model", default=None, help="a model with MTP layers, for the MTP + sa_config run")
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    try:
        import tensorrt_llm  # noqa: F401
    except Exception as error:  # noqa: BLE001
        from specplug_adapters.trtllm import INSTALL_HINT

        print(f"gpu_check_trtllm: {INSTALL_HINT} ({type(error).__name__}: {error})", file=sys.stderr)
        return 2
    from specplug_adapters.trtllm import installed_trtllm_version, speculative_config_dict

    print(f"TensorRT-LLM {installed_trtllm_version()}, model {args.model}, {args.tokens} tokens x {len(PROMPTS)} prompts, greedy")
    plain, plain_tps = _run(args.model, None, args.tokens)
    print(f"{'plain':<28} {plain_tps:8.1f} tok/s")
    runs = [("native NGram (preset)", args.model, lambda: _preset("ngram"))]
    if args.mtp_model:
        runs.append(("native MTP + sa_config", args.mtp_model, lambda: _preset("mtp-sa")))
    for method in ("suffix", "ngram", "adaptive"):
        runs.append((f"specplug {method}", args.model, lambda m=method: speculative_config_dict(m, max_draft_len=8)))
    failed = False
    for label, model, spec_of in runs:
        spec = spec_of()
        reference = plain if model == args.model else _run(model, None, args.tokens)[0]
        ids, tps = _run(model, spec, args.tokens, disable_overlap_scheduler=isinstance(spec, dict) and "drafter" in spec)
        same = sum(a == b for a, b in zip(ids, reference))
        failed |= same != len(reference)
        counters = dict(spec["drafter"].counters) if isinstance(spec, dict) and "drafter" in spec else {}
        print(f"{label:<28} {tps:8.1f} tok/s  {tps / plain_tps if model == args.model else float('nan'):5.2f}x  "
              f"identical {same}/{len(reference)}  {counters or ''}")  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
