"""The sampling interval of a gap between two methods: per-request times that add up to the cell's
figures, a paired bootstrap over them, and the engine-rules report that prints and tallies it."""

from __future__ import annotations

import json
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from specplug.cost import cost_model
from specplug.lab.bench import parse_method, run_benchmark
from specplug.lab.bench._noise import ratio_interval, speedup_of
from specplug.lab.bench._replay import StepLog, modeled_times
from specplug.lab.bench._result import BenchResult
from specplug.lab.bench._rules_report import batch_tables, misses
from specplug.lab.specdecode import read_specdecode
from specplug.lab.trace import TraceRecord

COST = cost_model("llama-3.1-8b-h100")


def _log(steps: list[tuple[int, int, int]]) -> StepLog:
    """(context, drafted, accepted) per step; every drafting step charged as a lookup."""
    context, drafted, accepted = (np.array(column, dtype=np.int64) for column in zip(*steps))
    return StepLog(context, drafted, accepted, (drafted > 0).astype(np.int64), np.zeros(len(steps)))


def test_request_times_add_up_to_the_cells_totals_to_the_bit():
    logs = [_log([(100, 4, 3), (104, 4, 0), (105, 0, 0)]), _log([(50, 8, 8), (59, 8, 2)]), _log([(7, 2, 1)])]
    for batch in (1, 128):
        speedup, per_request = speedup_of(logs, COST, batch)
        plain, spec = modeled_times(logs, COST, batch)
        assert speedup == plain / spec  # the cell's figure, as before the split
        assert per_request.shape == (3, 2)
        assert np.allclose(per_request.sum(axis=0), (plain, spec), rtol=1e-12)
        # each request's share is its own steps' time
        alone = np.array([modeled_times([log], COST, batch) for log in logs])
        assert np.allclose(per_request, alone, rtol=1e-12)


def test_equal_methods_have_a_point_interval_and_a_uniform_gap_keeps_its_ratio():
    rng = np.random.default_rng(3)
    plain = rng.uniform(1.0, 5.0, 6)
    bar = np.column_stack([plain, plain / 2.0])  # 2x on every request
    assert ratio_interval(bar, bar) == (1.0, 1.0)
    faster = np.column_stack([plain, plain / 2.5])  # 2.5x on every request: 1.25x the bar whatever is drawn
    low, high = ratio_interval(faster, bar)
    assert np.isclose(low, 1.25) and np.isclose(high, 1.25)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(1.0, 100.0), st.floats(1.1, 4.0), st.floats(1.1, 4.0)), min_size=2, max_size=12))
def test_the_interval_brackets_every_requests_own_ratio_range(rows):
    plain = np.array([row[0] for row in rows])
    mine = np.column_stack([plain, plain / np.array([row[1] for row in rows])])
    bar = np.column_stack([plain, plain / np.array([row[2] for row in rows])])
    low, high = ratio_interval(mine, bar)
    # a resample's ratio is a weighted mean of time ratios: never outside the requests' own extremes
    own = bar[:, 1] / mine[:, 1]
    assert own.min() - 1e-9 <= low <= high <= own.max() + 1e-9
    assert ratio_interval(mine, bar) == (low, high)  # seeded: the same report twice


def test_no_interval_for_rows_over_different_requests_or_a_single_one():
    two = np.ones((2, 2))
    assert ratio_interval(two, np.ones((3, 2))) is None
    assert ratio_interval(np.ones((1, 2)), np.ones((1, 2))) is None


def _records(folder) -> list[TraceRecord]:
    """Six requests of one workload in SpecDecode-Bench's layout: a repeating text and a head
    that is right for a few tokens at each position, more on some requests than on others."""
    lines = []
    for index in range(6):
        output = [5, 6, 7, 8, 9, 10, 11, 12] * (3 + index % 3)
        lines.append(json.dumps({
            "id": index, "prompt_token_ids": [1, 2, 3], "generated_token_ids": output,
            "acc_eagle": {"acc_len": [1 + index % 4] * len(output)}, "acc_ngram": {"acc_len": [1] * len(output)},
        }))  # fmt: skip
    (folder / "combined_w.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [record.model_copy(update={"neural": record.neural_head}) for record in read_specdecode([folder])]


def test_the_report_prints_each_misss_interval_and_tallies_the_ones_it_keeps(tmp_path):
    methods = [parse_method(spec) for spec in ("suffix", "neural", "hybrid", "adaptive:candidates=suffix+neural")]
    result = run_benchmark(_records(tmp_path), methods, COST, batch_sizes=[1], engine_runs=False)
    suffix = result.row("w", "suffix")
    assert suffix.request_times[1].shape == (6, 2)
    # hybrid made to lose on every request: a miss the resamples keep
    hybrid = result.row("w", "hybrid")
    hybrid.request_times[1] = suffix.request_times[1] * np.array([1.0, 1.2])
    hybrid.speedup[1] = suffix.speedup[1] / 1.2
    (line,) = [miss for miss in misses(result, 1, "w") if miss.startswith("hybrid") and "< suffix" in miss]
    assert "x0.833" in line and "over resampled requests, 90% within x0.833 to x0.833" in line
    text = batch_tables(result)
    assert "Of them, beyond the sampling noise" in text
    # the tally counts it (and adaptive's own misses, if any, are counted alike)
    (kept,) = re.findall(r"Of them, beyond the sampling noise \(.*\): (\d+)\.", text)
    assert int(kept) >= 1
    # a loss on one request of six: a miss in the cell, not in every resample
    hybrid.request_times[1] = suffix.request_times[1] * np.array([[1.0, 1.5], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0],
                                                                  [1.0, 1.0], [1.0, 0.95]])
    hybrid.speedup[1] = float(hybrid.request_times[1][:, 0].sum() / hybrid.request_times[1][:, 1].sum())
    (line,) = [miss for miss in misses(result, 1, "w") if miss.startswith("hybrid") and "< suffix" in miss]
    high = float(line.rsplit(" to x", 1)[1].rstrip(")"))
    assert high > 0.99
    (again_kept,) = re.findall(r"Of them, beyond the sampling noise \(.*\): (\d+)\.", batch_tables(result))
    assert int(again_kept) == int(kept) - 1
    # request times stay out of the JSON, which reads back as it did
    data = result.to_json()
    assert all("request_times" not in row for row in data["rows"])
    again = BenchResult.from_json(json.loads(json.dumps(data)))
    assert again.row("w", "suffix").speedup == suffix.speedup and again.row("w", "suffix").request_times == {}
