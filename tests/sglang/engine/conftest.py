"""SGLang engines on this CPU for the end-to-end tests: SmolLM2-135M in fp32, greedy, torch-native attention.

Engine starts take about a minute here, so each configuration starts once per module."""

from __future__ import annotations

import atexit
import os

import pytest

from specplug.engine import read_stats
from specplug_adapters.sglang import STATS_FILE_ENV, STATS_INTERVAL_ENV

#: code-edit prompts: the output repeats the prompt's lines, so lookups have something to draft
PROMPTS = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\n"
    "# the same function, renamed to fib2:\ndef fib2(n):\n",
    "class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n\n"
    "# the same class, renamed to Vector:\nclass Vector:\n",
]
SAMPLING = {"temperature": 0, "max_new_tokens": 40}
#: what every engine here is started with (the CPU path the test harness completes)
ENGINE_ARGS = {
    "device": "cpu",
    "attention_backend": "torch_native",
    "dtype": "float32",
    "mem_fraction_static": 0.3,
    "max_total_tokens": 4096,
    "max_running_requests": 4,
    "disable_cuda_graph": True,
    "grammar_backend": "none",
    "log_level": "warning",
}


@pytest.fixture(scope="session", autouse=True)
def cpu_engine_env():
    os.environ["SGLANG_USE_CPU_ENGINE"] = "1"


def start_engine(model_dir: str, **kwargs):
    """An engine; the test stops it with :func:`stop_engine` in its ``finally``."""
    import sglang

    return sglang.Engine(model_path=model_dir, **ENGINE_ARGS, **kwargs)


def stop_engine(engine) -> None:
    """Shut ``engine`` down now, and drop the second shutdown SGLang registered with atexit: at
    interpreter exit it would run after pytest closed the streams, and its logging would print
    "--- Logging error ---" tracebacks under a green run."""
    try:
        engine.shutdown()
    finally:
        atexit.unregister(engine.shutdown)


def generate(engine) -> list[dict]:
    return engine.generate(PROMPTS, dict(SAMPLING))


@pytest.fixture(scope="session")
def plain(sglang, model_dir) -> list[dict]:
    """The outputs without speculation: what every speculative run must reproduce token for token."""
    engine = start_engine(model_dir)
    try:
        return generate(engine)
    finally:
        stop_engine(engine)


def run_overlay(
    model_dir: str, plain: list[dict], monkeypatch, tmp_path, neural_source: str, accepting: list[int] | None = None,
    **engine_kwargs,
) -> dict:
    """Run a ``SPECPLUG_*`` overlay (``engine_kwargs``: its algorithm and draft settings, 3 steps) and
    check what every overlay must show: greedy text identical to ``plain``, drafted tokens accepted
    (in the outputs ``accepting`` lists; None: every one), no fault, and both the neural drafter
    (``drafts.<neural_source>``) and the lookup drafting. Returns the stats file's counters for the
    caller's own checks."""
    monkeypatch.setenv(STATS_FILE_ENV, str(tmp_path / "stats-{pid}.json"))
    monkeypatch.setenv(STATS_INTERVAL_ENV, "0")
    engine = start_engine(model_dir, speculative_num_steps=3, **engine_kwargs)
    try:
        outputs = generate(engine)
    finally:
        stop_engine(engine)
    assert [out["text"] for out in outputs] == [out["text"] for out in plain]
    metas = [out["meta_info"] for out in outputs]
    assert all(meta["spec_verify_ct"] > 0 for meta in metas), metas
    # the test prompts' greedy text repeats itself: the lookup drafts it and SGLang accepts it
    accepted = [metas[index] for index in accepting] if accepting is not None else metas
    assert all(meta["spec_num_correct_drafts"] > 0 for meta in accepted), metas
    assert all(meta["completion_tokens"] > meta["spec_verify_ct"] for meta in accepted), metas
    [stats_file] = tmp_path.glob("stats-*.json")  # one scheduler process
    stats = read_stats(stats_file)
    assert stats["method"] == engine_kwargs["speculative_algorithm"] and stats["num_draft_tokens"] == 4, stats
    counters = stats["counters"]
    assert counters.get("faults", 0) == 0, counters
    # both sources reached the method's choice
    assert counters[f"drafts.{neural_source}"] > 0 and counters["drafts.suffix"] > 0, counters
    return counters
