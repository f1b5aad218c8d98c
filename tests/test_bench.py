"""The replay benchmark: step accounting, modeled speedup, oracle, failures, reports, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

import specplug
from specplug import _plugins
from specplug import InvalidOptionError
from specplug._plugins import build_plugin_manager
from specplug.cli import main
from specplug.cost import cost_model
from specplug.lab.bench import parse_method, run_benchmark
from specplug.lab.bench._neural import TraceNeuralProposer
from specplug.lab.bench._replay import modeled_times
from specplug.lab.trace import NeuralTrace, TraceRecord, write_traces
from tests._scripted import Failing

H100 = cost_model("llama-3.1-8b-h100")
#: adaptive choosing between a lookup and the neural drafter, as the bench replays it by default
ADAPTIVE = "adaptive:candidates=suffix+neural"


def _records(seed: int = 0) -> list[TraceRecord]:
    rng = np.random.default_rng(seed)
    records = []
    for index in range(4):
        prompt = rng.integers(0, 5000, 300).tolist()
        if index < 2:  # an edit: most of the output copies the prompt
            output = prompt[40:140] + rng.integers(0, 5000, 30).tolist() + prompt[200:280]
            workload = "edit"
        else:
            output = rng.integers(0, 5000, 150).tolist()
            workload = "novel"
        accepted = np.minimum(rng.geometric(0.45, len(output)) - 1, 5).tolist()
        records.append(
            TraceRecord(
                v=1, id=f"{workload}-{index}", workload=workload, prompt_ids=prompt, output_ids=output,
                neural={"k": 5, "accepted": accepted},
            )
        )
    return records


def test_tokens_and_steps_add_up():
    records = _records()
    result = run_benchmark(records, [parse_method("ngram"), parse_method("neural")], H100, batch_sizes=[1], oracle=False)
    for row in result.rows:
        group = [r for r in records if row.workload in ("mixed", r.workload)]
        assert row.tokens == sum(len(r.output_ids) - 1 for r in group)
        assert row.tokens_per_step == pytest.approx(row.tokens / row.steps)
        assert row.accepted_per_step == pytest.approx(row.tokens_per_step - 1)
    novel = result.row("novel", "ngram")
    assert novel.drafted_share == pytest.approx(0.0, abs=0.05) and novel.speedup[1] == pytest.approx(1.0, abs=0.02)
    assert result.row("edit", "ngram").tokens_per_step > 2.0


def test_trace_neural_replays_the_recorded_acceptance():
    record = _records()[2]
    neural = TraceNeuralProposer([record])
    neural.start(record.id, record.prompt_ids)
    neural.extend(record.id, record.output_ids[:1])
    position, steps = 1, 0
    expected_steps = 0
    walk = 1
    while walk < len(record.output_ids):
        walk += min(record.neural.accepted[walk], len(record.output_ids) - walk - 1) + 1
        expected_steps += 1
    while position < len(record.output_ids):
        draft = neural.propose(record.id, 8)
        assert len(draft.tokens) == min(5, len(record.output_ids) - position)  # a head drafts all k
        accepted = 0
        while accepted < len(draft.tokens) and position + accepted < len(record.output_ids) - 1 and draft.tokens[accepted] == record.output_ids[position + accepted]:
            accepted += 1
        assert accepted == min(record.neural.accepted[position], len(record.output_ids) - position - 1)
        neural.extend(record.id, record.output_ids[position : position + accepted + 1])
        position += accepted + 1
        steps += 1
    assert steps == expected_steps


def test_no_draft_is_exactly_plain_decoding():
    records = _records()[2:]
    result = run_benchmark(records, [parse_method("suffix")], H100, oracle=False)
    row = result.row("novel", "suffix")
    if row.drafted_share == 0:
        assert all(value == pytest.approx(1.0) for value in row.speedup.values())
    plain, spec = modeled_times([], H100, 1)
    assert plain == spec == 0.0


def test_speedup_falls_with_batch_and_oracle_bounds_the_methods():
    records = _records()
    methods = [parse_method(m) for m in ("ngram", "suffix", "neural", "hybrid", ADAPTIVE)]
    result = run_benchmark(records, methods, H100)
    for workload in result.workloads:
        oracle = result.row(workload, "oracle")
        for method in ("ngram", "suffix", "neural"):
            row = result.row(workload, method)
            assert row.speedup[1] <= oracle.speedup[1] + 1e-9
            assert row.speedup[128] <= row.speedup[1] + 1e-9
            assert row.oracle_share[1] <= 1.0 + 1e-9
        adaptive = result.row(workload, ADAPTIVE)
        assert min(adaptive.speedup.values()) >= 1.0
    mixed = result.row("mixed", "hybrid")
    for batch in result.batch_sizes:
        parts = max(result.row("mixed", "suffix").speedup[batch], result.row("mixed", "neural").speedup[batch])
        assert mixed.speedup[batch] > parts
    # cost-aware: on novel text at batch 128 the hybrid drafts less than its neural part, and pays
    assert result.row("novel", "hybrid").speedup[128] > max(1.0, result.row("novel", "neural").speedup[128])


def test_composites_get_the_benchmark_cost_model_and_batch_size():
    from specplug.lab.bench._methods import build

    records = _records()
    for spec in ("hybrid", "adaptive:candidates=ngram+neural"):
        built = build(parse_method(spec), records, H100, 32, 0.6)
        assert built.proposer.cost is H100 and built.proposer.batch_size == 32
    plain = build(parse_method("hybrid:cost=null"), records, H100, 32, 0.6)
    assert plain.proposer.cost is None


# the built-in hybrid and relay, an out-of-tree composite named nothing like it (tests/plugins/relay_plugin.py):
# (spec, engine drafter option, part option, cost option)
COMPOSITES = [("hybrid:lookup=suffix", "neural", "lookup", "cost"), ("relay:backup=suffix", "head", "backup", "price")]


@pytest.mark.parametrize(("spec", "head", "part", "cost"), COMPOSITES)
def test_a_composite_is_built_from_its_capabilities_not_its_name(relay_distribution, spec, head, part, cost):
    from specplug.lab.bench._methods import build

    built = build(parse_method(spec), _records(), H100, 32, 0.6)
    proposer = built.proposer
    assert isinstance(getattr(proposer, head).inner, TraceNeuralProposer)  # the trace's neural drafter
    assert getattr(proposer, part).inner.name == "suffix"  # the part named in the spec, metered
    assert built.leaves == [getattr(proposer, part), getattr(proposer, head)]
    assert getattr(proposer, cost) is H100 and proposer.batch_size == 32 and built.takes_batch_size


def test_an_out_of_tree_composite_runs_in_the_bench_as_hybrid_does(relay_distribution, monkeypatch):
    from specplug.lab.bench import _run

    built = []

    def recording(*args):
        built.append(_run_build(*args))
        return built[-1]

    _run_build = _run.build
    monkeypatch.setattr(_run, "build", recording)
    specs = [spec for spec, *_ in COMPOSITES]
    result = run_benchmark(_records(), [parse_method(spec) for spec in specs], H100, batch_sizes=[1, 64], oracle=False)
    for workload in result.workloads:
        hybrid, relay = (result.row(workload, spec) for spec in specs)
        assert hybrid.status == relay.status == "ok", (hybrid.error, relay.error)
        assert set(relay.speedup) == set(hybrid.speedup) == {1, 64}
        assert relay.speedup[64] < relay.speedup[1]  # priced by the cost model at each batch size
    # each batch size was replayed on a proposer told that batch size
    relays = [b.proposer for b in built if type(b.proposer).__name__ == "Relay"]
    assert {size for relay in relays for size in relay.batch_sizes_seen} == {1, 64}
    assert all(relay.price is H100 for relay in relays)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("relay:head=ngram", "option 'head' takes the engine's own drafter"),
        ("relay:backup=nope", "unknown method 'nope'"),
        ("relay:color=red", "unknown option 'color'"),
        ("hybrid:lookup=suffix+ngram", "option 'lookup' takes one part, not 'suffix+ngram'"),
        ("neural:k=3", "takes no options"),
    ],
)
def test_composite_spec_mistakes_fail_at_parse_time(relay_distribution, spec, message):
    with pytest.raises(specplug.SpecplugError) as info:
        parse_method(spec)
    assert message in str(info.value)


class _FailingPlugin:
    @specplug.hookimpl
    def specplug_register_methods(self, registrar):
        from specplug.proposers._options import MethodOptions

        class Options(MethodOptions):
            after: int = 0

        registrar.add("failing", lambda options: Failing(options.after), options=Options, summary="fails on purpose")


@pytest.fixture
def failing_catalog():
    _plugins.reset()
    _plugins._default = _plugins.Catalog(build_plugin_manager(extra_plugins={"failing": _FailingPlugin()}))
    yield
    _plugins.reset()


def test_a_raising_proposer_fails_its_rows_and_the_rest_completes(failing_catalog):
    records = _records()
    methods = [parse_method("suffix"), parse_method("failing:after=40"), parse_method("ngram")]
    result = run_benchmark(records, methods, H100, batch_sizes=[1, 64])
    failed = [row for row in result.rows if row.status == "failed"]
    assert {row.method for row in failed} == {"failing:after=40"}
    assert all("RuntimeError: scripted failure" in row.error for row in failed)
    for workload in result.workloads:
        assert result.row(workload, "ngram").status == "ok" and result.row(workload, "ngram").speedup[64] > 0
        assert result.row(workload, "oracle").status == "ok"


def test_cli_writes_table_json_and_plots(tmp_path, capsys):
    traces = tmp_path / "t.jsonl"
    write_traces(traces, _records())
    out = tmp_path / "result.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(traces), "-m", "suffix", "-m", "neural", "-m", "hybrid", "--batch-sizes", "1,8,128",
              "--json", str(out), "--plots", str(tmp_path / "plots"), "--markdown", str(tmp_path / "t.md")])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "edit" in text and "oracle" in text and "x@128" in text
    data = json.loads(out.read_text())
    assert data["batch_sizes"] == [1, 8, 128] and data["cost_model"] == "llama-3.1-8b-h100"
    assert {row["method"] for row in data["rows"]} == {"suffix", "neural", "hybrid", "best fixed", "oracle"}
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "speedup-edit.png", "speedup-mixed.png", "speedup-novel.png", "tokens-per-step.png"
    ]
    assert (tmp_path / "plots" / "speedup-edit.png").read_bytes()[:4] == b"\x89PNG"
    markdown = (tmp_path / "t.md").read_text()
    assert "**edit**" in markdown and "| `hybrid` |" in markdown and "| `oracle` |" in markdown


@pytest.mark.parametrize("flag, expected", [([], True), (["--no-engine-runs"], False)])
def test_cli_engine_runs_can_be_left_out(tmp_path, flag, expected):
    """Recorded llama.cpp rows keep the draft length they were measured with: a --k 16 sweep drops them."""
    out = tmp_path / "result.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "-w", "code-edit", "-m", "ngram", "--no-oracle", "--batch-sizes", "1", "--json", str(out), *flag])
    assert exit_info.value.code == 0
    methods = {row["method"] for row in json.loads(out.read_text())["rows"]}
    assert "ngram" in methods
    assert any(name.startswith("llama.cpp/") for name in methods) is expected


def test_cli_reports_a_failed_row_and_exits_1(tmp_path, capsys, failing_catalog):
    traces = tmp_path / "t.jsonl"
    write_traces(traces, _records())
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(traces), "-m", "failing", "-m", "ngram", "--batch-sizes", "1"])
    assert exit_info.value.code == 1
    text = capsys.readouterr().out
    assert "failed: failing on edit: RuntimeError: scripted failure" in text.replace("\n", " ") or "FAILED" in text


def test_cli_bad_inputs_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"v": 1, "id": "a", "workload": "w", "prompt_ids": [1], "output_ids": [2, -1]}\n')
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(bad)])
    assert exit_info.value.code == 2
    assert f"specplug: error: {bad}:1: field output_ids: item 1 = -1 is not a token id" in capsys.readouterr().err
    good = tmp_path / "good.jsonl"
    write_traces(good, _records()[:1])
    for args, message in [
        (["-m", "nope"], "unknown method 'nope'"),
        (["-m", "suffix", "--cost", "tpu"], "unknown cost model 'tpu'"),
        (["-m", "suffix:max_depth=0"], "max_depth"),
        (["-m", "suffix", "--batch-sizes", "1,x"], "--batch-sizes '1,x'"),
        (["-m", "suffix", "-w", "chat"], "workload(s) ['chat'] are not in the traces"),
    ]:
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", str(good), *args])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2, args
        assert message in err, (args, err)


def test_engine_runs_become_rows():
    records = []
    for index, record in enumerate(_records()[:2]):
        produced = len(record.output_ids) - 1
        runs = {"llama.cpp/ngram-mod": {"draft_n": 100, "draft_n_accepted": 60, "predicted_n": produced + 1, "identical": index == 0}}
        records.append(record.model_copy(update={"engine_runs": runs}))
    result = run_benchmark(records, [parse_method("ngram")], H100, batch_sizes=[1, 128])
    row = result.row("edit", "llama.cpp/ngram-mod")
    produced = sum(len(r.output_ids) - 1 for r in records)
    assert row.source == "llama-server"
    assert row.steps == produced - 120 and row.acceptance_rate == pytest.approx(0.6)
    assert row.tokens_per_step == pytest.approx(produced / (produced - 120))
    assert row.notes == "output identical in 1/2"
    assert 1.0 < row.speedup[1] < row.tokens_per_step and row.speedup[128] < row.speedup[1]


def test_shipped_traces_replay_and_doctests():
    import doctest

    import specplug.lab.bench
    import specplug.lab.bench._methods
    from specplug.lab.bench import default_traces
    from specplug.lab.trace import read_traces

    files = default_traces()
    assert {path.stem for path in files} >= {"spec-bench", "humaneval", "code-edit", "agentic"}
    for path in files:
        records = read_traces(path)
        assert all(record.neural is not None and record.engine_runs for record in records), path
        # the EAGLE head trained here, beside the stand-in draft model, at the same draft length
        assert all(record.neural_head is not None and record.neural_head.k == record.neural.k for record in records), path
    for module in (specplug.lab.bench, specplug.lab.bench._methods):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_result_json_round_trip():
    from specplug.lab.bench import BenchResult, markdown_tables

    result = run_benchmark(_records()[:2], [parse_method("suffix")], H100, batch_sizes=[1, 4])
    again = BenchResult.from_json(json.loads(json.dumps(result.to_json())))
    assert again == result and markdown_tables(again) == markdown_tables(result)


def test_the_best_fixed_choice_is_at_least_every_single_drafter_and_at_most_the_oracle():
    records = _records()
    result = run_benchmark(records, [parse_method("ngram"), parse_method("suffix"), parse_method("neural")], H100, batch_sizes=[1, 128])
    for workload in result.workloads:
        fixed, oracle = result.row(workload, "best fixed"), result.row(workload, "oracle")
        assert fixed.status == "ok" and fixed.tokens_per_step >= 1.0
        for batch in (1, 128):
            singles = [result.row(workload, name).speedup[batch] for name in ("ngram", "suffix", "neural")]
            # a single drafter at k = 8 is one of the fixed choices; no draft (1.0x) is another
            assert max(*singles, 1.0) <= fixed.speedup[batch] + 1e-12 <= oracle.speedup[batch] + 1e-9
            assert f"{batch}: " in fixed.notes


def test_the_tune_and_validation_splits_are_disjoint_halves_that_keep_conversations_whole():
    from specplug.lab.bench import default_traces
    from specplug.lab.bench._split import conversation_of, split_records
    from specplug.lab.trace import read_traces

    records = [record for path in default_traces() for record in read_traces(path)]
    tune, validation = split_records(records, "tune"), split_records(records, "validation")
    assert {r.id for r in tune}.isdisjoint(r.id for r in validation)
    assert len(tune) + len(validation) == len(records)
    assert {conversation_of(r) for r in tune}.isdisjoint(conversation_of(r) for r in validation)
    for workload in {record.workload for record in records}:
        halves = [sum(r.workload == workload for r in part) for part in (tune, validation)]
        assert min(halves) >= 1 and abs(halves[0] - halves[1]) <= 1
    with pytest.raises(InvalidOptionError, match="split = 'test' is not valid"):
        split_records(records, "test")


def _two_column_records() -> list[TraceRecord]:
    """Novel text (no lookup helps) where the draft model is never right and the head always is."""
    records = []
    for record in _records()[2:]:
        length = len(record.output_ids)
        records.append(record.model_copy(update={
            "v": 2,
            "neural": NeuralTrace(k=5, accepted=[0] * length, drafter="draft model"),
            "neural_head": NeuralTrace(k=5, accepted=[min(5, length - i) for i in range(length)], drafter="head"),
        }))
    return records


def test_cli_neural_head_replays_the_head_column_and_draft_model_stays_the_default(tmp_path):
    traces = tmp_path / "t.jsonl"
    write_traces(traces, _two_column_records())
    results = {}
    for flag in ([], ["--neural", "draft-model"], ["--neural", "head"]):
        out = tmp_path / f"r{len(results)}.json"
        with pytest.raises(SystemExit) as exit_info:
            main(["bench", str(traces), "-m", "neural", "--no-oracle", "--no-best-fixed", "--batch-sizes", "1", "--json", str(out), *flag])
        assert exit_info.value.code == 0
        results[tuple(flag)] = json.loads(out.read_text())
    default, draft, head = results.values()
    assert default["neural"] == draft["neural"] == "draft-model" and head["neural"] == "head"

    def neural_row(data):  # without the proposer's measured time, the one figure that varies between runs
        row = next(row for row in data["rows"] if row["method"] == "neural" and row["workload"] == "novel")
        return {name: value for name, value in row.items() if name != "micros_per_step"}

    assert neural_row(default) == neural_row(draft)
    assert neural_row(draft)["accepted_per_step"] == 0.0  # the draft model's column: never right
    assert neural_row(head)["tokens_per_step"] > 5.5  # the head's: all 5 tokens nearly every step


def test_cli_neural_head_on_a_trace_without_the_column_names_the_file_and_record(tmp_path, capsys):
    with_head, without = tmp_path / "head.jsonl", tmp_path / "old.jsonl"
    write_traces(with_head, _two_column_records())
    write_traces(without, _records()[:1])
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(with_head), str(without), "-m", "neural", "--neural", "head"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "Traceback" not in err
    assert f"{without}: record {_records()[0].id} has no neural_head column" in err.replace("\n", "")
    assert "--refill-neural" in err and "valid: draft-model, head" in err.replace("\n", "")
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(with_head), "-m", "neural", "--neural", "eagle"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "--neural 'eagle' is not valid; valid: draft-model, head" in err


def test_result_json_keeps_the_neural_choice_and_old_results_read_as_draft_model():
    from specplug.lab.bench import BenchResult, markdown_tables
    from specplug.lab.bench._neural import with_neural_column

    records = with_neural_column(_two_column_records(), "head")
    result = run_benchmark(records, [parse_method("neural")], H100, batch_sizes=[1], neural="head")
    data = json.loads(json.dumps(result.to_json()))
    assert BenchResult.from_json(data) == result and "neural drafter: head" in markdown_tables(result)
    del data["neural"]
    assert BenchResult.from_json(data).neural == "draft-model"
