"""Per-request control through vLLM's own OpenAI server: a real OpenAI client sets
``extra_body={"vllm_xargs": {...}}``; vLLM's metrics show the request undrafted or capped, specplug's
stats show it drafted only by the part of the server's method it names, greedy output stays the
same, and a bad value is the client's HTTP 400 while the server goes on."""

from __future__ import annotations

import json
import re

import openai
import pytest

from specplug_adapters.vllm import read_stats
from tests.served import drafts_by_source
from tests.vllm._paths import eagle_head_dir, model_dir
from tests.vllm.engine.conftest import get, vllm_serve

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


def test_off_and_a_cap_are_honoured_per_request_with_the_same_output(server):
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
    ({"specplug_mode": "fast"},
     "'specplug_mode' is not valid; specplug reads specplug_draft, specplug_max_draft_tokens, specplug_method"),
    ({"specplug_method": "ngram"}, "specplug_method = 'ngram' is not valid; this server honours suffix"),
])
def test_a_bad_control_is_a_400_and_the_server_goes_on(server, xargs, message):
    base, _ = server
    with pytest.raises(openai.BadRequestError) as caught:
        complete(base, xargs)
    assert caught.value.status_code == 400 and message in str(caught.value)
    assert get(base + "/health") == ""


def test_a_single_method_server_takes_its_own_name(server):
    base, stats = server
    text, _, _ = complete(base, None)
    before = drafts_by_source(stats)
    named_text, drafts, _ = complete(base, {"specplug_method": "suffix"})
    assert named_text == text and drafts > 0
    assert drafts_by_source(stats)["suffix"] > before["suffix"]


# a composite server: specplug.adaptive over its lookups, specplug.hybrid over the trained EAGLE head
COMPOSITES = {
    "specplug.adaptive": ({"method": "specplug.adaptive", "num_speculative_tokens": 8}, ("adaptive", "suffix", "ngram")),
    "specplug.hybrid": ({"method": "specplug.hybrid", "neural": "eagle", "num_speculative_tokens": 3},
                        ("hybrid", "suffix", "neural")),
}
#: what the stats call the drafts of each name a request may give
SOURCES = {"suffix": "suffix", "ngram": "ngram", "neural": "eagle"}
#: a list the model goes on with: each lookup finds its continuation within the request itself
LIST_PROMPT = "apple, pear, plum, fig, apple, pear, plum, fig, apple, pear, plum, fig, apple, pear,"


def continued(base: str, xargs: dict | None) -> tuple[str, float]:
    """The greedy continuation of :data:`LIST_PROMPT` under ``xargs`` (a real OpenAI client), and
    the drafts vLLM counted for it alone."""
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=300, max_retries=0)
    drafts, _ = spec_counts(base)
    answer = client.completions.create(model="smol", prompt=LIST_PROMPT, max_tokens=TOKENS, temperature=0,
                                       extra_body={"vllm_xargs": xargs} if xargs is not None else None)
    return answer.choices[0].text, spec_counts(base)[0] - drafts


@pytest.fixture(scope="module", params=sorted(COMPOSITES))
def composite(request, vllm_cpu, tmp_path_factory):
    """`vllm serve` with a composite method; its stats written every step."""
    speculative, names = COMPOSITES[request.param]
    if "neural" in speculative:
        speculative = {**speculative, "model": eagle_head_dir()}
    stats = tmp_path_factory.mktemp("composite") / "stats.json"
    options = ["--speculative-config", json.dumps(speculative)]
    with vllm_serve(model_dir(), "smol", options, stats, f"vllm serve ({request.param})") as base:
        yield base, stats, names


def test_a_request_naming_a_part_is_drafted_by_that_part_alone_with_the_same_output(composite):
    base, stats, names = composite
    text, drafts = continued(base, None)
    assert drafts > 0
    for name in names[1:]:
        before = drafts_by_source(stats)
        named_text, named_drafts = continued(base, {"specplug_method": name})
        after = drafts_by_source(stats)
        gained = {source: after[source] - before[source] for source in after if after[source] != before[source]}
        assert named_text == text, name
        assert gained and set(gained) == {SOURCES[name]} and named_drafts > 0, (name, gained)
    own_text, _ = continued(base, {"specplug_method": names[0]})  # the server's own name: as it chooses
    assert own_text == text
    counters = read_stats(stats)["counters"]
    assert counters["request_control.method"] > 0 and counters.get("faults", 0) == 0, counters


def test_a_method_the_server_cannot_honour_is_a_400_naming_its_own(composite):
    base, _, names = composite
    with pytest.raises(openai.BadRequestError) as caught:
        complete(base, {"specplug_method": "eagle3"})
    message = f"specplug_method = 'eagle3' is not valid; this server honours {', '.join(names)}"
    assert caught.value.status_code == 400 and message in str(caught.value)
    assert get(base + "/health") == ""
    assert complete(base, {"specplug_method": names[1]})[0]  # and it goes on serving
