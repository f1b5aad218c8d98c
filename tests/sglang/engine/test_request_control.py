"""Per-request control through SGLang's own server (``launch_server --speculative-algorithm SPECPLUG_SUFFIX``,
and ``SPECPLUG_ADAPTIVE``): a real OpenAI client sets ``extra_body={"custom_params": {...}}``; SGLang's
per-request counts show the request undrafted or capped, specplug's stats show it drafted only by the part
of the server's method it names, greedy output stays the same, and a bad value is the client's HTTP 400."""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

import openai
import pytest

from specplug.engine import read_stats
from specplug.lab.local_server import free_port
from specplug_adapters.sglang import STATS_FILE_ENV, STATS_INTERVAL_ENV
from tests.sglang.engine.conftest import PROMPTS, SAMPLING
from tests.sglang.engine.test_server import STARTUP_S, _flags
from tests.served import drafts_by_source, served


def _launch(model_dir: str, folder: Path, algorithm: str):
    port = free_port()
    stats = folder / "stats.json"
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_dir, "--port", str(port),
               "--speculative-algorithm", algorithm, "--speculative-num-draft-tokens", "6", *_flags()]
    env = {**os.environ, STATS_FILE_ENV: str(stats), STATS_INTERVAL_ENV: "0"}
    return served(command, port, name=f"launch_server ({algorithm})", log=folder / "server.log", env=env,
                  timeout_s=STARTUP_S), stats


@pytest.fixture(scope="module")
def server(sglang, model_dir, tmp_path_factory):
    launched, stats = _launch(model_dir, tmp_path_factory.mktemp("sglang-server"), "SPECPLUG_SUFFIX")
    with launched as base:
        yield base, stats


def generate(base: str, custom_params: dict | None) -> dict:
    """``/generate`` with the request's controls: its text and SGLang's per-request counts (meta_info)."""
    sampling = {**SAMPLING, "custom_params": custom_params} if custom_params else dict(SAMPLING)
    body = json.dumps({"text": PROMPTS[0], "sampling_params": sampling}).encode()
    request = urllib.request.Request(base + "/generate", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:  # noqa: S310 - loopback only
        return json.loads(response.read())


def complete(base: str, custom_params: dict | None) -> str:
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=300, max_retries=0)
    answer = client.completions.create(
        model="default", prompt=PROMPTS[0], max_tokens=SAMPLING["max_new_tokens"], temperature=0,
        extra_body={"custom_params": custom_params} if custom_params else None,
    )
    return answer.choices[0].text


def test_off_and_a_cap_are_honoured_per_request_with_the_same_output(server):
    base, stats = server
    plain = generate(base, None)
    meta = plain["meta_info"]
    assert meta["completion_tokens"] > meta["spec_verify_ct"] * 1.5  # drafted: several tokens a step
    off = generate(base, {"specplug_draft": "off"})["meta_info"]
    assert off["completion_tokens"] <= off["spec_verify_ct"] + 1  # one token a step: nothing drafted
    capped = generate(base, {"specplug_max_draft_tokens": 1})["meta_info"]
    assert capped["completion_tokens"] <= 2 * capped["spec_verify_ct"] + 1  # at most one drafted token a step
    assert capped["spec_verify_ct"] < off["spec_verify_ct"]  # yet it drafted
    # the same greedy text whatever the request asked, through the OpenAI client too
    text = complete(base, None)
    assert complete(base, {"specplug_draft": "off"}) == text == complete(base, {"specplug_max_draft_tokens": 1})
    counters = read_stats(stats)["counters"]
    assert counters["request_control.off"] > 0 and counters["request_control.capped"] > 0
    assert counters.get("faults", 0) == 0, counters


@pytest.mark.parametrize(("params", "message"), [
    ({"specplug_draft": "maybe"}, "specplug_draft = 'maybe' is not valid; use one of on, off"),
    ({"specplug_max_draft_tokens": -1}, "specplug_max_draft_tokens = -1 is not valid; it must be an integer >= 0"),
    ({"specplug_mode": "fast"},
     "'specplug_mode' is not valid; specplug reads specplug_draft, specplug_max_draft_tokens, specplug_method"),
    ({"specplug_method": "ngram"}, "specplug_method = 'ngram' is not valid; this server honours suffix"),
])
def test_a_bad_control_is_a_400_and_the_server_goes_on(server, params, message):
    base, _ = server
    with pytest.raises(openai.BadRequestError) as caught:
        complete(base, params)
    assert caught.value.status_code == 400 and message in str(caught.value)
    with urllib.request.urlopen(base + "/health", timeout=30) as response:  # noqa: S310 - loopback only
        assert response.status == 200


@pytest.fixture(scope="module")
def adaptive(sglang, model_dir, tmp_path_factory):
    launched, stats = _launch(model_dir, tmp_path_factory.mktemp("sglang-adaptive"), "SPECPLUG_ADAPTIVE")
    with launched as base:
        yield base, stats


def test_a_request_naming_a_part_is_drafted_by_that_part_alone_with_the_same_output(adaptive):
    base, stats = adaptive
    text = complete(base, None)
    for name in ("suffix", "ngram"):
        before = drafts_by_source(stats)
        named = complete(base, {"specplug_method": name})
        after = drafts_by_source(stats)
        gained = {source for source in after if after[source] != before.get(source, 0)}
        assert named == text and gained == {name}, (name, gained)
    assert complete(base, {"specplug_method": "adaptive"}) == text  # the server's own name: as it chooses
    counters = read_stats(stats)["counters"]
    assert counters["request_control.method"] > 0 and counters.get("faults", 0) == 0, counters


def test_a_method_the_server_cannot_honour_is_a_400_naming_its_own(adaptive):
    base, _ = adaptive
    with pytest.raises(openai.BadRequestError) as caught:
        complete(base, {"specplug_method": "neural"})
    assert caught.value.status_code == 400
    assert "specplug_method = 'neural' is not valid; this server honours adaptive, suffix, ngram" in str(caught.value)
    assert complete(base, {"specplug_method": "ngram"})  # and it goes on serving
