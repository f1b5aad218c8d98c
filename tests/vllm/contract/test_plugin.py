"""The plugin against the real vLLM package (the CUDA wheel, installed --no-deps; no GPU needed).

vLLM must be installed: these tests fail, not skip, without it (scripts/setup_vllm.sh installs it).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import subprocess
import sys
from importlib import metadata

import pytest

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # the CUDA wheel's CLI parser asks for a device

import specplug  # noqa: E402
import specplug_adapters.vllm as adapter  # noqa: E402
from tests.vllm._paths import ROOT, SETUP_HINT, model_dir  # noqa: E402


@pytest.fixture(scope="module")
def vllm():
    try:
        module = importlib.import_module("vllm")
    except ImportError as error:  # a failure, never a skip: CI installs vLLM
        pytest.fail(f"vLLM is not importable ({error}); {SETUP_HINT}")
    version = adapter.installed_vllm_version()
    assert adapter.version_problem(version) is None, version
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    return module


def parser():
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    # the OpenAI server's parser: vllm.entrypoints.common.cli_args (0.33) or .openai.cli_args (0.32)
    name = "vllm.entrypoints.common.cli_args"
    if importlib.util.find_spec(name) is None:
        name = "vllm.entrypoints.openai.cli_args"
    return importlib.import_module(name).make_arg_parser(FlexibleArgumentParser())


def engine_config(**engine_args):
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(model=model_dir(), max_model_len=1024, **engine_args).create_engine_config()


def test_entry_point_is_published():
    points = {point.name: point.value for point in metadata.entry_points(group="vllm.general_plugins")}
    assert points.get("specplug") == "specplug_adapters.vllm:register"


def test_plugin_registers_once(vllm):
    from vllm.engine.arg_utils import EngineArgs

    assert {"config", "cli"} <= adapter.installed()
    wrapped = EngineArgs.create_speculative_config
    adapter.register()
    adapter.register()
    assert EngineArgs.create_speculative_config is wrapped  # idempotent: not wrapped twice
    assert not getattr(wrapped.__wrapped__, "__specplug_wraps__", False)


@pytest.mark.parametrize("method", ["suffix", "ngram", "adaptive", "hybrid"])
def test_cli_accepts_every_method_by_flag(vllm, method):
    args = parser().parse_args(["--model", "m", "--spec-method", f"specplug.{method}", "--spec-tokens", "8"])
    assert (args.spec_method, args.spec_tokens) == (f"specplug.{method}", 8)


def test_cli_takes_the_json_form_and_rejects_unknown_names(vllm, capsys):
    args = parser().parse_args(
        ["--model", "m", "-sc", '{"method": "specplug.hybrid", "num_speculative_tokens": 4}',
         "--additional-config", '{"specplug": {"lookup": "ngram"}}']
    )
    assert args.speculative_config == {"method": "specplug.hybrid", "num_speculative_tokens": 4}
    with pytest.raises(SystemExit):
        parser().parse_args(["--model", "m", "--spec-method", "specplug.nope"])
    assert "specplug.suffix" in capsys.readouterr().err  # argparse lists the valid choices


def test_flag_config_validates_into_the_custom_class_drafter(vllm):
    from vllm.engine.arg_utils import EngineArgs

    args = parser().parse_args(["--model", model_dir(), "--max-model-len", "1024", "--spec-method",
                                "specplug.suffix", "--spec-tokens", "8"])
    config = EngineArgs.from_cli_args(args).create_engine_config()
    spec = config.speculative_config
    assert (spec.method, spec.model, spec.num_speculative_tokens) == ("custom_class", adapter.DRAFTER_PATH, 8)
    assert config.additional_config["specplug"] == {"method": "suffix"}


def test_dict_config_with_options_validates(vllm):
    config = engine_config(
        speculative_config={"method": "specplug.adaptive", "num_speculative_tokens": 6, "min_gain": 0.1},
        additional_config={"specplug": {"candidates": ["ngram"]}},
    )
    assert config.speculative_config.method == "custom_class"
    assert config.additional_config["specplug"] == {"method": "adaptive", "candidates": ["ngram"], "min_gain": 0.1}
    # the drafter vLLM would build from this config
    drafter = importlib.import_module("specplug_adapters.vllm").SpecplugDrafter(config)
    assert drafter.settings.method == "adaptive" and drafter.num_speculative_tokens == 6


def test_unknown_option_fails_with_the_valid_ones(vllm):
    with pytest.raises(specplug.InvalidOptionError, match="unknown option 'max_deepth'.*max_depth"):
        engine_config(speculative_config={"method": "specplug.suffix", "num_speculative_tokens": 4, "max_deepth": 9})
    with pytest.raises(specplug.UnknownMethodError, match="specplug.adaptive"):
        engine_config(speculative_config={"method": "specplug.sufix", "num_speculative_tokens": 4})


def test_hybrid_with_a_draft_model_validates(vllm, monkeypatch):
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    config = engine_config(speculative_config={"method": "specplug.hybrid", "model": model_dir(),
                                               "num_speculative_tokens": 3})
    assert config.speculative_config.method == "draft_model"
    assert config.additional_config["specplug"] == {"method": "hybrid", "neural": None}
    assert os.environ["VLLM_USE_V2_MODEL_RUNNER"] == "0"  # the overlay lives in the V1 runner
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    with pytest.raises(ValueError, match="V1 model runner"):
        engine_config(speculative_config={"method": "specplug.hybrid", "model": model_dir(),
                                          "num_speculative_tokens": 3})


def test_overlay_wraps_the_runner_interface_it_relies_on(vllm):
    runner_module = importlib.import_module("vllm.v1.worker.gpu_model_runner")
    method = runner_module.GPUModelRunner.propose_draft_token_ids
    assert getattr(method, "__specplug_wraps__", False), "the post-import hook did not wrap the runner"
    assert "hybrid" in adapter.installed()
    parameters = list(inspect.signature(method.__wrapped__).parameters)
    assert parameters[:3] == ["self", "scheduler_output", "sampled_token_ids"]
    # the custom_class call the drafter implements
    source = inspect.getsource(method.__wrapped__)
    assert "self.input_batch.num_tokens_no_spec" in source and "self.input_batch.token_ids_cpu" in source
    from vllm.v1.worker.gpu_input_batch import InputBatch

    assert {"req_ids", "num_tokens_no_spec", "token_ids_cpu"} <= set(dir(InputBatch)) | set(
        inspect.signature(InputBatch.__init__).parameters) | _instance_attributes(InputBatch)


def _instance_attributes(cls) -> set[str]:
    source = inspect.getsource(cls.__init__)
    return {name for name in ("num_tokens_no_spec", "token_ids_cpu") if f"self.{name} =" in source}


def test_switched_off_by_environment():
    code = (
        "import os; os.environ.setdefault('VLLM_TARGET_DEVICE', 'cpu')\n"
        "from vllm.plugins import load_general_plugins; load_general_plugins()\n"
        "import specplug_adapters.vllm as a, json; print(json.dumps(sorted(a.installed())))\n"
    )
    env = {**os.environ, "SPECPLUG_VLLM_PLUGIN": "0"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
