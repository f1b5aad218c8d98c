"""SGLang's own server under data and tensor parallelism on this CPU's two cores (``--dp 2``, ``--tp 2``; one
core a rank through ``SGLANG_CPU_OMP_THREADS_BIND``), with SPECPLUG_SUFFIX and SPECPLUG_HYBRID_EAGLE over a
random-weight head: every scheduler process drafts with specplug, the ranks
of one tensor-parallel group count the same drafts, and every request's greedy text equals the same request's
with ``specplug_draft: off``. A server that does not answer within the timeouts (ranks that disagree on the
drafter's collectives would hang) fails the test.

``--tp 2`` runs tests/tiny_llama.py's random Llama (SmolLM2's 9 heads do not split in two)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from specplug.engine import read_stats
from specplug.lab.local_server import free_port
from specplug_adapters.sglang import STATS_FILE_ENV, STATS_INTERVAL_ENV
from tests.sglang.engine.conftest import PROMPTS, SAMPLING
from tests.sglang.engine.eagle_head import make_sglang_eagle_head
from tests.sglang.engine.test_server import STARTUP_S, _flags
from tests.served import served

#: one request's answer on a shared 2-core machine (a hang fails here)
REQUEST_TIMEOUT_S = 600


@pytest.fixture(scope="module")
def tiny_model(sglang, model_dir, tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("tiny-llama")
    result = subprocess.run(
        [sys.executable, "-c", f"from tests.tiny_llama import tiny_llama; tiny_llama({model_dir!r}, {str(out)!r})"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return str(out)


def serving(model: str, parallel: list[str], speculative: list[str], stats: Path):
    """``launch_server`` with ``parallel`` flags and the two cores split between its ranks (a context: its URL)."""
    port = free_port()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--port", str(port), *parallel,
               *speculative, *_flags()]
    env = {**os.environ, STATS_FILE_ENV: str(stats / "stats-{pid}.json"), STATS_INTERVAL_ENV: "0",
           "SGLANG_CPU_OMP_THREADS_BIND": "0|1"}
    return served(command, port, name="launch_server", log=stats / "server.log", env=env, timeout_s=STARTUP_S)


def generate(base: str, prompt: str, custom_params: dict | None) -> dict:
    sampling = {**SAMPLING, "custom_params": custom_params} if custom_params else dict(SAMPLING)
    body = json.dumps({"text": prompt, "sampling_params": sampling}).encode()
    request = urllib.request.Request(base + "/generate", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:  # noqa: S310 - loopback only
        return json.loads(response.read())


def drafted_and_undrafted(base: str) -> tuple[list[dict], list[dict]]:
    """Each prompt twice with drafting and once with ``specplug_draft: off``, all at once (so a data-parallel
    server spreads them over its engines)."""
    jobs = [(prompt, None) for prompt in PROMPTS] * 2 + [(prompt, {"specplug_draft": "off"}) for prompt in PROMPTS]
    with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:
        answers = list(pool.map(lambda job: generate(base, *job), jobs))
    return answers[: 2 * len(PROMPTS)], answers[2 * len(PROMPTS) :]


def assert_identical_and_drafted(drafted: list[dict], undrafted: list[dict]) -> None:
    for index, off in enumerate(undrafted):
        for on in (drafted[index], drafted[len(PROMPTS) + index]):
            assert on["text"] == off["text"], (on["text"], off["text"])
    # the first prompt's answer copies its lines: drafted, it takes fewer verify steps than tokens
    first = drafted[0]["meta_info"]
    assert first["spec_verify_ct"] < first["completion_tokens"], first


def rank_counters(stats: Path, ranks: int) -> list[dict]:
    files = sorted(stats.glob("stats-*.json"))
    assert len(files) == ranks, f"{len(files)} stats files for {ranks} scheduler processes: {files}"
    return [read_stats(path)["counters"] for path in files]


def speculative_flags(algorithm: str, model: str, head_dir: Path) -> list[str]:
    """The flags of ``algorithm``: the suffix lookup's width, or a random-weight EAGLE head for ``model``."""
    if algorithm == "SPECPLUG_SUFFIX":
        return ["--speculative-algorithm", algorithm, "--speculative-num-draft-tokens", "6"]
    head = make_sglang_eagle_head(model, head_dir)
    return ["--speculative-algorithm", algorithm, "--speculative-draft-model-path", str(head), "--speculative-num-steps", "3"]


def assert_sources(counters: dict, algorithm: str) -> None:
    assert counters.get("drafts.suffix", 0) > 0 and counters.get("faults", 0) == 0, counters
    if algorithm == "SPECPLUG_HYBRID_EAGLE":
        assert counters.get("drafts.eagle", 0) > 0 and counters.get("overlaid_rows", 0) > 0, counters


@pytest.mark.parametrize("algorithm", ["SPECPLUG_SUFFIX", "SPECPLUG_HYBRID_EAGLE"])
def test_data_parallel_engines_each_draft_and_match_undrafted_requests(model_dir, tmp_path, algorithm):
    stats = tmp_path / "stats"
    stats.mkdir()
    with serving(model_dir, ["--dp", "2"], speculative_flags(algorithm, model_dir, tmp_path / "eagle-head"), stats) as base:
        drafted, undrafted = drafted_and_undrafted(base)
    assert_identical_and_drafted(drafted, undrafted)
    for counters in rank_counters(stats, 2):
        assert_sources(counters, algorithm)


@pytest.mark.parametrize("algorithm", ["SPECPLUG_SUFFIX", "SPECPLUG_HYBRID_EAGLE"])
def test_tensor_parallel_ranks_draft_alike_and_match_undrafted_requests(tiny_model, tmp_path, algorithm):
    stats = tmp_path / "stats"
    stats.mkdir()
    with serving(tiny_model, ["--tp", "2"], speculative_flags(algorithm, tiny_model, tmp_path / "eagle-head"), stats) as base:
        drafted, undrafted = drafted_and_undrafted(base)
    assert_identical_and_drafted(drafted, undrafted)
    first, second = rank_counters(stats, 2)
    assert_sources(first, algorithm)
    # the ranks of one group chose alike: the same drafts from each source, the same rows overlaid
    chosen = [key for key in first if key.startswith(("drafts.", "overlaid_rows", "off_rows", "capped_rows"))]
    assert all(first[key] == second.get(key) for key in chosen), (first, second)
