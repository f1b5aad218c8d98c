"""The specplug command line."""

from __future__ import annotations

import subprocess
import sys

from typer.testing import CliRunner

import specplug
from specplug.cli import build_app


def test_version():
    result = CliRunner().invoke(build_app(), ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"specplug {specplug.__version__}"


def test_methods_lists_each_with_summary_and_options(fresh_catalog):
    result = CliRunner().invoke(build_app(), ["methods"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    for name, spec in specplug.method_specs().items():
        assert name in result.output
        assert spec.summary.split()[0] in result.output
    for option in ("min_n", "max_n", "min_hits", "max_depth", "min_token_prob", "max_cache_bytes"):
        assert option in result.output


def test_console_script_runs_and_reports_user_errors_without_traceback():
    exe = [sys.executable, "-c", "from specplug.cli import main; main()"]
    ok = subprocess.run([*exe, "--version"], capture_output=True, text=True)
    assert ok.returncode == 0 and "specplug" in ok.stdout
    bad = subprocess.run([*exe, "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and "no-such-command" in bad.stderr


def test_importing_specplug_imports_no_engine():
    code = (
        "import sys, specplug; specplug.create('suffix'); specplug.create('ngram');"
        "import specplug.verify, specplug.cli;"
        "bad = [m for m in ('torch', 'vllm', 'sglang', 'tensorrt_llm', 'llama_cpp', 'arctic_inference') if m in sys.modules];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
