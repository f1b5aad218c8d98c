"""An engine's HTTP server for one test or module: started, awaited, and always stopped."""

from __future__ import annotations

import subprocess
from collections import Counter
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from specplug.engine import read_stats
from specplug.lab.local_server import ServerNotReady, wait_until_ready


@contextmanager
def served(
    command: Sequence[str], port: int, *, name: str, log: Path, env: Mapping[str, str], timeout_s: float,
    cwd: Path | None = None, new_session: bool = False,
) -> Iterator[str]:
    """Run ``command`` (a server listening on 127.0.0.1:``port``, its output into ``log``) until its
    ``/health`` answers, then yield its base URL; a server that exits or stays silent fails the test
    with its log's tail. It is terminated on the way out, killed when it does not stop within 60 s."""
    with log.open("w") as out:
        process = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, env=dict(env), cwd=cwd,
                                   start_new_session=new_session)
    base = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_until_ready(process, base + "/health", name=name, timeout_s=timeout_s, log=log)
        except ServerNotReady as error:
            pytest.fail(str(error))
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def drafts_by_source(stats: Path) -> Counter[str]:
    """A server's specplug draft counts by source so far (0 for a source that drafted nothing), from
    its stats file (read until two reads a moment apart agree: the last step's write lands with the
    response)."""
    def read() -> dict[str, int]:
        counters = read_stats(stats)["counters"]
        return {key[len("drafts."):]: value for key, value in counters.items() if key.startswith("drafts.")}

    last = read()
    for _ in range(20):
        time.sleep(0.25)
        now = read()
        if now == last:
            break
        last = now
    return Counter(last)
