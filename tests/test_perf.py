"""``specplug perf`` runs end to end on small contexts and reports every column (not a timed test).

vLLM's NgramProposer is timed in the same run, so these tests need it (scripts/setup_vllm.sh,
scripts/setup_peers.sh); without it they fail with the setup hint.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from specplug.cli import build_app
from specplug.cli._perf import COLUMNS
from specplug.lab.perf import build_workload, corpus_tokens

SMALL = ["perf", "--contexts", "256,1k", "--steps", "40", "--repeats", "2", "--workloads", "code-edit,text"]


@pytest.fixture(scope="module")
def runner():
    return CliRunner()


def test_perf_json_has_every_figure(runner):
    result = runner.invoke(build_app(), [*SMALL, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    rows = data["rows"]
    assert {(row["proposer"], row["workload"], row["context_tokens"]) for row in rows} == {
        (name, workload, size)
        for name in ("ngram", "suffix", "vllm-ngram")
        for workload in ("code-edit", "text")
        for size in (256, 1024)
    }
    for row in rows:
        assert 0 < row["median_us"] <= row["p90_us"]
        assert row["steps"] == 2 * 40
        assert row["ratio_to_vllm"] > 0
        if row["proposer"] == "vllm-ngram":
            assert row["ratio_to_vllm"] == pytest.approx(1.0)
            assert row["kind"] == "peer" and row["target_us"] is None
        else:
            assert row["kind"] == "method"
            assert row["state_bytes_per_token"] > 0
    suffix = [row for row in rows if row["proposer"] == "suffix"]
    assert all(0 < row["cache_bytes"] <= row["cache_cap_bytes"] for row in suffix)  # the warm-up filled it
    edits = [row for row in rows if row["workload"] == "code-edit"]
    assert all(row["accepted_per_step"] > 0.5 for row in edits)  # re-emitted spans are drafted and accepted
    check = data["cache_cap_check"]
    assert check["within_cap"] and check["peak_bytes"] > check["cap_bytes"] // 4
    assert data["settings"]["targets_us"] == {"8192": 20.0, "65536": 50.0}
    assert data["machine"]["python"]


def test_perf_table_prints_the_columns(runner):
    result = runner.invoke(build_app(), [*SMALL[:5], "--repeats", "1", "--workloads", "text", "--no-cap-check"])
    assert result.exit_code == 0, result.output
    header = result.stdout
    for column in COLUMNS:
        assert column in header
    assert "vllm-ngram" in header and "suffix" in header and "machine:" in header


def test_perf_bad_input_is_one_clear_error(runner):
    result = runner.invoke(build_app(), ["perf", "--contexts", "8q", "--peers", ""])
    assert result.exit_code != 0
    assert "8q" in str(result.exception) or "8q" in result.output
    result = runner.invoke(build_app(), ["perf", "--workloads", "poetry", "--peers", ""])
    assert "poetry" in str(result.exception) or "poetry" in result.output


def test_workloads_are_real_streams_with_repeats():
    code = corpus_tokens("code", 20_000)
    assert len(np.unique(code)) < len(code) // 4  # code repeats its identifiers and punctuation
    first = build_workload("code-edit", 4096, 2000, seed=3)
    again = build_workload("code-edit", 4096, 2000, seed=3)
    assert np.array_equal(first.continuation, again.continuation)  # deterministic in the seed
    assert len(first.context) == 4096 and len(first.continuation) == 2000
    text = build_workload("text", 4096, 500)
    assert not np.array_equal(text.context[:500], code[:500])
