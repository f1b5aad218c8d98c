"""SpecDecode-Bench's profiled data becomes the bench's traces; the bench replays the engine rules,
tunes their knobs on the tune split only, and checks the composites' targets per batch size."""

from __future__ import annotations

import json

import pytest

from specplug._errors import InvalidOptionError
from specplug.cli import main
from specplug.cost import cost_model
from specplug.lab.bench import parse_method, run_benchmark
from specplug.lab.bench._rules import TUNED, load_tuned, save_tuned, tune_rules, tuned_label
from specplug.lab.bench._rules_report import batch_tables, misses
from specplug.lab.bench._split import split_records
from specplug.lab.specdecode import K, read_specdecode, specdecode_files
from specplug.lab.trace import TraceError, read_traces


def _line(ident: object, output: list[int], eagle: list[int], ngram: list[int] | None = None) -> str:
    return json.dumps({
        "id": ident, "prompt_token_ids": [1, 2, 3], "generated_token_ids": output,
        "acc_eagle": {"acc_len": eagle}, "acc_ngram": {"acc_len": ngram or [1] * len(output)},
    })  # fmt: skip


def _cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return exit_info.value.code


def _data(folder, name: str, lines: list[str]):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"combined_{name}.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_acceptance_lengths_become_accepted_tokens_at_the_same_position(tmp_path):
    path = _data(tmp_path / "data" / "llama3.1-8B", "gsm8k", [_line(7, [4, 5, 6, 7], [1, 4, 3, 2], [1, 1, 3, 2])])
    (record,) = read_specdecode([tmp_path])  # a checkout: its data folder is found
    assert record.id == "gsm8k/7" and record.workload == "gsm8k" and record.v == 3
    assert record.neural_head.accepted == (0, 3, 2, 1) and record.neural_head.k == K
    assert record.lookup.accepted == (0, 0, 2, 1)
    assert specdecode_files(path) == [path]


def test_a_request_is_cut_to_the_positions_both_columns_cover(tmp_path):
    _data(tmp_path, "sharegpt", [_line("a", [4, 5, 6, 7, 8], [2, 1, 1]), _line("b", [4, 5], [1, 2, 1, 1])])
    short, long = read_specdecode([tmp_path])
    assert short.output_ids == (4, 5, 6) and short.meta["output_length"] == 5 and short.meta["eagle_length"] == 3
    assert long.output_ids == (4, 5) and long.neural_head.accepted == (0, 1)


@pytest.mark.parametrize(
    ("line", "field", "problem"),
    [
        ('{"id": 1}', "generated_token_ids", "is missing or empty"),
        (_line(1, [4, 5], [1, 0]), "acc_eagle.acc_len", f"item 1 = 0 is not an int in 1..{K + 1}"),
        (json.dumps({"id": 1, "generated_token_ids": [4], "acc_eagle": {"acc_len": [1]}}), "acc_ngram.acc_len", "is missing"),
        ("[1]", "(line)", "must be a JSON object"),
    ],
)
def test_bad_data_names_the_file_line_and_field(tmp_path, line, field, problem):
    path = _data(tmp_path, "cnn", [_line(0, [4], [1]), line])
    with pytest.raises(TraceError) as info:
        read_specdecode([path])
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, field)
    assert problem in str(info.value)


def test_missing_sources_and_repeated_files_are_one_line_errors(tmp_path):
    with pytest.raises(InvalidOptionError, match="no such file or folder"):
        read_specdecode([tmp_path / "nope"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidOptionError, match="no .jsonl files"):
        read_specdecode([tmp_path / "empty"])
    path = _data(tmp_path, "cnn", [_line(0, [4], [1])])
    with pytest.raises(InvalidOptionError, match="appears twice"):
        read_specdecode([path, path])


def test_the_cli_converts_and_the_split_alternates_requests_within_each_dataset(tmp_path, capsys):
    lines = [_line(i, [4, 5, 6], [1, 2, 1]) for i in range(6)]
    _data(tmp_path / "src", "cnn", lines)
    _data(tmp_path / "src", "gsm8k", lines[:3])
    out = tmp_path / "sdb.jsonl"
    assert _cli(["trace", "--specdecode", str(tmp_path / "src"), "--out", str(out)]) == 0
    records = read_traces(out)
    tune = [record.id for record in split_records(records, "tune")]
    validation = [record.id for record in split_records(records, "validation")]
    assert tune == ["cnn/0", "cnn/2", "cnn/4", "gsm8k/0", "gsm8k/2"]
    assert validation == ["cnn/1", "cnn/3", "cnn/5", "gsm8k/1"]
    capsys.readouterr()
    assert _cli(["trace", "--specdecode", str(tmp_path / "src"), "--out", str(out), "--neural-model", "x.gguf"]) == 2
    assert "--specdecode converts recorded data" in capsys.readouterr().err


def _toy(tmp_path):
    """Two workloads: one where the head's drafts are right, one where they never are."""
    good = [_line(i, list(range(100, 160)), [5] * 60) for i in range(4)]
    bad = [_line(i, list(range(200, 260)), [1] * 60) for i in range(4)]
    _data(tmp_path, "good", good)
    _data(tmp_path, "bad", bad)
    return [record.model_copy(update={"neural": record.neural_head}) for record in read_specdecode([tmp_path])]


def test_tuning_picks_the_best_setting_per_batch_size_from_the_tune_split_only(tmp_path):
    records = _toy(tmp_path)
    cost = cost_model("llama-3.1-8b-h100")
    tuned = tune_rules(split_records(records, "tune"), cost, 8, [1, 128], names=["vllm-per-batch"])
    chosen = {batch: setting["num_speculative_tokens_per_batch_size"][0][2] for batch, setting in tuned["vllm-per-batch"].items()}
    # half the requests draft 4 right tokens of 5 and half none: long drafts pay at batch 1 only
    assert chosen[1] >= 4 and chosen[128] < chosen[1]
    about = {"traces": ["toy"], "k": 8}
    save_tuned(tuned, tmp_path / "tuned.json", about)
    assert load_tuned(tmp_path / "tuned.json", about) == tuned
    assert load_tuned(tmp_path / "tuned.json", {**about, "k": 4}) is None  # tuned on something else: tune again


def test_rule_rows_and_their_tuned_rows_run_in_the_benchmark_and_the_tables_check_the_targets(tmp_path):
    records = _toy(tmp_path)
    cost = cost_model("llama-3.1-8b-h100")
    tuned = tune_rules(records, cost, 8, [1, 128], names=["trtllm-schedule"])
    methods = [parse_method(spec) for spec in ("neural", "suffix", "hybrid", "adaptive:candidates=suffix+neural",
                                                 "rule:trtllm-schedule", "rule:llamacpp-chain:draft_n_max=2")]
    result = run_benchmark(records, methods, cost, batch_sizes=[1, 128], engine_runs=False, tuned_rules=tuned)
    assert tuned_label("trtllm-schedule") in result.methods
    row = result.row("good", f"rule:trtllm-schedule{TUNED}")
    assert row.status == "ok" and row.speedup[1] > 1.0 and "1: " in row.notes
    text = batch_tables(result)
    assert "### Batch 1" in text and "### Batch 128" in text and "rule:trtllm-schedule (tuned)" in text
    for batch in (1, 128):
        for workload in result.workloads:
            for miss in misses(result, batch, workload):
                assert miss.startswith(("hybrid", "adaptive"))
    # a miss is reported with both figures: a row made to lose says so
    result.row("good", "hybrid").speedup[1] = 0.5
    assert any(miss.startswith("hybrid 0.50 <") for miss in misses(result, 1, "good"))
    assert "Targets missed at batch 1" in batch_tables(result)


def test_rule_specs_in_the_cli_fail_early_with_the_valid_names(tmp_path, capsys):
    records = _toy(tmp_path)
    path = tmp_path / "toy.jsonl"
    from specplug.lab.trace import write_traces

    write_traces(path, records)
    assert _cli(["bench", str(path), "--neural", "head", "-m", "rule:nope", "--no-oracle"]) == 2
    assert "rule:trtllm-sa" in capsys.readouterr().err
    assert _cli(["bench", str(path), "--neural", "head", "--tuned-rules", str(tmp_path / "t.json")]) == 2
    assert "--tuned-rules keeps the settings of --tune-rules" in capsys.readouterr().err
