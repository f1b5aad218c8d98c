"""The examples in the TensorRT-LLM adapter's docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["specplug_adapters.trtllm._compat", "specplug_adapters.trtllm._settings",
           "specplug_adapters.trtllm._sync", "specplug.lab.trtllm._tune"]  # fmt: skip


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, fresh_catalog):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
