"""A drafter that raises inside vLLM costs those steps their drafts; every request completes.

The faulty drafter also runs with the plugin switched off in vLLM's processes, through vLLM's
own ``custom_class`` path: the drafter needs no plugin.
"""

from __future__ import annotations

from specplug_adapters.vllm import read_stats
from tests.vllm.engine.conftest import assert_same_output, engine, generate


def test_faults_cost_drafts_not_requests(plain, chats, stats_path, monkeypatch):
    monkeypatch.setenv("SPECPLUG_VLLM_PLUGIN", "0")  # read by vLLM's engine and worker processes
    speculative = {"model": "tests.vllm.engine.faulty.FaultyDrafter", "num_speculative_tokens": 6}
    extra = {"specplug": {"method": "suffix", "stats_file": str(stats_path), "stats_interval": 0}}
    with engine(speculative, extra, in_process=False) as llm:  # the plugin is loaded in this process
        assert llm.llm_engine.vllm_config.speculative_config.method == "custom_class"
        run = generate(llm, chats)
    assert all(len(tokens) > 0 for tokens in run.tokens)  # every request completed
    assert_same_output(plain, run, "faulty drafter")
    stats = read_stats(stats_path)
    assert stats["vllm_plugin"] == []  # the worker ran without the plugin
    assert stats["counters"]["faults"] > 0, stats
    # the other steps still drafted, and vLLM accepted some of those drafts
    assert stats["counters"]["drafts.suffix"] > 0
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
