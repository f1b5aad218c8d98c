"""``vllm serve --data-parallel-size 2`` on this CPU with specplug.adaptive and the specplug.hybrid overlay over a
draft model (the tiny model drafting for itself; the overlay runs the drafter's whole pass every step under data
parallelism): both engines draft, and every request's greedy tokens equal the same request's with drafting turned
off (``specplug_draft: off``; the overlay's draft-model drafts are verified either way, so there it checks the
identity only). On the adaptive server, requests naming ``suffix`` are drafted by suffix alone in both engines:
the suffix method's own path under data parallelism, without a third server."""

from __future__ import annotations

import json
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from tests.served import drafts_by_source
from tests.vllm.engine.test_parallel import MAX_TOKENS, PROMPTS, tiny_model  # noqa: F401 - the model fixture
from tests.vllm.engine.conftest import get, vllm_serve


METHODS = ["specplug.adaptive", "specplug.hybrid"]


@pytest.fixture(scope="module", params=METHODS)
def server(request, tiny_model, tmp_path_factory):  # noqa: F811
    if request.param == "specplug.hybrid":
        speculative = {"method": request.param, "neural": "draft_model", "model": tiny_model, "num_speculative_tokens": 3}
    else:
        speculative = {"method": request.param, "num_speculative_tokens": 4}
    folder = tmp_path_factory.mktemp("dp")
    options = ["--data-parallel-size", "2", "--speculative-config", json.dumps(speculative)]
    with vllm_serve(tiny_model, "tiny", options, folder / "stats-{pid}.json", f"vllm serve (DP 2, {request.param})",
                    max_model_len=1024) as base:
        yield base, request.param, folder


def tokens(base: str, prompt: list[int], xargs: dict | None) -> list[int]:
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=300, max_retries=0)
    extra = {"return_token_ids": True, "ignore_eos": True}
    if xargs:
        extra["vllm_xargs"] = xargs
    answer = client.completions.create(model="tiny", prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, extra_body=extra)
    return list(answer.choices[0].token_ids)


def each_engines_drafts(folder: Path) -> list[Counter[str]]:
    """Each engine's draft counts by source (a stats file per engine process)."""
    return [drafts_by_source(path) for path in sorted(folder.glob("stats-*.json"))]


def answers(base: str, xargs: dict | None) -> list[list[int]]:
    with ThreadPoolExecutor(4) as pool:  # concurrent, so both data-parallel engines get requests
        return list(pool.map(lambda prompt: tokens(base, prompt, xargs), PROMPTS * 2))


def test_both_engines_draft_and_match_undrafted_requests(server):
    base, method, folder = server
    drafted = answers(base, None)
    undrafted = answers(base, {"specplug_draft": "off"})
    assert drafted == undrafted
    accepted = dict(re.findall(r'^vllm:spec_decode_num_accepted_tokens_total\{engine="(\d+)"[^}]*\} (\S+)$',
                               get(base + "/metrics"), re.M))
    assert set(accepted) == {"0", "1"} and all(float(value) > 0 for value in accepted.values()), accepted
    if method != "specplug.adaptive":
        return
    before = each_engines_drafts(folder)
    assert answers(base, {"specplug_method": "suffix"}) == undrafted
    after = each_engines_drafts(folder)
    assert len(before) == len(after) == 2, after
    for engine_before, engine_after in zip(before, after, strict=True):
        gained = {source for source in engine_after if engine_after[source] != engine_before[source]}
        assert gained == {"suffix"}, (engine_before, engine_after)
