"""Hash flooding: a prompt built so that its windows collide in the lookups' hash tables costs no
more than a random prompt, because the hash is keyed per process (``_hashing.HASH_KEY``).

The colliding prompt is built for the hash without a key (key 0), as an attacker who read the
source would build it: windows whose hash lands in the first
few slots of any table up to 2**20 slots, so that linear probing turns them into one cluster and
every insert walks it. A control run with the key set to 0 shows that the prompt is an attack.
Timings are medians of runs interleaved with the random prompt's, so a noisy machine slows both. The
bounds leave room for what the prompts' contents change (the crafted one's windows are all distinct)
and for a shared machine: a keyed start within ``KEYED_BOUND`` times a random one's, against the
unkeyed attack's hundreds of times (at least ``ATTACK_FLOOR``).
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import pytest
from numba import njit

import specplug
from specplug.proposers.lookup import _suffix_index, ngram
from specplug.proposers.lookup._hashing import HASH_KEY, NO_RING, window_hash

PROMPT_TOKENS = 50_000
#: a crafted window's unkeyed hash has its low LOW_BITS bits below SPREAD: one cluster in any table
LOW_BITS, SPREAD = 20, 256
#: (method, options, window length that its first table hashes)
METHODS = [("ngram", {}, 2), ("suffix", {}, 1)]
#: keyed, the crafted prompt costs at most this many times a random one; unkeyed, at least ATTACK_FLOOR times
KEYED_BOUND, ATTACK_FLOOR = 4, 20


@njit(cache=True)
def _colliding_windows(n, count, low_mask, spread):
    """``count`` distinct windows of ``n`` (1 or 2) tokens whose unkeyed hash has its low bits below
    ``spread``: for n = 1 single tokens, for n = 2 pairs (first token below 2**8, second below 2**22)."""
    found = np.empty((count, 2), dtype=np.int64)
    scratch = np.empty(2, dtype=np.int64)
    got = 0
    candidate = 0
    while got < count:
        if n == 1:
            scratch[0] = candidate
        else:
            scratch[0], scratch[1] = candidate >> 22, candidate & ((1 << 22) - 1)
        if (window_hash(scratch, n - 1, n, NO_RING, 0) & low_mask) < spread:
            found[got, 0], found[got, 1] = scratch[0], scratch[1]
            got += 1
        candidate += 1
    return found


def colliding_prompt(n: int) -> list[int]:
    windows = _colliding_windows(n, PROMPT_TOKENS // n, (1 << LOW_BITS) - 1, SPREAD)
    return windows[:, :n].reshape(-1).tolist()


def _timed(method: str, options: dict, prompt: list[int], steps: np.ndarray) -> tuple[float, float]:
    """(seconds to start a request with ``prompt``, median seconds of a step: extend by one token, draft)."""
    proposer = specplug.create(method, **options)
    began = time.perf_counter()
    proposer.start("r", prompt)
    start = time.perf_counter() - began
    proposer.propose("r", 8)
    times = []
    for token in steps.tolist():
        began = time.perf_counter()
        proposer.extend("r", [token])
        proposer.propose("r", 8)
        times.append(time.perf_counter() - began)
    proposer.stop("r")
    return start, statistics.median(times)


def _medians(method: str, options: dict, crafted: list[int], rounds: int) -> tuple[float, float, float, float]:
    rng = np.random.default_rng(0)
    plain = rng.integers(0, 1 << 16, PROMPT_TOKENS).tolist()
    steps = rng.integers(0, 1 << 16, 200)
    _timed(method, options, plain[:1000], steps[:5])  # compiled and warm before anything is timed
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "crafted": []}
    for _ in range(rounds):  # interleaved: a slow spell of the machine slows both
        runs["plain"].append(_timed(method, options, plain, steps))
        runs["crafted"].append(_timed(method, options, crafted, steps))
    (plain_start, plain_step), (crafted_start, crafted_step) = (
        tuple(statistics.median(values) for values in zip(*runs[name])) for name in ("plain", "crafted")
    )
    return plain_start, plain_step, crafted_start, crafted_step


@pytest.mark.parametrize(("method", "options", "n"), METHODS)
def test_a_prompt_crafted_to_collide_costs_no_more_than_a_random_one(method, options, n):
    crafted = colliding_prompt(n)
    assert len(set(zip(*[crafted[i::n] for i in range(n)]))) == PROMPT_TOKENS // n  # distinct windows
    plain_start, plain_step, crafted_start, crafted_step = _medians(method, options, crafted, rounds=5)
    assert crafted_start <= KEYED_BOUND * plain_start, (crafted_start, plain_start)
    assert crafted_step <= KEYED_BOUND * plain_step, (crafted_step, plain_step)


@pytest.mark.parametrize(("method", "options", "n"), METHODS)
def test_without_the_key_the_crafted_prompt_is_an_attack(method, options, n, monkeypatch):
    """The control: the same prompt against the unkeyed hash is many times slower to start."""
    monkeypatch.setattr(ngram, "HASH_KEY", 0)
    monkeypatch.setattr(_suffix_index, "HASH_KEY", 0)
    plain_start, _, crafted_start, _ = _medians(method, options, colliding_prompt(n), rounds=1)
    assert crafted_start > ATTACK_FLOOR * plain_start, (crafted_start, plain_start)


def test_the_key_is_drawn_per_process():
    import subprocess
    import sys

    code = "from specplug.proposers.lookup._hashing import HASH_KEY; print(HASH_KEY)"
    keys = {int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout) for _ in range(3)}
    keys.add(HASH_KEY)
    assert len(keys) >= 3 and all(0 <= key < 2**31 for key in keys)
