"""Subprocess worker that runs SGLang's real ``NgramCorpus`` and speaks JSON lines.

It runs in the peers venv (``.venv-peers``: sglang, the CPU torch, apache-tvm-ffi for the
C++ trie), which cannot share a venv with specplug's main one, so it imports nothing from
specplug: stdlib, numpy and sglang only. One JSON object per line in, one per line out:

    {"op": "init", "options": {...}}          -> {"ok": true, "versions": {...}}
    {"op": "start", "rid": 1, "prompt": [..]} -> {"ok": true}
    {"op": "propose", "rid": 1}               -> {"ok": true, "tokens": [..], "mask": [[..]..]}
    {"op": "extend", "rid": 1, "tokens": [..]}-> {"ok": true}
    {"op": "stop", "rid": 1}                  -> {"ok": true}
    {"op": "exit"}                            -> {"ok": true}, then the process ends

Every answer carries ``ns``: the time spent in SGLang's code for that message, so a
benchmark can tell the peer's own cost from the pipe's. A failure answers
``{"ok": false, "error": "..."}`` (and ``"missing": true`` when sglang cannot be imported).

The calls follow SGLang's ``NGRAMWorker``: before drafting it waits for pending inserts
(``synchronize``) and matches the request's last ``max_trie_depth`` tokens with its total
length (``batch_get``); after each verification it inserts the last ``max_trie_depth``
tokens of prompt + output (``batch_put``). SGLang does not insert the prompt itself; the
option ``index_prompt`` does (all its suffixes, up to the trie depth).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

#: NgramCorpus keyword arguments accepted through "init" (the rest are worker options)
CORPUS_OPTIONS = ("max_trie_depth", "min_bfs_breadth", "max_bfs_breadth", "draft_token_num", "match_type", "capacity")


class Worker:
    """The per-request tails and the one corpus shared by all requests, as in SGLang."""

    def __init__(self) -> None:
        self.corpus: Any = None
        self.depth = 0
        self.index_prompt = False
        self.draft_token_num = 0
        self.tails: dict[int, list[int]] = {}
        self.totals: dict[int, int] = {}

    def init(self, message: dict[str, Any]) -> dict[str, Any]:
        options = dict(message.get("options", {}))
        self.index_prompt = bool(options.pop("index_prompt", False))
        unknown = sorted(set(options) - set(CORPUS_OPTIONS))
        if unknown:
            return {"ok": False, "error": f"unknown NgramCorpus options {unknown}; valid: {list(CORPUS_OPTIONS)}"}
        try:
            import sglang
            from sglang.srt.speculative.cpp_ngram.ngram_corpus import NgramCorpus
        except Exception as error:  # noqa: BLE001 - reported to the parent, which names the setup script
            return {"ok": False, "missing": True, "error": f"{type(error).__name__}: {error}"}
        self.corpus = NgramCorpus(**options)
        self.depth = int(options.get("max_trie_depth", 18))
        self.draft_token_num = int(options.get("draft_token_num", 8))
        return {"ok": True, "versions": {"sglang": getattr(sglang, "__version__", "?"), "python": sys.version}}

    def start(self, message: dict[str, Any]) -> dict[str, Any]:
        rid, prompt = int(message["rid"]), [int(token) for token in message["prompt"]]
        self.tails[rid] = prompt[-self.depth :]
        self.totals[rid] = len(prompt)
        if self.index_prompt and prompt:
            self.corpus.batch_put([prompt])
        return {"ok": True}

    def propose(self, message: dict[str, Any]) -> dict[str, Any]:
        rid = int(message["rid"])
        tail = self.tails[rid]
        if not tail:
            return {"ok": True, "tokens": [], "mask": []}
        self.corpus.synchronize()
        tokens, mask = self.corpus.batch_get([str(rid)], [tail], [self.totals[rid]])
        size = len(tokens)
        return {"ok": True, "tokens": tokens.tolist(), "mask": mask.reshape(size, size).tolist()}

    def extend(self, message: dict[str, Any]) -> dict[str, Any]:
        rid = int(message["rid"])
        tokens = [int(token) for token in message["tokens"]]
        tail = (self.tails[rid] + tokens)[-self.depth :]
        self.tails[rid] = tail
        self.totals[rid] += len(tokens)
        self.corpus.batch_put([tail])
        return {"ok": True}

    def stop(self, message: dict[str, Any]) -> dict[str, Any]:
        rid = int(message["rid"])
        del self.tails[rid], self.totals[rid]
        self.corpus.erase_match_state([str(rid)])
        return {"ok": True}


def serve(inp: Any, out: Any) -> None:
    """Answer messages from ``inp`` on ``out`` until "exit" or end of input."""
    worker = Worker()
    handlers = {"init": worker.init, "start": worker.start, "propose": worker.propose,
                "extend": worker.extend, "stop": worker.stop}
    for line in inp:
        if not line.strip():
            continue
        began = time.perf_counter_ns()
        try:
            message = json.loads(line)
            op = message.get("op")
            if op == "exit":
                answer: dict[str, Any] = {"ok": True}
            elif op not in handlers:
                answer = {"ok": False, "error": f"unknown op {op!r}; valid: {sorted(handlers) + ['exit']}"}
            elif op != "init" and worker.corpus is None:
                answer = {"ok": False, "error": f"op {op!r} before 'init'"}
            else:
                answer = handlers[op](message)
        except Exception as error:  # noqa: BLE001 - the worker answers every message
            op = None
            answer = {"ok": False, "error": f"{type(error).__name__}: {error}"}
        answer["ns"] = time.perf_counter_ns() - began
        out.write(json.dumps(answer) + "\n")
        out.flush()
        if op == "exit":
            return


def main() -> None:
    # The protocol owns the real stdout; anything a library prints goes to stderr instead.
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, protocol)


if __name__ == "__main__":
    main()
