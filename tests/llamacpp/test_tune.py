"""``specplug tune llama-server`` on the real SmolLM2-135M: a small grid, and its errors."""

from __future__ import annotations

import json

import pytest

from specplug._presets import Preset
from specplug.cli import main
from specplug.lab.llamacpp import Setting, tune
from specplug_adapters.llamacpp import check_flags, help_options, server_help

GRID = (
    Setting("ngram-map-k n4 m16", ("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "4", "--spec-ngram-map-k-size-m", "16")),
    Setting("ngram-simple", ("--spec-type", "ngram-simple")),
)


@pytest.fixture
def prompts_file(tmp_path, code_prompts):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"prompt": p.text}) + "\n" for p in code_prompts[:1]))
    return path


def test_tune_measures_against_plain_and_writes_the_fastest_preset(smollm2, prompts_file, tmp_path, server_binary):
    out = tmp_path / "mine.ini"
    measurements, path = tune(smollm2, prompts_file, name="mine", out=out, candidates=GRID, n_predict=48, rounds=1)
    assert path == out
    assert [m.setting.name for m in measurements] == ["plain", *(s.name for s in GRID)]
    plain = measurements[0]
    assert plain.speedup == 1.0 and plain.median_tps > 0
    fastest = max(measurements[1:], key=lambda m: m.speedup)
    assert any(m.draft_n_accepted > 0 for m in measurements[1:])
    preset = Preset("llama-server", "mine", out.name, out.read_text(), "")
    assert tuple(preset.flags()) == fastest.setting.flags  # the winner, as a --models-preset section
    check_flags(preset.flags(), help_options(server_help(server_binary)))
    assert f"{fastest.speedup:.2f}x plain" in preset.text and "reproduce:" in preset.text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["tune", "vllm", "--model", "m.gguf", "--prompts", "p.jsonl"], "cannot tune engine 'vllm'; valid engines: llama-server"),
        (["tune", "llama-server", "--model", "missing.gguf", "--prompts", "{prompts}"], "missing.gguf' does not exist"),
        (["tune", "llama-server", "--model", "{model}", "--prompts", "nope.jsonl"], "prompt file 'nope.jsonl' does not exist"),
    ],
)
def test_tune_mistakes_are_one_clear_line(args, message, capsys, smollm2, prompts_file):
    argv = [a.format(model=smollm2, prompts=prompts_file) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.strip().count("\n") == 0
