"""The worked examples in the vLLM adapter's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["specplug_adapters.vllm._config", "specplug_adapters.vllm._compat", "specplug_adapters.vllm._hybrid"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
