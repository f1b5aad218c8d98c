"""The replay models of TensorRT-LLM's drafters, and tuning on a small slice of the traces."""

from __future__ import annotations

import random

import pytest
import yaml

from specplug_adapters.trtllm import check_model_yaml
from specplug.lab.trtllm._tune import (
    NgramPool,
    SuffixAutomaton,
    load_records,
    render_presets,
    replay_neural_sa,
    split,
    tune,
)


def brute_lookup(tokens, k):
    """The longest suffix seen earlier, and what followed its first occurrence (by brute force)."""
    for length in range(len(tokens) - 1, 0, -1):
        suffix = tokens[len(tokens) - length :]
        for end in range(length - 1, len(tokens) - 1):
            if tokens[end - length + 1 : end + 1] == suffix:
                return length, tokens[end + 1 : end + 1 + k]
    return 0, []


def test_the_suffix_automaton_matches_brute_force():
    rng = random.Random(5)
    for _ in range(30):
        tokens = [rng.randrange(4) for _ in range(rng.randrange(1, 60))]
        sa = SuffixAutomaton()
        for index, token in enumerate(tokens):
            sa.extend(token)
            assert sa.lookup(3) == brute_lookup(tokens[: index + 1], 3)


def test_the_ngram_pool_drafts_the_longest_pattern_s_continuation():
    pool = NgramPool(3, 2)
    assert pool.draft("a", [1, 2, 3, 4, 1, 2], room=3) == [3, 4, 1]
    newest = NgramPool(2, 1, use_oldest=False)
    assert newest.draft("a", [5, 6, 5, 7, 5], room=2) == [7, 5]
    assert NgramPool(2, 1).draft("a", [5, 6, 5, 7, 5], room=2) == [6, 5]
    private = NgramPool(2, 1, public=False)
    private.draft("a", [1, 9, 1], room=2)
    assert private.draft("b", [1], room=2) == []  # another request's pool is not shared


@pytest.fixture(scope="module")
def records():
    short = []
    for record in load_records():
        cut = 48
        short.append(record.model_copy(update={
            "output_ids": record.output_ids[:cut],
            "neural": record.neural.model_copy(update={"accepted": tuple(min(a, 6) for a in record.neural.accepted[:cut])}),
        }))  # fmt: skip
    return short


def test_split_keeps_a_task_s_turns_together_and_covers_every_workload(records):
    tuning, heldout = split(records)
    assert len(tuning) + len(heldout) == len(records)
    tasks = lambda rs: {r.id.rpartition("/turn-")[0] or r.id for r in rs}  # noqa: E731
    assert not tasks(tuning) & tasks(heldout)
    assert {r.workload for r in tuning} == {r.workload for r in heldout} == {r.workload for r in records}


def test_without_sa_config_the_replay_is_the_trace_s_neural_acceptance(records):
    steps = replay_neural_sa(records[:3], 6, None)
    first = records[0]
    assert steps.rows[0][2] == min(first.neural.accepted[1], 6, len(first.output_ids) - 2)
    assert sum(row[2] + 1 for row in steps.rows) == sum(len(r.output_ids) - 1 for r in records[:3])


def test_tune_chooses_on_the_tuning_half_and_renders_valid_presets(records):
    report = tune(records[::4], thresholds=(1, 4))
    assert report.chosen["sa_threshold"] in (1, 4)
    assert min(report.chosen["schedule"]) == 1
    presets = render_presets(report)
    assert set(presets) == {"mtp-sa.yaml", "eagle3-sa.yaml", "pard-sa.yaml", "eagle3-schedule.yaml", "ngram.yaml", "sa.yaml"}
    for name, text in presets.items():
        check_model_yaml(yaml.safe_load(text), name)
        assert text.startswith("# ") and "held-out" in text
    assert "tuning:" in report.table() and "held-out:" in report.table()
