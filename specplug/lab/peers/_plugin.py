"""The lab's peers as a specplug plugin (entry point ``specplug.lab.peers`` in group ``specplug``).

Registering imports only the wrappers (pydantic and numpy); each engine is imported when its
peer is created.
"""

from __future__ import annotations

from specplug import hookimpl
from specplug._registry import PeerRegistrar
from specplug.lab.peers.arctic_suffix import ArcticSuffixOptions, ArcticSuffixPeer
from specplug.lab.peers.sglang_ngram import SglangNgramOptions, SglangNgramPeer
from specplug.lab.peers.vllm_ngram import VllmNgramOptions, VllmNgramPeer


@hookimpl
def specplug_register_peers(registrar: PeerRegistrar) -> None:
    registrar.add(
        "arctic-suffix",
        ArcticSuffixPeer,
        options=ArcticSuffixOptions,
        summary="Snowflake's suffix decoding (arctic_inference SuffixDecodingCache), driven as vLLM's suffix method",
    )
    registrar.add(
        "sglang-ngram",
        SglangNgramPeer,
        options=SglangNgramOptions,
        summary="SGLang's NgramCorpus (C++ trie shared across requests) in a subprocess worker",
    )
    registrar.add(
        "vllm-ngram",
        VllmNgramPeer,
        options=VllmNgramOptions,
        summary="vLLM's NgramProposer (numba KMP over the whole context at every step)",
    )
