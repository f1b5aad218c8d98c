"""Peers (vLLM's NgramProposer, SGLang's NgramCorpus, Arctic's suffix decoding) through ``specplug.lab.peers``.

The wrappers live in ``specplug.lab.peers`` (another part of the project); the benchmark only
names them. When that module or a peer's engine is not installed, the names are still
listed and creating one fails with the reason.
"""

from __future__ import annotations

from typing import Any

from specplug._contract import Proposer
from specplug._errors import SpecplugError

__all__ = ["create_peer", "peer_names"]


class PeerUnavailableError(SpecplugError, RuntimeError):
    """A peer whose wrapper or engine is not installed here."""


def _module():
    try:
        import specplug.lab.peers as peers  # noqa: PLC0415 - optional part
    except ImportError as error:
        raise PeerUnavailableError(f"specplug.lab.peers is not available: {error}") from None
    return peers


def peer_names() -> list[str]:
    try:
        peers = _module()
    except PeerUnavailableError:
        return []
    return list(peers.peer_names()) if hasattr(peers, "peer_names") else []


def create_peer(name: str, options: dict[str, Any]) -> Proposer:
    peers = _module()
    return peers.create_peer(name, **options)
