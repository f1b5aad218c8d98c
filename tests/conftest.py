"""Shared fixtures and the hypothesis profiles."""

from __future__ import annotations

import os
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


def install_distribution(
    folder: Path, monkeypatch, name: str, module: str, source: str, *, entry_point: str | None = None
) -> Path:
    """Make ``folder`` hold an installed distribution ``name`` (a .dist-info on sys.path) whose
    ``specplug`` entry point (``entry_point``, by default ``name`` without ``specplug-``) is
    ``module``, written from ``source``: what importlib.metadata finds for a plugin installed with pip."""
    (folder / f"{module}.py").write_text(source)
    info = folder / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[specplug]\n{entry_point or name.removeprefix('specplug-')} = {module}\n")
    monkeypatch.syspath_prepend(str(folder))
    _plugins.reset()
    return folder


@pytest.fixture
def relay_distribution(tmp_path, monkeypatch, fresh_catalog):
    """An installed distribution publishing ``relay``, an out-of-tree composite (``tests/plugins/relay_plugin.py``)."""
    source = (Path(__file__).parent / "plugins" / "relay_plugin.py").read_text()
    return install_distribution(tmp_path, monkeypatch, "specplug-relay", "specplug_relay_plugin", source)
