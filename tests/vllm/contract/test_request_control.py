"""Per-request control in vLLM without an engine: the keys' checks, vLLM's validation error, and the
drafter and the hybrid overlay honouring a request's control row by row."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specplug import InvalidOptionError
from specplug.engine import RequestControl, request_control
from specplug_adapters.vllm._hybrid import HybridOverlay


@pytest.mark.parametrize(("params", "expected"), [
    (None, RequestControl()),
    ({"kv_transfer_params": {"x": 1}}, RequestControl()),  # another extension's key: left alone
    ({"specplug_draft": "on"}, RequestControl()),
    ({"specplug_draft": "off"}, RequestControl(off=True)),
    ({"specplug_max_draft_tokens": 0}, RequestControl(max_draft_tokens=0)),
    ({"specplug_max_draft_tokens": 3, "specplug_draft": "on"}, RequestControl(max_draft_tokens=3)),
    ({"specplug_method": "suffix"}, RequestControl(method="suffix")),
])
def test_a_request_control_reads_its_keys(params, expected):
    assert request_control(params) == expected


@pytest.mark.parametrize(("params", "message"), [
    ({"specplug_draft": True}, "specplug_draft = True is not valid; use one of on, off"),
    ({"specplug_max_draft_tokens": "2"}, "specplug_max_draft_tokens = '2' is not valid; it must be an integer >= 0"),
    ({"specplug_max_draft_tokens": True}, "specplug_max_draft_tokens = True is not valid"),
    ({"specplug_mode": "fast"},
     "'specplug_mode' is not valid; specplug reads specplug_draft, specplug_max_draft_tokens, specplug_method"),
    ({"specplug_method": 3}, "specplug_method = 3 is not valid; it must be a method name"),
])
def test_a_bad_request_control_is_one_clear_error(params, message):
    with pytest.raises(InvalidOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        request_control(params)


def test_the_check_raises_vllms_validation_error():
    from vllm.exceptions import VLLMValidationError

    from specplug_adapters.vllm._requests import check_request

    check_request({"specplug_draft": "off"})
    with pytest.raises(VLLMValidationError, match="specplug_draft = 'no' is not valid"):
        check_request({"specplug_draft": "no"})


def _requests(**extra_args: dict) -> dict:
    return {rid: SimpleNamespace(sampling_params=SimpleNamespace(extra_args=args)) for rid, args in extra_args.items()}


def test_the_overlay_keeps_a_request_that_is_off_undrafted_and_a_capped_one_short():
    batch = SimpleNamespace(token_ids_cpu=np.zeros((3, 256), dtype=np.int32), num_tokens_no_spec=np.zeros(3, dtype=np.int32),
                            req_ids=["a", "off", "cap"])
    for row in range(3):  # novel text: the lookup has nothing, the head's draft is taken where allowed
        batch.token_ids_cpu[row, :20] = range(1000 * (row + 1), 1000 * (row + 1) + 20)
        batch.num_tokens_no_spec[row] = 20
    runner = SimpleNamespace(input_batch=batch, discard_request_mask=None,
                             requests=_requests(a=None, off={"specplug_draft": "off"}, cap={"specplug_max_draft_tokens": 1}))
    overlay = HybridOverlay(SimpleNamespace(
        additional_config={"specplug": {"method": "hybrid", "neural": "eagle", "lookup": "ngram", "explore": 0.0,
                                        "step_costs": "off"}},
        speculative_config=SimpleNamespace(method="eagle")))
    asked: list[int] = []

    def head(tokens: int):
        asked.append(tokens)
        return [[7] * tokens for _ in range(3)]

    out = overlay.apply(runner, 3, [[5], [5], [5]], head)
    assert asked == [3] and out == [[7, 7, 7], [], [7]]
    assert overlay.counters["request_control.off"] == 1 and overlay.counters["request_control.capped"] == 1
    runner.requests = _requests(a={"specplug_draft": "off"}, off={"specplug_draft": "off"}, cap={"specplug_draft": "off"})
    asked.clear()
    out = overlay.apply(runner, 3, [[7, 7, 7, 6], [6], [7, 6]], head)
    assert out == [[], [], []] and asked == [0]  # no row may draft: the drafter's fill pass only


def test_a_method_is_checked_against_the_servers_own_names():
    served = ("hybrid", "suffix", "neural")
    assert request_control({"specplug_method": "neural"}, served) == RequestControl(method="neural")
    with pytest.raises(InvalidOptionError, match="specplug_method = 'ngram' is not valid; this server honours hybrid, suffix, neural"):
        request_control({"specplug_method": "ngram"}, served)


def test_the_config_notes_what_its_requests_may_name_and_the_check_holds_them_to_it(monkeypatch):
    from vllm.exceptions import VLLMValidationError

    from specplug_adapters.vllm import _requests
    from specplug.engine import _request_control as request_control_module, noted_served
    from specplug_adapters.vllm._config import translate

    monkeypatch.setattr(request_control_module, "_served", None)
    _requests.check_request({"specplug_method": "anything"})  # no server built here: the engine checks it
    translate({"method": "specplug.adaptive", "num_speculative_tokens": 4}, None, ["method", "model", "num_speculative_tokens"])
    assert noted_served() == ("adaptive", "suffix", "ngram")
    _requests.check_request({"specplug_method": "ngram"})
    with pytest.raises(VLLMValidationError, match="specplug_method = 'neural' is not valid; this server honours adaptive, suffix, ngram"):
        _requests.check_request({"specplug_method": "neural"})
    translate({"method": "specplug.suffix", "num_speculative_tokens": 4}, None, ["method", "model", "num_speculative_tokens"])
    with pytest.raises(VLLMValidationError, match="specplug_method = 'ngram' is not valid; this server honours suffix \\("):
        _requests.check_request({"specplug_method": "ngram"})


def test_the_overlay_drafts_a_request_only_with_the_part_it_names():
    """A request restricted to the lookup never gets the head's draft, not even where the lookup has
    none (vLLM's own draft fills only rows the head may draft); one restricted to the head gets the
    head's where the lookup would have won; the head's pass runs for the batch when any row takes it."""
    batch = SimpleNamespace(token_ids_cpu=np.zeros((4, 256), dtype=np.int32), num_tokens_no_spec=np.zeros(4, dtype=np.int32),
                            req_ids=["free", "lookup-novel", "head", "lookup"])
    repeating = [1, 2, 3, 4] * 5
    for row, tokens in enumerate([repeating, range(1000, 1020), repeating, repeating]):
        batch.token_ids_cpu[row, :20] = list(tokens)
        batch.num_tokens_no_spec[row] = 20
    runner = SimpleNamespace(input_batch=batch, discard_request_mask=None, requests=_requests(
        free=None, **{"lookup-novel": {"specplug_method": "ngram"}}, head={"specplug_method": "neural"},
        lookup={"specplug_method": "hybrid"}))  # the server's own method: as the server chooses
    overlay = HybridOverlay(SimpleNamespace(
        additional_config={"specplug": {"method": "hybrid", "neural": "eagle", "lookup": "ngram", "explore": 0.0,
                                        "step_costs": "off"}},
        speculative_config=SimpleNamespace(method="eagle")))
    assert overlay.request_methods == ("hybrid", "ngram", "neural")
    asked: list[int] = []

    def head(tokens: int):
        asked.append(tokens)
        return [[7] * tokens for _ in range(4)]

    out = overlay.apply(runner, 3, [[4], [5], [4], [4]], head)
    assert asked == [3]
    assert out == [[1, 2, 3], [], [7, 7, 7], [1, 2, 3]]
    assert overlay.counters["request_control.method"] == 2 and overlay.counters.get("faults", 0) == 0
    runner.requests = _requests(**{name: {"specplug_method": "ngram"} for name in batch.req_ids})
    asked.clear()
    sampled = [[1], [6], [1], [1]]
    for row, tokens in enumerate(sampled):
        batch.token_ids_cpu[row, 20] = tokens[0]
        batch.num_tokens_no_spec[row] = 21
    out = overlay.apply(runner, 3, sampled, head)
    assert asked == [0] and out == [[2, 3, 4], [], [2, 3, 4], [2, 3, 4]]  # no row may take the head's: its fill only


def test_the_plugin_and_its_request_check_load_no_numba():
    """vLLM loads the plugin in every process before its CPU worker rebinds its kernels, walking the
    loaded modules; llvmlite's (numba's) objects make that walk fail, so the engine would not start."""
    import subprocess
    import sys

    code = ("import sys, specplug_adapters.vllm._plugin, specplug_adapters.vllm._requests, specplug_adapters.vllm._config; "
            "print(sorted(name for name in ('numba', 'llvmlite') if name in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert result.stdout.strip() == "[]", result.stdout
