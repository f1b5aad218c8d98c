"""Every ``specplug`` command and group answers ``--help`` with its usage and exit status 0."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from specplug.cli._app import build_app


def _paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``command``, groups included, the root as ()."""
    paths = [path]
    # a group, whichever click (typer ships its own) it was built on, holds its commands by name
    for name, sub in (getattr(command, "commands", None) or {}).items():
        paths += _paths(sub, (*path, name))
    return paths


COMMAND_PATHS = _paths(typer.main.get_command(build_app()))


def test_the_walk_reaches_the_groups_and_their_commands():
    assert {("bench",), ("perf",), ("trtllm",), ("trtllm", "serve"), ("trtllm", "check")} <= set(COMMAND_PATHS)


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda path: " ".join(path) or "specplug")
def test_help_prints_usage_and_exits_0(path):
    result = CliRunner().invoke(build_app(), [*path, "--help"])
    assert result.exit_code == 0, f"specplug {' '.join(path)} --help: exit {result.exit_code}\n{result.output}"
    assert "Usage:" in result.output
    assert f"specplug {' '.join(path)}".strip() in " ".join(result.output.split())


def test_trtllm_serve_help_needs_neither_a_model_yaml_nor_tensorrt_llm():
    result = CliRunner().invoke(build_app(), ["trtllm", "serve", "--help"])
    assert result.exit_code == 0
    assert "trtllm-serve --help" in " ".join(result.output.split())
