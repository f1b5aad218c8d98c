"""The INI presets loaded the way users load them: llama-server's router with ``--models-preset``.

Each shipped section is copied into one presets file with a ``model`` line added (what
docs/llamacpp.md tells users to do). The router must list every section with our flags on
the command line it would start, and the n-gram and draft-model sections must really
speculate when a request names them. The MTP sections need a GGUF with MTP layers, which no
PyPI package ships, so they are checked as far as the router's parsing goes.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from specplug._presets import list_presets
from specplug_adapters.llamacpp import help_options, server_help
from specplug_adapters.llamacpp._binary import hermetic_env
from specplug_adapters.llamacpp._server import _free_port

PRESETS = {preset.name: preset for preset in list_presets("llama-server")}
NEEDS_MTP_LAYERS = {name for name, preset in PRESETS.items() if "draft-mtp" in preset.options().get("spec-type", "")}


def _get(url: str, payload: dict | None = None, timeout: float = 300) -> dict:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def router(tmp_path_factory, server_binary, smollm2):
    home = tmp_path_factory.mktemp("router")
    sections = []
    for name, preset in PRESETS.items():
        lines = [f"[{name}]", f"model = {smollm2}", "ctx-size = 2048"]
        if name == "draft-model":  # SmolLM2 drafts for itself: the plumbing, not the speed
            lines.append(f"spec-draft-model = {smollm2}")
        lines += [f"{key} = {value}" for key, value in preset.options().items()]
        sections.append("\n".join(lines))
    presets_file = home / "presets.ini"
    presets_file.write_text("\n\n".join(sections) + "\n")
    port = _free_port()
    command = [
        server_binary, "--models-preset", str(presets_file), "--models-max", "1",
        "--host", "127.0.0.1", "--port", str(port), "-t", "1", "-tb", "1",
    ]  # fmt: skip
    log = (home / "router.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=hermetic_env(home=str(home)), cwd=home)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, f"the router exited: {Path(log.name).read_text()[-2000:]}"
            try:
                _get(url + "/v1/models", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "the router did not answer within 120 s"
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_the_router_lists_every_preset_with_its_flags(router, server_binary):
    options = help_options(server_help(server_binary))
    models = {model["id"]: model for model in _get(router + "/v1/models")["data"]}
    assert set(PRESETS) <= set(models), f"sections missing from the router: {sorted(set(PRESETS) - set(models))}"
    for name, preset in PRESETS.items():
        args = models[name]["status"]["args"]
        for key, value in preset.options().items():
            # the router writes each flag under one of its names (--spec-draft-p-min as --draft-p-min)
            spelled = [flag for flag in options[f"--{key}"].names if flag in args]
            assert spelled, f"{name}: the router would not pass --{key} (it would run {args})"
            if value.lower() != "true":
                given = args[args.index(spelled[0]) + 1]
                assert given == value, f"{name}: --{key} would be {given}, the preset says {value}"


@pytest.mark.parametrize("name", sorted(set(PRESETS) - NEEDS_MTP_LAYERS))
def test_a_request_naming_the_preset_speculates(router, name, code_prompts):
    answer = _get(
        router + "/completion",
        {"model": name, "prompt": code_prompts[0].text, "n_predict": 48, "temperature": 0.0, "top_k": 1},
    )
    timings = answer["timings"]
    assert timings.get("draft_n", 0) > 0 and timings.get("draft_n_accepted", 0) > 0, f"{name}: {timings}"
