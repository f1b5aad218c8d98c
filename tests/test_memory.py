"""stop() frees all per-request state: memory stays flat over 10^5 start/stop cycles."""

from __future__ import annotations

import gc
import tracemalloc

import numpy as np
import pytest

import specplug

CYCLES = 100_000


def _cycle(proposer, number, prompt, output):
    proposer.start(number, prompt)
    proposer.propose(number, 4)
    proposer.extend(number, output)
    proposer.stop(number)


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("ngram", {}),
        ("suffix", {"global_cache": False}),
        # with the cache on, memory may grow only up to the cache cap
        ("suffix", {"max_cache_bytes": 1 << 16, "max_cached_requests": 1000}),
    ],
)
def test_memory_flat_over_start_stop_cycles(method, options):
    proposer = specplug.create(method, **options)
    rng = np.random.default_rng(0)
    prompt = rng.integers(0, 50, size=48).tolist()
    output = rng.integers(0, 50, size=8).tolist()
    for number in range(5_000):  # warm up: kernels compiled, caches at their steady size
        _cycle(proposer, number, prompt, output)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for number in range(CYCLES):
        _cycle(proposer, number, prompt, output)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert proposer.active_requests() == []
    assert after - before < 64 * 1024, f"{method} grew by {after - before} bytes over {CYCLES} cycles"
