"""vLLM with ``tensor_parallel_size=2`` on this CPU's two cores (multiprocessing executor, one core a rank):
specplug.adaptive, requests in it naming the suffix method, and the hybrid overlay with costs learnt online give
the plain run's greedy tokens, and every run ends within its timeout (ranks that disagree on the drafter's
collectives would hang).

The model is tests/tiny_llama.py's random Llama (SmolLM2's 9 heads do not split in two)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specplug_adapters.vllm import read_stats
from tests.vllm._paths import ROOT, model_dir

#: per run: vLLM's start with two spawned ranks, on a shared 2-core machine (a hang fails here)
RUN_TIMEOUT_S = 900
PROMPTS = [[100, 101, 102, 103, 104, 105, 106, 107] * 2, [500, 600, 700, 800] * 2 + [500]]
MAX_TOKENS = 32


@pytest.fixture(scope="module")
def tiny_model(vllm_cpu, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("tiny-llama")
    result = subprocess.run(
        [sys.executable, "-c", f"from tests.tiny_llama import tiny_llama; tiny_llama({model_dir()!r}, {str(out)!r})"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return str(out)


def run(model: str, speculative_config: dict | None = None, additional_config: dict | None = None,
        prompts: list[list[int]] = PROMPTS, extra_args: list[dict | None] | None = None) -> dict:
    spec = {"tensor_parallel_size": 2, "prompts": prompts, "max_tokens": MAX_TOKENS, "extra_args": extra_args,
            "speculative_config": speculative_config, "additional_config": additional_config}
    env = {**os.environ, "VLLM_CPU_OMP_THREADS_BIND": "0|1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    try:
        result = subprocess.run([sys.executable, "-m", "tests.vllm.engine.parallel_run", model, json.dumps(spec)],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tensor_parallel_size=2 with {speculative_config} did not finish in {RUN_TIMEOUT_S} s (a hang?)")
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no result (exit {result.returncode}): {result.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("RESULT "))


def each_ranks_counters(folder: Path) -> list[dict]:
    """Each rank's specplug counters (a stats file per worker process)."""
    return [read_stats(path)["counters"] for path in sorted(folder.glob("stats-*.json"))]


@pytest.fixture(scope="module")
def plain(tiny_model) -> dict:
    return run(tiny_model)


def test_lookup_methods_at_tp2_match_plain(tiny_model, plain, tmp_path):
    # specplug.adaptive, and the suffix method alone through the same engine: a request naming suffix
    stats = tmp_path / "stats-{pid}.json"
    out = run(tiny_model, {"method": "specplug.adaptive", "num_speculative_tokens": 4},
              {"specplug": {"stats_file": str(stats), "stats_interval": 0}},
              prompts=PROMPTS * 2, extra_args=[None] * len(PROMPTS) + [{"specplug_method": "suffix"}] * len(PROMPTS))
    assert out["tokens"] == plain["tokens"] * 2
    assert out["metrics"]["spec_decode_num_accepted_tokens"] > 0  # drafts were verified and taken
    ranks = each_ranks_counters(tmp_path)
    assert len(ranks) == 2 and all(counters.get("request_control.method", 0) > 0 for counters in ranks), ranks
    assert all(counters.get("drafts.suffix", 0) > 0 for counters in ranks), ranks


def test_the_hybrid_overlay_with_online_costs_at_tp2_matches_plain(tiny_model, plain, tmp_path):
    stats = tmp_path / "stats-{pid}.json"
    out = run(tiny_model, {"method": "specplug.hybrid", "neural": "draft_model", "model": tiny_model,
                           "num_speculative_tokens": 3},
              {"specplug": {"step_costs": "online", "stats_file": str(stats), "stats_interval": 0}})
    assert out["tokens"] == plain["tokens"]
    assert out["metrics"]["spec_decode_num_drafts"] > 0
    # every rank wrote its counters: the same choices and the same learnt costs (rank 0's times, exchanged)
    ranks = each_ranks_counters(tmp_path)
    assert len(ranks) == 2, ranks
    keys = [key for key in ranks[0] if key.startswith(("neural_pass.", "drafts.", "costs."))]
    assert keys and all(ranks[0][key] == ranks[1].get(key) for key in keys), ranks
