"""Measuring llama-server settings side by side: tokens/s, acceptance and speedup over plain.

Settings are measured in rounds. Each round starts one fresh server per setting, all at
once, and sends every prompt to every setting back to back (plain first), so no server sees
a prompt twice (the caches of ``ngram-mod``/``ngram-cache`` would learn the answer) and the
settings compared on a prompt run seconds apart. Speed is counted two ways: wall-clock
tokens/s (``timings.predicted_ms``) and tokens per CPU-second of the server process (one
thread), which on a shared machine leaves out the time spent waiting for a core. A setting's
speedup is the median over rounds of its CPU tokens/s over plain's in the same round; the
spread of those ratios is the noise quoted with it.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TextIO

from specplug import accepted_prefix
from specplug.lab.llamacpp._mtp import check_mtp_settings
from specplug.lab.llamacpp._prompts import Prompt
from specplug_adapters.llamacpp import Completion, LlamaServer

__all__ = ["Agreement", "Measurement", "Setting", "agreement", "first_divergence", "measure_settings"]


@dataclass(frozen=True)
class Setting:
    """A named set of llama-server flags (``flags=()`` is plain decoding)."""

    name: str
    flags: tuple[str, ...] = ()


@dataclass
class Measurement:
    """One setting over all rounds: per-round totals and the comparison with plain."""

    setting: Setting
    tokens_per_second: list[float] = field(default_factory=list)  # wall clock, per round
    cpu_tokens_per_second: list[float] = field(default_factory=list)  # per CPU-second, per round
    ratios: list[float] = field(default_factory=list)  # CPU tokens/s over plain's, per round
    draft_n: int = 0
    draft_n_accepted: int = 0
    predicted_n: int = 0
    identical: int = 0  # prompts whose tokens equal plain's (counted in the first round)
    compared: int = 0

    @property
    def median_tps(self) -> float:
        return statistics.median(self.tokens_per_second) if self.tokens_per_second else 0.0

    @property
    def median_cpu_tps(self) -> float:
        return statistics.median(self.cpu_tokens_per_second) if self.cpu_tokens_per_second else 0.0

    @property
    def speedup(self) -> float:
        return statistics.median(self.ratios) if self.ratios else 0.0

    @property
    def spread(self) -> tuple[float, float]:
        return (min(self.ratios), max(self.ratios)) if self.ratios else (0.0, 0.0)

    @property
    def acceptance(self) -> float | None:
        return self.draft_n_accepted / self.draft_n if self.draft_n else None

    @property
    def accepted_per_token(self) -> float:
        """Share of the generated tokens that came from accepted drafts."""
        return self.draft_n_accepted / self.predicted_n if self.predicted_n else 0.0


def first_divergence(expected: Sequence[int], got: Sequence[int]) -> int | None:
    """Index of the first differing token, None when equal (a shorter run differs at its end).

    >>> first_divergence([1, 2, 3], [1, 9, 3]), first_divergence([1, 2], [1, 2, 3]), first_divergence([1], [1])
    (1, 2, None)
    """
    index = accepted_prefix(expected, got)
    return None if index == len(expected) == len(got) else index


@dataclass(frozen=True)
class Agreement:
    """How a speculative run's tokens compare with plain greedy decoding."""

    identical: bool
    divergence: int | None = None  # index of the first differing token
    log_gap: float | None = None  # ln(p1 / p2) of plain's two best tokens there
    detail: str = ""

    @property
    def ok(self) -> bool:
        """Identical, or the first difference is plain's runner-up at a near-tie."""
        return self.identical or not self.detail


def agreement(
    plain_tokens: Sequence[int],
    plain_top: Sequence[Sequence[tuple[int, float]]],
    tokens: Sequence[int],
    *,
    max_log_gap: float = 0.5,
) -> Agreement:
    """Compare ``tokens`` with plain's; a difference is fine only at a near-tie.

    Speculation verifies several tokens in one batch, and llama.cpp's batched kernels on
    quantized weights round differently from its one-token kernels: logits move by up to
    about 0.4 nats here (measured on SmolLM2 Q4_1, where ']' vs '])' flips from 0.55/0.37
    to 0.42/0.45). So where plain's two best tokens are within ``max_log_gap`` nats
    (ln p1/p2) a batched run may take the runner-up, and after that the texts go apart.
    ``plain_top`` is plain's top-2 (token, probability) per generated token.
    """
    index = first_divergence(plain_tokens, tokens)
    if index is None:
        return Agreement(True)
    if index >= min(len(plain_tokens), len(tokens)):
        return Agreement(False, index, None, f"one run stopped at token {index}, the other went on")
    if index >= len(plain_top) or len(plain_top[index]) < 2:
        return Agreement(False, index, None, f"no top-2 probabilities for token {index}")
    (first, p1), (second, p2) = plain_top[index][:2]
    gap = math.log(p1 / p2) if p2 > 0 else math.inf
    if tokens[index] != second:
        return Agreement(False, index, gap, f"token {index}: got {tokens[index]}, not plain's top-2 ({first}, {second})")
    if gap > max_log_gap:
        return Agreement(False, index, gap, f"token {index}: top-2 are {gap:.2f} nats apart, not a near-tie")
    return Agreement(False, index, gap)


def measure_settings(
    model: str | os.PathLike[str],
    settings: Sequence[Setting],
    prompts: Sequence[Prompt],
    *,
    n_predict: int = 128,
    rounds: int = 3,
    threads: int = 1,
    ctx_size: int = 4096,
    binary: str | None = None,
    progress: Callable[[str], None] | None = None,
    engine_log: TextIO | None = None,
    after_round: Callable[[int, list[Measurement]], None] | None = None,
) -> list[Measurement]:
    """Measure ``settings`` (plain is added first if missing) over ``prompts`` in ``rounds``.

    ``progress`` is called before each completion; each server's own log goes to ``engine_log``
    (when given) once its round ends; ``after_round`` gets the rounds done so far and the
    measurements over them (the demo prints a first table from round 1).
    """
    if not any(not setting.flags for setting in settings):
        settings = [Setting("plain"), *settings]
    plain_name = next(s.name for s in settings if not s.flags)
    settings = sorted(settings, key=lambda s: s.name != plain_name)  # plain first on every prompt

    def server(setting: Setting) -> LlamaServer:
        return LlamaServer(model, setting.flags, threads=threads, ctx_size=ctx_size, binary=binary)

    for setting in settings:  # check every setting (flags against --help, model path) before any runs
        server(setting)
    check_mtp_settings(model, settings)  # a draft-mtp setting needs the GGUF's MTP layers
    results = {s.name: Measurement(s) for s in settings}
    plain_tokens: dict[str, tuple[int, ...]] = {}
    for round_index in range(rounds):
        runs: dict[str, list[Completion]] = {s.name: [] for s in settings}
        with ExitStack() as stack:
            live = {s.name: stack.enter_context(server(s)) for s in settings}
            for prompt in prompts:
                text = prompt.render(live[plain_name])
                for setting in settings:
                    if progress:
                        progress(f"round {round_index + 1}/{rounds}, {prompt.id}: {setting.name}")
                    runs[setting.name].append(live[setting.name].complete(text, n_predict))
        if engine_log is not None:
            for name, running in live.items():
                engine_log.write(f"==== llama-server, round {round_index + 1}/{rounds}, {name}: {' '.join(running.command())}\n")
                engine_log.write(running.log_text())
            engine_log.flush()
        plain_cpu = _totals(runs[plain_name])[1]
        for setting in settings:
            completions, result = runs[setting.name], results[setting.name]
            wall, cpu = _totals(completions)
            result.tokens_per_second.append(wall)
            result.cpu_tokens_per_second.append(cpu)
            result.ratios.append(cpu / plain_cpu if plain_cpu else 0.0)
            result.draft_n += sum(c.draft_n for c in completions)
            result.draft_n_accepted += sum(c.draft_n_accepted for c in completions)
            result.predicted_n += sum(c.predicted_n for c in completions)
            if round_index == 0:
                if setting.name == plain_name:
                    plain_tokens = {p.id: c.tokens for p, c in zip(prompts, completions)}
                result.compared += len(prompts)
                result.identical += sum(
                    first_divergence(plain_tokens[p.id], c.tokens) is None for p, c in zip(prompts, completions)
                )
        if after_round:
            after_round(round_index + 1, [results[s.name] for s in settings])
    return [results[s.name] for s in settings]


def _totals(completions: Sequence[Completion]) -> tuple[float, float]:
    """(wall-clock tokens/s, tokens per CPU-second) over all completions."""
    tokens = sum(c.predicted_n for c in completions)
    millis = sum(c.predicted_ms for c in completions)
    cpu = sum(c.generation_cpu_seconds for c in completions)
    return (1000.0 * tokens / millis if millis else 0.0), (tokens / cpu if cpu else 0.0)
