"""Peers: other engines' real drafting code behind the specplug contract, for benchmarks.

Each peer is a :class:`specplug.Proposer` that drives the engine's own implementation on
token ids, so a replay benchmark runs it exactly like specplug's methods:

- ``vllm-ngram``: vLLM's ``NgramProposer`` (in this venv; ``scripts/setup_vllm.sh``),
- ``arctic-suffix``: Snowflake's ``SuffixDecodingCache`` (in this venv; ``scripts/setup_peers.sh``),
- ``sglang-ngram``: SGLang's ``NgramCorpus`` (in ``.venv-peers``, through a subprocess worker).

The engines are imported when a peer is created, never when this package is imported; a
peer whose engine is missing raises :class:`PeerNotInstalledError` naming the setup script.

>>> peer_names()
['arctic-suffix', 'sglang-ngram', 'vllm-ngram']
>>> create_peer("nope")
Traceback (most recent call last):
...
specplug.lab.peers._common.UnknownPeerError: unknown peer 'nope'; valid peers: arctic-suffix, sglang-ngram, vllm-ngram
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from specplug._contract import Proposer
from specplug.lab.peers._common import PeerNotInstalledError, PeerOptions, UnknownPeerError, validate_options

__all__ = ["PeerNotInstalledError", "PeerSpec", "UnknownPeerError", "create_peer", "peer_names", "peer_specs"]


@dataclass(frozen=True)
class PeerSpec:
    """One peer: its module, class and options model (imported only when it is created)."""

    name: str
    summary: str
    module: str
    cls: str
    options: str

    def load(self) -> tuple[type[Proposer], type[PeerOptions]]:
        module = importlib.import_module(f"specplug.lab.peers.{self.module}")
        return getattr(module, self.cls), getattr(module, self.options)


_PEERS = {
    spec.name: spec
    for spec in (
        PeerSpec(
            "arctic-suffix",
            "Snowflake's suffix decoding (arctic_inference SuffixDecodingCache), driven as vLLM's suffix method",
            "arctic_suffix",
            "ArcticSuffixPeer",
            "ArcticSuffixOptions",
        ),
        PeerSpec(
            "sglang-ngram",
            "SGLang's NgramCorpus (C++ trie shared across requests) in a subprocess worker",
            "sglang_ngram",
            "SglangNgramPeer",
            "SglangNgramOptions",
        ),
        PeerSpec(
            "vllm-ngram",
            "vLLM's NgramProposer (numba KMP over the whole context at every step)",
            "vllm_ngram",
            "VllmNgramPeer",
            "VllmNgramOptions",
        ),
    )
}


def peer_names() -> list[str]:
    """The names of the known peers, sorted (whether or not their engines are installed)."""
    return sorted(_PEERS)


def peer_specs() -> dict[str, PeerSpec]:
    """The known peers by name."""
    return dict(sorted(_PEERS.items()))


def create_peer(name: str, **options: object) -> Proposer:
    """Create peer ``name`` with its options (unknown names and options are clear errors)."""
    if not isinstance(name, str) or name not in _PEERS:
        raise UnknownPeerError(f"unknown peer {name!r}; valid peers: {', '.join(peer_names())}")
    cls, model = _PEERS[name].load()
    return cls(validate_options(name, model, dict(options)))
