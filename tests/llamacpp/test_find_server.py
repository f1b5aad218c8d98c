"""Where the llama.cpp adapter looks for llama-server: the one build of scripts/setup_llamacpp.sh
installs it inside llama-cpp-python's package (llama_cpp/bin)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os

import pytest

from specplug_adapters.llamacpp import _binary
from specplug_adapters.llamacpp._errors import BinaryNotFoundError


def _fake_llama_cpp(monkeypatch, folder) -> None:
    spec = importlib.machinery.ModuleSpec("llama_cpp", None, is_package=True)
    spec.submodule_search_locations = [str(folder)]
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: spec if name == "llama_cpp" else real(name, *a))


def test_the_server_inside_llama_cpp_is_found(tmp_path, monkeypatch):
    server = tmp_path / "bin" / "llama-server"
    server.parent.mkdir()
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    _fake_llama_cpp(monkeypatch, tmp_path)
    assert _binary._server_in_llama_cpp() == server


def test_a_package_without_the_server_is_passed_over(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    _fake_llama_cpp(monkeypatch, tmp_path)
    assert _binary._server_in_llama_cpp() is None


def test_not_found_names_the_setup_script_and_the_variable(tmp_path, monkeypatch):
    _fake_llama_cpp(monkeypatch, tmp_path)
    monkeypatch.delenv(_binary.BINARY_ENV, raising=False)
    monkeypatch.setattr(_binary.sys, "executable", str(tmp_path / "python"))
    monkeypatch.setattr(_binary, "_packaged_server", lambda: None)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BinaryNotFoundError, match=r"setup_llamacpp\.sh.*SPECPLUG_LLAMA_SERVER"):
        _binary.find_server()
    assert os.environ["PATH"] == str(tmp_path)
