"""Abuse of the core API beyond drafts and threads: nonsense options, batch forms, pending drafts,
verification inputs, numpy integers, unhashable ids."""

from __future__ import annotations

import math
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import specplug
from specplug import BatchStep, InvalidOptionError, InvalidTokensError, RequestStateError
from specplug.cost import OnlineCostModel
from specplug.proposers.composite._pending import MAX_WAITING
from specplug.verify import verify_greedy, verify_sampled


@pytest.mark.parametrize(
    ("method", "options", "named"),
    [
        ("suffix", {"max_spec_offset": math.nan}, "max_spec_offset = nan"),
        ("suffix", {"max_spec_factor": math.inf}, "max_spec_factor = inf"),
        ("suffix", {"max_spec_factor": 1e300}, "max_spec_factor = 1e+300"),
        ("suffix", {"min_token_prob": math.nan}, "min_token_prob = nan"),
        ("suffix", {"max_cache_bytes": 10**20}, "max_cache_bytes"),
        ("ngram", {"min_hits": 10**20}, "min_hits"),
        ("hybrid", {"margin": math.nan}, "margin = nan"),
        ("hybrid", {"prior_weight": math.inf}, "prior_weight = inf"),
        ("hybrid", {"explore": math.inf}, "explore = inf"),
        ("adaptive", {"prior_weight": math.inf}, "prior_weight = inf"),
        ("adaptive", {"min_gain": math.inf}, "min_gain = inf"),
        ("adaptive", {"explore": math.nan}, "explore = nan"),
        ("adaptive", {"prior": math.nan}, "prior = nan"),
    ],
)
def test_nonsense_options_are_refused_at_creation_in_one_line(method, options, named):
    if method == "hybrid":
        options = {**options, "neural": specplug.create("ngram", min_n=1, max_n=1)}
    with pytest.raises(InvalidOptionError) as raised:
        specplug.create(method, **options)
    message = str(raised.value)
    assert named in message and "\n" not in message


ZERO_COST = """name = "zero"
step_overhead = 0.0
[verify]
per_kv_token = 0.0
per_batched_token = 0.0
fixed = 0.0
[draft.lookup]
fixed = 0.0
[draft.neural]
fixed = 0.0
"""


def test_a_cost_model_whose_steps_take_no_time_is_refused(tmp_path: Path):
    path = tmp_path / "zero.toml"
    path.write_text(ZERO_COST)
    with pytest.raises(specplug.SpecplugError, match=r"zero.toml: a step of one token takes no time") as raised:
        specplug.create("adaptive", cost=str(path))
    assert "\n" not in str(raised.value)

    class Free:  # a CostModel by protocol whose steps cost nothing
        name = "free"

        def verify_time(self, batched_tokens, kv_tokens):
            return 0.0

        def draft_time(self, kind, draft_tokens, kv_tokens, verify_time):
            return 0.0

        def step_overhead(self):
            return 0.0

    for method, extra in (("adaptive", {}), ("hybrid", {"neural": specplug.create("ngram")})):
        with pytest.raises(specplug.SpecplugError, match="'free' gives a plain step 0.0 seconds"):
            specplug.create(method, cost=Free(), **extra)
    specplug.create("adaptive", cost=OnlineCostModel())  # measured online: priced before any step, by its prior


def test_extend_batch_reads_an_iterator_of_tokens_once():
    proposer = specplug.create("ngram", min_n=1, max_n=1)
    twin = specplug.create("ngram", min_n=1, max_n=1)
    for p in (proposer, twin):
        p.start("a", [1, 7, 9, 1])
    proposer.extend_batch([("a", iter([7, 9]))])
    twin.extend("a", [7, 9])
    assert proposer.propose("a", 4) == twin.propose("a", 4)
    assert proposer.propose("a", 4).tokens  # the tokens went in: 9 was seen before, it drafts


def test_batch_steps_read_iterators_once():
    proposer = specplug.create("ngram", min_n=1, max_n=2)
    step = BatchStep(
        ["b"], np.empty(0, dtype=np.int64), np.zeros(2, dtype=np.int64), np.array([2]),
        started=iter([("b", iter([4, 5, 4]))]), stopped=iter([]),
    )
    assert proposer.step_batch(step).draft(0).tokens == (5, 4)
    got = proposer.step_batch(BatchStep.of(["b"], [iter([5])], [2], stopped=iter([])))
    assert got.draft(0).tokens == (4, 5)


@pytest.mark.parametrize(
    "call",
    [
        lambda p: p.extend_batch(5),
        lambda p: p.extend_batch("ab"),
        lambda p: p.extend_batch([("a",)]),
        lambda p: p.extend_batch(["a"]),
        lambda p: p.extend_batch([("a", [1], 2)]),
        lambda p: p.propose_batch([("a",)]),
        lambda p: p.propose_batch(None),
        lambda p: p.step_batch("a"),
        lambda p: p.step_batch(BatchStep("a", np.empty(0, dtype=np.int64), np.zeros(2, dtype=np.int64), np.array([1]))),
        lambda p: p.step_batch(BatchStep.of(["a"], [[]], [1], started=[("b",)])),
        lambda p: p.step_batch(BatchStep.of(["a"], 5, [1])),
        lambda p: p.step_batch(BatchStep.of(["a"], [[]], [1.5])),
    ],
)
def test_malformed_batch_containers_are_one_line_errors_and_change_nothing(call):
    proposer = specplug.create("ngram", min_n=1, max_n=1)
    proposer.start("a", [1, 2, 1])
    before = proposer.propose("a", 4)
    with pytest.raises(InvalidOptionError) as raised:
        call(proposer)
    assert "\n" not in str(raised.value)
    assert proposer.active_requests() == ["a"] and proposer.propose("a", 4) == before


@pytest.mark.parametrize("method", ["adaptive", "hybrid"])
def test_unresolved_drafts_are_bounded_in_memory_and_in_the_next_extends_time(method):
    extra = {"neural": specplug.create("ngram", min_n=1, max_n=1)} if method == "hybrid" else {}
    proposer = specplug.create(method, **extra)
    proposer.start("r", [1, 2, 3, 4] * 50)
    # warm both calls: on a cold numba cache the first extend compiles the composites' kernels
    proposer.propose("r", 8)
    proposer.extend("r", [1])
    for _ in range(200):
        proposer.propose("r", 8)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(5_000):
            proposer.propose("r", 8)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert proposer._waiting.count[proposer._slot["r"]] <= MAX_WAITING
    assert grown < 256 * 1024  # before the bound: 5,000 drafts held, over 1 MiB
    started = time.perf_counter()
    proposer.extend("r", [1, 2, 3])
    assert time.perf_counter() - started < 0.05  # before: 0.76 s after 50,000 proposes


def test_a_re_draft_at_the_same_position_is_scored_once():
    adaptive = specplug.create("adaptive", candidates=["ngram"])
    twin = specplug.create("adaptive", candidates=["ngram"])
    for p in (adaptive, twin):
        p.start("r", [1, 2, 3, 4] * 8)
    for _ in range(5):
        adaptive.propose("r", 4)
    twin.propose("r", 4)
    for p in (adaptive, twin):
        p.extend("r", [1, 2, 3, 4, 1])
    assert np.array_equal(adaptive.acceptance("r", 0), twin.acceptance("r", 0))


def test_verify_sampled_checks_the_draft_vocabulary_up_front():
    target = np.full((2, 4), 0.25)
    with pytest.raises(InvalidOptionError, match="draft_probs has a vocabulary of 3; target_probs has 4"):
        verify_sampled([1], target, np.random.default_rng(0), np.full((1, 3), 1 / 3))


@pytest.mark.parametrize(("draft", "target"), [([-1], [1, 2]), ([1.0], [1, 2]), ([1], [1.9, 2]), ([1], [1, -2]), ([True], [1, 2])])
def test_verify_greedy_rejects_negative_and_float_ids(draft, target):
    with pytest.raises(InvalidTokensError):
        verify_greedy(draft, target)
    if draft != [1]:  # the draft is the bad part: sampling refuses it too
        with pytest.raises(InvalidTokensError):
            verify_sampled(draft, np.full((len(draft) + 1, 4), 0.25), np.random.default_rng(0))


@pytest.mark.parametrize("method", ["ngram", "suffix", "adaptive"])
@pytest.mark.parametrize("kind", [np.int64, np.int32, np.uint8, int])
def test_numpy_integers_are_taken_alike_by_set_batch_size_and_propose(method, kind):
    proposer, twin = specplug.create(method), specplug.create(method)
    for p in (proposer, twin):
        p.start("r", [1, 2, 3, 1, 2])
    proposer.set_batch_size(kind(4))
    twin.set_batch_size(4)
    assert proposer.propose("r", kind(4)) == twin.propose("r", 4)
    for bad in (0, -1, 2.0, True, "4", None):
        with pytest.raises(InvalidOptionError, match="batch_size"):
            proposer.set_batch_size(bad)
        with pytest.raises(InvalidOptionError, match="max_tokens"):
            proposer.propose("r", bad)


@pytest.mark.parametrize("call", [
    lambda p: p.start(["a"], [1]),
    lambda p: p.propose({"a"}, 4),
    lambda p: p.extend({}, [1]),
    lambda p: p.stop([]),
    lambda p: p.state_nbytes([]),
    lambda p: p.step_batch(BatchStep.of([["a"]], [[]], [1])),
])
def test_unhashable_request_ids_are_clear_errors(call):
    with pytest.raises(RequestStateError, match="not hashable"):
        call(specplug.create("ngram"))
    assert [] not in specplug.create("ngram")
