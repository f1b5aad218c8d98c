"""Meta-tests: every hook is documented and exercised by at least one test."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from specplug import hookspecs

HOOKS = sorted(name for name in dir(hookspecs) if name.startswith("specplug_"))
TESTS = Path(__file__).parent


def test_hooks_share_one_prefix_and_exist():
    assert HOOKS, "no hooks found"
    for name, _ in inspect.getmembers(hookspecs, inspect.isfunction):
        if not name.startswith("_") and hasattr(getattr(hookspecs, name), "specplug_spec"):
            assert name.startswith("specplug_")


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook):
    function = getattr(hookspecs, hook)
    doc = inspect.getdoc(function) or ""
    assert len(doc.splitlines()[0]) > 10, f"{hook} has no summary line"
    assert "Called" in doc, f"{hook} does not say when it is called"
    for parameter in inspect.signature(function).parameters:
        assert f":param {parameter}:" in doc, f"{hook} does not document parameter {parameter}"
    assert ":return:" in doc, f"{hook} does not document its return value"
    assert "first" in doc or "all implementations" in doc, f"{hook} does not say whether the first result wins"


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_test(hook):
    users = [
        path.name
        for path in TESTS.rglob("test_*.py")
        if path.name != Path(__file__).name and f"def {hook}" in path.read_text()
    ]
    assert users, f"no test implements hook {hook}"
