"""``specplug perf --batch``: a smoke run (tiny sizes; the figures themselves are in docs/performance.md)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from specplug.cli import build_app
from specplug.cli._perf import BATCH_COLUMNS

SMALL = ["perf", "--batch", "1,5", "--contexts", "256", "--steps", "4", "--repeats", "1", "--workloads", "code-edit"]


def test_perf_batch_json_has_every_method_beside_vllm_at_every_batch():
    result = CliRunner().invoke(build_app(), [*SMALL, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert {(row["proposer"], row["batch"]) for row in rows} == {
        (name, batch) for name in ("ngram", "suffix", "hybrid", "adaptive", "vllm-ngram") for batch in (1, 5)
    } | {("ngram/requests", 1), ("suffix/requests", 1)}  # at batch 1, the lookups through the per-request API too
    for row in rows:
        assert row["median_us"] > 0 and row["steps"] == 4
        assert abs(row["per_row_us"] * row["batch"] - row["median_us"]) < 1e-6
        assert (row["ratio_to_vllm"] is None) == (row["proposer"] == "vllm-ngram")


def test_perf_batch_table_prints_the_columns():
    result = CliRunner().invoke(build_app(), [*SMALL, "--methods", "ngram,suffix", "--peers", ""])
    assert result.exit_code == 0, result.output
    for column in BATCH_COLUMNS:
        assert column.split()[0] in result.output


def test_perf_batch_bad_sizes_are_one_clear_error():
    result = CliRunner().invoke(build_app(), ["perf", "--batch", "1,0", "--peers", ""])
    assert result.exit_code != 0
    assert "--batch '1,0'" in str(result.exception) or "--batch '1,0'" in result.output



def test_perf_batch_gives_each_repeats_ratio_to_suffix_and_prints_their_range(tmp_path):
    out = tmp_path / "perf.json"
    two = ["perf", "--batch", "1,5", "--contexts", "256", "--steps", "4", "--repeats", "2", "--workloads", "code-edit",
           "--methods", "suffix,ngram", "--peers", "", "--json-out", str(out)]
    result = CliRunner().invoke(build_app(), two)
    assert result.exit_code == 0, result.output
    rows = {(row["proposer"], row["batch"]): row for row in json.loads(out.read_text())["rows"]}
    for batch in (1, 5):
        ngram, suffix = rows[("ngram", batch)], rows[("suffix", batch)]
        assert suffix["suffix_ratios"] is None and suffix["ratio_to_suffix"] is None
        ratios = ngram["suffix_ratios"]
        assert len(ratios) == 2 and all(ratio > 0 for ratio in ratios)
        # the table's "× suffix" cell: the ratio of the medians, then the range within a repeat
        cell = f"{ngram['ratio_to_suffix']:.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        assert cell in result.output


def test_perf_batch_interleaved_steps_every_subject_as_often_and_says_so(tmp_path):
    out = tmp_path / "perf.json"
    args = [*SMALL, "--methods", "suffix,adaptive", "--peers", "", "--interleave", "--json-out", str(out)]
    result = CliRunner().invoke(build_app(), args)
    assert result.exit_code == 0, result.output
    assert "interleaved" in result.output
    data = json.loads(out.read_text())
    assert data["interleaved"] is True
    rows = {(row["proposer"], row["batch"]): row for row in data["rows"]}
    assert set(rows) == {(name, batch) for name in ("suffix", "adaptive") for batch in (1, 5)} | {("suffix/requests", 1)}
    for row in rows.values():
        assert row["steps"] == 4 and row["median_us"] > 0
    # the same rows, so the same acceptance whichever order the lookups stepped in
    assert rows[("suffix", 1)]["accepted_per_row_step"] == rows[("suffix/requests", 1)]["accepted_per_row_step"]


def test_perf_interleave_without_batch_is_one_clear_error():
    result = CliRunner().invoke(build_app(), ["perf", "--interleave", "--peers", ""])
    assert result.exit_code != 0
    assert "--interleave" in (str(result.exception) + result.output)
