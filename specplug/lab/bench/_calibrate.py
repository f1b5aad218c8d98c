"""Measuring forward-pass times with llama-server, for ``specplug calibrate``.

A verification step of ``n`` batched tokens over ``kv`` cached tokens is timed as the
prompt evaluation of ``n`` new tokens appended to a cached prefix of ``kv`` tokens
(``timings.prompt_ms``): the same forward pass, over one sequence rather than a batch.
Plain decoding time per token gives the per-step overhead; a draft model's decoding time
per token prices a neural draft (``k`` sequential passes); the suffix proposer's own time
per step prices a lookup.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from specplug.cost import DraftTable, DraftTerm, LinearCostModel, VerifyTerm
from specplug._cost._fit import fit_verify
from specplug.lab.bench.llama_server import LlamaServer

__all__ = ["calibrate"]

_TEXT = (
    "Speculative decoding drafts several tokens and verifies them in one forward pass of the target model. "
    "A cost model says what that pass costs for a given number of batched tokens and cached tokens. "
)


def _prefix(server: LlamaServer, length: int) -> list[int]:
    tokens = server.tokenize(_TEXT * 8, add_special=False)
    while len(tokens) < length + 64:
        tokens = tokens + tokens
    return tokens


def _forward_sample(server: LlamaServer, tokens: list[int], kv: int, batched: int) -> tuple[int, int, float]:
    """``(kv tokens, batched tokens, seconds)`` of one forward pass, as the server reports it.

    The server keeps the last request's tokens cached and re-evaluates at least one token,
    so the prefix is cached first, then ``batched`` more tokens are sent; ``cache_n`` and
    ``prompt_n`` say what was really reused and evaluated.
    """
    server.completion_response(tokens[:kv], 1, cache_prompt=True)
    timings = server.completion_response(tokens[: kv + batched], 1, cache_prompt=True)["timings"]
    return int(timings.get("cache_n", kv)), int(timings["prompt_n"]), float(timings["prompt_ms"]) / 1000.0


def _decode_seconds(server: LlamaServer, tokens: list[int], kv: int, count: int = 32) -> float:
    response = server.completion_response(tokens[:kv], count, cache_prompt=True)
    timings = response["timings"]
    return float(timings["predicted_ms"]) / 1000.0 / max(int(timings["predicted_n"]), 1)


def _lookup_seconds() -> float:
    """The suffix proposer's time per step (propose + extend) on a repetitive stream."""
    from specplug._plugins import create

    proposer = create("suffix")
    rng = np.random.default_rng(0)
    stream = np.tile(rng.integers(0, 30000, 200), 10).tolist()
    proposer.start("c", stream[:500])
    began = time.perf_counter()
    steps = 0
    for token in stream[500:]:
        proposer.propose("c", 8)
        proposer.extend("c", [token])
        steps += 1
    return (time.perf_counter() - began) / steps


def calibrate(
    model: str,
    *,
    name: str,
    neural_model: str | None = None,
    threads: int = 1,
    contexts: Sequence[int] = (128, 512, 1024),
    batched: Sequence[int] = (1, 2, 4, 8, 16, 32),
    repeats: int = 3,
    progress: Callable[[str], None] | None = None,
) -> tuple[LinearCostModel, dict[str, float]]:
    """Fit a cost model for ``model`` on this machine; returns it and fit diagnostics."""
    tell = progress or (lambda message: None)
    samples: list[tuple[int, int, float]] = []
    overheads = []
    context_size = max(contexts) + max(batched) + 128
    with LlamaServer(model, threads=threads, ctx_size=context_size) as server:
        tokens = _prefix(server, max(contexts) + max(batched))
        server.completion_response(tokens[: max(contexts)], 1, cache_prompt=True)  # first-use costs
        for kv in contexts:
            for n in batched:
                measured = [_forward_sample(server, tokens, kv, n) for _ in range(repeats)]
                seconds = statistics.median(sample[2] for sample in measured)
                samples.append((measured[0][0], measured[0][1], seconds))
                tell(f"verify: kv {samples[-1][0]}, batched {samples[-1][1]}: {1000 * seconds:.2f} ms")
        per_kv, per_token, fixed, error = fit_verify(samples)
        for kv in contexts:
            decode = statistics.median(_decode_seconds(server, tokens, kv) for _ in range(repeats))
            overheads.append(max(decode - (per_kv * kv + per_token + fixed), 0.0))
            tell(f"decode at kv {kv}: {1000 * decode:.2f} ms/token")
    draft_per_token = []
    with LlamaServer(neural_model or model, threads=threads, ctx_size=context_size) as draft:
        tokens = _prefix(draft, max(contexts))
        for kv in contexts:
            draft_per_token.append(statistics.median(_decode_seconds(draft, tokens, kv) for _ in range(repeats)))
    lookup = _lookup_seconds()
    description = (
        f"{name}: llama-server, {threads} thread(s), fitted by specplug calibrate "
        f"(median relative error {100 * error:.1f}%); neural = {'draft model' if neural_model else 'the model itself'}"
    )
    fitted = LinearCostModel(
        name=name,
        description=description,
        verify=VerifyTerm(per_kv_token=per_kv, per_batched_token=per_token, fixed=fixed),
        draft=DraftTable(
            lookup=DraftTerm(fixed=float(f"{lookup:.4g}")),
            neural=DraftTerm(per_draft_token=float(f"{statistics.median(draft_per_token):.6g}")),
        ),
        step_overhead=float(f"{statistics.median(overheads):.6g}"),
    )
    return fitted, {"median_relative_error": error, "samples": float(len(samples)), "lookup_seconds": lookup}
