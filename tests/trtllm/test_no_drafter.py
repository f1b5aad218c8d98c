"""A ``specplug:`` block naming a method that composes the model's own drafter (hybrid), served on a real
model: refused by ``specplug trtllm serve`` before TensorRT-LLM is needed, in one line with exit status 2."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from specplug_adapters.trtllm import TrtllmConfigError
from specplug_adapters.trtllm._launcher import plan_launch
from tests.vllm._paths import model_dir

CLI = [sys.executable, "-c", "from specplug.cli import main; main()"]


def expected(source: str, method: str, model: str) -> str:
    return (f"{source}: specplug.method = {method!r} drafts with the model's own drafter (MTP layers, an EAGLE head "
            f"or a draft model), but there is none for {model}: TensorRT-LLM's User_Provided path runs no MTP/EAGLE "
            "drafter beside specplug's")


@pytest.fixture
def hybrid_yaml(tmp_path):
    path = tmp_path / "hybrid.yaml"
    path.write_text(yaml.safe_dump({"specplug": {"method": "hybrid", "max_draft_len": 4}}))
    return path


def test_serve_is_one_line_and_exit_status_2_before_tensorrt_llm_is_needed(hybrid_yaml):
    result = subprocess.run([*CLI, "trtllm", "serve", model_dir(), "--config", str(hybrid_yaml)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert line.startswith("specplug: error: " + expected(str(hybrid_yaml), "hybrid", model_dir())), line
    assert "`specplug preset trtllm mtp-sa`" in line and "method: suffix" in line and "method: adaptive" in line
    assert "pip install tensorrt-llm" not in line  # refused before TensorRT-LLM is imported


def test_every_composing_method_is_refused_and_the_lookups_are_not(tmp_path, relay_distribution):
    for method in ("hybrid", "relay"):
        path = tmp_path / f"{method}.yaml"
        path.write_text(yaml.safe_dump({"specplug": {"method": method}}))
        with pytest.raises(TrtllmConfigError) as raised:
            plan_launch(["org/plain-7b", "--config", str(path)])
        assert str(raised.value).startswith(expected(str(path), method, "org/plain-7b"))
        assert "\n" not in str(raised.value)
    # options before the model: the line says "the model" rather than guess which argument it is
    with pytest.raises(TrtllmConfigError, match="there is none for the model:"):
        plan_launch(["--config", str(tmp_path / "hybrid.yaml"), "org/plain-7b"])
    for method in ("suffix", "adaptive"):
        path = tmp_path / f"{method}.yaml"
        path.write_text(yaml.safe_dump({"specplug": {"method": method}}))
        assert plan_launch(["org/plain-7b", "--config", str(path)]).settings.method == method
