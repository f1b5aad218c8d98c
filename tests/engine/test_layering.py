"""The engine layer imports specplug's core only: no adapter, lab, CLI or engine."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import specplug.engine

FORBIDDEN = ("specplug_adapters", "specplug.lab", "specplug.cli", "vllm", "llama_cpp", "torch", "sglang", "tensorrt_llm")


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_engine_modules_import_no_adapter_or_engine():
    for path in Path(specplug.engine.__file__).parent.glob("*.py"):
        bad = sorted(name for name in _imported(path) if name.startswith(FORBIDDEN))
        assert not bad, f"{path.name} imports {bad}"


def test_importing_the_engine_layer_loads_no_adapter_or_engine():
    code = "import sys, json, specplug.engine; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert not [name for name in loaded if name.startswith(FORBIDDEN)]
