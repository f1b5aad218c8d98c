"""``specplug.hybrid`` on a real model without MTP layers and no head given: refused before any engine
process starts, in one line, by the server's command line (exit status 2) and by ``LLM(...)``
(specplug's own error, not vLLM's NotImplementedError)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import specplug
from specplug.lab.local_server import free_port
from tests.vllm._paths import ROOT, model_dir

#: the start fails in the config check: seconds of imports, no model load
START_S = 240
SERVERS = {
    "api_server": [sys.executable, "-m", "vllm.entrypoints.openai.api_server"],
    "vllm serve": [str(Path(sys.executable).parent / "vllm"), "serve"],
}


def expected_start(model: str) -> str:
    return (f"specplug: error: specplug.hybrid drafts with the model's own drafter (MTP layers, an EAGLE head or a "
            f"draft model), but there is none for {model} (LlamaForCausalLM): it has no MTP layers")


@pytest.mark.parametrize("server", list(SERVERS))
def test_the_server_start_is_one_line_and_exit_status_2(vllm_cpu, server):
    command = [*SERVERS[server], "--model", model_dir(), "--dtype", "float32", "--port", str(free_port()),
               "--spec-method", "specplug.hybrid", "--spec-tokens", "4"]
    if server == "vllm serve":  # the model is serve's positional argument
        command = [*SERVERS[server], model_dir(), *command[len(SERVERS[server]) + 2:]]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=START_S,
                            env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    ours = [line for line in result.stderr.splitlines() if line.startswith("specplug:")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert len(ours) == 1 and ours[0].startswith(expected_start(model_dir())), result.stderr[-3000:]
    assert '--spec-model HEAD' in ours[0] and "specplug.suffix" in ours[0]
    assert "Traceback" not in result.stderr and "NotImplementedError" not in result.stderr + result.stdout
    # refused before the engine core process: vLLM never got to start it
    assert "EngineCore" not in result.stdout + result.stderr


def test_llm_raises_specplugs_own_error(vllm_cpu):
    from vllm import LLM

    with pytest.raises(specplug.NoDrafterError) as raised:
        LLM(model=model_dir(), dtype="float32", max_model_len=1024,
            speculative_config={"method": "specplug.hybrid", "num_speculative_tokens": 4})
    assert ("specplug: error: " + str(raised.value)).startswith(expected_start(model_dir()))
