"""``specplug tune --draft`` on the real llama-server: chains of a lookup and SmolLM2-135M drafting for itself,
and the one-line refusals of a bad drafter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplug import InvalidOptionError
from specplug._presets import Preset
from specplug.cli import main
from specplug.lab.llamacpp import MTP_TENSOR, Drafter, Setting, chain_settings, drafter_types, preset_settings, with_drafter
from specplug_adapters.llamacpp import check_flags, help_options, server_help

LOOKUP = "ngram-mod match16 min8 max32"
LENGTHS = (2, 4)


@pytest.fixture
def prompts_file(tmp_path, code_prompts):
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt": code_prompts[0].text}) + "\n")
    return path


def test_tune_chains_a_lookup_and_a_draft_model_and_writes_the_fastest(smollm2, prompts_file, tmp_path, server_binary, capsys):
    out = tmp_path / "chain.ini"
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "llama-server", "--model", str(smollm2), "--prompts", str(prompts_file), "--draft", str(smollm2),
              "--candidates", LOOKUP, "--draft-lengths", ",".join(map(str, LENGTHS)), "-n", "32", "-r", "1",
              "--name", "chain", "--out", str(out)])  # fmt: skip
    assert exit_info.value.code == 0
    table = capsys.readouterr().out
    # the drafter alone and the chain, at each length, beside plain (rich wraps long names: compare words)
    for n in LENGTHS:
        assert table.count(f"n{n}") == 2, table
    assert table.count("plain") == 1 and table.count("match16") == len(LENGTHS)
    assert table.count("1/1") == 1 + 2 * len(LENGTHS), table  # every setting's tokens equal plain's
    preset = Preset("llama-server", "chain", out.name, out.read_text(), "")
    options = preset.options()
    # the bundle names the drafter, its type and a measured length
    assert options["spec-draft-model"] == str(smollm2)
    assert options["spec-type"] in ("draft-simple", "ngram-mod,draft-simple")
    assert int(options["spec-draft-n-max"]) in LENGTHS
    check_flags(preset.flags(), help_options(server_help(server_binary)))
    # the winner's tokens equal plain greedy decoding's, and its drafts were accepted
    assert "output identical to plain in 1/1" in preset.text
    assert "acceptance n/a" not in preset.text and "acceptance 0%" not in preset.text
    assert "then draft-simple (SmolLM2-135M-Instruct.Q4_1.gguf)" in preset.text
    assert preset.text.startswith("# chain: fastest llama.cpp chain of a lookup and draft-simple found by specplug tune\n")


def test_chain_settings_put_the_lookup_first_and_leave_a_block_drafter_its_length():
    lookup = Setting("mod", ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "16"))
    simple = chain_settings(Drafter("draft-simple", Path("/d.gguf")), [lookup], [3])
    assert [s.name for s in simple] == ["draft-simple n3", "mod + draft-simple n3"]
    assert simple[1].flags == ("--spec-type", "ngram-mod,draft-simple", "--spec-ngram-mod-n-match", "16",
                               "--spec-draft-n-max", "3", "--spec-draft-model", "/d.gguf")  # fmt: skip
    block = chain_settings(Drafter("draft-dflash", Path("/h.gguf")), [lookup], [2, 4, 8])
    assert [s.name for s in block] == ["draft-dflash", "mod + draft-dflash"]
    assert all("--spec-draft-n-max" not in s.flags for s in block)
    assert chain_settings(Drafter("draft-mtp"), [lookup], [2])[1].flags[-2:] == ("--spec-draft-n-max", "2")
    with pytest.raises(InvalidOptionError, match="'spec-default' sets no --spec-type"):
        chain_settings(Drafter("draft-simple", Path("/d.gguf")), [Setting("spec-default", ("--spec-default",))])


def test_a_shipped_chain_preset_gets_the_drafter_file_only_where_it_drafts_with_that_type():
    drafter = Drafter("draft-simple", Path("/d.gguf"))
    chain, eagle, lookup = preset_settings(["draft-model-ngram", "eagle3-ngram", "code-edit"])
    assert with_drafter(chain, drafter).flags == (*chain.flags, "--spec-draft-model", "/d.gguf")
    assert with_drafter(eagle, drafter) == eagle and with_drafter(lookup, drafter) == lookup
    named = Setting("own", ("--spec-type", "draft-simple", "-md", "/mine.gguf"))
    assert with_drafter(named, drafter) == named


def test_the_installed_binary_lists_the_drafters():
    assert {"draft-simple", "draft-mtp", "draft-eagle3"} <= set(drafter_types())
    assert not any(kind.startswith("ngram") for kind in drafter_types())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--draft", "missing.gguf"], "--draft: draft model file 'missing.gguf' does not exist (give the path of a .gguf file)"),
        (["--draft", "{prompts}"], "is not a GGUF file (it does not start with 'GGUF')"),
        (["--draft", "{model}", "--draft-type", "draft-nope"],
         "--draft-type 'draft-nope' is not a drafter this llama-server accepts; valid drafter types: draft-simple"),
        (["--draft", "{model}", "--draft-type", "ngram-mod"], "--draft-type 'ngram-mod' is not a drafter"),
        (["--draft-type", "draft-eagle3"], "--draft-type draft-eagle3 needs --draft DRAFT.gguf"),
        (["--draft-lengths", "2,4"], "--draft-lengths needs --draft DRAFT.gguf"),
        (["--draft", "{model}", "--draft-lengths", "0"], "--draft-lengths '0': give ints from 1 to 256"),
        (["--draft", "{model}", "--candidates", "spec-default"], "candidate 'spec-default' sets no --spec-type"),
        (["--draft-type", "draft-mtp"], f"no tensor {MTP_TENSOR}"),
    ],
)
def test_a_bad_drafter_is_one_clear_line(extra, message, smollm2, prompts_file, tmp_path, capsys):
    out = tmp_path / "chain.ini"
    argv = ["tune", "llama-server", "--model", str(smollm2), "--prompts", str(prompts_file), "--out", str(out),
            *(word.format(model=smollm2, prompts=prompts_file) for word in extra)]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.strip().count("\n") == 0, err
    assert not out.exists()  # refused before anything was measured
