"""Shared fixtures and the hypothesis profiles."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from specplug import _plugins

# CI runs a fixed set of examples so that a green run is reproducible; locally they vary.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture
def fresh_catalog():
    """Rebuild the process-wide catalog before and after the test (plugins may change)."""
    _plugins.reset()
    yield
    _plugins.reset()


@pytest.fixture
def relay_distribution(tmp_path, monkeypatch, fresh_catalog):
    """An installed distribution (a .dist-info on sys.path) whose ``specplug`` entry point
    publishes ``relay``, an out-of-tree composite (``tests/plugins/relay_plugin.py``)."""
    shutil.copy(Path(__file__).parent / "plugins" / "relay_plugin.py", tmp_path / "specplug_relay_plugin.py")
    info = tmp_path / "specplug_relay-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: specplug-relay\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[specplug]\nrelay = specplug_relay_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _plugins.reset()
    return tmp_path
