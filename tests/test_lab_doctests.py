"""The examples in the lab's and the CLI's docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import specplug.lab

#: modules that import an engine at the top (llama-cpp-python); they carry no examples
NEEDS_ENGINE = {"specplug.lab.llamacpp._inprocess"}
MODULES = sorted(
    {info.name for info in pkgutil.walk_packages(specplug.lab.__path__, "specplug.lab.")} - NEEDS_ENGINE
) + ["specplug.cli._lists"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, fresh_catalog):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
