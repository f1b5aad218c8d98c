"""``specplug.hybrid`` over vLLM's own neural drafter, in the real V1 model runner.

vLLM's CPU build runs no MTP/EAGLE head here (no small model has one), but it runs a draft
model, the other neural drafter the overlay handles: SmolLM2 drafting for itself. The overlay
then sees vLLM's real ``propose_draft_token_ids`` call (padded batch, drafts as a tensor).
"""

from __future__ import annotations

from specplug_adapters.vllm import read_stats
from tests.vllm._paths import model_dir
from tests.vllm.engine.conftest import assert_same_output, engine, generate


def test_hybrid_over_a_draft_model(plain, chats, stats_path):
    speculative = {"method": "specplug.hybrid", "model": model_dir(), "num_speculative_tokens": 4,
                   "lookup": "suffix"}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        assert llm.llm_engine.vllm_config.speculative_config.method == "draft_model"
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid")
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    stats = read_stats(stats_path)
    counters = stats["counters"]
    assert stats["method"] == "hybrid" and stats["steps"] > 0, stats
    assert "hybrid" in stats["vllm_plugin"]  # the runner was wrapped in the worker process
    assert counters.get("faults", 0) == 0, counters
    # the overlay chose per request: vLLM's draft-model drafts and, where the text repeats, lookups
    assert counters.get("drafts.draft_model", 0) + counters.get("drafts.draft_model+suffix", 0) > 0, counters
    assert sum(value for key, value in counters.items() if key.startswith("drafts.")) > 0
