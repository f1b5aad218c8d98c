"""The plugin system: registration, entry points, blocking, duplicates, the CLI hook."""

from __future__ import annotations

import textwrap

import pytest
from typer.testing import CliRunner

import specplug
from specplug import _plugins
from specplug._plugins import PluginWarning, build_plugin_manager
from specplug._registry import MethodRegistrar
from specplug.cli import build_app
from tests.conftest import install_distribution
from specplug.proposers.lookup.ngram import NgramOptions, NgramProposer

THROWAWAY = '''
"""An out-of-tree proposer that always drafts the last token again."""
from pydantic import BaseModel, ConfigDict
import specplug

class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repeat: int = 1

class Echo(specplug.Proposer):
    name = "echo"
    def __init__(self, options):
        super().__init__()
        self.repeat = options.repeat
        self.last = {}
    def _start(self, rid, prompt):
        self.last[rid] = int(prompt[-1]) if len(prompt) else 0
    def _propose(self, rid, max_tokens):
        return specplug.Draft((self.last[rid],) * min(self.repeat, max_tokens), self.name, None)
    def _extend(self, rid, tokens):
        self.last[rid] = int(tokens[-1])
    def _stop(self, rid):
        del self.last[rid]

@specplug.hookimpl
def specplug_register_methods(registrar):
    registrar.add("echo", Echo, options=EchoOptions, summary="repeat the last token")

@specplug.hookimpl
def specplug_add_commands(app):
    @app.command("echo-hello")
    def echo_hello():
        """Say hello from an out-of-tree plugin."""
        print("hello from echo")
'''


@pytest.fixture
def throwaway_distribution(tmp_path, monkeypatch, fresh_catalog):
    """A real installed distribution (a .dist-info on sys.path) publishing a `specplug` entry point."""
    return install_distribution(tmp_path, monkeypatch, "specplug-echo", "specplug_echo_plugin", textwrap.dedent(THROWAWAY))


def test_builtin_methods_are_registered(fresh_catalog):
    assert {"ngram", "suffix"} <= set(specplug.methods())


def test_out_of_tree_plugin_through_a_real_entry_point(throwaway_distribution):
    assert "echo" in specplug.methods()
    proposer = specplug.create("echo", repeat=3)
    proposer.start("r", [4, 5])
    assert proposer.propose("r", 8).tokens == (5, 5, 5)
    proposer.extend("r", [5, 9])
    assert proposer.propose("r", 2).tokens == (9, 9)


def test_out_of_tree_plugin_adds_a_cli_command(throwaway_distribution):
    result = CliRunner().invoke(build_app(), ["echo-hello"])
    assert result.exit_code == 0, result.output
    assert "hello from echo" in result.output


def test_blocking_a_plugin_by_environment_variable(throwaway_distribution, monkeypatch):
    monkeypatch.setenv("SPECPLUG_BLOCK_PLUGINS", "echo, specplug.suffix")
    _plugins.reset()
    names = specplug.methods()
    assert "echo" not in names and "suffix" not in names and "ngram" in names


def test_broken_entry_point_names_the_plugin_and_the_rest_loads(tmp_path, monkeypatch, fresh_catalog):
    install_distribution(tmp_path, monkeypatch, "specplug-broken", "specplug_broken_plugin", "raise RuntimeError('boom')\n")
    with pytest.warns(PluginWarning, match=r"'broken'.*specplug-broken.*boom.*SPECPLUG_BLOCK_PLUGINS=broken"):
        manager = build_plugin_manager()
    assert "broken" in manager.faults and not manager.has_plugin("broken")
    assert {"ngram", "suffix"} <= set(_plugins.Catalog(manager).methods())


def test_registrar_rejects_duplicates_naming_both_origins():
    registrar = MethodRegistrar()
    registrar.add("ngram", NgramProposer, options=NgramOptions, summary="one")
    with pytest.raises(specplug.DuplicateNameError, match="registered twice"):
        registrar.add("ngram", NgramProposer, options=NgramOptions, summary="two")


def test_duplicate_method_from_a_plugin_leaves_the_plugin_out(fresh_catalog):
    class Clash:
        @specplug.hookimpl
        def specplug_register_methods(self, registrar):
            registrar.add("ngram", NgramProposer, options=NgramOptions, summary="again")

    with pytest.warns(PluginWarning, match="plugin 'clash' .* registers method 'ngram', which plugin 'specplug.ngram'"):
        catalog = _plugins.Catalog(build_plugin_manager(entry_points=False, extra_plugins={"clash": Clash()}))
    assert catalog.specs["ngram"].plugin == "specplug.ngram" and catalog.specs["ngram"].summary != "again"


@pytest.mark.parametrize(
    ("name", "kwargs", "message"),
    [
        ("Bad Name", {}, "not valid"),
        ("ok", {"summary": "two\nlines"}, "one non-empty line"),
        ("ok", {"options": dict}, "pydantic model"),
    ],
)
def test_registrar_validates_entries(name, kwargs, message):
    arguments = {"options": NgramOptions, "summary": "fine", **kwargs}
    with pytest.raises(specplug.InvalidOptionError, match=message):
        MethodRegistrar().add(name, NgramProposer, **arguments)


def test_plugin_manager_is_not_built_at_import():
    import subprocess
    import sys

    code = "import specplug, specplug._plugins as p; assert p._default is None; print('lazy')"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "lazy"


def test_an_out_of_tree_composite_declares_its_capabilities(relay_distribution):
    spec = specplug.method_specs()["relay"]
    assert spec.capabilities.composes_engine_drafter and spec.capabilities.engine_drafter_option == "head"
    assert spec.capabilities.uses_cost_model and spec.capabilities.takes_batch_size
    head = specplug.create("ngram", min_n=1, max_n=1)
    relay = specplug.create("relay", head=head, backup="suffix")
    assert relay.draft_kind == "neural"
    relay.start("r", [1, 2, 3, 1])
    assert relay.propose("r", 2).source.startswith("relay:")


def test_capabilities_must_name_real_options():
    registrar = MethodRegistrar()
    with pytest.raises(specplug.InvalidOptionError, match="'nope'.*min_n"):
        registrar.add(
            "x", NgramProposer, options=NgramOptions, summary="x",
            capabilities=specplug.MethodCapabilities(cost_option="nope"),
        )
    with pytest.raises(specplug.InvalidOptionError, match="kind 'gpu'"):
        registrar.add("x", NgramProposer, options=NgramOptions, summary="x", capabilities=specplug.MethodCapabilities(kind="gpu"))
