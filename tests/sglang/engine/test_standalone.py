"""SPECPLUG_HYBRID_STANDALONE through ``sglang.Engine`` on this CPU: SGLang's own STANDALONE worker with
the test model drafting for itself, the hybrid's lookup drafts overlaid on the draft model's chains. Greedy
output identical to no speculation, drafted tokens accepted, both sources counted in the stats file."""

from __future__ import annotations

import json

from specplug.engine import read_stats
from specplug_adapters.sglang import OPTIONS_ENV, STATS_FILE_ENV, STATS_INTERVAL_ENV
from tests.sglang.engine.conftest import generate, start_engine, stop_engine


def test_the_hybrid_over_a_draft_model_is_identical_to_plain_decoding_with_both_sources_drafting(
    sglang, model_dir, plain, monkeypatch, tmp_path
):
    # the draft model is the target itself, so its chains would always win a fair choice: the lookup is
    # given the edge wherever it drafts, and the draft model drafts the rest
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"margin": 100.0, "explore": 0.0}))
    monkeypatch.setenv(STATS_FILE_ENV, str(tmp_path / "stats-{pid}.json"))
    monkeypatch.setenv(STATS_INTERVAL_ENV, "0")
    engine = start_engine(
        model_dir,
        speculative_algorithm="SPECPLUG_HYBRID_STANDALONE",
        speculative_draft_model_path=model_dir,
        speculative_num_steps=3,
    )
    try:
        outputs = generate(engine)
    finally:
        stop_engine(engine)
    assert [out["text"] for out in outputs] == [out["text"] for out in plain]
    metas = [out["meta_info"] for out in outputs]
    assert all(meta["spec_verify_ct"] > 0 for meta in metas), metas
    assert all(meta["spec_num_correct_drafts"] > 0 for meta in metas), metas
    assert all(meta["completion_tokens"] > meta["spec_verify_ct"] for meta in metas), metas
    [stats_file] = tmp_path.glob("stats-*.json")  # one scheduler process
    stats = read_stats(stats_file)
    assert stats["method"] == "SPECPLUG_HYBRID_STANDALONE" and stats["num_draft_tokens"] == 4, stats
    counters = stats["counters"]
    assert counters.get("faults", 0) == 0, counters
    # both sources reached the hybrid's choice: the lookup where it matched, the draft model elsewhere
    assert counters["drafts.draft_model"] > 0 and counters["drafts.suffix"] > 0, counters
