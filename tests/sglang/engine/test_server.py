"""One HTTP check: ``python -m sglang.launch_server --speculative-algorithm SPECPLUG_SUFFIX``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request

import pytest

from specplug.lab.local_server import ServerNotReady, free_port, wait_until_ready
from tests.sglang.engine.conftest import ENGINE_ARGS, PROMPTS, SAMPLING

STARTUP_S = 300


def _flags() -> list[str]:
    flags = []
    for name, value in ENGINE_ARGS.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        else:
            flags += [flag, str(value)]
    return flags


def test_launch_server_serves_specplug_drafts_with_output_identical_to_plain(sglang, model_dir, plain):
    port = free_port()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_dir, "--port", str(port),
               "--speculative-algorithm", "SPECPLUG_SUFFIX", "--speculative-num-draft-tokens", "6", *_flags()]
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        try:
            wait_until_ready(process, f"http://127.0.0.1:{port}/health", name="launch_server", timeout_s=STARTUP_S, log=log.name)
        except ServerNotReady as error:
            pytest.fail(str(error))
        body = json.dumps({"text": PROMPTS[0], "sampling_params": SAMPLING}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.loads(response.read())
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    assert answer["text"] == plain[0]["text"]
    assert answer["meta_info"]["spec_verify_ct"] > 0
    assert answer["meta_info"]["completion_tokens"] > answer["meta_info"]["spec_verify_ct"]
