"""Per-request control through vLLM's own OpenAI server: a real OpenAI client sets
``extra_body={"vllm_xargs": {...}}``; vLLM's metrics show the request undrafted or capped, greedy output
stays the same, and a bad value is the client's HTTP 400 while the server goes on."""

from __future__ import annotations

import re

import openai
import pytest

from specplug_adapters.vllm import read_stats
from tests.vllm.engine.test_server import get, server  # noqa: F401 - the module's server fixture

# a list the model repeats: the suffix method drafts most of it
PROMPT = "Repeat this list exactly, twice:\nitem 1: apple\nitem 2: pear\nitem 3: plum\nitem 4: fig\n"
TOKENS = 48


def spec_counts(base: str) -> tuple[float, float]:
    """vLLM's totals so far: (drafts, draft tokens)."""
    metrics = get(base + "/metrics")

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^vllm:spec_decode_{name}_total\{{[^}}]*\}} (\S+)$", metrics, re.M))

    return total("num_drafts"), total("num_draft_tokens")


def complete(base: str, xargs: dict | None) -> tuple[str, float, float]:
    """The greedy completion under ``xargs``, and the drafts and draft tokens vLLM counted for it alone."""
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=300, max_retries=0)
    drafts, tokens = spec_counts(base)
    answer = client.chat.completions.create(
        model="smol", messages=[{"role": "user", "content": PROMPT}], max_tokens=TOKENS, temperature=0,
        extra_body={"vllm_xargs": xargs} if xargs is not None else None,
    )
    after_drafts, after_tokens = spec_counts(base)
    return answer.choices[0].message.content, after_drafts - drafts, after_tokens - tokens


def test_off_and_a_cap_are_honoured_per_request_with_the_same_output(server):  # noqa: F811
    base, stats = server
    text, drafts, tokens = complete(base, None)
    assert tokens > drafts > 0  # as the server is set: drafts of several tokens
    off_text, _, off_tokens = complete(base, {"specplug_draft": "off"})
    assert off_tokens == 0 and off_text == text
    capped_text, capped_drafts, capped_tokens = complete(base, {"specplug_max_draft_tokens": 1})
    assert 0 < capped_tokens <= capped_drafts and capped_text == text  # every draft one token at most
    counters = read_stats(stats)["counters"]
    assert counters["request_control.off"] > 0 and counters["request_control.capped"] > 0
    assert counters.get("faults", 0) == 0, counters


@pytest.mark.parametrize(("xargs", "message"), [
    ({"specplug_draft": "maybe"}, "specplug_draft = 'maybe' is not valid; use one of on, off"),
    ({"specplug_max_draft_tokens": -1}, "specplug_max_draft_tokens = -1 is not valid; it must be an integer >= 0"),
    ({"specplug_max_draft_tokens": 1.5}, "specplug_max_draft_tokens = 1.5 is not valid"),
    ({"specplug_mode": "fast"}, "'specplug_mode' is not valid; specplug reads specplug_draft, specplug_max_draft_tokens"),
])
def test_a_bad_control_is_a_400_and_the_server_goes_on(server, xargs, message):  # noqa: F811
    base, _ = server
    with pytest.raises(openai.BadRequestError) as caught:
        complete(base, xargs)
    assert caught.value.status_code == 400 and message in str(caught.value)
    assert get(base + "/health") == ""
