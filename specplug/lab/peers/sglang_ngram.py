"""``sglang-ngram``: SGLang's ``NgramCorpus`` (C++ trie, JIT-built), in a subprocess.

SGLang needs its own torch and cannot share the main venv, so the corpus runs in the peers
venv behind ``_sglang_worker.py`` (JSON lines on stdin/stdout) and this class speaks the
specplug contract on the main side. The corpus is shared by all requests of one peer, as in
SGLang's ``NGRAMWorker``, and is fed the same way (see the worker's docstring).

SGLang drafts a tree (``draft_token_num`` slots: the last token as root, then BFS nodes);
the contract's draft is one chain, so ``Draft.tokens`` is the tree's longest root-to-leaf
path (the first such path on a tie), and ``paths(request_id)`` keeps every leaf path of the
last draft for a benchmark that scores tree verification the way SGLang does. Figures
that count only ``Draft.tokens`` are a lower bound of SGLang's own acceptance.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug._errors import SpecplugError
from specplug.lab.peers._common import PeerNotInstalledError, PeerOptions, leaf_paths

__all__ = ["PeerWorkerError", "SglangNgramOptions", "SglangNgramPeer", "default_peers_python"]

#: the environment variable that points at the peers venv's Python
PYTHON_ENV = "SPECPLUG_PEERS_PYTHON"
WORKER = Path(__file__).with_name("_sglang_worker.py")


class PeerWorkerError(SpecplugError, RuntimeError):
    """The peer's worker process failed or answered with an error."""


def default_peers_python() -> Path:
    """``$SPECPLUG_PEERS_PYTHON``, else ``.venv-peers/bin/python`` at the repository root."""
    configured = os.environ.get(PYTHON_ENV)
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[3] / ".venv-peers" / "bin" / "python"


class SglangNgramOptions(PeerOptions):
    max_trie_depth: int = Field(18, ge=2, le=1024, description="longest n-gram in the trie (SGLang default 18)")
    draft_token_num: int = Field(12, ge=2, le=256, description="tree slots incl. the root (SGLang default 12)")
    min_bfs_breadth: int = Field(1, ge=1, description="tree breadth at the deepest match")
    max_bfs_breadth: int = Field(10, ge=1, description="tree breadth at the shallowest match")
    match_type: str = Field("BFS", pattern="^(BFS|PROB)$", description="BFS (recency) or PROB (frequency)")
    capacity: int = Field(
        1_000_000, ge=1024, description="trie nodes (SGLang's server default 10M takes ~2 GB and 8 s to build)"
    )
    index_prompt: bool = Field(False, description="also insert the prompt (SGLang does not)")
    python: str | None = Field(None, description=f"the peers venv's Python (default ${PYTHON_ENV} or .venv-peers)")
    timeout_s: float = Field(300.0, gt=0, description="longest wait for one answer (the first JIT build ~35 s)")


def _shutdown(process: subprocess.Popen, stderr: Any) -> None:
    if process.poll() is None:
        try:
            process.stdin.write(b'{"op": "exit"}\n')
            process.stdin.flush()
            process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            process.kill()
            process.wait()
    stderr.close()


class SglangNgramPeer(Proposer):
    """SGLang's ``NgramCorpus`` behind the specplug contract (one worker process per peer)."""

    name = "sglang-ngram"

    def __init__(self, options: SglangNgramOptions) -> None:
        super().__init__()
        self.options = options
        python = Path(options.python) if options.python else default_peers_python()
        if not python.exists():
            raise PeerNotInstalledError(
                "sglang-ngram", f"the peers venv's Python {python}", f"no such file; or point {PYTHON_ENV} at one"
            )
        self._stderr = tempfile.TemporaryFile()
        self._process = subprocess.Popen(
            [str(python), str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr
        )
        self._finalizer = weakref.finalize(self, _shutdown, self._process, self._stderr)
        self._wire: dict[RequestId, int] = {}
        self._next_wire = 0
        self._paths: dict[RequestId, list[list[int]]] = {}
        #: nanoseconds spent inside SGLang's code (without the pipe), over all calls
        self.worker_ns = 0
        corpus = options.model_dump(exclude={"python", "timeout_s"})
        answer = self._call({"op": "init", "options": corpus}, check=False)
        if not answer.get("ok"):
            self.close()
            if answer.get("missing"):
                raise PeerNotInstalledError("sglang-ngram", f"sglang in {python}", answer.get("error", "?"))
            raise PeerWorkerError(f"peer 'sglang-ngram' failed to start: {answer.get('error')}")
        self.versions: dict[str, str] = answer.get("versions", {})

    # ----------------------------------------------------------------- the pipe
    def _call(self, message: dict[str, Any], check: bool = True) -> dict[str, Any]:
        process = self._process
        try:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
        except OSError as error:
            raise PeerWorkerError(f"peer 'sglang-ngram' worker is gone ({error}); {self._stderr_tail()}") from None
        ready, _, _ = select.select([process.stdout], [], [], self.options.timeout_s)
        line = process.stdout.readline() if ready else b""
        if not line:
            reason = "timed out" if not ready else f"exited with code {process.poll()}"
            raise PeerWorkerError(f"peer 'sglang-ngram' worker {reason} on {message['op']!r}; {self._stderr_tail()}")
        answer = json.loads(line)
        self.worker_ns += int(answer.get("ns", 0))
        if check and not answer.get("ok"):
            raise PeerWorkerError(f"peer 'sglang-ngram' worker failed on {message['op']!r}: {answer.get('error')}")
        return answer

    def _stderr_tail(self) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip()
        return f"its stderr ends: {text[-1500:]}" if text else "it wrote nothing to stderr"

    def close(self) -> None:
        """End the worker process (also done when the peer is garbage-collected)."""
        self._finalizer()

    # ------------------------------------------------------------- the contract
    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        wire = self._next_wire
        self._call({"op": "start", "rid": wire, "prompt": prompt.tolist()})
        self._next_wire += 1
        self._wire[request_id] = wire

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        answer = self._call({"op": "propose", "rid": self._wire[request_id]})
        paths = leaf_paths(answer["tokens"], answer["mask"]) if answer["tokens"] else []
        self._paths[request_id] = [path[:max_tokens] for path in paths]
        best = max(paths, key=len) if paths else []
        return Draft(tuple(best[:max_tokens]), self.name, None)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._call({"op": "extend", "rid": self._wire[request_id], "tokens": tokens.tolist()})

    def _stop(self, request_id: RequestId) -> None:
        self._paths.pop(request_id, None)
        self._call({"op": "stop", "rid": self._wire.pop(request_id)})

    def paths(self, request_id: RequestId) -> list[list[int]]:
        """Every root-to-leaf path of the last draft tree (each cut to that step's max_tokens)."""
        return list(self._paths.get(request_id, []))

