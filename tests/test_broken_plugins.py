"""Broken plugins, installed through real entry points: each is left out with one warning that names
its entry point, its distribution and the SPECPLUG_BLOCK_PLUGINS value that blocks it; the
built-in methods keep working; its own methods report its error when asked for."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import specplug
import specplug.lab.peers as peers
from specplug import _plugins
from specplug._plugins import PluginError, PluginWarning
from specplug.cost import cost_model
from specplug.proposers.lookup.ngram import NgramProposer
from tests.conftest import install_distribution

HEADER = """
import specplug
from specplug.proposers.lookup.ngram import NgramOptions, NgramProposer
from specplug.cost import cost_model
"""

#: name -> (plugin source, entry point or None for the default, what the warning says)
BROKEN = {
    "raises": (
        """
        @specplug.hookimpl
        def specplug_register_methods(registrar):
            registrar.add("raises-first", NgramProposer, options=NgramOptions, summary="registered before the fault")
            raise RuntimeError("registration blew up")
        """,
        None,
        "its specplug_register_methods raised RuntimeError: registration blew up",
    ),
    "misspelled": (
        """
        @specplug.hookimpl
        def specplug_register_method(registrar):
            registrar.add("misspelled-method", NgramProposer, options=NgramOptions, summary="never seen")
        """,
        None,
        "implements 'specplug_register_method' (did you mean 'specplug_register_methods'?)",
    ),
    "dupcost": (
        """
        from importlib import resources

        @specplug.hookimpl
        def specplug_register_cost_models(registrar):
            with resources.as_file(resources.files("specplug.data") / "cost" / "llama-3.1-8b-h100.toml") as path:
                registrar.add("llama-3.1-8b-h100", str(path), summary="a copy")
        """,
        None,
        "it registers cost model 'llama-3.1-8b-h100', which plugin 'specplug.cost' (specplug._builtin_cost_models) registered first",
    ),
    "dupmethod": (
        """
        @specplug.hookimpl
        def specplug_register_methods(registrar):
            registrar.add("dupmethod-own", NgramProposer, options=NgramOptions, summary="its own")
            registrar.add("ngram", NgramProposer, options=NgramOptions, summary="a second ngram")
        """,
        None,
        "it registers method 'ngram', which plugin 'specplug.ngram' (specplug.proposers.lookup.ngram) registered first",
    ),
    "badname": (
        """
        @specplug.hookimpl
        def specplug_register_methods(registrar):
            registrar.add("Bad Name", NgramProposer, options=NgramOptions, summary="x")
        """,
        None,
        "raised InvalidOptionError: method name 'Bad Name' is not valid",
    ),
    "lookuploop": (
        """
        @specplug.hookimpl
        def specplug_register_cost_models(registrar):
            registrar.add("mine", cost_model("llama-3.1-8b-h100"), summary="looks a cost model up while they register")
        """,
        None,
        "raised PluginError: cost models are being registered",
    ),
    "importfails": ("raise ImportError('no module named torch_of_the_future')", None, "it failed to load: ImportError"),
    "suffixclash": (
        """
        @specplug.hookimpl
        def specplug_register_methods(registrar):
            registrar.add("shadow", NgramProposer, options=NgramOptions, summary="x")
        """,
        "specplug.suffix",
        "its name is taken by plugin 'specplug.suffix' (specplug.proposers.lookup.suffix)",
    ),
}


def _install(tmp_path, monkeypatch, name: str) -> str:
    source, entry_point, _ = BROKEN[name]
    text = HEADER + textwrap.dedent(source) if "hookimpl" in source else source
    install_distribution(
        tmp_path, monkeypatch, f"specplug-{name}", f"specplug_{name}_plugin", text, entry_point=entry_point
    )
    return entry_point or name


def _block_value(name: str, entry_point: str) -> str:
    return f"{entry_point}@specplug-{name}" if entry_point.startswith("specplug.") else entry_point


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_plugin_is_reported_once_and_the_built_ins_keep_working(name, tmp_path, monkeypatch, fresh_catalog):
    entry_point = _install(tmp_path, monkeypatch, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        names = specplug.methods()
        proposer = specplug.create("ngram", min_n=1, max_n=2)
        specplug.create("suffix")
        cost_model("llama-3.1-8b-h100")
        peers.peer_specs()
        specplug.methods()
    reports = [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]
    assert len(reports) == 1, reports
    report = reports[0]
    assert f"plugin {entry_point!r} (entry point {entry_point} = specplug_{name}_plugin, distribution specplug-{name})" in report
    assert BROKEN[name][2] in report
    assert report.endswith(f"SPECPLUG_BLOCK_PLUGINS={_block_value(name, entry_point)}")
    assert {"ngram", "suffix", "hybrid", "adaptive"} <= set(names)
    assert isinstance(proposer, NgramProposer) and type(specplug.create("suffix")).__name__ == "SuffixProposer"
    assert specplug.method_specs()["ngram"].plugin == "specplug.ngram"
    assert cost_model("llama-3.1-8b-h100").verify.fixed == pytest.approx(0.00588590713)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_value_the_warning_gives_blocks_the_plugin_and_nothing_else(name, tmp_path, monkeypatch, fresh_catalog):
    entry_point = _install(tmp_path, monkeypatch, name)
    monkeypatch.setenv("SPECPLUG_BLOCK_PLUGINS", _block_value(name, entry_point))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PluginWarning)
        assert {"ngram", "suffix", "hybrid", "adaptive"} <= set(specplug.methods())
        cost_model("llama-3.1-8b-h100")
    assert not _plugins.default_catalog().faults


def test_a_broken_plugins_own_method_reports_its_error(tmp_path, monkeypatch, fresh_catalog):
    _install(tmp_path, monkeypatch, "raises")
    with pytest.warns(PluginWarning):
        names = specplug.methods()
    assert "raises-first" not in names  # nothing of a broken plugin is kept
    with pytest.raises(PluginError, match=r"method 'raises-first' is not available: .*'raises'.*specplug-raises.*blew up"):
        specplug.create("raises-first")
    # a name it never got to register: the usual error, saying which plugins were left out
    with pytest.raises(specplug.UnknownMethodError, match=r"unknown method 'raises-later'.*left out as broken: raises"):
        specplug.create("raises-later")


def test_a_duplicate_names_both_plugins_and_keeps_the_first(tmp_path, monkeypatch, fresh_catalog):
    _install(tmp_path, monkeypatch, "dupmethod")
    with pytest.warns(PluginWarning, match="dupmethod"):
        assert specplug.method_specs()["ngram"].summary != "a second ngram"
    with pytest.raises(PluginError, match="method 'dupmethod-own' is not available: .*SPECPLUG_BLOCK_PLUGINS=dupmethod"):
        specplug.create("dupmethod-own")


def test_a_factory_that_returns_no_proposer_is_named(tmp_path, monkeypatch, fresh_catalog):
    source = HEADER + textwrap.dedent(
        """
        @specplug.hookimpl
        def specplug_register_methods(registrar):
            registrar.add("liar", lambda options: "not a proposer", options=NgramOptions, summary="returns a string")
            registrar.add("crasher", lambda options: 1 / 0, options=NgramOptions, summary="raises")
        """
    )
    install_distribution(tmp_path, monkeypatch, "specplug-liar", "specplug_liar_plugin", source)
    with pytest.raises(
        PluginError,
        match=r"method 'liar' of plugin 'liar' \(entry point liar = specplug_liar_plugin, distribution specplug-liar\) "
        r"returned 'not a proposer', not a specplug.Proposer; block the plugin with SPECPLUG_BLOCK_PLUGINS=liar",
    ):
        specplug.create("liar")
    with pytest.raises(PluginError, match=r"method 'crasher' of plugin 'liar' .* failed to build: ZeroDivisionError"):
        specplug.create("crasher")
    assert specplug.create("ngram").propose is not None  # the rest is untouched


def test_the_cli_runs_with_a_broken_plugin_and_warns_in_one_line(tmp_path, monkeypatch, fresh_catalog):
    """A real process with the broken distribution on its path: `specplug methods` works, one warning line."""
    _install(tmp_path, monkeypatch, "raises")
    source = HEADER + textwrap.dedent(
        """
        @specplug.hookimpl
        def specplug_add_commands(app):
            @app.command("methods")
            def clash():
                print("should not replace the built-in")
        """
    )
    install_distribution(tmp_path, monkeypatch, "specplug-cmdclash", "specplug_cmdclash_plugin", source)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-c", "from specplug.cli import main; main()", "methods", "--no-options"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = sorted(result.stderr.splitlines())
    assert len(lines) == 2, lines  # one per broken plugin
    assert lines[0].startswith("specplug: warning: specplug plugin 'cmdclash'")
    assert "adds CLI command(s) ['methods'], which are taken" in lines[0]
    assert lines[1].startswith("specplug: warning: specplug plugin 'raises'") and "blew up" in lines[1]
    assert "ngram" in result.stdout and "should not replace" not in result.stdout


def test_a_plugin_found_broken_later_is_left_out_whole(tmp_path, monkeypatch, fresh_catalog):
    """Methods are collected first; when the same plugin's cost-model hook fails later, its methods go too."""
    source = HEADER + textwrap.dedent(
        """
        @specplug.hookimpl
        def specplug_register_methods(registrar):
            registrar.add("halfway", NgramProposer, options=NgramOptions, summary="fine so far")

        @specplug.hookimpl
        def specplug_register_cost_models(registrar):
            raise OSError("cost table missing")
        """
    )
    install_distribution(tmp_path, monkeypatch, "specplug-halfway", "specplug_halfway_plugin", source)
    assert "halfway" in specplug.methods()
    with pytest.warns(PluginWarning, match="'halfway'.*specplug_register_cost_models raised OSError: cost table missing"):
        cost_model("llama-3.1-8b-h100")
    assert "halfway" not in specplug.methods()
    with pytest.raises(PluginError, match="method 'halfway' is not available: .*cost table missing"):
        specplug.create("halfway")
