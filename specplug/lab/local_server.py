"""An engine's HTTP server started on this machine for a test or a benchmark: a free port, and the
wait until the server answers.

Used by the SGLang and vLLM server tests and ``scripts/gpu_check_sglang.py``; the standard
library only, so it imports in every engine's environment.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path


class ServerNotReady(RuntimeError):
    """The server's process exited, or it did not answer in time; the message says which."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answers(url: str, timeout_s: float = 5) -> bool:
    """Whether a GET of ``url`` returns status 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 - a local server's URL
            return response.status == 200
    except OSError:  # refused while it starts, reset, timed out, or an HTTP error status
        return False


def log_tail(log: str | Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a server's log file ('' when there is none)."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_until_ready(
    process: subprocess.Popen, url: str, *, name: str, timeout_s: float, log: str | Path | None = None, poll_s: float = 2
) -> None:
    """Poll ``url`` until it answers 200; raise :class:`ServerNotReady` when ``process`` exits first
    or ``timeout_s`` pass. The error names ``name`` and ends with the tail of ``log`` when given."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            problem = f"{name} exited with {process.returncode} before answering {url}"
            break
        if answers(url):
            return
        if time.monotonic() > deadline:
            problem = f"{name} did not answer {url} in {timeout_s:.0f} s"
            break
        time.sleep(poll_s)
    if log is not None:
        problem += f"; log {log}, its last lines:\n{log_tail(log)}"
    raise ServerNotReady(problem)
