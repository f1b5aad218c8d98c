"""specplug.lab.local_server: the wait until an engine's HTTP server answers, against real processes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from specplug.lab.local_server import ServerNotReady, free_port, wait_until_ready

# a server that answers 200 on every GET, but only after a delay (as an engine loads its model)
LATE_SERVER = """
import http.server, sys, time
time.sleep(0.5)
class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Ok).serve_forever()
"""


def _start(code: str, *args: str, log=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=log, stderr=subprocess.STDOUT)


def test_returns_once_a_late_server_answers():
    port = free_port()
    process = _start(LATE_SERVER, str(port))
    try:
        started = time.monotonic()
        wait_until_ready(process, f"http://127.0.0.1:{port}/health", name="late", timeout_s=30, poll_s=0.1)
        assert time.monotonic() - started >= 0.4  # it waited for the server, not past it
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_a_process_that_exits_first_is_named_with_its_status_and_log(tmp_path):
    log = tmp_path / "server.log"
    with log.open("w") as out:
        process = _start("import sys; print('model file missing'); sys.exit(3)", log=out)
    with pytest.raises(ServerNotReady, match=r"(?s)broken exited with 3 before answering .*model file missing"):
        wait_until_ready(process, f"http://127.0.0.1:{free_port()}/health", name="broken", timeout_s=30, log=log, poll_s=0.1)


def test_a_server_that_never_answers_times_out():
    process = _start("import time; time.sleep(60)")
    try:
        started = time.monotonic()
        with pytest.raises(ServerNotReady, match="silent did not answer .* in 1 s"):
            wait_until_ready(process, f"http://127.0.0.1:{free_port()}/health", name="silent", timeout_s=0.6, poll_s=0.1)
        assert time.monotonic() - started < 10
    finally:
        process.kill()
        process.wait()
