"""scripts/ holds the tools a user, CI or a maintainer runs again, each Python one answering ``--help``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"

#: every Python tool in scripts/; one added there must be added here, so it gets this smoke test
PYTHON_TOOLS = (
    "bench_vllm.py",
    "extract_trtllm_schema.py",
    "gpu_check_sglang.py",
    "gpu_check_trtllm.py",
    "gpu_check_vllm_hybrid.py",
    "make_prompts.py",
    "make_vllm_model.py",
    "train_eagle_head.py",
)


def _tracked() -> list[str]:
    listed = subprocess.run(["git", "ls-files", "scripts"], cwd=ROOT, capture_output=True, text=True, check=True)
    return listed.stdout.split()


def test_every_python_tool_in_scripts_is_listed_here():
    assert sorted(Path(path).name for path in _tracked() if path.endswith(".py")) == sorted(PYTHON_TOOLS)


def test_scripts_stays_small_and_pins_no_commit():
    tracked = _tracked()
    assert len(tracked) <= 20, tracked
    pinned = re.compile(r"(--before|git (checkout|worktree add|show))\s+[0-9a-f]{7,40}\b|\b[0-9a-f]{40}\b")
    for path in tracked:
        assert not pinned.search((ROOT / path).read_text(encoding="utf-8")), f"{path} pins a git commit"


@pytest.mark.parametrize("name", PYTHON_TOOLS)
def test_each_python_tool_prints_its_help(name):
    # --help must need nothing beyond the core: every heavy import sits inside the tool's functions
    result = subprocess.run(
        [sys.executable, str(SCRIPTS / name), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:"), result.stdout[:200]
