#!/usr/bin/env python3
"""Check and benchmark the SGLang adapter: the same greedy prompts with no speculation, SGLang's own
NGRAM, and specplug's algorithms, in one run.

    python scripts/gpu_check_sglang.py --model Qwen/Qwen3-0.6B                    # a GPU machine
    .venv-sglang/bin/python scripts/gpu_check_sglang.py --device cpu \\
        --model .models/smollm2-135m-fp32 --prompts 4 --tokens 96                 # this CPU (test harness)

The prompts are the first user turns of the shipped code-edit prompt set (specplug.lab). For each
configuration it prints tokens/s (wall time of the whole set, after a warm-up request), SGLang's
acceptance counters (drafts proposed and accepted, mean accepted length) and whether every output
equals the plain run token for token. ``--device cpu`` puts tests/sglang/harness (test code: a
stand-in sgl_kernel and the torch-native TARGET_VERIFY branch) on the path first. Exit status 1
when an output differs; 2 when SGLang is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALGORITHMS = [None, "NGRAM", "SPECPLUG_SUFFIX", "SPECPLUG_ADAPTIVE"]


def _prompts(model: str, count: int) -> list[str]:
    from transformers import AutoTokenizer

    from specplug.lab.bench._tracegen import first_user_turns

    tokenizer = AutoTokenizer.from_pretrained(model)
    return [tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
            for chat in first_user_turns("code-edit", count)]


def _engine_args(device: str, width: int) -> dict:
    if device == "cpu":
        return {"device": "cpu", "attention_backend": "torch_native", "dtype": "float32", "mem_fraction_static": 0.3,
                "max_total_tokens": 8192, "max_running_requests": 4, "disable_cuda_graph": True,
                "grammar_backend": "none", "log_level": "warning"}
    return {"log_level": "warning"}


def _run(model: str, algorithm: str | None, prompts: list[str], tokens: int, device: str, width: int) -> dict:
    import sglang

    spec = {"speculative_algorithm": algorithm, "speculative_num_draft_tokens": width} if algorithm else {}
    engine = sglang.Engine(model_path=model, **_engine_args(device, width), **spec)
    try:
        params = {"temperature": 0, "max_new_tokens": tokens}
        engine.generate(prompts[:1], dict(params, max_new_tokens=8))  # warm-up
        started = time.perf_counter()
        outputs = [engine.generate(prompt, dict(params)) for prompt in prompts]  # one stream at a time
        elapsed = time.perf_counter() - started
    finally:
        engine.shutdown()
    metas = [out["meta_info"] for out in outputs]
    generated = sum(meta["completion_tokens"] for meta in metas)
    verify = sum(meta.get("spec_verify_ct", 0) for meta in metas)
    return {
        "algorithm": algorithm or "plain",
        "tokens_per_s": round(generated / elapsed, 2),
        "generated": generated,
        "verify_steps": verify,
        "proposed": sum(meta.get("spec_num_proposed_drafts", 0) for meta in metas),
        "accepted": sum(meta.get("spec_num_correct_drafts", 0) for meta in metas),
        "tokens_per_step": round(generated / verify, 2) if verify else None,
        "texts": [out["text"] for out in outputs],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--width", type=int, default=8, help="--speculative-num-draft-tokens")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.device == "cpu":
        harness = str(ROOT / "tests" / "sglang" / "harness")
        sys.path.insert(0, harness)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [harness, os.environ.get("PYTHONPATH")]))
        os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
    try:
        import sglang  # noqa: F401
    except ImportError as error:
        print(f"SGLang is not importable ({error}); run scripts/setup_sglang.sh", file=sys.stderr)
        return 2
    prompts = _prompts(args.model, args.prompts)
    results = [_run(args.model, algorithm, prompts, args.tokens, args.device, args.width) for algorithm in ALGORITHMS]
    plain = results[0]["texts"]
    status = 0
    print(f"{'algorithm':<20}{'tokens/s':>10}{'speedup':>9}{'tok/step':>10}{'accepted':>10}{'proposed':>10}  output")
    for result in results:
        same = result["texts"] == plain
        status |= 0 if same else 1
        speedup = result["tokens_per_s"] / results[0]["tokens_per_s"]
        print(f"{result['algorithm']:<20}{result['tokens_per_s']:>10}{speedup:>8.2f}x{result['tokens_per_step'] or '-':>10}"
              f"{result['accepted']:>10}{result['proposed']:>10}  {'identical' if same else 'DIFFERS'}")
    if args.json:
        from specplug._outputs import write_text_atomic

        write_text_atomic(args.json, json.dumps([{k: v for k, v in r.items() if k != "texts"} for r in results], indent=1))
    return status


if __name__ == "__main__":
    sys.exit(main())
