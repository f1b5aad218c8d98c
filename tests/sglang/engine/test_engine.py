"""Each SPECPLUG_* algorithm through ``sglang.Engine`` on this CPU: greedy output identical to no
speculation, with drafts verified and accepted (SGLang's own ``spec_*`` counters). SGLang's default
``--speculative-ngram-max-bfs-breadth`` (10) applies, so SPECPLUG_SUFFIX sends real draft trees
(counted in the scheduler's stats file)."""

from __future__ import annotations

import json

import pytest

from specplug.engine import read_stats
from specplug_adapters.sglang import OPTIONS_ENV, STATS_FILE_ENV, STATS_INTERVAL_ENV
from tests.sglang.engine.conftest import generate, start_engine, stop_engine

#: per algorithm, its JSON options (hybrid takes a lookup where a GPU would give it the model's head)
CASES = {
    "SPECPLUG_NGRAM": {},
    "SPECPLUG_SUFFIX": {},
    "SPECPLUG_ADAPTIVE": {},
    "SPECPLUG_HYBRID": {"neural": "ngram"},
}


@pytest.mark.parametrize("algorithm", sorted(CASES))
def test_output_is_identical_to_plain_decoding_with_drafts_accepted(
    sglang, model_dir, plain, monkeypatch, tmp_path, algorithm
):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps(CASES[algorithm]))
    monkeypatch.setenv(STATS_FILE_ENV, str(tmp_path / "stats-{pid}.json"))
    monkeypatch.setenv(STATS_INTERVAL_ENV, "0")
    engine = start_engine(model_dir, speculative_algorithm=algorithm, speculative_num_draft_tokens=6)
    try:
        outputs = generate(engine)
    finally:
        stop_engine(engine)
    assert [out["text"] for out in outputs] == [out["text"] for out in plain]
    for out in outputs:
        meta = out["meta_info"]
        assert meta["spec_verify_ct"] > 0, meta
        # every verify step yields one token of the target's own; more tokens than steps were drafts accepted
        assert meta["completion_tokens"] > meta["spec_verify_ct"], meta
        assert meta["spec_num_correct_drafts"] > 0, meta
    [stats_file] = tmp_path.glob("stats-*.json")  # one scheduler process
    stats = read_stats(stats_file)
    assert stats["method"] == algorithm and stats["max_branches"] == 10, stats
    counters = stats["counters"]
    assert counters.get("faults", 0) == 0 and counters["draft_tokens"] > 0, counters
    if algorithm == "SPECPLUG_SUFFIX":  # suffix has alternatives: real trees went to SGLang's verify
        assert counters["tree_drafts"] > 0, counters
