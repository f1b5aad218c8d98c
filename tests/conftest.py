"""Shared fixtures and the hypothesis profiles."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from specplug import _catalog

# CI runs a fixed set of examples so that a green run is reproducible; locally they vary.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def fresh_catalog():
    """Rebuild the process-wide catalog before and after the test (plugins may change)."""
    _catalog.reset()
    yield
    _catalog.reset()
