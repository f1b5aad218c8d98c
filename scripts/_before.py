"""An earlier commit's module, for paired benchmarks that measure old code against new in one process.

The old code is read from git, not kept as a copy: the benchmark names the commit it compares with.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path


def source_at(commit: str, path: str) -> str:
    """The text of ``path`` at ``commit``."""
    try:
        return subprocess.run(["git", "show", f"{commit}:{path}"], capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"--before {commit!r}: git has no {path} there ({error.stderr.strip()}); "
                         "give a commit of this repository's history") from None


def module_at(commit: str, path: str, name: str, folder: Path, text: str | None = None) -> types.ModuleType:
    """``path`` as it was at ``commit`` (or ``text``, that file edited), imported as ``name`` (its
    numba functions compile anew)."""
    if text is None:
        text = source_at(commit, path)
    file = folder / f"{name}.py"
    file.write_text(text)
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
