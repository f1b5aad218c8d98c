"""One HTTP check: ``python -m sglang.launch_server --speculative-algorithm SPECPLUG_SUFFIX``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from tests.sglang.engine.conftest import ENGINE_ARGS, PROMPTS, SAMPLING

STARTUP_S = 300


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _flags() -> list[str]:
    flags = []
    for name, value in ENGINE_ARGS.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        else:
            flags += [flag, str(value)]
    return flags


def _tail(path: str) -> str:
    with open(path, errors="replace") as handle:
        return handle.read()[-3000:]


def test_launch_server_serves_specplug_drafts_with_output_identical_to_plain(sglang, model_dir, plain):
    port = _port()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_dir, "--port", str(port),
               "--speculative-algorithm", "SPECPLUG_SUFFIX", "--speculative-num-draft-tokens", "6", *_flags()]
    with tempfile.NamedTemporaryFile("w+", suffix=".log", delete=False) as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if process.poll() is not None:
                pytest.fail(f"launch_server exited with {process.returncode}:\n{_tail(log.name)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"launch_server did not answer /health in {STARTUP_S} s:\n{_tail(log.name)}")
            time.sleep(2)
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
