"""specplug's lookup methods inside vLLM's CPU engine: output unchanged, drafts accepted."""

from __future__ import annotations

import pytest

import specplug
from specplug_adapters.vllm import read_stats
from tests.vllm.engine.conftest import assert_same_output, engine, generate


@pytest.mark.parametrize(
    ("method", "source", "options"),
    [
        ("suffix", "suffix", {"max_depth": 24}),
        ("ngram", "ngram", {"max_n": 3}),
        ("adaptive", None, {"candidates": ["suffix", "ngram"]}),
    ],
)
def test_greedy_output_unchanged_and_drafts_accepted(plain, chats, stats_path, tmp_path, method, source, options):
    if method == "adaptive":  # what it learnt is written as vLLM's engine process shuts down
        options = {**options, "learnt_state": str(tmp_path / "learnt.npz")}
    # options travel in the speculative config; adapter settings in additional_config
    speculative = {"method": f"specplug.{method}", "num_speculative_tokens": 6, **options}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        run = generate(llm, chats)
    if method == "adaptive":
        assert specplug.create("adaptive", **options)._pooled_drafted.sum() > 0
    assert_same_output(plain, run, f"specplug.{method}")
    # acceptance lands in vLLM's own spec-decode metrics
    assert run.metrics["spec_decode_num_drafts"] > 0, run.metrics
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    assert run.metrics["spec_decode_num_accepted_tokens"] <= run.metrics["spec_decode_num_draft_tokens"]
    # specplug's own counters, exported by the drafter in vLLM's worker process
    stats = read_stats(stats_path)
    counters = stats["counters"]
    assert stats["method"] == method and stats["steps"] > 0
    assert stats["options"] == options  # the options reached the drafter in the worker
    assert {"config", "cli"} <= set(stats["vllm_plugin"])
    assert counters.get("faults", 0) == 0, counters
    drafted = {key: value for key, value in counters.items() if key.startswith("drafts.")}
    assert sum(drafted.values()) > 0, counters
    if source is not None:
        assert drafted.get(f"drafts.{source}", 0) > 0, counters
    # vLLM counts at most what specplug drafted (it may cut drafts to the scheduled K)
    assert run.metrics["spec_decode_num_draft_tokens"] <= counters["draft_tokens"]


def test_bad_options_fail_before_the_engine_starts(vllm_cpu):
    with pytest.raises(specplug.InvalidOptionError, match="unknown option 'max_m'.*max_n"):
        with engine({"method": "specplug.ngram", "num_speculative_tokens": 4, "max_m": 2}):
            pass
    with pytest.raises(specplug.UnknownMethodError, match="specplug.suffix"):
        with engine({"method": "specplug.sufix", "num_speculative_tokens": 4}):
            pass
