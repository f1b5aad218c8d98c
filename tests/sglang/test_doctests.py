"""The worked examples in the SGLang adapter's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["specplug_adapters.sglang._trees", "specplug_adapters.sglang._config", "specplug_adapters.sglang._compat"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
