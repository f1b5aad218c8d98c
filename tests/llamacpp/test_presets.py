"""Every llama-server preset, checked flag by flag against the installed binary's ``--help``."""

from __future__ import annotations

import configparser

import pytest

from specplug._presets import PresetError, UnknownPresetError, list_presets, load_preset
from specplug.cli import main
from specplug_adapters.llamacpp import FlagRejectedError, check_flags, help_options, server_help

PRESETS = list_presets("llama-server")
#: the presets the issue asks for: code editing, chat, agentic loops, a draft model, MTP, MTP + n-gram
REQUIRED = {"code-edit", "chat", "agentic", "draft-model", "mtp", "mtp-ngram"}


@pytest.fixture(scope="module")
def options(server_binary: str):
    return help_options(server_help(server_binary))


def test_the_required_presets_are_shipped():
    assert REQUIRED <= {preset.name for preset in PRESETS}


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_every_flag_is_accepted_by_the_installed_llama_server(preset, options, server_binary):
    flags = preset.flags()
    assert flags, f"{preset.filename} has no options"
    check_flags(flags, options, binary=server_binary)
    for flag in flags[::2]:
        assert flag in options, flag  # presets use long names that --help lists


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.name)
def test_each_preset_is_one_models_preset_section_with_a_summary(preset):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(preset.text)
    assert parser.sections() == [preset.name]
    assert "spec-type" in parser[preset.name] or "spec-default" in parser[preset.name]
    assert preset.summary and len(preset.summary) > 20


def test_the_flag_check_can_fail(options, server_binary):
    # the checks above must be able to fail: removed flags and unknown spec types are caught
    with pytest.raises(FlagRejectedError, match="--draft-max"):
        check_flags(["--draft-max", "8"], options, binary=server_binary)
    with pytest.raises(FlagRejectedError, match="draft-self"):
        check_flags(["--spec-type", "ngram-mod,draft-self"], options, binary=server_binary)


def _spec_types(name: str) -> list[str]:
    options = load_preset("llama-server", name).options()
    # --spec-default is llama.cpp's default n-gram setup (ngram-mod); tune may pick it
    return options["spec-type"].split(",") if "spec-type" in options else ["ngram-mod"] * ("spec-default" in options)


def test_ngram_presets_name_only_ngram_types():
    for name in ("code-edit", "chat", "agentic"):
        kinds = _spec_types(name)
        assert kinds and all(kind.startswith("ngram-") for kind in kinds), (name, kinds)


@pytest.mark.parametrize(("name", "drafter"), [
    ("mtp-ngram", "draft-mtp"), ("eagle3-ngram", "draft-eagle3"), ("dflash-ngram", "draft-dflash"),
    ("dspark-ngram", "draft-dspark"), ("draft-model-ngram", "draft-simple"),
])
def test_each_chain_puts_the_lookup_first_then_one_drafter(name, drafter):
    kinds = _spec_types(name)
    assert kinds[0].startswith("ngram-") and kinds[1:] == [drafter], kinds


def test_cli_prints_flags_and_ini(capsys):
    preset = load_preset("llama-server", "code-edit")
    with pytest.raises(SystemExit) as exit_info:
        main(["preset", "llama-server", "code-edit", "--format", "flags"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == " ".join(preset.flags())
    with pytest.raises(SystemExit):
        main(["preset", "llama-server", "code-edit", "--format", "ini"])
    assert "[code-edit]" in capsys.readouterr().out


def test_cli_lists_presets_of_every_engine(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["preset", "--list"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for preset in list_presets():
        assert preset.name in out


def test_cli_bad_preset_name_is_one_clear_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["preset", "llama-server", "no-such-preset"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no-such-preset" in err and "code-edit" in err
    assert "Traceback" not in err


def test_bad_engine_and_bad_format_are_errors():
    with pytest.raises(UnknownPresetError, match="llama-server"):
        load_preset("llama-sever", "code-edit")
    with pytest.raises(PresetError, match="valid formats: ini, flags"):
        load_preset("llama-server", "code-edit").render("json")
