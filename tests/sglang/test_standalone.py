"""The hybrid over SGLang's STANDALONE worker (SPECPLUG_<METHOD>_STANDALONE) without an engine: the worker
shape it relies on, registration, argument resolution and errors, the overlay on a draft model's chains;
and the names over DFLASH and DSPARK, refused in one line with SGLang's reason."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from specplug_adapters.sglang import OPTIONS_ENV, overlay_algorithm_names, refused_overlay_names
from tests.sglang.test_eagle import HEAD_CHAIN, REPEATING, _batch, _verify_input
from tests.sglang.test_plugin import LOAD, _refusal, _resolve, _run

STANDALONE_ALGORITHMS = sorted(name for name, (_, source) in overlay_algorithm_names().items() if source == "draft_model")
REFUSED_ALGORITHMS = sorted(refused_overlay_names())


def test_one_standalone_and_one_refused_name_per_drafter_for_each_composing_method():
    from specplug.engine import methods_composing_engine_drafter

    composing = methods_composing_engine_drafter()
    assert "hybrid" in composing
    assert STANDALONE_ALGORITHMS == sorted(f"SPECPLUG_{m.upper()}_STANDALONE" for m in composing)
    assert REFUSED_ALGORITHMS == sorted(f"SPECPLUG_{m.upper()}_{d}" for m in composing for d in ("DFLASH", "DSPARK"))


def test_sglangs_standalone_worker_drafts_with_the_eagle_workers_draft_step(sglang):
    # what the overlay relies on: STANDALONE is the EAGLE worker with another draft worker, whose
    # draft step (the verify input the overlay writes over) is the EAGLE draft worker's own
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2
    from sglang.srt.speculative.standalone_worker_v2 import StandaloneDraftWorker, StandaloneWorkerV2

    assert issubclass(StandaloneWorkerV2, EAGLEWorkerV2) and issubclass(StandaloneDraftWorker, EagleDraftWorker)
    assert StandaloneDraftWorker.draft is EagleDraftWorker.draft
    assert StandaloneWorkerV2.forward_batch_generation is EAGLEWorkerV2.forward_batch_generation


def test_sglangs_dflash_and_dspark_workers_have_no_draft_step_to_overlay(sglang):
    # the refusals' reasons, checked against the installed SGLang: neither worker is an EAGLE worker,
    # DFLASH drafts and verifies in forward_batch_generation alone, DSPARK's verify is planned from confidences
    from sglang.srt.speculative.dflash_worker_v2 import DFlashWorkerV2
    from sglang.srt.speculative.dspark_components.dspark_worker_v2 import DSparkWorkerV2
    from sglang.srt.speculative.eagle_worker_v2 import EAGLEWorkerV2

    for worker in (DFlashWorkerV2, DSparkWorkerV2):
        assert not issubclass(worker, EAGLEWorkerV2)
        assert "draft" not in dir(worker)
    assert "_verify_planner" in DSparkWorkerV2.__init__.__code__.co_names


def test_the_installed_entry_point_registers_the_standalone_and_refused_names(sglang):
    names = STANDALONE_ALGORITHMS + REFUSED_ALGORITHMS
    result = _run(LOAD.format(names=names))
    assert result.returncode == 0, result.stderr[-2000:]
    kinds = ["SpecplugStandaloneSpecAlgo"] * len(STANDALONE_ALGORITHMS) + ["SpecplugRefusedSpecAlgo"] * len(
        REFUSED_ALGORITHMS
    )
    assert result.stdout.strip() == str(kinds)


def test_the_standalone_spec_class_answers_as_sglangs_standalone_and_builds_the_overlay_worker(sglang):
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from specplug_adapters.sglang import SpecplugStandaloneSpecAlgo, SpecplugStandaloneWorker

    asked = {
        name
        for name, value in vars(SpeculativeAlgorithm).items()
        if callable(value) and not name.startswith("_") and name not in ("from_string", "register")
    }
    assert sorted(asked - set(dir(SpecplugStandaloneSpecAlgo))) == []
    spec = SpeculativeAlgorithm.from_string("specplug_hybrid_standalone")
    builtin = SpeculativeAlgorithm.STANDALONE
    assert type(spec) is SpecplugStandaloneSpecAlgo
    # SGLang's STANDALONE paths: draft KV, top-k, no hidden states carried, not EAGLE's nor the n-gram path
    for question in ("is_standalone", "is_eagle", "is_ngram", "has_draft_kv", "carries_draft_hidden_states", "need_topk"):
        assert getattr(spec, question)() == getattr(builtin, question)(), question
    assert spec.get_platform_worker_cls() is None
    assert spec.create_worker(SimpleNamespace(disable_overlap_schedule=True)) is SpecplugStandaloneWorker


@pytest.mark.parametrize("algorithm", STANDALONE_ALGORITHMS)
def test_every_standalone_name_parses_with_a_chain_and_no_overlap(sglang, model_dir, monkeypatch, algorithm):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    view = _resolve(["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", algorithm,
                     "--speculative-draft-model-path", model_dir])
    assert view.speculative_algorithm == algorithm
    assert (view.speculative_eagle_topk, view.speculative_num_steps, view.speculative_num_draft_tokens) == (1, 3, 4)
    assert view.disable_overlap_schedule is True and view.enable_mixed_chunk is False


@pytest.mark.parametrize(
    ("options", "extra", "message"),
    [
        ({}, None, "SGLang's STANDALONE worker is given no --speculative-draft-model-path; run SPECPLUG_HYBRID_EAGLE"),
        ({}, ["--speculative-eagle-topk", "2"], "--speculative-eagle-topk = 2 is not valid for SPECPLUG_HYBRID_STANDALONE"),
        ({"neural": "ngram"}, [], "option 'neural' takes the engine's own drafter"),
        ({"bogus": 1}, [], "bogus"),
    ],
)
def test_a_bad_standalone_setting_or_option_is_one_clear_error(
    sglang, model_dir, monkeypatch, capsys, options, extra, message
):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps(options))
    args = ["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", "SPECPLUG_HYBRID_STANDALONE"]
    if extra is not None:
        args += ["--speculative-draft-model-path", model_dir, *extra]
    refusal = _refusal(args, capsys)
    assert message in refusal
    assert "\n" not in refusal.strip()


def test_dp_attention_is_refused_as_sglang_refuses_it_for_its_own_standalone(model_dir):
    from specplug import InvalidOptionError
    from specplug_adapters.sglang import check_eagle_options

    server_args = SimpleNamespace(speculative_draft_model_path=model_dir, speculative_eagle_topk=1, attn_dp_size=2)
    with pytest.raises(InvalidOptionError, match=r"^--attn-dp-size = 2 is not valid for SPECPLUG_HYBRID_STANDALONE"):
        check_eagle_options("SPECPLUG_HYBRID_STANDALONE", {}, server_args)
    check_eagle_options("SPECPLUG_HYBRID_EAGLE", {}, server_args)  # EAGLE takes it


@pytest.mark.parametrize("algorithm", ["SPECPLUG_HYBRID_DFLASH", "specplug_adaptive_dspark"])
def test_an_overlay_over_dflash_or_dspark_is_refused_in_one_line_with_sglangs_reason(
    sglang, model_dir, monkeypatch, capsys, algorithm
):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    drafter = algorithm.upper().rsplit("_", 1)[1]
    refusal = _refusal(["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", algorithm,
                        "--speculative-draft-model-path", model_dir], capsys)
    assert f"{algorithm.upper()} is not available: SGLang's {drafter} worker" in refusal
    assert f"run {drafter} on its own" in refusal and "_STANDALONE" in refusal
    assert "\n" not in refusal.strip()


def test_the_overlaid_standalone_draft_runs_sglangs_draft_then_the_overlay(sglang, monkeypatch):
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker
    from sglang.srt.speculative.standalone_worker_v2 import StandaloneDraftWorker

    from specplug_adapters.sglang import EagleOverlay
    from specplug_adapters.sglang._standalone import _OverlaidStandaloneDraftWorker

    def sglang_draft(self, batch, *, with_topology=False):
        # the draft model's chain below each request's root (its history's last token)
        return _verify_input([[req.output_ids[-1], *HEAD_CHAIN] for req in batch.reqs])

    monkeypatch.setattr(EagleDraftWorker, "draft", sglang_draft)
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"margin": 100.0, "explore": 0.0}))
    worker = object.__new__(StandaloneDraftWorker)
    worker.__class__ = _OverlaidStandaloneDraftWorker  # as the worker installs it on SGLang's draft worker
    assert isinstance(worker, StandaloneDraftWorker)  # the draft model's own embedding and LM head stay
    worker.overlay = EagleOverlay("SPECPLUG_HYBRID_STANDALONE", "hybrid", "draft_model", worker="STANDALONE")
    decode = SimpleNamespace(is_idle=lambda: False)
    verify = worker.draft(_batch(REPEATING, [20, 21, 22, 23], forward_mode=decode))
    # the lookup's chain where it matched, the draft model's where nothing repeats
    assert verify.draft_token.view(2, 4).tolist() == [[7, 8, 9, 10], [23, *HEAD_CHAIN]]
    counters = worker.overlay.counters
    assert counters["drafts.suffix"] == 1 and counters["drafts.draft_model"] == 1, counters
    assert counters["overlaid_rows"] == 1 and counters.get("faults", 0) == 0, counters
