"""The worked examples in the core's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "specplug._contract",
    "specplug._plugins",
    "specplug._plugin_faults",
    "specplug._inputs",
    "specplug._outputs",
    "specplug._registry",
    "specplug._guard",
    "specplug.verify",
    "specplug.proposers.ngram",
    "specplug.proposers.suffix",
    "specplug.proposers._suffix_index",
    "specplug.proposers._parts",
    "specplug.proposers.hybrid",
    "specplug.proposers.adaptive",
    "specplug.proposers._pending",
    "specplug._cost._steps",
    "specplug.cost._online",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name, fresh_catalog):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
