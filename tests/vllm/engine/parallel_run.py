"""One offline vLLM run under tensor parallelism, in its own process (vLLM spawns a worker per rank, so the
script needs its ``__main__`` guard): ``python -m tests.vllm.engine.parallel_run MODEL JSON`` prints one JSON
line with each prompt's greedy token ids and vLLM's spec-decode counters.

JSON: ``{"tensor_parallel_size": 2, "speculative_config": {...} or null, "additional_config": {...},
"prompts": [[ids], ...], "max_tokens": N, "extra_args": [{...} or null, ...]}`` (``extra_args``: optional, a
request's ``SamplingParams.extra_args`` per prompt)."""

from __future__ import annotations

import json
import sys


def main(model: str, spec: dict) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    llm = LLM(model=model, dtype="float32", enforce_eager=True, max_model_len=1024, max_num_seqs=4, seed=0,
              tensor_parallel_size=spec.get("tensor_parallel_size", 1), disable_log_stats=False,
              speculative_config=spec.get("speculative_config"), additional_config=spec.get("additional_config") or {})
    extra_args = spec.get("extra_args") or [None] * len(spec["prompts"])
    params = [SamplingParams(temperature=0.0, max_tokens=spec["max_tokens"], ignore_eos=True, extra_args=extra)
              for extra in extra_args]
    outputs = llm.generate([TokensPrompt(prompt_token_ids=ids) for ids in spec["prompts"]], params, use_tqdm=False)
    metrics: dict[str, float] = {}
    for metric in llm.get_metrics():
        if metric.name.startswith("vllm:spec_decode") and hasattr(metric, "value"):
            metrics[metric.name.removeprefix("vllm:")] = metrics.get(metric.name.removeprefix("vllm:"), 0.0) + float(metric.value)
    result = {"tokens": [list(output.outputs[0].token_ids) for output in outputs], "metrics": metrics}
    llm.llm_engine.engine_core.shutdown()
    return result


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(sys.argv[1], json.loads(sys.argv[2]))), flush=True)
