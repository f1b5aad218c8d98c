"""Fixtures for the llama.cpp tests: the real llama-server, the real SmolLM2 model, real prompts.

Nothing here skips: a missing binary, model or llama-cpp-python raises in the fixture, so
the test fails with the message of the adapter's error (scripts/setup_llamacpp.sh installs
all three).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specplug.lab.llamacpp import Prompt, load_prompts, shipped_prompts
from specplug_adapters.llamacpp import find_server
from specplug_adapters.llamacpp._server import check_model

ROOT = Path(__file__).resolve().parents[2]
SMOLLM2 = ROOT / ".models" / "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture(scope="session")
def server_binary() -> str:
    """The installed llama-server (fails, never skips, when it is missing)."""
    return str(find_server())


@pytest.fixture(scope="session")
def smollm2() -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB) as installed by scripts/setup_llamacpp.sh."""
    return check_model(SMOLLM2)


@pytest.fixture(scope="session")
def code_prompts() -> list[Prompt]:
    """Two of the shipped code-edit prompts (real functions of specplug's source)."""
    return load_prompts(shipped_prompts("code_edit"))[:2]
