"""An engine the tests stop leaves nothing for interpreter exit (no engine started here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: a stand-in for ``sglang.Engine``, which registers its own ``shutdown`` with atexit when it starts
SCRIPT = """
import atexit
from tests.sglang.engine.conftest import stop_engine

class Engine:
    def __init__(self):
        atexit.register(self.shutdown)
    def shutdown(self):
        print("shutdown", flush=True)

engine = Engine()
{stop}
print("exiting", flush=True)
"""


def _run(stop: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(stop=stop)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_stop_engine_shuts_down_once_and_leaves_no_shutdown_for_exit():
    assert _run("stop_engine(engine)") == ["shutdown", "exiting"]


def test_a_plain_shutdown_would_run_again_at_exit():
    # what stop_engine prevents: SGLang's hook shuts the engine down a second time at exit
    assert _run("engine.shutdown()") == ["shutdown", "exiting", "shutdown"]
