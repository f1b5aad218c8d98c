"""``vllm serve --data-parallel-size 2`` on this CPU with specplug.suffix, specplug.adaptive and the
specplug.hybrid overlay over a draft model (the tiny model drafting for itself; the overlay runs the drafter's
whole pass every step under data parallelism): both engines draft, and every request's greedy tokens equal the
same request's with drafting turned off (``specplug_draft: off``; the overlay's draft-model drafts are verified
either way, so there it checks the identity only)."""

from __future__ import annotations

import json
import os
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import openai
import pytest

from specplug.lab.local_server import free_port
from tests.served import served
from tests.vllm._paths import ROOT
from tests.vllm.engine.test_parallel import MAX_TOKENS, PROMPTS, tiny_model  # noqa: F401 - the model fixture
from tests.vllm.engine.test_server import STARTUP_S, get


METHODS = ["specplug.suffix", "specplug.adaptive", "specplug.hybrid"]


@pytest.fixture(scope="module", params=METHODS)
def server(request, tiny_model, tmp_path_factory):  # noqa: F811
    cli = Path(sys.executable).parent / "vllm"
    port = free_port()
    if request.param == "specplug.hybrid":
        speculative = {"method": request.param, "neural": "draft_model", "model": tiny_model, "num_speculative_tokens": 3}
    else:
        speculative = {"method": request.param, "num_speculative_tokens": 4}
    command = [str(cli), "serve", tiny_model, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", "1024", "--max-num-seqs", "2", "--served-model-name", "tiny",
               "--data-parallel-size", "2", "--speculative-config", json.dumps(speculative)]
    with served(command, port, name=f"vllm serve (DP 2, {request.param})", log=tmp_path_factory.mktemp("dp") / "server.log",
                env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}, timeout_s=STARTUP_S, cwd=ROOT, new_session=True) as base:
        yield base


def tokens(base: str, prompt: list[int], xargs: dict | None) -> list[int]:
    client = openai.OpenAI(base_url=base + "/v1", api_key="none", timeout=300, max_retries=0)
    extra = {"return_token_ids": True, "ignore_eos": True}
    if xargs:
        extra["vllm_xargs"] = xargs
    answer = client.completions.create(model="tiny", prompt=prompt, max_tokens=MAX_TOKENS, temperature=0, extra_body=extra)
    return list(answer.choices[0].token_ids)


def test_both_engines_draft_and_match_undrafted_requests(server):
    with ThreadPoolExecutor(4) as pool:  # concurrent, so both data-parallel engines get requests
        drafted = list(pool.map(lambda prompt: tokens(server, prompt, None), PROMPTS * 2))
        undrafted = list(pool.map(lambda prompt: tokens(server, prompt, {"specplug_draft": "off"}), PROMPTS * 2))
    assert drafted == undrafted
    accepted = dict(re.findall(r'^vllm:spec_decode_num_accepted_tokens_total\{engine="(\d+)"[^}]*\} (\S+)$',
                               get(server + "/metrics"), re.M))
    assert set(accepted) == {"0", "1"} and all(float(value) > 0 for value in accepted.values()), accepted
