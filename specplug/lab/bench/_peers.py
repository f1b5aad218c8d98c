"""Peers (vLLM's NgramProposer, SGLang's NgramCorpus, Arctic's suffix decoding, any plugin's) by name.

They come from the core's peer registry (``specplug.lab.peers.peer_specs()``); the lab's own register
through its entry point. A peer whose engine is not installed is still listed, and creating it
fails with the reason.
"""

from __future__ import annotations

from typing import Any

from specplug import Proposer
from specplug._plugins import create_peer as _create_peer, peer_specs

__all__ = ["create_peer", "peer_names"]


def peer_names() -> list[str]:
    return sorted(peer_specs())


def create_peer(name: str, options: dict[str, Any]) -> Proposer:
    return _create_peer(name, **options)
