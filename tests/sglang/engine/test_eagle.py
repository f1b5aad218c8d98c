"""SPECPLUG_HYBRID_EAGLE and SPECPLUG_ADAPTIVE_EAGLE through ``sglang.Engine`` on this CPU: SGLang's
own EAGLE worker with a random-weight head (tests/sglang/engine/eagle_head.py), the method's lookup
drafts overlaid on the head's (for adaptive the head is one more candidate). The head's drafts are near-random, so what gets accepted is the lookup's: greedy output
identical to no speculation, drafted tokens accepted, both sources counted in the stats file."""

from __future__ import annotations

import pytest

from specplug.engine import read_stats
from specplug_adapters.sglang import OPTIONS_ENV, STATS_FILE_ENV, STATS_INTERVAL_ENV
from tests.sglang.engine.conftest import generate, start_engine, stop_engine
from tests.sglang.engine.eagle_head import make_sglang_eagle_head


@pytest.mark.parametrize("algorithm", ["SPECPLUG_HYBRID_EAGLE", "SPECPLUG_ADAPTIVE_EAGLE"])
def test_a_method_over_eagle_is_identical_to_plain_decoding_with_lookup_drafts_accepted(
    sglang, model_dir, plain, monkeypatch, tmp_path, algorithm
):
    head = make_sglang_eagle_head(model_dir, tmp_path / "eagle-head")
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    monkeypatch.setenv(STATS_FILE_ENV, str(tmp_path / "stats-{pid}.json"))
    monkeypatch.setenv(STATS_INTERVAL_ENV, "0")
    engine = start_engine(
        model_dir,
        speculative_algorithm=algorithm,
        speculative_draft_model_path=str(head),
        speculative_num_steps=3,
    )
    try:
        outputs = generate(engine)
    finally:
        stop_engine(engine)
    assert [out["text"] for out in outputs] == [out["text"] for out in plain]
    metas = [out["meta_info"] for out in outputs]
    assert all(meta["spec_verify_ct"] > 0 for meta in metas), metas
    # the first prompt's answer copies its lines: the lookup drafts them and SGLang accepts them
    assert metas[0]["spec_num_correct_drafts"] > 0, metas
    assert metas[0]["completion_tokens"] > metas[0]["spec_verify_ct"], metas
    [stats_file] = tmp_path.glob("stats-*.json")  # one scheduler process
    stats = read_stats(stats_file)
    assert stats["method"] == algorithm and stats["num_draft_tokens"] == 4, stats
    counters = stats["counters"]
    assert counters.get("faults", 0) == 0, counters
    # both sources reached the method, and its lookup drafts went to SGLang's verify in the head's place
    assert counters["drafts.eagle"] > 0 and counters["drafts.suffix"] > 0, counters
    assert counters["overlaid_rows"] > 0, counters
