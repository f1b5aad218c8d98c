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
])
def test_a_request_control_reads_its_keys(params, expected):
    assert request_control(params) == expected


@pytest.mark.parametrize(("params", "message"), [
    ({"specplug_draft": True}, "specplug_draft = True is not valid; use one of on, off"),
    ({"specplug_max_draft_tokens": "2"}, "specplug_max_draft_tokens = '2' is not valid; it must be an integer >= 0"),
    ({"specplug_max_draft_tokens": True}, "specplug_max_draft_tokens = True is not valid"),
    ({"specplug_method": "ngram"}, "'specplug_method' is not valid; specplug reads specplug_draft, specplug_max_draft_tokens"),
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
