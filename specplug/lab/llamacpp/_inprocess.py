"""Measuring draft models inside llama-cpp-python: decode tokens/s, acceptance, speedup.

Each generation gets a fresh draft model from its factory, so nothing learnt on one round
(a suffix cache holding the answer) helps the next. Decode speed is timed from the first
generated token to the last, so the prompt's evaluation (which ``logits_all`` makes slower
for every speculative run alike) is not counted, as in llama-server's ``predicted_per_second``.
Speed is counted per wall-clock second and per CPU-second of this process (one thread: on a
shared machine the CPU time leaves out waiting for a core). Rounds interleave the settings,
and speedups are medians of per-round ratios of CPU tokens/s to plain's.
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

import llama_cpp
import numpy as np
from llama_cpp import Llama
from llama_cpp._logger import llama_log_callback as default_log_callback
from llama_cpp.llama_speculative import LlamaDraftModel

from specplug import accepted_prefix
from specplug.engine import HistorySync
from specplug.lab.llamacpp._measure import Measurement, Setting, first_divergence

__all__ = ["CountingDraftModel", "DraftFactory", "llama_cpp_log_to", "measure_draft_models"]

#: returns a fresh draft model for one generation, or None for plain decoding
DraftFactory = Callable[[], Any]


class CountingDraftModel(LlamaDraftModel):
    """Wraps any draft model (e.g. ``LlamaPromptLookupDecoding``) to count drafted and accepted tokens.

    Acceptance is inferred as in :class:`SpecplugDraftModel`: the tokens a call adds to the
    previous call's history start with the accepted part of the previous draft.
    """

    def __init__(self, inner: LlamaDraftModel) -> None:
        self.inner = inner
        self.stats: dict[str, int] = {"drafted": 0, "accepted": 0}
        self._sync = HistorySync()
        self._draft = np.empty(0, dtype=np.intc)

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        gained = self._sync.advance(input_ids)
        if gained is not None:
            self.stats["accepted"] += accepted_prefix(self._draft, gained)
        draft = np.asarray(self.inner(np.array(input_ids, dtype=np.intc, copy=True), **kwargs), dtype=np.intc)
        self.stats["drafted"] += len(draft)
        self._draft = draft
        return draft


@contextmanager
def llama_cpp_log_to(sink: TextIO) -> Iterator[None]:
    """Send llama.cpp's own log lines (model loading, context set-up) to ``sink`` meanwhile.

    llama-cpp-python's log callback reads ggml's log levels one off (a warning counts as an
    error), so with ``verbose=False`` lines such as ``llama_kv_cache_iswa: using full-size SWA
    cache`` still reach the console, once per model loaded.
    """

    @llama_cpp.llama_log_callback
    def write(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        sink.write(text.decode("utf-8", errors="replace"))

    llama_cpp.llama_log_set(write, ctypes.c_void_p(0))
    try:
        yield
    finally:  # back to llama-cpp-python's own callback; ctypes needs `write` alive until here
        sink.flush()
        llama_cpp.llama_log_set(default_log_callback, ctypes.c_void_p(0))


def _generate(llm: Llama, prompt_ids: list[int], n_predict: int) -> tuple[list[int], float, float]:
    """Greedy tokens, and the wall and CPU seconds from the first token to the last."""
    tokens: list[int] = []
    first = last = (0.0, 0.0)
    for token in llm.generate(prompt_ids, temp=0.0, top_k=1, reset=True):
        last = (time.perf_counter(), time.process_time())
        if not tokens:
            first = last
        if token == llm.token_eos():
            break
        tokens.append(int(token))
        if len(tokens) == n_predict:
            break
    return tokens, last[0] - first[0], last[1] - first[1]


def measure_draft_models(
    model: str | os.PathLike[str],
    factories: dict[str, DraftFactory],
    prompts: Sequence[str],
    *,
    n_predict: int = 128,
    rounds: int = 3,
    threads: int = 1,
    n_ctx: int = 1024,
    progress: Callable[[str], None] | None = None,
    after_round: Callable[[int, list[Measurement]], None] | None = None,
) -> list[Measurement]:
    """Measure each draft-model factory (``None``-returning = plain, measured first).

    ``progress`` is called before each generation; ``after_round`` (when given) once a round ends,
    with the rounds done so far and the rows measured so far, in the returned order.
    """
    names = list(factories)
    plain_name = next((name for name in names if factories[name]() is None), None)
    if plain_name is None:
        raise ValueError("one factory must return None (plain decoding) to compare with")
    names.remove(plain_name)
    names.insert(0, plain_name)
    llms = {}
    for name in names:
        draft = factories[name]()
        if draft is not None:  # warm up (numba compiles or loads its cache on the first call), untimed
            draft(np.array([1, 2, 3, 1, 2, 3, 1, 2], dtype=np.intc))
        # llama-cpp-python 0.3.36 turns logits_all on for a draft model but sizes its scores
        # buffer from the argument: without logits_all=True it overflows past n_batch tokens
        llms[name] = Llama(
            str(model), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
            draft_model=draft, logits_all=draft is not None, verbose=False,
        )  # fmt: skip
    tokenized = [llms[plain_name].tokenize(prompt.encode()) for prompt in prompts]
    results = {name: Measurement(Setting(name, () if name == plain_name else ("in-process",))) for name in names}
    plain_tokens: list[list[int]] = []
    results[plain_name].compared = results[plain_name].identical = len(prompts)
    for round_index in range(rounds):
        plain_tps = 0.0
        for name in names:
            llm, result = llms[name], results[name]
            produced, seconds, cpu_seconds = 0, 0.0, 0.0
            for index, prompt_ids in enumerate(tokenized):
                if progress:
                    progress(f"round {round_index + 1}/{rounds}, prompt {index + 1}: {name}")
                drafter = factories[name]()
                llm.draft_model = drafter  # a fresh drafter per generation (see module docstring)
                tokens, elapsed, cpu = _generate(llm, prompt_ids, n_predict)
                produced += max(len(tokens) - 1, 0)
                seconds += elapsed
                cpu_seconds += cpu
                stats = getattr(drafter, "stats", None)
                if stats is not None:
                    result.draft_n += stats["drafted"]
                    result.draft_n_accepted += stats["accepted"]
                if name == plain_name and round_index == 0:
                    plain_tokens.append(tokens)
                elif round_index == 0:
                    result.compared += 1
                    result.identical += first_divergence(plain_tokens[index], tokens) is None
            result.tokens_per_second.append(produced / seconds if seconds else 0.0)
            cpu_tps = produced / cpu_seconds if cpu_seconds else 0.0
            result.cpu_tokens_per_second.append(cpu_tps)
            result.predicted_n += produced
            if name == plain_name:
                plain_tps = cpu_tps
            result.ratios.append(cpu_tps / plain_tps if plain_tps else 0.0)
        if after_round:
            after_round(round_index + 1, [results[name] for name in names])
    return [results[name] for name in names]
