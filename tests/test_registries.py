"""The registries: one set of name rules for methods, cost models and peers; peers through their hook."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

import specplug
import specplug.lab.peers as peers
from specplug._plugins import Catalog, PluginError, PluginWarning, build_plugin_manager
from specplug.cost import CostModelRegistrar, cost_model
from specplug.proposers.lookup.ngram import NgramOptions, NgramProposer


def _method(registrar, name, summary="fine"):
    registrar.add(name, NgramProposer, options=NgramOptions, summary=summary)


def _peer(registrar, name, summary="fine"):
    registrar.add(name, NgramProposer, options=NgramOptions, summary=summary)


def _cost(registrar, name, summary="fine"):
    registrar.add(name, cost_model("llama-3.1-8b-h100"), summary=summary, origin="tests")


REGISTRARS = [
    pytest.param(specplug.MethodRegistrar, _method, "method", id="methods"),
    pytest.param(CostModelRegistrar, _cost, "cost model", id="cost-models"),
    pytest.param(peers.PeerRegistrar, _peer, "peer", id="peers"),
]


@pytest.mark.parametrize(("registrar", "add", "kind"), REGISTRARS)
@pytest.mark.parametrize("name", ["Bad Name", "", "-dash", "x" * 65, "a:b", "ok\n", 3, None])
def test_every_registrar_rejects_the_same_bad_names(registrar, add, kind, name):
    with pytest.raises(specplug.InvalidOptionError, match=f"{kind} name .* is not valid; use 1-64 lower-case"):
        add(registrar(), name)


@pytest.mark.parametrize(("registrar", "add", "kind"), REGISTRARS)
@pytest.mark.parametrize("name", ["ngram", "llama-3.1-8b-h100", "vllm-ngram", "3gram", "a_b.c", "x" * 64])
def test_every_registrar_accepts_the_same_good_names(registrar, add, kind, name):
    entries = registrar()
    add(entries, name)
    assert list(entries.specs()) == [name]


@pytest.mark.parametrize(("registrar", "add", "kind"), REGISTRARS)
@pytest.mark.parametrize("summary", ["", "   ", "two\nlines", None])
def test_every_registrar_wants_a_one_line_summary(registrar, add, kind, summary):
    with pytest.raises(specplug.InvalidOptionError, match=f"{kind} 'ok': summary must be one non-empty line"):
        add(registrar(), "ok", summary)


@pytest.mark.parametrize(("registrar", "add", "kind"), REGISTRARS)
def test_every_registrar_rejects_a_duplicate_naming_both_origins(registrar, add, kind):
    entries = registrar()
    add(entries, "twice", " padded summary ")
    assert entries.specs()["twice"].summary == "padded summary"
    with pytest.raises(specplug.DuplicateNameError, match=f"{kind} 'twice' is registered twice: by .* and by .*SPECPLUG_BLOCK_PLUGINS"):
        add(entries, "twice")


class EchoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    repeat: int = 1


class Echo(specplug.Proposer):
    """A peer stand-in: drafts the last token again."""

    name = "echo-peer"

    def __init__(self, options: EchoOptions) -> None:
        super().__init__()
        self.repeat = options.repeat
        self.last: dict = {}

    def _start(self, rid, prompt):
        self.last[rid] = int(prompt[-1])

    def _propose(self, rid, max_tokens):
        return specplug.Draft((self.last[rid],) * min(self.repeat, max_tokens), self.name)

    def _extend(self, rid, tokens):
        self.last[rid] = int(tokens[-1])

    def _stop(self, rid):
        del self.last[rid]


class PeerPlugin:
    """An in-process plugin that registers peers through the hook."""

    def __init__(self) -> None:
        self.calls = 0

    @specplug.hookimpl
    def specplug_register_peers(self, registrar):
        self.calls += 1
        registrar.add("echo-peer", Echo, options=EchoOptions, summary="repeats the last token")
        registrar.add("not-a-proposer", lambda options: object(), options=EchoOptions, summary="returns junk")


@pytest.fixture
def peer_catalog(monkeypatch):
    """The process-wide catalog, replaced by one whose plugins include :class:`PeerPlugin`."""
    from specplug import _plugins

    plugin = PeerPlugin()
    monkeypatch.setattr(_plugins, "_default", Catalog(build_plugin_manager(entry_points=False, extra_plugins={"peers": plugin})))
    return plugin


def test_peers_register_through_their_hook_on_first_use(peer_catalog):
    assert peer_catalog.calls == 0  # building the catalog collects methods, not peers
    specs = peers.peer_specs()
    assert list(specs) == ["echo-peer", "not-a-proposer"] and peer_catalog.calls == 1
    spec = specs["echo-peer"]
    assert (spec.summary, spec.options, spec.factory, spec.origin) == ("repeats the last token", EchoOptions, Echo, __name__)
    peer = peers.create_peer("echo-peer", repeat=2)
    peer.start("r", [4, 5])
    assert peer.propose("r", 8).tokens == (5, 5)
    peers.peer_specs()
    assert peer_catalog.calls == 1  # collected once per catalog


def test_create_peer_errors_name_the_bad_value_and_the_valid_ones(peer_catalog):
    with pytest.raises(peers.UnknownPeerError, match="unknown peer 'nope'; valid peers: echo-peer, not-a-proposer"):
        peers.create_peer("nope")
    with pytest.raises(specplug.InvalidOptionError, match="peer 'echo-peer': unknown option 'k'. Valid options: repeat"):
        peers.create_peer("echo-peer", k=3)
    with pytest.raises(specplug.InvalidOptionError, match="peer 'echo-peer': option repeat = '2'"):
        peers.create_peer("echo-peer", repeat="2")
    with pytest.raises(PluginError, match="peer 'not-a-proposer' of plugin 'peers' .* not a specplug.Proposer"):
        peers.create_peer("not-a-proposer")


def test_a_duplicate_peer_from_two_plugins_leaves_the_second_out():
    manager = build_plugin_manager(entry_points=False, extra_plugins={"one": PeerPlugin(), "two": PeerPlugin()})
    with pytest.warns(PluginWarning, match="plugin 'two' .* registers peer 'echo-peer', which plugin 'one' .* registered first"):
        peers = Catalog(manager).peers()
    assert peers["echo-peer"].plugin == "one" and "two" in manager.faults


def test_the_core_registers_no_peer_and_no_command(fresh_catalog):
    from specplug._plugins import BUILTIN_PLUGINS, Catalog

    core_only = Catalog(build_plugin_manager(entry_points=False))
    assert core_only.peers() == {}
    assert all(module.startswith(("specplug.proposers.", "specplug._builtin_cost_models")) for module in BUILTIN_PLUGINS.values())
    assert not core_only.manager.hook.specplug_add_commands.get_hookimpls()


def test_the_lab_peers_register_through_their_entry_point(fresh_catalog):
    specs = peers.peer_specs()
    assert sorted(specs) == ["arctic-suffix", "sglang-ngram", "vllm-ngram"]
    assert all(spec.origin.startswith("specplug.lab.peers.") for spec in specs.values())


def test_peer_registrar_checks_factory_and_options():
    with pytest.raises(specplug.InvalidOptionError, match="peer 'p': factory 3 is not callable"):
        peers.PeerRegistrar().add("p", 3, options=EchoOptions, summary="x")
    with pytest.raises(specplug.InvalidOptionError, match="peer 'p': options must be a pydantic model class"):
        peers.PeerRegistrar().add("p", Echo, options=dict, summary="x")
