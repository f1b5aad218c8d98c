"""``vllm serve`` with specplug's flags on a loopback port (conftest's ``server``) answers OpenAI-style requests."""

from __future__ import annotations

import json
import re
import urllib.request

from specplug_adapters.vllm import read_stats
from tests.vllm.engine.conftest import conversations, get


def test_chat_completion_with_specplug_drafts(server):
    base, stats = server
    body = json.dumps({"model": "smol", "messages": conversations()[-1], "max_tokens": 64,
                       "temperature": 0}).encode()
    request = urllib.request.Request(base + "/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:  # noqa: S310 - loopback only
        assert response.status == 200
        answer = json.loads(response.read())
    text = answer["choices"][0]["message"]["content"]
    assert "item 1" in text, text  # the model does repeat the list
    assert answer["usage"]["completion_tokens"] > 0
    # vLLM's own Prometheus metrics show specplug's drafts accepted
    metrics = get(base + "/metrics")
    accepted = [float(value) for value in
                re.findall(r"^vllm:spec_decode_num_accepted_tokens_total\{[^}]*\} (\S+)$", metrics, re.M)]
    assert accepted and sum(accepted) > 0, "no accepted draft tokens in /metrics"
    counters = read_stats(stats)["counters"]
    assert counters.get("drafts.suffix", 0) > 0 and counters.get("faults", 0) == 0, counters
