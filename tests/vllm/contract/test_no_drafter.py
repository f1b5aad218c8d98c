"""A method that composes the model's own drafter, on a model without one: refused before vLLM builds
its speculative config, naming the method, the model and the fixes (plain dicts, then vLLM's real
config classes and the target's config; no engine)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")  # the CUDA wheel's CLI parser asks for a device

import specplug  # noqa: E402
from specplug_adapters.vllm import translate  # noqa: E402
from specplug_adapters.vllm._config import TargetModel  # noqa: E402
from tests.vllm._paths import SETUP_HINT, model_dir  # noqa: E402

FIELDS = ["method", "model", "num_speculative_tokens", "disable_padded_drafter_batch"]
PLAIN = TargetModel("org/plain-7b", "LlamaForCausalLM", has_mtp=False)
WITH_MTP = TargetModel("org/mtp-model", "DeepseekV3ForCausalLM", has_mtp=True)
#: what every refusal says besides the method and the model: the two ways out
FIXES = ('give an EAGLE head or a draft model of the same vocabulary (--spec-model HEAD, or "model": HEAD',
         'use a lookup method that needs none: specplug.suffix, or specplug.adaptive without "neural"')


def refusal(spec: dict, target: TargetModel | None = PLAIN) -> str:
    with pytest.raises(specplug.NoDrafterError) as raised:
        translate(spec, None, FIELDS, target)
    message = str(raised.value)
    assert "\n" not in message and all(fix in message for fix in FIXES), message
    return message


@pytest.mark.parametrize("method", ["hybrid", "relay"])
def test_a_composing_method_on_a_model_without_mtp_names_the_method_the_model_and_the_fixes(method, relay_distribution):
    message = refusal({"method": f"specplug.{method}", "num_speculative_tokens": 4})
    assert message.startswith(f"specplug.{method} drafts with the model's own drafter")
    assert "there is none for org/plain-7b (LlamaForCausalLM): it has no MTP layers" in message
    # naming mtp explicitly is the same request
    assert "has no MTP layers" in refusal({"method": f"specplug.{method}", "neural": "mtp"})


def test_adaptive_is_refused_only_with_a_neural_part():
    assert "specplug.adaptive" in refusal({"method": "specplug.adaptive", "neural": "mtp"})
    spec, extra = translate({"method": "specplug.adaptive", "num_speculative_tokens": 4}, None, FIELDS, PLAIN)
    assert spec["method"] == "custom_class" and extra["specplug"] == {"method": "adaptive"}


@pytest.mark.parametrize("neural", ["eagle", "eagle3", "draft_model"])
def test_a_head_method_without_its_head_is_refused_whatever_the_model(neural):
    message = refusal({"method": "specplug.hybrid", "neural": neural}, WITH_MTP)
    assert f"neural = {neural!r} drafts with a head or draft model" in message


def test_a_model_with_mtp_layers_a_given_head_or_an_unknown_target_go_on_to_vllm():
    spec, _ = translate({"method": "specplug.hybrid", "num_speculative_tokens": 4}, None, FIELDS, WITH_MTP)
    assert spec["method"] == "mtp"
    spec, extra = translate({"method": "specplug.hybrid", "model": "/m/head"}, None, FIELDS, PLAIN)
    assert spec == {"model": "/m/head"} and extra["specplug"]["neural"] is None
    spec, _ = translate({"method": "specplug.hybrid", "neural": "eagle", "model": "/m/head"}, None, FIELDS, PLAIN)
    assert spec["method"] == "eagle"
    # vLLM's mapping unavailable: vLLM decides, as without specplug
    spec, _ = translate({"method": "specplug.hybrid"}, None, FIELDS, TargetModel("m", has_mtp=None))
    assert spec["method"] == "mtp"


# ------------------------------------------------------------------------- vLLM's own mapping
@pytest.fixture(scope="module")
def target_model():
    try:
        from specplug_adapters.vllm._target import target_model
        import vllm.config.speculative  # noqa: F401
    except ImportError as error:  # a failure, never a skip
        pytest.fail(f"vLLM is not importable ({error}); {SETUP_HINT}")
    return target_model


def _config(kind: str, **values):
    import transformers

    config = getattr(transformers, kind)(**values)
    config.architectures = [kind.replace("Config", "ForCausalLM")]
    return config


@pytest.mark.parametrize(
    ("config", "values", "has_mtp"),
    [
        ("DeepseekV3Config", {"num_nextn_predict_layers": 1}, True),
        ("DeepseekV3Config", {"num_nextn_predict_layers": 0}, False),  # a V3 architecture with its MTP layer dropped
        ("Qwen3NextConfig", {}, True),
        ("LlamaConfig", {}, False),
        ("Qwen2Config", {}, False),
    ],
)
def test_mtp_layers_are_read_through_vllms_own_mapping(target_model, config, values, has_mtp):
    hf_config = _config(config, **values)
    target = target_model(SimpleNamespace(model="org/m", hf_config=hf_config))
    assert target == TargetModel("org/m", config.replace("Config", "ForCausalLM"), has_mtp)
    assert hf_config.model_type == _config(config, **values).model_type  # vLLM's mapping ran on a copy


def test_the_real_config_path_raises_specplugs_error_naming_the_model(target_model):
    from vllm.engine.arg_utils import EngineArgs
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    args = EngineArgs(model=model_dir(), max_model_len=1024,
                      speculative_config={"method": "specplug.hybrid", "num_speculative_tokens": 4})
    with pytest.raises(specplug.NoDrafterError) as raised:
        args.create_engine_config()
    assert f"there is none for {model_dir()} (LlamaForCausalLM): it has no MTP layers" in str(raised.value)


def server_parser():
    """The OpenAI server's parser, with the plugin loaded (where the module lives differs between builds)."""
    import importlib
    import importlib.util

    from vllm.plugins import load_general_plugins
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    load_general_plugins()
    places = ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args", "vllm.entrypoints.openai.cli_args")
    name = next(place for place in places if importlib.util.find_spec(place) is not None)
    return importlib.import_module(name).make_arg_parser(FlexibleArgumentParser())


def test_from_the_command_line_it_is_one_line_and_exit_status_2(target_model, capsys):
    from vllm.engine.arg_utils import EngineArgs

    args = server_parser().parse_args(["--model", model_dir(), "--max-model-len", "1024", "--spec-method",
                                       "specplug.hybrid", "--spec-tokens", "4"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        EngineArgs.from_cli_args(args).create_engine_config()
    assert exited.value.code == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if line.startswith("specplug:")]
    assert line.startswith("specplug: error: specplug.hybrid drafts with the model's own drafter")
    assert model_dir() in line and "Traceback" not in err


def test_from_the_command_line_a_head_in_spec_model_goes_on(target_model, monkeypatch):
    from vllm.engine.arg_utils import EngineArgs

    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    # the model drafting for itself stands in for a head of the same vocabulary
    args = server_parser().parse_args(["--model", model_dir(), "--max-model-len", "1024", "--spec-method",
                                       "specplug.hybrid", "--spec-model", model_dir(), "--spec-tokens", "3"])
    config = EngineArgs.from_cli_args(args).create_engine_config()
    assert config.speculative_config.method == "draft_model"
    assert config.additional_config["specplug"] == {"method": "hybrid", "neural": None}
