"""Shared fixtures: a fresh catalog per test that touches plugins."""

from __future__ import annotations

import pytest

from specplug import _catalog


@pytest.fixture
def fresh_catalog():
    """Rebuild the process-wide catalog before and after the test (plugins may change)."""
    _catalog.reset()
    yield
    _catalog.reset()
