"""Methods that compose the model's own drafter, in vLLM: the built-in ``hybrid`` and a plugin's
``relay`` (tests/plugins/relay_plugin.py) get the same treatment, read from their declared
capabilities (plain dicts and vLLM-shaped arrays, no engine)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

import specplug
from specplug_adapters.vllm import _plugin, read_settings, translate
from specplug_adapters.vllm._config import create_method
from specplug_adapters.vllm._hybrid import HybridOverlay

FIELDS = ["method", "model", "num_speculative_tokens", "disable_padded_drafter_batch", "prompt_lookup_max"]
# method, the option taking the model's drafter, a part option
COMPOSITES = [("hybrid", "neural", "lookup"), ("relay", "head", "backup")]


@pytest.fixture(params=COMPOSITES, ids=[item[0] for item in COMPOSITES])
def composite(request, relay_distribution):
    return request.param


def test_translates_to_an_overlay_on_the_models_own_drafter(composite):
    method, _, part = composite
    spec, extra = translate({"method": f"specplug.{method}", "num_speculative_tokens": 4, part: "ngram"}, None, FIELDS)
    assert spec == {"method": "mtp", "num_speculative_tokens": 4, "disable_padded_drafter_batch": True}
    assert extra["specplug"] == {"method": method, part: "ngram", "neural": "mtp"}
    spec, extra = translate({"method": f"specplug.{method}", "model": "/m/draft", "num_speculative_tokens": 3}, None,
                            FIELDS)
    assert spec == {"model": "/m/draft", "num_speculative_tokens": 3}  # vLLM detects eagle/eagle3/draft_model
    assert extra["specplug"] == {"method": method, "neural": None}


def test_the_same_checks(composite):
    method, drafter_option, _ = composite
    with pytest.raises(specplug.InvalidOptionError, match=f"specplug.{method} setting neural = 'mlp_speculator'"):
        translate({"method": f"specplug.{method}", "neural": "mlp_speculator"}, None, FIELDS)
    with pytest.raises(specplug.InvalidOptionError, match="unknown option 'margn'"):
        translate({"method": f"specplug.{method}", "margn": 1.0}, None, FIELDS)
    # it cannot run as the custom_class drafter: there is no drafter of the model's there
    with pytest.raises(specplug.InvalidOptionError, match="overlays lookup drafts") as raised:
        create_method(read_settings({"specplug": {"method": method}}))
    assert f"method {method!r}" in str(raised.value) and f"option {drafter_option!r}" in str(raised.value)


def test_lookup_methods_with_a_model_point_to_every_composing_method(relay_distribution):
    with pytest.raises(specplug.InvalidOptionError, match="takes no model") as raised:
        translate({"method": "specplug.suffix", "model": "/m/draft"}, None, FIELDS)
    assert "specplug.hybrid" in str(raised.value) and "specplug.relay" in str(raised.value)


def test_the_drafter_option_is_the_engines_to_fill(relay_distribution):
    with pytest.raises(specplug.InvalidOptionError, match="option 'head' takes the engine's own drafter"):
        translate({"method": "specplug.relay", "head": "ngram"}, None, FIELDS)


class Batch:
    def __init__(self) -> None:
        self.token_ids_cpu = np.zeros((4, 256), dtype=np.int32)
        self.num_tokens_no_spec = np.zeros(4, dtype=np.int32)
        self.req_ids: list[str] = []

    def add(self, request_id: str, prompt: list[int]) -> None:
        row = len(self.req_ids)
        self.req_ids.append(request_id)
        self.token_ids_cpu[row, : len(prompt)] = prompt
        self.num_tokens_no_spec[row] = len(prompt)

    def append(self, row: int, tokens: list[int]) -> list[int]:
        start = self.num_tokens_no_spec[row]
        self.token_ids_cpu[row, start : start + len(tokens)] = tokens
        self.num_tokens_no_spec[row] = start + len(tokens)
        return tokens


def overlay_config(section: dict) -> SimpleNamespace:
    return SimpleNamespace(additional_config={"specplug": {"neural": "mtp", **section}},
                           speculative_config=SimpleNamespace(method="mtp"))


def two_rows() -> tuple[Batch, SimpleNamespace]:
    batch = Batch()
    batch.add("a", [1, 2, 3, 4] * 6)
    batch.add("b", [9, 8, 7] * 6)
    return batch, SimpleNamespace(input_batch=batch, requests={"a", "b"}, discard_request_mask=None)


def test_the_overlay_runs_the_relay_on_vllms_drafts_with_the_batch_size(relay_distribution):
    batch, runner = two_rows()
    overlay = HybridOverlay(overlay_config({"method": "relay", "backup": "ngram"}))
    sampled = [batch.append(0, [1]), batch.append(1, [9])]
    # row a: vLLM drafted, the relay keeps it; row b: vLLM drafted nothing, the relay's backup drafts
    assert overlay.apply(runner, 3, sampled, lambda k: [[50, 51, 52][:k], []]) == [[50, 51, 52], [8, 7, 9]]
    relay = overlay.guard.proposer
    assert relay.head is overlay.engine_drafts and relay.batch_sizes_seen == [2]
    assert overlay.engine_drafts.max_draft_tokens == 3
    assert overlay.counters["drafts.relay:mtp"] == 1 and overlay.counters["drafts.relay:ngram"] == 1
    assert overlay.counters["faults"] == 0 and overlay.stats.steps == 1


def test_the_overlay_runs_the_hybrid_on_lists_with_the_batch_size():
    batch, runner = two_rows()
    overlay = HybridOverlay(overlay_config({"method": "hybrid", "lookup": "ngram", "margin": 100.0, "step_costs": "off"}))
    sampled = [batch.append(0, [1]), batch.append(1, [9])]
    assert overlay.apply(runner, 3, sampled, lambda k: [[50, 51, 52][:k], [60, 61, 62][:k]]) == [[2, 3, 4], [8, 7, 9]]
    assert overlay.guard.proposer.batch_size == 2 and overlay.counters["faults"] == 0


def test_the_overlay_refuses_a_method_that_composes_no_drafter():
    with pytest.raises(specplug.InvalidOptionError, match="specplug.suffix does not compose the model's own drafter"):
        HybridOverlay(overlay_config({"method": "suffix"}))


class Runner:
    """A model runner as the plugin sees it (a plain class: the plugin keeps runners in a WeakKeyDictionary)."""

    def __init__(self, vllm_config) -> None:
        self.vllm_config = vllm_config


@pytest.mark.parametrize(
    ("section", "spec_method", "expected"),
    [({"method": "relay"}, "mtp", True), ({"method": "hybrid"}, "eagle", True), ({"method": "suffix"}, "mtp", False),
     ({"method": "relay"}, "custom_class", False), ({"method": "adaptive"}, "eagle", True),
     ({"method": "adaptive"}, "custom_class", False), ({"method": "sufix"}, "mtp", False), ({}, "mtp", False)],
)
def test_the_plugin_overlays_exactly_the_composing_methods(section, spec_method, expected, relay_distribution):
    config = SimpleNamespace(additional_config={"specplug": section},
                             speculative_config=SimpleNamespace(method=spec_method))
    runner = Runner(config)
    overlay = _plugin._overlay_for(runner)
    assert isinstance(overlay, HybridOverlay) is expected
    assert _plugin._overlay_for(runner) is overlay  # made once per runner


def test_engine_args_for_a_composing_method_ask_for_the_v1_runner(composite, monkeypatch):
    method, _, _ = composite
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    args = SimpleNamespace(spec_method=f"specplug.{method}", spec_model=None, spec_tokens=3, speculative_config=None,
                           additional_config=None)
    _plugin._translate_engine_args(args, frozenset(FIELDS))
    assert args.speculative_config == {"method": "mtp", "num_speculative_tokens": 3,
                                       "disable_padded_drafter_batch": True}
    assert args.additional_config["specplug"]["method"] == method
    assert os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    args.spec_method, args.speculative_config = f"specplug.{method}", None
    with pytest.raises(ValueError, match=f"specplug.{method} overlays drafts in vLLM's V1 model runner"):
        _plugin._translate_engine_args(args, frozenset(FIELDS))


def test_a_lookup_method_leaves_the_runner_choice_alone(monkeypatch):
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    args = SimpleNamespace(spec_method="specplug.suffix", spec_model=None, spec_tokens=3, speculative_config=None,
                           additional_config=None)
    _plugin._translate_engine_args(args, frozenset(FIELDS))
    assert args.speculative_config["method"] == "custom_class"
    assert "VLLM_USE_V2_MODEL_RUNNER" not in os.environ
