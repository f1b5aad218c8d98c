"""The hybrid over SGLang's NEXTN (SPECPLUG_<METHOD>_NEXTN) without an engine: what it relies on in the installed
SGLang (NEXTN is an alias of EAGLE, and the EAGLE worker's draft model for an MTP checkpoint is its MTP layers),
registration, argument resolution (the model's own path as the draft) and errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from specplug_adapters.sglang import OPTIONS_ENV, overlay_algorithm_names
from tests.sglang.test_plugin import LOAD, _refusal, _resolve, _run

NEXTN_ALGORITHMS = sorted(name for name, (_, source) in overlay_algorithm_names().items() if source == "mtp")


@pytest.fixture(scope="module")
def mtp_model(model_dir, tmp_path_factory) -> str:
    from tests.sglang.engine.mtp_model import make_mimo_mtp_model

    return str(make_mimo_mtp_model(model_dir, tmp_path_factory.mktemp("mimo-mtp")))


def test_one_nextn_name_per_composing_method():
    from specplug.engine import methods_composing_engine_drafter

    composing = methods_composing_engine_drafter()
    assert "hybrid" in composing
    assert NEXTN_ALGORITHMS == sorted(f"SPECPLUG_{m.upper()}_NEXTN" for m in composing)
    assert all(overlay_algorithm_names()[name][0] in composing for name in NEXTN_ALGORITHMS)


def test_sglang_resolves_nextn_to_its_eagle_worker(sglang, mtp_model):
    # what the name relies on: SGLang keeps NEXTN to itself (no plugin may register it) and runs it as EAGLE,
    # the worker SPECPLUG_<METHOD>_NEXTN overlays
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    from sglang.srt.speculative.spec_registry import _reserved_names

    assert "NEXTN" in _reserved_names() and "NEXTN" not in SpeculativeAlgorithm.__members__
    view = _resolve(["--model-path", mtp_model, "--device", "cpu", "--speculative-algorithm", "NEXTN",
                     "--speculative-draft-model-path", mtp_model])
    assert view.speculative_algorithm == "EAGLE"
    assert SpeculativeAlgorithm.from_string(view.speculative_algorithm) is SpeculativeAlgorithm.EAGLE


def test_sglangs_draft_of_an_mtp_checkpoint_is_its_mtp_layers(sglang, mtp_model):
    # the EAGLE worker loads the draft path as a draft model: a MiMo checkpoint becomes MiMoMTP (its MTP layer),
    # so the model's own path drafts with the model's own MTP layers (DeepSeek-V3 -> ...NextN alike)
    from sglang.srt.configs.model_config import ModelConfig

    assert ModelConfig(mtp_model).hf_config.architectures == ["MiMoForCausalLM"]
    draft = ModelConfig(mtp_model, is_draft_model=True, speculative_algorithm="SPECPLUG_HYBRID_NEXTN")
    assert draft.hf_config.architectures == ["MiMoMTP"]


def test_the_installed_entry_point_registers_the_nextn_names(sglang):
    result = _run(LOAD.format(names=NEXTN_ALGORITHMS))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(["SpecplugNextnSpecAlgo"] * len(NEXTN_ALGORITHMS))


def test_the_nextn_spec_class_answers_as_sglangs_eagle_and_builds_the_eagle_overlay_worker(sglang):
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from specplug_adapters.sglang import SpecplugEagleWorker, SpecplugNextnSpecAlgo

    spec = SpeculativeAlgorithm.from_string("specplug_hybrid_nextn")
    builtin = SpeculativeAlgorithm.EAGLE  # what SGLang's own NEXTN runs as
    assert type(spec) is SpecplugNextnSpecAlgo
    for question in ("is_eagle", "is_eagle3", "is_standalone", "is_ngram", "has_draft_kv",
                     "carries_draft_hidden_states", "need_topk"):
        assert getattr(spec, question)() == getattr(builtin, question)(), question
    assert spec.get_platform_worker_cls() is None
    assert spec.create_worker(SimpleNamespace(disable_overlap_schedule=True)) is SpecplugEagleWorker


@pytest.mark.parametrize("algorithm", NEXTN_ALGORITHMS)
def test_every_nextn_name_drafts_with_the_models_own_path_as_a_chain(sglang, mtp_model, monkeypatch, algorithm):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    view = _resolve(["--model-path", mtp_model, "--device", "cpu", "--speculative-algorithm", algorithm])
    assert view.speculative_algorithm == algorithm
    assert view.speculative_draft_model_path == mtp_model
    assert (view.speculative_eagle_topk, view.speculative_num_steps, view.speculative_num_draft_tokens) == (1, 3, 4)
    assert view.disable_overlap_schedule is True and view.enable_mixed_chunk is False


def test_a_draft_path_given_with_nextn_is_kept(sglang, mtp_model, model_dir, monkeypatch):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    view = _resolve(["--model-path", mtp_model, "--device", "cpu", "--speculative-algorithm", "SPECPLUG_HYBRID_NEXTN",
                     "--speculative-draft-model-path", model_dir, "--speculative-num-steps", "5"])
    assert view.speculative_draft_model_path == model_dir
    assert (view.speculative_num_steps, view.speculative_num_draft_tokens) == (5, 6)


@pytest.mark.parametrize(
    ("options", "extra", "message"),
    [
        ({}, ["--speculative-eagle-topk", "2"], "--speculative-eagle-topk = 2 is not valid for SPECPLUG_HYBRID_NEXTN"),
        ({}, ["--speculative-use-rejection-sampling"], "--speculative-use-rejection-sampling is not valid for "
                                                       "SPECPLUG_HYBRID_NEXTN"),
        ({"neural": "ngram"}, [], "option 'neural' takes the engine's own drafter"),
        ({"bogus": 1}, [], "bogus"),
    ],
)
def test_a_bad_nextn_setting_or_option_is_one_clear_error(sglang, mtp_model, monkeypatch, capsys, options, extra,
                                                          message):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps(options))
    refusal = _refusal(["--model-path", mtp_model, "--device", "cpu", "--speculative-algorithm",
                        "SPECPLUG_HYBRID_NEXTN", *extra], capsys)
    assert message in refusal
    assert "\n" not in refusal.strip()
