"""scripts/train_eagle_head.py in its seconds-long mode: a head in vLLM's eagle layout, the same twice,
and the same again from its data cache.

No engine starts here; the trained head's run in vLLM is test_hybrid.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.vllm._paths import ROOT, model_dir

SCRIPT = ROOT / "scripts" / "train_eagle_head.py"
#: the head's own weights: what vLLM's EagleLlamaForCausalLM loads (embedding and LM head come from the target)
HEAD_WEIGHTS = {"fc.weight", "layers.0.post_attention_layernorm.weight"} | {
    f"layers.0.self_attn.{name}_proj.weight" for name in "qkvo"} | {
    f"layers.0.mlp.{name}_proj.weight" for name in ("gate", "up", "down")}


def train(out, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), "--tiny", "--target", model_dir(), "--out", str(out), *extra],
                          capture_output=True, text=True, timeout=600, check=False)


def test_tiny_training_writes_the_same_loadable_head_twice_and_from_its_data_cache(tmp_path):
    from safetensors.torch import load_file

    cache = tmp_path / "data.pt"
    first, second = train(tmp_path / "a"), train(tmp_path / "b", "--data-cache", str(cache))
    assert first.returncode == 0, first.stderr[-2000:]
    assert second.returncode == 0, second.stderr[-2000:]
    assert cache.is_file() and "data: saved to" in second.stdout
    # what the script must print: its data, its phases' times, the validation and held-out acceptance per position
    for line in ("data: ", "[distill]", "[train]", "epoch 1 (step", "validation acceptance 1: ",
                 "held-out acceptance", "per draft position: 1: "):
        assert line in first.stdout, (line, first.stdout[-2000:])
    weights = load_file(str(tmp_path / "a" / "model.safetensors"))
    assert set(weights) == HEAD_WEIGHTS
    assert {str(tensor.dtype) for tensor in weights.values()} == {"torch.bfloat16"}
    config = json.loads((tmp_path / "a" / "config.json").read_text())
    target = json.loads((ROOT / model_dir() / "config.json").read_text())
    assert config["architectures"] == ["EagleLlamaForCausalLM"] and config["num_hidden_layers"] == 1
    assert weights["fc.weight"].shape == (target["hidden_size"], 2 * target["hidden_size"])
    report = json.loads((tmp_path / "a" / "training.json").read_text())
    assert report["data"]["tokens"] > 0 and 0.0 <= report["eval"]["held_out"]["per_position"][0] <= 1.0
    assert report["data"]["validation_samples"] >= 1 and len(report["training"]["validation"]) == 2
    # deterministic given the seed: the same bytes from a second run
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    # the cache stands in for the data: no target forward, the same head
    third = train(tmp_path / "c", "--data-cache", str(cache))
    assert third.returncode == 0 and "data: loaded from" in third.stdout, third.stderr[-2000:]
    assert (tmp_path / "c" / "model.safetensors").read_bytes() == (tmp_path / "a" / "model.safetensors").read_bytes()
    # a cache made with other data options is refused in one line that names the option
    other = train(tmp_path / "d", "--data-cache", str(cache), "--seed", "1")
    assert other.returncode == 2 and "made with other data options (seed 0 there, 1 here)" in other.stderr
    assert "Traceback" not in other.stderr and not (tmp_path / "d").exists()


def test_bad_sizes_are_one_clear_line(tmp_path):
    result = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--prompts", "0"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 2 and "--prompts must be >= 1, got 0" in result.stderr
    assert "Traceback" not in result.stderr
    share = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--data-share", "0"],
                           capture_output=True, text=True, timeout=120, check=False)
    assert share.returncode == 2 and "--data-share must be in (0, 1], got 0.0" in share.stderr
    assert "Traceback" not in share.stderr
