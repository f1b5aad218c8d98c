"""The INI presets loaded the way users load them: llama-server's router with ``--models-preset``.

Each shipped section is copied into one presets file with a ``model`` line added (what
docs/llamacpp.md tells users to do). The router must list every section with our flags on
the command line it would start, and the n-gram and draft-model sections must really
speculate when a request names them. The MTP sections need a GGUF with MTP layers, which no
PyPI package ships, so they are checked as far as the router's parsing goes.
"""

from __future__ import annotations

import pytest

from specplug._presets import list_presets
from specplug_adapters.llamacpp import LlamaServer, help_options, server_help

PRESETS = {preset.name: preset for preset in list_presets("llama-server")}
NEEDS_MTP_LAYERS = {name for name, preset in PRESETS.items() if "draft-mtp" in preset.options().get("spec-type", "")}
#: presets chaining a head of the target (EAGLE-3, DFlash, DSpark): no GGUF of one ships for the test models
HEAD_TYPES = {"draft-eagle3", "draft-dflash", "draft-dspark"}
NEEDS_HEAD = {name for name, preset in PRESETS.items()
              if HEAD_TYPES & set(preset.options().get("spec-type", "").split(","))}


class _Router(LlamaServer):
    """llama-server as a router: it loads no model itself, each request names a presets section.
    (The runner's model argument only satisfies its checks; the sections carry the models.)"""

    def command(self) -> list[str]:
        threads = str(self.threads)
        return [self.binary, "--host", "127.0.0.1", "--port", str(self.port), "-t", threads, "-tb", threads, *self.flags]


@pytest.fixture(scope="module")
def router(tmp_path_factory, server_binary, smollm2):
    sections = []
    for name, preset in PRESETS.items():
        lines = [f"[{name}]", f"model = {smollm2}", "ctx-size = 2048"]
        if "draft-simple" in preset.options().get("spec-type", ""):  # SmolLM2 drafts for itself: the plumbing
            lines.append(f"spec-draft-model = {smollm2}")
        lines += [f"{key} = {value}" for key, value in preset.options().items()]
        sections.append("\n".join(lines))
    presets_file = tmp_path_factory.mktemp("router") / "presets.ini"
    presets_file.write_text("\n\n".join(sections) + "\n")
    with _Router(smollm2, ["--models-preset", str(presets_file), "--models-max", "1"], binary=server_binary) as server:
        yield server


def test_the_router_lists_every_preset_with_its_flags(router, server_binary):
    options = help_options(server_help(server_binary))
    models = {model["id"]: model for model in router._request("GET", "/v1/models", None, timeout=60)["data"]}
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


@pytest.mark.parametrize("name", sorted(set(PRESETS) - NEEDS_MTP_LAYERS - NEEDS_HEAD))
def test_a_request_naming_the_preset_speculates(router, name, code_prompts):
    request = {"model": name, "prompt": code_prompts[0].text, "n_predict": 48, "temperature": 0.0, "top_k": 1}
    answer = router._request("POST", "/completion", request, timeout=300)
    timings = answer["timings"]
    assert timings.get("draft_n", 0) > 0 and timings.get("draft_n_accepted", 0) > 0, f"{name}: {timings}"
