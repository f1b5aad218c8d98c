"""llama-server's MTP presets need a GGUF with MTP layers: ``specplug preset`` says which models carry them,
and ``specplug tune`` and the demo refuse them on the real SmolLM2 GGUF (none) in one line, naming the
tensor looked for, before any llama-server starts."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import specplug
from specplug._presets import list_presets
from specplug.cli import main
from specplug.lab.llamacpp import MTP_TENSOR, Setting, check_mtp_settings, mtp_tensors, uses_model_mtp

MTP_PRESETS = [preset for preset in list_presets("llama-server") if uses_model_mtp(preset.flags())]


def test_the_mtp_presets_say_which_models_carry_mtp_layers():
    assert {preset.name for preset in MTP_PRESETS} == {"mtp", "mtp-ngram"}
    for preset in MTP_PRESETS:
        assert "MTP layers" in preset.summary and "blk.N.nextn" in preset.summary, preset.summary
    assert "Qwen3-Next" in next(p for p in MTP_PRESETS if p.name == "mtp").summary
    assert not any(uses_model_mtp(p.flags()) for p in list_presets("llama-server") if p.name in ("code-edit", "draft-model"))


@pytest.fixture
def prompts_file(tmp_path, code_prompts):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt": code_prompts[0].text}) + "\n")
    return path


@pytest.mark.parametrize("preset", ["mtp", "mtp-ngram"])
def test_tune_refuses_an_mtp_preset_on_a_gguf_without_mtp_layers(preset, smollm2, prompts_file, tmp_path, capsys):
    out = tmp_path / "tuned.ini"
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "llama-server", "--model", str(smollm2), "--prompts", str(prompts_file), "--presets",
              f"code-edit,{preset}", "--out", str(out)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"specplug: error: llama-server setting 'preset {preset}' (--spec-type draft-mtp) drafts with "
                          f"the model's own drafter")
    assert f"there is none for {smollm2.name}: the GGUF has no MTP layers (no tensor {MTP_TENSOR}" in err
    assert "-md DRAFT.gguf" in err and "code-edit, chat or agentic" in err
    assert not out.exists()  # nothing was measured


def test_tune_names_the_valid_presets(smollm2, prompts_file, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "llama-server", "--model", str(smollm2), "--prompts", str(prompts_file), "--presets", "mtp-nope"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--presets 'mtp-nope'" in err and "mtp-ngram" in err and err.count("\n") == 1


def test_the_demo_refuses_an_mtp_preset_in_one_line(smollm2):
    result = subprocess.run(
        [sys.executable, "-m", "specplug.lab.llamacpp._demo", "--model", str(smollm2), "--preset", "mtp", "--rounds", "1"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("demo: error: llama-server setting 'specplug preset mtp (tuned)'")
    assert MTP_TENSOR in result.stderr and "specplug demo:" not in result.stdout  # refused before it began


def _gguf_with(path, names: list[str]):
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen35")
    writer.add_uint32("qwen35.nextn_predict_layers", 1)
    for name in names:
        writer.add_tensor(name, np.zeros((2, 2), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_a_gguf_carrying_mtp_layers_passes_and_a_separate_draft_gguf_is_not_asked(tmp_path):
    mtp = Setting("mtp", ("--spec-type", "draft-mtp"))
    with_mtp = _gguf_with(tmp_path / "with.gguf", ["token_embd.weight", "blk.1.nextn.eh_proj.weight"])
    assert mtp_tensors(with_mtp) == ["blk.1.nextn.eh_proj.weight"]
    check_mtp_settings(with_mtp, [mtp])
    # another nextn tensor alone is not an MTP block llama.cpp can run
    without = _gguf_with(tmp_path / "without.gguf", ["token_embd.weight", "blk.1.nextn.enorm.weight"])
    with pytest.raises(specplug.NoDrafterError, match="there is none for without.gguf"):
        check_mtp_settings(without, [Setting("plain"), mtp])
    check_mtp_settings(without, [Setting("sidecar", ("--spec-type", "draft-mtp", "-md", "head.gguf"))])
    check_mtp_settings(without, [Setting("ngram", ("--spec-type=ngram-mod",))])
    with pytest.raises(specplug.InvalidOptionError, match="is not a readable GGUF file"):
        check_mtp_settings(tmp_path / "missing.gguf", [mtp])
