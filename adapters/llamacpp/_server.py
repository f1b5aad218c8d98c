"""A llama-server child process on the loopback interface, and its completions.

The server is hermetic (no ``LLAMA_ARG_*`` variables, no user ``config.ini``), single-threaded
by default (one thread is what makes timings comparable on a shared machine), and checked
before it starts: a missing binary, a missing model file or a flag the binary rejects is a
one-line error instead of a dead child process.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specplug._inputs import is_file
from specplug._outputs import short_path
from specplug_adapters.llamacpp._binary import check_flags, find_server, help_options, hermetic_env, server_help
from specplug_adapters.llamacpp._errors import FlagRejectedError, ModelNotFoundError, ServerError

__all__ = ["Completion", "LlamaServer", "check_model"]

#: flags the server object sets itself; a preset or user flag may not override them
MANAGED_FLAGS = ("-m", "--model", "--host", "--port", "-t", "--threads", "-tb", "--threads-batch")


def check_model(model: str | os.PathLike[str]) -> Path:
    """``model`` as a Path, or :class:`ModelNotFoundError` if it is not a GGUF file."""
    path = Path(model)
    shown = repr(short_path(path))
    if not is_file(path):
        raise ModelNotFoundError(f"model file {shown} does not exist (give the path of a .gguf file)")
    try:
        with path.open("rb") as handle:
            magic = handle.read(4)
    except OSError as error:
        raise ModelNotFoundError(f"model file {shown} cannot be read: {error.strerror or error}") from None
    if magic != b"GGUF":
        raise ModelNotFoundError(f"model file {shown} is not a GGUF file (it does not start with 'GGUF')")
    return path.resolve()  # the server runs in a temporary folder: relative paths would break


@dataclass(frozen=True)
class Completion:
    """One greedy completion: text, tokens, timings and (if asked) top-n probabilities."""

    text: str
    tokens: tuple[int, ...]
    predicted_n: int
    predicted_ms: float
    prompt_ms: float
    draft_n: int
    draft_n_accepted: int
    #: per generated token, the top-n candidates as (token id, probability), most likely first
    top: tuple[tuple[tuple[int, float], ...], ...] = ()
    #: CPU time the server process spent on this request (prompt and generation)
    cpu_seconds: float = 0.0

    @property
    def tokens_per_second(self) -> float:
        return 1000.0 * self.predicted_n / self.predicted_ms if self.predicted_ms > 0 else 0.0

    @property
    def acceptance(self) -> float | None:
        return self.draft_n_accepted / self.draft_n if self.draft_n else None

    @property
    def generation_cpu_seconds(self) -> float:
        """CPU time of the generation alone: the request's CPU time split as its wall time was.

        On a shared machine wall time also counts waiting for a core; the server's CPU time
        (one thread) counts only its own work, so it compares settings more fairly.
        """
        total = self.prompt_ms + self.predicted_ms
        return self.cpu_seconds * self.predicted_ms / total if total > 0 else 0.0

    @property
    def cpu_tokens_per_second(self) -> float:
        cpu = self.generation_cpu_seconds
        return self.predicted_n / cpu if cpu > 0 else 0.0

    @classmethod
    def from_response(cls, response: dict[str, Any], cpu_seconds: float = 0.0) -> Completion:
        timings = response.get("timings") or {}
        top = tuple(_top_candidates(item) for item in response.get("completion_probabilities") or ())
        return cls(
            text=str(response.get("content", "")),
            tokens=tuple(int(token) for token in response.get("tokens") or ()),
            predicted_n=int(timings.get("predicted_n", 0)),
            predicted_ms=float(timings.get("predicted_ms", 0.0)),
            prompt_ms=float(timings.get("prompt_ms", 0.0)),
            draft_n=int(timings.get("draft_n", 0)),
            draft_n_accepted=int(timings.get("draft_n_accepted", 0)),
            top=top,
            cpu_seconds=cpu_seconds,
        )


def _top_candidates(item: dict[str, Any]) -> tuple[tuple[int, float], ...]:
    # post_sampling_probs=true answers "top_probs" with "prob"; otherwise "top_logprobs" with "logprob"
    if "top_probs" in item:
        return tuple((int(c["id"]), float(c["prob"])) for c in item["top_probs"])
    return tuple((int(c["id"]), math.exp(float(c["logprob"]))) for c in item.get("top_logprobs", ()))


def _die_with_parent() -> None:
    # Linux: the server gets SIGTERM when the process that started it dies, even by a signal
    # that skips Python's cleanup, so no llama-server is left behind holding memory and a port
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """llama-server for one model and one set of flags, bound to 127.0.0.1.

    >>> with LlamaServer(".models/SmolLM2-135M-Instruct.Q4_1.gguf", ["--spec-type", "ngram-mod"]) as server:
    ...     completion = server.complete("def add(a, b):", 32)          # doctest: +SKIP
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        flags: Sequence[str] = (),
        *,
        threads: int = 1,
        ctx_size: int = 4096,
        binary: str | os.PathLike[str] | None = None,
        startup_timeout: float = 180.0,
    ) -> None:
        self.binary = str(find_server(binary))
        self.model = check_model(model)
        self.flags = [str(flag) for flag in flags]
        managed = sorted({flag.partition("=")[0] for flag in self.flags} & set(MANAGED_FLAGS))
        if managed:
            raise FlagRejectedError(
                f"flag(s) {', '.join(managed)} are set by specplug (model, loopback host/port, threads); "
                "pass the model and threads as arguments instead"
            )
        check_flags(self.flags, help_options(server_help(self.binary)), binary=self.binary)
        self.threads = threads
        self.ctx_size = ctx_size
        self.startup_timeout = startup_timeout
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._home: tempfile.TemporaryDirectory[str] | None = None
        self._log: Any = None

    # ----------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The full command line the server runs with."""
        return [
            self.binary, "-m", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
            "-t", str(self.threads), "-tb", str(self.threads), "-c", str(self.ctx_size),
            "--parallel", "1", *self.flags,
        ]  # fmt: skip

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server and wait until it answers ``/health``."""
        if self._process is not None:
            return
        self._home = tempfile.TemporaryDirectory(prefix="specplug-llama-")
        self._log = tempfile.TemporaryFile()
        self.port = _free_port()
        self._process = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=hermetic_env(home=self._home.name), cwd=self._home.name,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )  # fmt: skip
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code, tail = self._process.returncode, self.log_tail()
                self.stop()
                raise ServerError(f"llama-server exited with code {code} while starting; its last lines:\n{tail}")
            try:
                if self._request("GET", "/health", None, timeout=2).get("status") == "ok":
                    return
            except (OSError, ServerError):
                pass
            time.sleep(0.1)
        tail = self.log_tail()
        self.stop()
        raise ServerError(f"llama-server did not answer /health within {self.startup_timeout:.0f} s; its last lines:\n{tail}")

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 15 s) and remove its temporary files."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.terminate()
                try:
                    self._process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            self._process = None
        if self._home is not None:
            self._home.cleanup()
            self._home = None

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (from /proc; 0 where unavailable)."""
        if self._process is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self._process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime, in ticks

    def log_text(self) -> str:
        """Everything the server printed so far (kept after :meth:`stop`, until the next start)."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines the server printed."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    # ---------------------------------------------------------------------- HTTP
    def _request(self, method: str, path: str, payload: dict[str, Any] | None, *, timeout: float) -> dict[str, Any]:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            body = error.read().decode(errors="replace")[:400]
            raise ServerError(f"llama-server {path} answered HTTP {error.code}: {body}") from None

    def chat_prompt(self, messages: list[dict[str, str]]) -> str:
        """The model's chat template applied to ``messages``, ending with the assistant's turn."""
        return str(self._request("POST", "/apply-template", {"messages": messages}, timeout=60)["prompt"])

    def tokenize(self, text: str, *, add_special: bool = True) -> list[int]:
        """Token ids of ``text``: special tokens parsed, BOS added as the model wants (unless not ``add_special``)."""
        payload = {"content": text, "add_special": add_special, "parse_special": True}
        answer = self._request("POST", "/tokenize", payload, timeout=60)
        return [int(token) for token in answer["tokens"]]

    def complete(
        self, prompt: str | Sequence[int], n_predict: int, *, n_probs: int = 0, timeout: float = 900.0
    ) -> Completion:
        """Greedy completion of ``prompt`` (text or token ids), ``n_predict`` tokens at most.

        The prompt cache is off, so every request is timed from the same cold state;
        ``n_probs`` > 0 also returns each generated token's top-n probabilities.
        """
        payload: dict[str, Any] = {
            "prompt": prompt if isinstance(prompt, str) else [int(token) for token in prompt],
            "n_predict": n_predict,
            "temperature": 0.0,
            "top_k": 1,
            "seed": 0,
            "cache_prompt": False,
            "return_tokens": True,
        }
        if n_probs:
            payload.update(n_probs=n_probs, post_sampling_probs=False)
        before = self.cpu_seconds()
        response = self._request("POST", "/completion", payload, timeout=timeout)
        return Completion.from_response(response, cpu_seconds=self.cpu_seconds() - before)
