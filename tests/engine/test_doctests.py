"""The worked examples in the engine layer's docstrings run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    f"specplug.engine.{name}"
    for name in ("_sync", "_keyed_history", "_drafting", "_create", "_engine_drafts", "_batch_step", "_stats", "_versions", "_lazy")
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name, fresh_catalog):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
