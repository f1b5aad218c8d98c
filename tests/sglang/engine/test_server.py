"""One HTTP check: ``python -m sglang.launch_server --speculative-algorithm SPECPLUG_SUFFIX``."""

from __future__ import annotations

import json
import os
import sys
import urllib.request

from specplug.lab.local_server import free_port
from tests.sglang.engine.conftest import ENGINE_ARGS, PROMPTS, SAMPLING
from tests.served import served

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


def test_launch_server_serves_specplug_drafts_with_output_identical_to_plain(sglang, model_dir, plain, tmp_path):
    port = free_port()
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_dir, "--port", str(port),
               "--speculative-algorithm", "SPECPLUG_SUFFIX", "--speculative-num-draft-tokens", "6", *_flags()]
    with served(command, port, name="launch_server", log=tmp_path / "server.log", env=os.environ, timeout_s=STARTUP_S) as base:
        body = json.dumps({"text": PROMPTS[0], "sampling_params": SAMPLING}).encode()
        request = urllib.request.Request(base + "/generate", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=300) as response:
            answer = json.loads(response.read())
    assert answer["text"] == plain[0]["text"]
    assert answer["meta_info"]["spec_verify_ct"] > 0
    assert answer["meta_info"]["completion_tokens"] > answer["meta_info"]["spec_verify_ct"]
