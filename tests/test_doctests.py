"""The worked examples in the core's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "specplug._drafts",
    "specplug._batch",
    "specplug._proposer",
    "specplug._plugins",
    "specplug._plugin_faults",
    "specplug._inputs",
    "specplug._outputs",
    "specplug._registry",
    "specplug._guard",
    "specplug.verify",
    "specplug.proposers.lookup.ngram",
    "specplug.proposers.lookup.suffix",
    "specplug.proposers.lookup._suffix_index",
    "specplug.proposers.composite._parts",
    "specplug.proposers.composite.hybrid",
    "specplug.proposers.composite.adaptive",
    "specplug.proposers.composite._pending",
    "specplug._cost._steps",
    "specplug._cost._online",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name, fresh_catalog):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
