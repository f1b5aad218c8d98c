"""llama-server on the loopback interface with the real SmolLM2-135M: errors, hermeticity, presets live."""

from __future__ import annotations

import pytest

from specplug._presets import load_preset
from specplug.lab.llamacpp import agreement
from specplug_adapters.llamacpp import (
    BinaryNotFoundError,
    FlagRejectedError,
    LlamaServer,
    ModelNotFoundError,
    ServerError,
)

N_PREDICT = 96
NGRAM_PRESETS = ("code-edit", "chat", "agentic")


# ------------------------------------------------------------------------- clear errors
def test_missing_model_path_is_a_clear_error(server_binary, tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelNotFoundError, match="nope.gguf.*does not exist"):
        LlamaServer(missing)
    text = tmp_path / "notes.gguf"
    text.write_text("not a model")
    with pytest.raises(ModelNotFoundError, match="not a GGUF file"):
        LlamaServer(text)


def test_flag_the_binary_rejects_is_a_clear_error(smollm2):
    with pytest.raises(FlagRejectedError, match=r"'--draft-max' was removed from llama.cpp.*use --spec-draft-n-max"):
        LlamaServer(smollm2, ["--draft-max", "8"])  # removed from llama.cpp, now fatal there
    with pytest.raises(FlagRejectedError, match="'draft-self'.*valid values: .*ngram-mod"):
        LlamaServer(smollm2, ["--spec-type", "draft-self"])
    with pytest.raises(FlagRejectedError, match="set by specplug"):
        LlamaServer(smollm2, ["--port", "8080"])


def test_value_the_binary_rejects_at_start_is_reported_with_its_output(smollm2):
    # passes the name check, fails inside llama-server: its own message comes back
    server = LlamaServer(smollm2, ["--spec-ngram-map-k-size-n", "not-a-number"])
    with pytest.raises(ServerError, match="exited with code"):
        server.start()


def test_missing_binary_is_a_clear_error(smollm2, tmp_path):
    with pytest.raises(BinaryNotFoundError, match="not an executable file"):
        LlamaServer(smollm2, binary=tmp_path / "llama-server")


def test_server_ignores_llama_arg_variables_and_user_config(smollm2, monkeypatch, tmp_path, code_prompts):
    # leaked into llama-server, either would break the run: a 64-token context cannot hold the prompt
    monkeypatch.setenv("LLAMA_ARG_CTX_SIZE", "64")
    config = tmp_path / "llama.cpp"
    config.mkdir()
    (config / "config.ini").write_text("ctx-size = 64\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with LlamaServer(smollm2) as server:
        completion = server.complete(code_prompts[0].render(server), 8)
    assert completion.predicted_n == 8


# --------------------------------------------------------------------- presets, live
@pytest.fixture(scope="module")
def plain_runs(smollm2, code_prompts):
    """Plain greedy runs with each token's top-2 probabilities (for the near-tie check)."""
    with LlamaServer(smollm2) as server:
        return [server.complete(p.render(server), N_PREDICT, n_probs=2) for p in code_prompts]


@pytest.mark.parametrize("name", NGRAM_PRESETS)
def test_ngram_preset_speculates_and_keeps_greedy_output(name, smollm2, code_prompts, plain_runs):
    preset = load_preset("llama-server", name)
    with LlamaServer(smollm2, preset.flags()) as server:
        runs = [server.complete(p.render(server), N_PREDICT) for p in code_prompts]
    assert sum(run.draft_n_accepted for run in runs) > 0, f"{name}: no drafted token was accepted"
    for prompt, plain, run in zip(code_prompts, plain_runs, runs):
        assert run.draft_n >= run.draft_n_accepted
        result = agreement(plain.tokens, plain.top, run.tokens)
        assert result.ok, f"{name} on {prompt.id}: {result.detail}"


def test_plain_server_does_not_speculate(plain_runs):
    assert all(run.draft_n == 0 and run.predicted_n == N_PREDICT for run in plain_runs)
    assert all(len(run.top) == N_PREDICT and len(run.top[0]) == 2 for run in plain_runs)


def test_draft_model_preset_with_a_same_vocabulary_draft(smollm2, code_prompts, plain_runs):
    # SmolLM2 drafting for itself: checks the preset's plumbing (a real pair would be faster, not more correct)
    preset = load_preset("llama-server", "draft-model")
    with LlamaServer(smollm2, [*preset.flags(), "--spec-draft-model", str(smollm2)]) as server:
        run = server.complete(code_prompts[0].render(server), N_PREDICT)
    assert run.draft_n_accepted > 0
    result = agreement(plain_runs[0].tokens, plain_runs[0].top, run.tokens)
    assert result.ok, result.detail
