"""The tokens/step bound of any lookup proposer (``specplug bench --lookup-bound``) holds above suffix's replay."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import specplug
from specplug.cli._app import build_app
from specplug.cost import cost_model
from specplug.lab.bench import _lookup_bound as lookup_bound
from specplug.lab.bench import default_traces, parse_method, run_benchmark
from specplug.lab.trace import TraceRecord, read_traces


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


def test_bad_variant_or_draft_length_is_one_clear_error():
    record = _record("a", [1], [2, 3])
    with pytest.raises(ValueError, match="'everything' is not one of local, \\+outputs, \\+all"):
        lookup_bound.bound([record], 8, "everything")
    with pytest.raises(ValueError, match="k must be >= 1"):
        lookup_bound.bound([record], 0, "local")


def test_the_bench_option_prints_one_row_per_workload_and_draft_length(tmp_path):
    path = next(p for p in default_traces() if p.name == "code-edit.jsonl")
    out = tmp_path / "bound.md"
    result = CliRunner().invoke(build_app(), ["bench", str(path), "--lookup-bound", "5,8", "--markdown", str(out)])
    assert result.exit_code == 0, result.output
    rows = [line for line in out.read_text().splitlines() if line.startswith("| code-edit |")]
    assert [row.split("|")[2].strip() for row in rows] == ["5", "8"]
    # a longer draft never lowers the bound, and more seen text never lowers it either
    five, eight = ([float(cell) for cell in row.split("|")[3:8]] for row in rows)
    assert all(b >= a for a, b in zip(five, eight))
    assert five[1] >= five[0] and five[2] >= five[1]


def test_the_bench_option_rejects_a_bad_draft_length():
    result = CliRunner().invoke(build_app(), ["bench", "--lookup-bound", "5,x"])
    assert result.exit_code != 0
    assert "--lookup-bound '5,x'" in str(result.exception or result.output)
