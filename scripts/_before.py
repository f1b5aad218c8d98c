"""An earlier commit's module, for paired benchmarks that measure old code against new in one process.

The old code is read from git, not kept as a copy: the benchmark names the commit it compares with.
"""

from __future__ import annotations

import argparse
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


def paired_parser(description: str, *, before: str, what: str, steps: int) -> argparse.ArgumentParser:
    """The options every paired benchmark shares: the batch it times, and the commit (``before``
    by default) whose ``what`` it measures the checkout's against."""
    parser = argparse.ArgumentParser(description=description.splitlines()[0])
    parser.add_argument("--before", default=before, help=f"the commit whose {what} to measure against")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--workloads", default="code-edit,text")
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--skip", type=int, default=5, help="first steps not timed (warm-up)")
    parser.add_argument("-k", type=int, default=8)
    return parser
