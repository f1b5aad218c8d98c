"""scripts/lookup_bound.py: the tokens/step bound of any lookup proposer holds above suffix and vLLM-style replays."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

import specplug
from specplug.cost import cost_model
from specplug.lab.bench import default_traces, parse_method, run_benchmark
from specplug.lab.trace import TraceRecord, read_traces

_spec = importlib.util.spec_from_file_location("lookup_bound", Path(__file__).parent.parent / "scripts" / "lookup_bound.py")
lookup_bound = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lookup_bound)


def _record(rid: str, prompt: list[int], output: list[int]) -> TraceRecord:
    return TraceRecord(v=1, id=rid, workload="w", prompt_ids=prompt, output_ids=output)


def test_bound_counts_the_longest_seen_span_per_step():
    # output after prefill: 1 2 3 4 | 9 | 1 2 ; the first token (0) comes from prefill
    record = _record("a", [1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 9, 1, 2, 7])
    # k = 8: step 1 drafts 1 2 3 4 (seen) + target's 9; step 2 drafts 1 2 + target's 7 (the last token)
    assert lookup_bound.bound([record], 8, "local") == (8, 2)
    # k = 2: drafts 1 2 (+3), then 4 ("4 9" was never seen; +9), then 1 2 (+7)
    assert lookup_bound.bound([record], 2, "local") == (8, 3)
    # only after a match of >= 2 tokens: "5 0" never occurred, so the first step drafts nothing
    assert lookup_bound.bound([record], 8, "local", anchor=2)[1] > 2


def test_bound_uses_earlier_requests_only_when_asked():
    first = _record("a", [1], [5, 6, 7, 8, 9, 10])
    second = _record("b", [2], [5, 6, 7, 8, 9, 10])
    assert lookup_bound.bound([first, second], 8, "local") == (10, 10)
    assert lookup_bound.bound([first, second], 8, "+outputs") == (10, 6)


@pytest.mark.parametrize("k", [5, 16])
def test_suffix_replay_stays_under_the_bound_on_a_shipped_trace(k):
    path = next(p for p in default_traces() if p.name == "code-edit.jsonl")
    records = read_traces(path)[:4]
    result = run_benchmark(records, [parse_method("suffix")], cost_model("llama-3.1-8b-h100"), k=k,
                           batch_sizes=[1], oracle=False, engine_runs=False)
    tokens, steps = lookup_bound.bound(records, k, "+outputs", anchor=1)
    row = result.row("code-edit", "suffix")
    assert row.tokens == tokens
    assert row.steps >= steps
    assert specplug.create("suffix").options.min_match == 1  # what the anchored bound assumes
