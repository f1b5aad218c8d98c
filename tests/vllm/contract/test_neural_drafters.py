"""The hybrid over each of vLLM's neural drafters: the config each becomes, and what the overlay
runs of each drafter on a step (plain objects and vLLM's own classes; no engine).

The overlay's calls into vLLM's drafter, per method, are checked here against fakes of the
drafting pass; the classes' side (the methods vLLM's config accepts, the proposer each one
builds) against the installed vLLM. tests/vllm/engine/test_neural_drafters.py runs them in
vLLM's CPU build.
"""

from __future__ import annotations

import importlib
import inspect
import os
import typing
from types import SimpleNamespace

import pytest

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # the CUDA wheel's imports ask for a device

from specplug import InvalidOptionError, NoDrafterError  # noqa: E402
from specplug_adapters.vllm import translate  # noqa: E402
from specplug_adapters.vllm._hybrid import HybridOverlay  # noqa: E402
from specplug_adapters.vllm._neural import NEURAL_METHODS, UNSUPPORTED, is_mtp, neural_drafter  # noqa: E402
from tests.vllm._paths import SETUP_HINT  # noqa: E402
from tests.vllm.contract.test_drafter_logic import Batch, EnginePass, Runner  # noqa: E402

FIELDS = ["method", "model", "num_speculative_tokens", "disable_padded_drafter_batch", "parallel_drafting",
          "dspark_draft_topk", "draft_sample_method", "enable_adaptive_verification"]
#: the proposer class vLLM's V1 runner builds for each method (module, class)
PROPOSERS = {
    "mtp": ("vllm.v1.spec_decode.eagle", "EagleProposer"),
    "eagle": ("vllm.v1.spec_decode.eagle", "EagleProposer"),
    "eagle3": ("vllm.v1.spec_decode.eagle", "EagleProposer"),
    "draft_model": ("vllm.v1.spec_decode.draft_model", "DraftModelProposer"),
    "dflash": ("vllm.v1.spec_decode.dflash", "DFlashProposer"),
    "medusa": ("vllm.v1.spec_decode.medusa", "MedusaProposer"),
}


def _vllm_methods() -> list[str]:
    try:
        from vllm.config.speculative import SpeculativeMethod
    except ImportError as error:  # a failure, never a skip: CI installs vLLM
        pytest.fail(f"vLLM is not importable ({error}); {SETUP_HINT}")

    def flat(kind: object) -> list[str]:
        return [name for arg in typing.get_args(kind)
                for name in (flat(arg) if typing.get_args(arg) else [arg])]

    return flat(SpeculativeMethod)


# ------------------------------------------------------------------ against vLLM's classes
def test_every_method_vllms_config_accepts_is_overlaid_or_refused_with_a_reason():
    methods = _vllm_methods()
    assert {"eagle", "eagle3", "mtp", "draft_model", "dflash", "dspark"} <= set(methods), methods
    unplaced = [name for name in methods if name not in NEURAL_METHODS and not is_mtp(name) and name not in UNSUPPORTED]
    assert unplaced == [], f"vLLM methods the overlay neither runs on nor refuses: {unplaced}"


@pytest.mark.parametrize("method", NEURAL_METHODS)
def test_each_drafter_takes_the_draft_length_the_overlay_asks_through(method):
    """The overlay sets a step's draft length in ``num_spec_tokens_to_schedule``; the runner hands it
    to the proposer's ``propose(num_speculative_tokens=...)``. A method the installed vLLM dropped
    (Medusa after 0.32) is refused by vLLM's own config."""
    if method not in _vllm_methods():
        assert method == "medusa", f"vLLM no longer accepts {method}"
        return
    module, name = PROPOSERS[method]
    proposer = getattr(importlib.import_module(module), name)
    assert "num_speculative_tokens" in inspect.signature(proposer.propose).parameters, proposer


def test_a_parallel_drafter_lays_out_k_slots_when_built():
    """Why a parallel drafter is never asked for fewer than K: its query slots per request are fixed
    from the config's K when the proposer is built, and its one forward's output is read as K columns."""
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    source = inspect.getsource(SpecDecodeBaseProposer)
    assert "1 if not self.parallel_drafting else self.num_speculative_tokens" in source
    assert "self.num_speculative_tokens == 1 or self.parallel_drafting" in source


# ------------------------------------------------------------------------- config
@pytest.mark.parametrize("method", NEURAL_METHODS)
def test_each_neural_method_becomes_vllms_own_with_its_knobs_passed_through(method):
    knobs = {"parallel_drafting": True} if method in ("eagle", "eagle3", "draft_model") else {}
    if method == "dflash":
        knobs = {"draft_sample_method": "greedy"}
    spec, extra = translate({"method": "specplug.hybrid", "neural": method, "model": "org/drafter",
                             "num_speculative_tokens": 4, **knobs}, None, FIELDS)
    assert spec["method"] == method and spec["model"] == "org/drafter"
    assert {key: spec[key] for key in knobs} == knobs
    # MTP and sequential EAGLE draft after bookkeeping; parallel drafters and draft models keep vLLM's
    # padded batch (vLLM refuses disable_padded_drafter_batch with parallel drafting)
    assert spec.get("disable_padded_drafter_batch") == (True if method == "mtp" else None)
    assert extra["specplug"]["neural"] == method


def test_sequential_eagle_drafts_after_bookkeeping():
    spec, _ = translate({"method": "specplug.hybrid", "neural": "eagle3", "model": "org/head"}, None, FIELDS)
    assert spec["disable_padded_drafter_batch"] is True


def test_a_model_specific_mtp_name_is_accepted_as_mtp():
    spec, _ = translate({"method": "specplug.hybrid", "neural": "deepseek_mtp"}, None, FIELDS)
    assert spec["method"] == "deepseek_mtp" and spec["disable_padded_drafter_batch"] is True
    assert neural_drafter("qwen3_next_mtp") == neural_drafter("mtp")


@pytest.mark.parametrize(("method", "reason"), [
    ("mlp_speculator", "builds no drafter"), ("dspark", "V2 model runner only"),
    ("extract_hidden_states", "drafts no tokens"),
    ("ngram", "not a neural drafter"), ("medusa2", "use one of mtp, eagle"),
])
def test_a_method_the_overlay_cannot_run_on_is_refused_with_the_reason(method, reason):
    with pytest.raises(InvalidOptionError, match=f"neural = '{method}' is not valid.*{reason}"):
        translate({"method": "specplug.hybrid", "neural": method, "model": "org/drafter"}, None, FIELDS)


@pytest.mark.parametrize("method", ["dflash", "medusa"])
def test_a_drafter_that_needs_a_model_without_one_is_refused(method):
    with pytest.raises(NoDrafterError, match=f"neural = '{method}' drafts with a head or draft model"):
        translate({"method": "specplug.hybrid", "neural": method}, None, FIELDS)


# ------------------------------------------------------------------------- overlay
def overlay_over(method: str, parallel: bool = False, **section) -> tuple[Runner, HybridOverlay]:
    batch = Batch()
    batch.add("a", [1, 2, 3, 4] * 6)
    batch.add("b", [9, 8, 7] * 6)
    batch.append(0, [1])
    batch.append(1, [9])
    runner = Runner(input_batch=batch, requests={"a", "b"})
    config = SimpleNamespace(
        additional_config={"specplug": {"method": "hybrid", "neural": method, "lookup": "ngram", "step_costs": "off",
                                        **section}},
        speculative_config=SimpleNamespace(method=method, parallel_drafting=parallel))
    return runner, HybridOverlay(config)


NEURAL = [[50, 51, 52], [60, 61, 62]]


@pytest.mark.parametrize(("method", "parallel", "asked", "counted"), [
    ("eagle", False, [0], "fill"),     # the first forward only: the head's KV cache follows
    ("mtp", False, [0], "fill"),
    ("eagle3", True, [3], "full"),     # P-EAGLE: its first forward is its whole draft
    ("draft_model", True, [3], "full"),  # PARD
    ("dflash", False, [3], "full"),    # one block of K mask queries: the fill would cost the draft
    ("medusa", False, [], "skip"),     # no cache of its own to keep in step
])
def test_where_every_row_takes_the_lookup_the_drafter_runs_what_its_kind_needs(method, parallel, asked, counted):
    runner, overlay = overlay_over(method, parallel, margin=100.0)  # the lookup wins where it drafts
    engine = EnginePass(NEURAL)
    out = overlay.apply(runner, 3, [[1], [9]], engine)
    assert out == [[2, 3, 4], [8, 7, 9]]
    assert engine.asked == asked
    assert overlay.counters[f"neural_pass.{counted}"] == 1 and overlay.counters["faults"] == 0


@pytest.mark.parametrize(("method", "parallel", "asked"), [
    ("eagle", False, [2]), ("eagle3", True, [3]), ("dflash", False, [3]),
    ("medusa", False, [3]),
])
def test_a_shorter_neural_draft_is_asked_only_of_a_sequential_drafter(method, parallel, asked):
    runner, overlay = overlay_over(method, parallel, margin=-100.0, neural_max_tokens=2)  # the neural part wins
    engine = EnginePass(NEURAL)
    out = overlay.apply(runner, 3, [[1], [9]], engine)
    assert engine.asked == asked
    # the hybrid sends at most neural_max_tokens of the drafter's tokens, whatever it was asked for
    assert out == [[50, 51], [60, 61]]
    assert overlay.counters[f"drafts.{method}"] == 2


def test_skip_stays_skip_on_a_parallel_drafter():
    runner, overlay = overlay_over("dflash", margin=100.0, unused_neural_pass="skip")
    engine = EnginePass(NEURAL)
    overlay.apply(runner, 3, [[1], [9]], engine)
    assert engine.asked == [] and overlay.counters["neural_pass.skip"] == 1


def test_the_gpu_check_runs_every_neural_method():
    import runpy

    from tests.vllm._paths import ROOT

    script = runpy.run_path(str(ROOT / "scripts" / "gpu_check_vllm_hybrid.py"))
    assert script["NEURAL_METHODS"] == NEURAL_METHODS
