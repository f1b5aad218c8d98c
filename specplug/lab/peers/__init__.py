"""Peers: other engines' real drafting code behind the specplug contract, for benchmarks.

Each peer is a :class:`specplug.Proposer` that drives the engine's own implementation on
token ids, so a replay benchmark runs it exactly like specplug's methods:

- ``vllm-ngram``: vLLM's ``NgramProposer`` (in this venv; ``scripts/setup_vllm.sh``),
- ``arctic-suffix``: Snowflake's ``SuffixDecodingCache`` (in this venv; ``scripts/setup_peers.sh``),
- ``sglang-ngram``: SGLang's ``NgramCorpus`` (in ``.venv-peers``, through a subprocess worker).

They register in the core's peer registry like any plugin's (``specplug_register_peers``, through
the ``specplug`` entry point ``specplug.lab.peers``), so :func:`create_peer` and a benchmark's
``peer:NAME`` find them, and third-party peers beside them. The engines are imported when a peer
is created, never when it is registered; a peer whose engine is missing raises
:class:`PeerNotInstalledError` naming the setup script.

>>> peer_names()
['arctic-suffix', 'sglang-ngram', 'vllm-ngram']
>>> create_peer("nope")
Traceback (most recent call last):
...
specplug._errors.UnknownPeerError: unknown peer 'nope'; valid peers: arctic-suffix, sglang-ngram, vllm-ngram
"""

from __future__ import annotations

from specplug._errors import UnknownPeerError
from specplug._plugins import create_peer, peer_specs
from specplug._registry import PeerRegistrar, PeerSpec
from specplug.lab.peers._common import PeerNotInstalledError, PeerOptions

__all__ = [
    "PeerNotInstalledError",
    "PeerOptions",
    "PeerRegistrar",
    "PeerSpec",
    "UnknownPeerError",
    "create_peer",
    "peer_names",
    "peer_specs",
]


def peer_names() -> list[str]:
    """The names of the registered peers, sorted (whether or not their engines are installed)."""
    return sorted(peer_specs())
