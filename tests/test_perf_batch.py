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
