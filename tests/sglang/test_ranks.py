"""SGLang's tensor-parallel ranks each overlay their own verify input, so the EAGLE overlay's choice must
come out alike on every rank: two simulated ranks, each reading its own skewed clocks, over the same steps."""

from __future__ import annotations

import itertools
import json
import time

import torch

from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.test_eagle import _batch, _verify_input

#: the target's greedy text: a phrase that recurs (the lookup's) between stretches only the head knows
TARGET = [*range(100, 112), *range(5, 17), *range(200, 212), *range(5, 17), *range(300, 330)]
PROMPT = 6
WIDTH = 4  # the root and a chain of 3
OPTIONS = {"margin": 100.0, "explore": 1.0}  # the lookup wins where it drafts; the head elsewhere


def head_chain(history: list[int], step: int) -> list[int]:
    """The EAGLE head's chain: right on even steps, wrong from its second token on odd ones."""
    right = (TARGET + [0] * WIDTH)[len(history) : len(history) + WIDTH - 1]
    return right if step % 2 == 0 else [right[0], 999, 998]


def accepted(history: list[int], chain: list[int]) -> int:
    right = TARGET[len(history) :]
    return sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], zip(chain, right)))


def skewed(rank: int):
    """Clocks that disagree between ranks (rank 1's run fast and jump)."""
    counter = itertools.count()
    return lambda: 1e4 * rank + next(counter) * (1.0 if rank == 0 else 37.5)


def test_ranks_with_different_clocks_overlay_the_same_chains(sglang, monkeypatch):
    from specplug_adapters.sglang import EagleOverlay

    monkeypatch.setenv(OPTIONS_ENV, json.dumps(OPTIONS))
    overlays = [EagleOverlay("SPECPLUG_HYBRID_EAGLE", "hybrid", "eagle") for _ in range(2)]
    history = TARGET[:PROMPT]
    sent: list[list[list[int]]] = [[], []]
    step = 0
    while len(history) < len(TARGET) - WIDTH:
        chain = head_chain(history, step)
        for rank, overlay in enumerate(overlays):
            clock = skewed(rank)
            for name in ("perf_counter", "monotonic", "time"):
                monkeypatch.setattr(time, name, clock)
            verify = _verify_input([[history[-1], *chain]])
            overlay.apply(_batch(list(history)), verify)
            sent[rank].append(verify.draft_token.tolist()[1:])
        monkeypatch.undo()
        monkeypatch.setenv(OPTIONS_ENV, json.dumps(OPTIONS))
        assert sent[0][-1] == sent[1][-1], f"step {step}: the ranks verify different drafts"
        gained = accepted(history, sent[0][-1])
        history = TARGET[: len(history) + gained + 1]
        step += 1
    # the run exercised both sources: the lookup's chain replaced the head's on some steps, not all
    overlaid = [overlay.counters.get("overlaid_rows", 0) for overlay in overlays]
    assert overlaid[0] == overlaid[1] and 0 < overlaid[0] < step
    assert all(overlay.counters.get("faults", 0) == 0 for overlay in overlays)
    assert torch.equal(torch.tensor(sent[0]), torch.tensor(sent[1]))
