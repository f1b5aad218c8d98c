"""``vllm serve`` with specplug's flags on a loopback port answers OpenAI-style requests."""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.request
from pathlib import Path

import pytest

from specplug.lab.local_server import free_port
from tests.served import served
from specplug_adapters.vllm import read_stats
from tests.vllm._paths import ROOT, model_dir
from tests.vllm.engine.conftest import conversations

STARTUP_S = 420  # 30 s alone; a busy 2-core machine takes several times that


def get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read().decode()


@pytest.fixture(scope="module")
def server(vllm_cpu, tmp_path_factory):
    """`vllm serve MODEL --spec-method specplug.suffix --spec-tokens 8` on 127.0.0.1."""
    cli = Path(sys.executable).parent / "vllm"
    assert cli.is_file(), f"{cli} is missing: the vllm-cpu install has no vllm command"
    port = free_port()
    stats = tmp_path_factory.mktemp("server") / "stats.json"
    command = [
        str(cli), "serve", model_dir(), "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
        "--enforce-eager", "--max-model-len", "2048", "--max-num-seqs", "2", "--served-model-name", "smol",
        "--spec-method", "specplug.suffix", "--spec-tokens", "8",
        "--additional-config", json.dumps({"specplug": {"stats_file": str(stats), "stats_interval": 0}}),
    ]
    with served(command, port, name="vllm serve", log=stats.parent / "server.log",
                env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}, timeout_s=STARTUP_S, cwd=ROOT, new_session=True) as base:
        yield base, stats


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
