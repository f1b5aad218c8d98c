"""Trace files: round trip, and errors that name the file, the line and the field."""

from __future__ import annotations

import doctest
import json

import pytest

import specplug.lab.trace
from specplug.lab.trace import NeuralTrace, TraceError, TraceRecord, read_traces, write_traces


def _record(**changes):
    data = {"v": 1, "id": "r0", "workload": "code-edit", "prompt_ids": [1, 2, 3], "output_ids": [4, 5, 6]}
    data.update(changes)
    return data


def _write(tmp_path, lines, end="\n"):
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(line) if not isinstance(line, str) else line for line in lines) + end)
    return path


def test_round_trip(tmp_path):
    records = [
        TraceRecord.model_validate(_record()),
        TraceRecord.model_validate(
            _record(
                id="r1",
                neural={"k": 4, "accepted": [0, 4, 2], "drafter": "draft model"},
                engine_runs={"llama.cpp/ngram-mod": {"draft_n": 3, "draft_n_accepted": 2, "predicted_n": 3}},
                meta={"model": "smollm2", "turn": 2},
            )
        ),
    ]
    path = tmp_path / "out" / "t.jsonl"
    write_traces(path, records)
    again = read_traces(path)
    assert again == records
    assert again[1].neural == NeuralTrace(k=4, accepted=(0, 4, 2), drafter="draft model")
    assert path.read_text().count("\n") == 2


def test_a_head_column_is_written_as_version_2_beside_the_neural_column(tmp_path):
    draft = {"k": 4, "accepted": [0, 4, 2], "drafter": "draft model"}
    head = {"k": 6, "accepted": [1, 0, 0], "drafter": "head"}
    records = [
        TraceRecord.model_validate(_record(v=2, id="both", neural=draft, neural_head=head)),
        TraceRecord.model_validate(_record(v=1, id="draft-only", neural=draft)),
    ]
    path = tmp_path / "t.jsonl"
    write_traces(path, records)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    # each line at the lowest version that holds it: the record without a head column stays version 1
    assert [line["v"] for line in lines] == [2, 1]
    assert lines[0]["neural_head"] == head and lines[0]["neural"] == draft and "neural_head" not in lines[1]
    again = read_traces(path)
    assert again == records
    assert again[0].neural_head == NeuralTrace(k=6, accepted=(1, 0, 0), drafter="head")
    assert again[0].neural == NeuralTrace(k=4, accepted=(0, 4, 2), drafter="draft model")


def test_a_lookup_column_is_written_as_version_3(tmp_path):
    lookup = {"k": 20, "accepted": [0, 5, 4], "drafter": "n-gram"}
    head = {"k": 20, "accepted": [0, 2, 1], "drafter": "EAGLE-3"}
    records = [
        TraceRecord.model_validate(_record(v=3, id="measured", neural_head=head, lookup=lookup)),
        TraceRecord.model_validate(_record(v=3, id="head-only", neural_head=head)),
    ]
    path = tmp_path / "t.jsonl"
    write_traces(path, records)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["v"] for line in lines] == [3, 2]
    assert lines[0]["lookup"] == lookup and "lookup" not in lines[1]
    assert [record.model_copy(update={"v": 3}) for record in read_traces(path)] == records


def test_version_1_files_round_trip_byte_for_byte(tmp_path):
    """An old file (no head column) is rewritten exactly as it was, at version 1."""
    lines = [
        json.dumps(_record(id="a", neural={"k": 4, "accepted": [0, 4, 2], "drafter": "d"}), separators=(",", ":")),
        json.dumps(_record(id="b", meta={"model": "m", "text": "é"}), separators=(",", ":"), ensure_ascii=False),
    ]
    old = tmp_path / "v1.jsonl"
    old.write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_traces(tmp_path / "copy.jsonl", read_traces(old))
    assert (tmp_path / "copy.jsonl").read_bytes() == old.read_bytes()


def test_the_shipped_traces_round_trip_and_without_the_head_column_are_version_1(tmp_path):
    from specplug.lab.bench import default_traces

    for path in default_traces():
        records = read_traces(path)
        assert all(record.v == 2 and record.neural_head is not None for record in records), path
        write_traces(tmp_path / "same.jsonl", records)
        assert (tmp_path / "same.jsonl").read_bytes() == path.read_bytes(), path
        stripped = [record.model_copy(update={"neural_head": None}) for record in records]
        write_traces(tmp_path / "v1.jsonl", stripped)
        lines = [json.loads(line) for line in (tmp_path / "v1.jsonl").read_text(encoding="utf-8").splitlines()]
        assert all(line["v"] == 1 and "neural_head" not in line and "neural" in line for line in lines), path


def test_a_version_2_record_without_a_head_column_is_read_and_written_as_version_1(tmp_path):
    path = _write(tmp_path, [_record(v=2)])
    (record,) = read_traces(path)
    assert record.v == 2 and record.neural_head is None
    write_traces(tmp_path / "out.jsonl", [record])
    assert json.loads((tmp_path / "out.jsonl").read_text())["v"] == 1


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"prompt_ids": [1, -2]}, "prompt_ids", "item 1 = -2 is not a token id"),
        ({"output_ids": []}, "output_ids", "must not be empty"),
        ({"output_ids": [1, "x"]}, "output_ids", "item 1 = 'x' is not a token id"),
        ({"v": 4}, "v", "format version 4 is not supported; this specplug reads versions 1, 2 and 3"),
        ({"id": 7}, "id", "string"),
        ({"extra": 1}, "extra", "is not a trace field"),
        ({"neural": {"k": 2, "accepted": [0, 3, 1]}}, "neural", "accepted[1] = 3 is larger than k = 2"),
        ({"neural": {"k": 2, "accepted": [0, 1]}}, "(record)", "neural.accepted has 2 entries but output_ids has 3"),
        # the head column: only in version 2, and checked as the neural one is
        ({"neural_head": {"k": 2, "accepted": [0, 1, 0]}}, "neural_head", "needs format version 2 (\"v\": 2)"),
        # the lookup column: only in version 3
        ({"v": 2, "lookup": {"k": 2, "accepted": [0, 1, 0]}}, "lookup", "needs format version 3 (\"v\": 3); version 2 has no lookup column"),
        ({"v": 3, "lookup": {"k": 2, "accepted": [0, 1]}}, "(record)", "lookup.accepted has 2 entries but output_ids has 3"),
        ({"v": 2, "neural_head": {"k": 2, "accepted": [0, 3, 1]}}, "neural_head", "accepted[1] = 3 is larger than k = 2"),
        ({"v": 2, "neural_head": {"k": 2, "accepted": [0]}}, "(record)", "neural_head.accepted has 1 entries but output_ids has 3"),
        ({"v": 2, "neural_head": {"k": 0, "accepted": [0, 0, 0]}}, "neural_head.k", "greater than or equal to 1"),
        ({"v": 2, "neural_head": {"k": 2, "accepted": [0, 0, 0], "why": 1}}, "neural_head.why",
         "is not a neural column field; fields: k, accepted, drafter"),
    ],
)
def test_bad_field_names_file_line_and_field(tmp_path, change, field, message):
    good = _record(id="ok")
    path = _write(tmp_path, [good, _record(**change)])
    with pytest.raises(TraceError) as info:
        read_traces(path)
    error = info.value
    assert (error.path, error.line, error.field) == (str(path), 2, field)
    assert message in str(error)
    assert str(error).startswith(f"{path}:2: field {field}:")


def test_missing_field(tmp_path):
    record = _record()
    del record["output_ids"]
    path = _write(tmp_path, [record])
    with pytest.raises(TraceError, match=rf"{path}:1: field output_ids: is missing"):
        read_traces(path)


def test_truncated_file(tmp_path):
    full = json.dumps(_record())
    path = _write(tmp_path, [_record(id="a"), full[: len(full) // 2]], end="")
    with pytest.raises(TraceError, match=rf"{path}:2: field \(line\): not valid JSON \(the file looks truncated\)"):
        read_traces(path)


def test_not_an_object_duplicate_ids_empty_and_missing_file(tmp_path):
    with pytest.raises(TraceError, match=r":1: field \(line\): must be a JSON object, got list"):
        read_traces(_write(tmp_path, ["[1, 2]"]))
    with pytest.raises(TraceError, match=r":2: field id: 'r0' already used on line 1"):
        read_traces(_write(tmp_path, [_record(), _record()]))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(TraceError, match=r"empty.jsonl:1: field \(file\): holds no records"):
        read_traces(empty)
    with pytest.raises(TraceError, match=r"absent.jsonl:0: field \(file\): cannot be read"):
        read_traces(tmp_path / "absent.jsonl")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(TraceError, match="is not UTF-8"):
        read_traces(binary)


def test_doctests():
    result = doctest.testmod(specplug.lab.trace)
    assert result.attempted > 0 and result.failed == 0


def test_shipped_prompt_sets_are_well_formed():
    from specplug.lab.bench._tracegen import PROMPT_SETS, load_prompt_sets

    scripts = load_prompt_sets(list(PROMPT_SETS))
    assert {script["workload"] for script in scripts} == set(PROMPT_SETS)
    assert len({script["id"] for script in scripts}) == len(scripts)
    for script in scripts:
        steps = script["script"]
        assert any("generate" in step for step in steps) and "generate" not in steps[0]
    agent = [s for s in scripts if s["workload"] == "agentic"][0]
    # later turns repeat the tool call of the first
    calls = [step["content"] for step in agent["script"] if step.get("role") == "user" and "Tool result for" in step["content"]]
    assert calls[0].splitlines()[0] == calls[-1].splitlines()[0]


def test_trace_command_rejects_bad_input(tmp_path, capsys):
    from specplug.cli import main

    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "x", "workload": "w", "script": []}\n{"id": "y"}\n')
    for args, message in [
        (["nope", "--out", str(tmp_path / "t.jsonl")], "prompt set 'nope' is neither one of spec-bench"),
        ([str(bad), "--out", str(tmp_path / "t.jsonl")], f"{bad}:2: field workload is missing"),
        (["code-edit", "--out", str(tmp_path / "t.txt")], "must end in .jsonl"),
        (["code-edit", "--out", str(tmp_path / "t.jsonl"), "--model", "llama-70b"], "neither a .gguf path nor one of"),
    ]:
        with pytest.raises(SystemExit) as info:
            main(["trace", *args])
        assert info.value.code == 2
        assert message in capsys.readouterr().err
