"""``SPECPLUG_HYBRID`` with no neural part, and its EAGLE overlay with no head, on the real model (no drafter
of its own): refused before any SGLang process starts, in one line with exit status 2 from the server's
command line, and as specplug's own error from ``sgl.Engine(...)``; and the overlay over DFLASH, which
SGLang's worker leaves nowhere to write, refused the same way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import specplug
from specplug.lab.local_server import free_port
from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.engine.conftest import ENGINE_ARGS

#: the start fails in the argument check: seconds of imports, no model load
START_S = 240
SERVERS = {
    "launch_server": [sys.executable, "-m", "sglang.launch_server"],
    "sglang serve": [str(Path(sys.executable).parent / "sglang"), "serve"],
}
#: algorithm -> what the line says is missing
CASES = {
    "SPECPLUG_HYBRID": f"SGLang's n-gram verify path (SPECPLUG_HYBRID) runs none of its own and {OPTIONS_ENV} gives no 'neural'",
    "SPECPLUG_HYBRID_EAGLE": "SGLang's EAGLE worker is given no --speculative-draft-model-path",
}


def expected(algorithm: str, model: str) -> str:
    return (f"specplug: error: {algorithm} drafts with the model's own drafter (MTP layers, an EAGLE head or a draft "
            f"model), but there is none for {model}: {CASES[algorithm]}; run SPECPLUG_HYBRID_EAGLE (or "
            "SPECPLUG_HYBRID_EAGLE3) with --speculative-draft-model-path HEAD (an EAGLE head; for a model with MTP "
            "layers, SPECPLUG_HYBRID_NEXTN), or SPECPLUG_HYBRID_STANDALONE with --speculative-draft-model-path DRAFT (a "
            "smaller model with the target's vocabulary), or use a lookup algorithm that needs none: SPECPLUG_SUFFIX, "
            "or SPECPLUG_ADAPTIVE")


@pytest.mark.parametrize(("server", "algorithm"), [("launch_server", "SPECPLUG_HYBRID"),
                                                   ("launch_server", "SPECPLUG_HYBRID_EAGLE"),
                                                   ("sglang serve", "SPECPLUG_HYBRID")])
def test_the_server_start_is_one_line_and_exit_status_2(sglang, model_dir, server, algorithm):
    command = [*SERVERS[server], "--model-path", model_dir, "--device", "cpu", "--port", str(free_port()),
               "--speculative-algorithm", algorithm]
    environ = {key: value for key, value in os.environ.items() if key != OPTIONS_ENV}
    result = subprocess.run(command, capture_output=True, text=True, timeout=START_S,
                            env={**environ, "SGLANG_USE_CPU_ENGINE": "1"})
    ours = [line for line in result.stderr.splitlines() if line.startswith("specplug:")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert ours == [expected(algorithm, model_dir)], result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout


def test_an_overlay_over_dflash_is_refused_at_server_start_in_one_line(sglang, model_dir):
    from specplug_adapters.sglang import refused_overlay_names

    command = [*SERVERS["launch_server"], "--model-path", model_dir, "--device", "cpu", "--port", str(free_port()),
               "--speculative-algorithm", "SPECPLUG_HYBRID_DFLASH", "--speculative-draft-model-path", model_dir]
    environ = {key: value for key, value in os.environ.items() if key != OPTIONS_ENV}
    result = subprocess.run(command, capture_output=True, text=True, timeout=START_S,
                            env={**environ, "SGLANG_USE_CPU_ENGINE": "1"})
    ours = [line for line in result.stderr.splitlines() if line.startswith("specplug:")]
    assert result.returncode == 2, result.stderr[-3000:]
    assert ours == ["specplug: error: " + refused_overlay_names()["SPECPLUG_HYBRID_DFLASH"]], result.stderr[-3000:]
    assert "Traceback" not in result.stderr + result.stdout


def test_engine_raises_specplugs_own_error(sglang, model_dir, monkeypatch):
    import sglang as sgl

    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    monkeypatch.setenv("SGLANG_USE_CPU_ENGINE", "1")
    # sgl.Engine registers its shutdown at exit before it resolves its arguments; refused, it started
    # nothing, and its shutdown at interpreter exit would only log into pytest's closed streams
    monkeypatch.setattr("atexit.register", lambda function, *args, **kwargs: function)
    with pytest.raises(specplug.NoDrafterError) as raised:
        sgl.Engine(model_path=model_dir, speculative_algorithm="SPECPLUG_HYBRID", **ENGINE_ARGS)
    assert "specplug: error: " + str(raised.value) == expected("SPECPLUG_HYBRID", model_dir)
