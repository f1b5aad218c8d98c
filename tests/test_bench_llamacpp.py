"""specplug trace / calibrate / bench against a real llama-server (scripts/setup_llamacpp.sh).

These tests need the engine: without llama-server or the SmolLM2 model they fail, naming
what is missing; they never skip.
"""

from __future__ import annotations

import json

import pytest

from specplug.cli import main
from specplug.cost import load_cost_model
from specplug.lab.bench._llamacpp import measure_llamacpp
from specplug.lab.bench._tracegen import generate_records, load_prompt_sets, neural_acceptance
from specplug.lab.bench.llama_server import BENCH_FLAGS, LlamaServer, LlamaServerError, find_model
from specplug.lab.trace import read_traces
from specplug_adapters.llamacpp import LlamaServer as AdapterServer
from specplug_adapters.llamacpp import find_server

pytestmark = pytest.mark.engine("llama.cpp")


@pytest.fixture(scope="module")
def model():
    find_server()  # raises LlamaServerError (BinaryNotFoundError) naming the setup script when it is missing
    return find_model("smollm2")


@pytest.fixture(scope="module")
def server(model):
    with LlamaServer(model, threads=1, ctx_size=4096) as running:
        yield running


@pytest.fixture(scope="module")
def records(server, model):
    scripts = load_prompt_sets(["code-edit"])[:1] + load_prompt_sets(["agentic"])[:1]
    return list(generate_records(server, scripts, model_name=model.name, max_tokens=24))


def test_greedy_trace_is_reproducible(server, records):
    assert [r.workload for r in records] == ["code-edit", "agentic", "agentic", "agentic"]
    again = server.completion_response(records[0].prompt_ids, len(records[0].output_ids))
    assert [int(t) for t in again["tokens"]] == list(records[0].output_ids)
    # later agent turns carry the earlier turns in their prompt
    first, second = records[1], records[2]
    assert len(second.prompt_ids) > len(first.prompt_ids) + len(first.output_ids)


def test_neural_acceptance_of_the_model_itself_is_total(server, records):
    """The target drafting for itself accepts everything (minus the output's end)."""
    record = records[0]
    neural = neural_acceptance(server, record, 4, drafter="self")
    expected = [min(4, len(record.output_ids) - i) for i in range(len(record.output_ids))]
    assert list(neural.accepted) == expected


def test_llamacpp_ngram_counters(model, records):
    runs = measure_llamacpp(str(model), records[:2], ["ngram-simple"], draft_max=8)
    for record in records[:2]:
        run = runs[record.id]["llama.cpp/ngram-simple"]
        assert run["predicted_n"] == len(record.output_ids)
        assert 0 <= run["draft_n_accepted"] <= run["draft_n"]
        assert run["identical"] or run["first_divergence"] is not None


def test_trace_command_then_bench_replays_it(tmp_path, capsys, model):
    out = tmp_path / "t.jsonl"
    with pytest.raises(SystemExit) as exit_info:
        main(["trace", "code-edit", "--limit", "1", "--max-tokens", "16", "--out", str(out),
              "--neural-model", str(model), "--neural-k", "3", "--llamacpp-types", "ngram-mod"])
    assert exit_info.value.code == 0
    (record,) = read_traces(out)
    assert len(record.output_ids) == 16 and record.neural.k == 3
    assert "llama.cpp/ngram-mod" in record.engine_runs
    result = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", str(out), "-m", "suffix", "-m", "neural", "--batch-sizes", "1", "--json", str(result)])
    assert exit_info.value.code == 0
    rows = {row["method"]: row for row in json.loads(result.read_text())["rows"]}
    assert {"suffix", "neural", "llama.cpp/ngram-mod", "oracle"} <= set(rows)
    # a drafter that is the target itself accepts all it drafts, but near the end of the output
    assert rows["neural"]["tokens_per_step"] > 3.0 and rows["neural"]["acceptance_rate"] > 0.8
    assert rows["oracle"]["speedup"]["1"] >= max(rows["suffix"]["speedup"]["1"], rows["neural"]["speedup"]["1"])


def test_calibrate_fits_a_usable_model(tmp_path, capsys):
    out = tmp_path / "cpu.toml"
    with pytest.raises(SystemExit) as exit_info:
        main(["calibrate", "--out", str(out), "--contexts", "64,256", "--batched", "1,4,16", "--repeats", "1"])
    assert exit_info.value.code == 0
    model = load_cost_model(out)
    assert model.name == "cpu"
    # more batched tokens cost more; a forward pass costs something
    assert model.verify_time(16, 256) > model.verify_time(1, 256) > 0
    assert model.draft.neural.per_draft_token > 0 and model.draft.lookup.fixed > 0


def test_missing_model_is_a_clear_error(tmp_path):
    with pytest.raises(LlamaServerError, match="does not exist"):
        find_model(str(tmp_path / "none.gguf"))
    with pytest.raises(LlamaServerError, match="neither a .gguf path nor one of"):
        find_model("llama-70b")


def test_bench_server_is_the_adapters_with_its_flags_checked(model, server):
    """One process runner: the adapter's, with the bench's flags in front of ``extra``."""
    assert isinstance(server, AdapterServer)
    extra = ["--spec-type", "ngram-mod"]
    command = LlamaServer(model, extra=extra).command()
    assert command[-len(BENCH_FLAGS) - len(extra) :] == [*BENCH_FLAGS, *extra]
    with pytest.raises(LlamaServerError, match="'draft-self'.*valid values"):
        LlamaServer(model, extra=["--spec-type", "draft-self"])
    with pytest.raises(LlamaServerError, match="set by specplug"):
        LlamaServer(model, extra=["--threads", "4"])


def test_cached_completion_evaluates_only_new_tokens(server):
    tokens = server.tokenize("def add(a, b):\n    return a + b\n" * 4, add_special=False)
    server.completion_response(tokens[:-4], 1, cache_prompt=True)
    timings = server.completion_response(tokens, 1, cache_prompt=True)["timings"]
    assert timings["cache_n"] >= len(tokens) - 5 and timings["prompt_n"] <= 5


def test_tokenize_without_special_tokens_drops_the_bos():
    # Gemma 3 adds a BOS token (SmolLM2 adds none); calibrate builds prefixes without it
    with LlamaServer(find_model("gemma3")) as gemma:
        with_bos, plain = gemma.tokenize("hello world"), gemma.tokenize("hello world", add_special=False)
    assert len(plain) > 0 and with_bos[1:] == plain and len(with_bos) == len(plain) + 1
