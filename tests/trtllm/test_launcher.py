"""specplug trtllm serve and the Python form, with TensorRT-LLM's entry points replaced by recorders."""

from __future__ import annotations

import inspect
import sys
import types
from pathlib import Path

import argparse
import pytest
import yaml

from specplug_adapters.trtllm import MissingEngineError, TrtllmConfigError, speculative_config
from specplug_adapters.trtllm._drafter import SpecplugDrafter
from specplug_adapters.trtllm._launcher import EntryPoints, plan_launch, serve
from specplug_adapters.trtllm._resources import SpecplugResourceManager

MODEL_YAML = {
    "kv_cache_config": {"free_gpu_memory_fraction": 0.8},
    "cuda_graph_config": {"enable_padding": True, "max_batch_size": 64},
    "specplug": {"method": "suffix", "max_draft_len": 6, "max_depth": 20},
}


class UserProvidedDecodingConfig:
    """Records how ``tensorrt_llm.llmapi.UserProvidedDecodingConfig`` was built (keywords only)."""

    def __init__(self, **fields):
        self.fields = fields


class LaunchRecorder:
    """``launch_server(host, port, llm_args, metadata_server_cfg=None, server_role=None)`` of
    ``tensorrt_llm/commands/serve.py`` (1.2-1.4): records each call's positional and keyword arguments."""

    __signature__ = inspect.Signature(
        [inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
         for name, default in (("host", inspect.Parameter.empty), ("port", inspect.Parameter.empty),
                               ("llm_args", inspect.Parameter.empty), ("metadata_server_cfg", None), ("server_role", None))]
    )  # fmt: skip

    def __init__(self) -> None:
        self.calls: list[tuple[tuple, dict]] = []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))


class ServeCommand:
    """trtllm-serve's click ``serve`` command as the launcher uses it: ``main(args=, prog_name=,
    standalone_mode=True)`` parses the options, builds LLM arguments, merges the YAML over them and
    calls its module's ``launch_server`` positionally; it ends with SystemExit like click does."""

    def __init__(self, module) -> None:
        self.module = module

    def main(self, args, prog_name, standalone_mode=True):
        parser = argparse.ArgumentParser(prog=prog_name)
        parser.add_argument("model")
        parser.add_argument("--host", default="localhost")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--tp_size", type=int, default=1)
        parser.add_argument("--backend", default="pytorch")
        parser.add_argument("--config", "--extra_llm_api_options", dest="config")
        options = parser.parse_args(args)
        llm_args = {"model": options.model, "tensor_parallel_size": options.tp_size, "backend": options.backend}
        if options.config:
            self.module.seen_yaml = yaml.safe_load(Path(options.config).read_text())
            llm_args = llm_args | self.module.seen_yaml
        self.module.launch_server(options.host, options.port, llm_args)
        raise SystemExit(0)


def fake_serve_module() -> types.SimpleNamespace:
    """``tensorrt_llm.commands.serve``'s shape: ``serve`` and the ``launch_server`` it looks up at call time."""
    module = types.SimpleNamespace(launch_server=LaunchRecorder(), seen_yaml=None)
    module.serve = ServeCommand(module)
    return module


@pytest.fixture
def model_yaml(tmp_path):
    path = tmp_path / "model.yaml"
    path.write_text(yaml.safe_dump(MODEL_YAML))
    return path


@pytest.mark.parametrize("inline", [False, True])
def test_serve_passes_the_yaml_minus_specplug_plus_the_speculative_config_by_keyword(model_yaml, inline):
    module = fake_serve_module()
    entry = EntryPoints(module, UserProvidedDecodingConfig)
    config = [f"--config={model_yaml}"] if inline else ["--config", str(model_yaml)]
    code = serve(["/models/llama", "--host", "0.0.0.0", "--tp_size", "2", *config], entry_points=entry)
    assert code == 0
    engine_yaml = {key: value for key, value in MODEL_YAML.items() if key != "specplug"}
    assert module.seen_yaml == engine_yaml  # the file trtllm-serve read: exactly the YAML minus specplug
    (args, kwargs), = module.launch_server.calls
    assert args == () and set(kwargs) == {"host", "port", "llm_args"}  # what serve gave, every one by keyword
    assert kwargs["host"] == "0.0.0.0" and kwargs["port"] == 8000
    spec = kwargs["llm_args"].pop("speculative_config")
    assert kwargs["llm_args"] == {"model": "/models/llama", "tensor_parallel_size": 2, "backend": "pytorch", **engine_yaml}
    assert isinstance(spec, UserProvidedDecodingConfig) and set(spec.fields) == {"max_draft_len", "drafter", "resource_manager"}
    assert spec.fields["max_draft_len"] == 6
    drafter, resources = spec.fields["drafter"], spec.fields["resource_manager"]
    assert isinstance(drafter, SpecplugDrafter) and isinstance(resources, SpecplugResourceManager)
    assert resources.runtime is drafter.runtime and drafter.runtime.settings.options == {"max_depth": 20}
    assert module.launch_server is not None and not hasattr(module.launch_server, "__wrapped__")  # restored


def test_mistakes_in_the_yaml_stop_before_tensorrt_llm_is_needed(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"specplug": {"method": "suffix", "max_depth": 0}}))
    with pytest.raises(TrtllmConfigError, match=r"bad\.yaml: specplug block: method 'suffix': option max_depth = 0"):
        serve(["m", "--config", str(bad)])
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump({"specplug": {}, "speculative_config": {"decoding_type": "NGram", "max_draft_len": 2}}))
    with pytest.raises(TrtllmConfigError, match="both `specplug:` and `speculative_config:`"):
        plan_launch(["m", "--extra_llm_api_options", str(both)])
    with pytest.raises(TrtllmConfigError, match="needs the model.yaml"):
        plan_launch(["m", "--tp_size", "2"])
    native = tmp_path / "native.yaml"
    native.write_text(yaml.safe_dump({"speculative_config": {"decoding_type": "NGram", "max_draft_len": 2}}))
    with pytest.raises(TrtllmConfigError, match="no top-level `specplug:` block"):
        plan_launch(["m", "--config", str(native)])
    with pytest.raises(TrtllmConfigError, match="missing.yaml: cannot be read"):
        plan_launch(["m", "--config", str(tmp_path / "missing.yaml")])


@pytest.fixture
def cli(fresh_catalog):
    from specplug.cli import main  # `trtllm` is a built-in group of the CLI

    return main


@pytest.mark.skipif("tensorrt_llm" in sys.modules, reason="asserts the message for a machine without TensorRT-LLM")
def test_without_tensorrt_llm_one_line_says_how_to_install_it(cli, model_yaml, capsys):
    with pytest.raises(SystemExit) as done:
        cli(["trtllm", "serve", "model", "--config", str(model_yaml)])
    assert done.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pip install tensorrt-llm" in err
    with pytest.raises(MissingEngineError):
        speculative_config("suffix")


def test_cli_check_names_the_file_the_key_and_the_choices(cli, tmp_path, capsys):
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump({"speculative_config": {"decoding_type": "Ngram", "max_draft_len": 2}}))
    with pytest.raises(SystemExit) as done:
        cli(["trtllm", "check", str(path)])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"{path}: speculative_config.decoding_type = 'Ngram'" in err and "NGram" in err


def test_the_python_form_builds_user_provided_config_by_keyword():
    import specplug

    spec = speculative_config("ngram", max_draft_len=4, max_n=3, config_class=UserProvidedDecodingConfig)
    assert spec.fields["max_draft_len"] == 4 and spec.fields["drafter"].runtime.settings.options == {"max_n": 3}
    head = specplug.create("ngram")  # any Proposer stands for an engine drafter part
    hybrid = speculative_config("hybrid", max_draft_len=3, neural=head, config_class=UserProvidedDecodingConfig)
    assert hybrid.fields["drafter"].runtime._parts == {"neural": head}
    with pytest.raises(TrtllmConfigError, match="speculative_config\\(\\): specplug.method = 'hybrid' drafts with the model's own drafter"):
        speculative_config("hybrid", config_class=UserProvidedDecodingConfig)
