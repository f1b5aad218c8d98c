"""adaptive: goodput-maximising choice of candidate and length, empty when plain decoding wins."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug.cost import CostModelError, OnlineCostModel, cost_model
from specplug.proposers.composite._parts import score_band
from tests._scripted import Oracle, drive, geometric, late_lengths_by_batch, with_room

PROMPT = [7] * 50


def _make(outputs, neural_correct, lookup_correct, pad=False, **options):
    neural = Oracle(outputs, neural_correct, pad=True)
    lookup = Oracle(outputs, lookup_correct, name="look", kind="lookup", pad=pad)
    return specplug.create("adaptive", candidates=[lookup, neural], **options), neural, lookup


def test_drafts_the_better_candidate_at_batch_1():
    output = list(range(100, 400))
    adaptive, neural, lookup = _make({"r": output}, lambda pos: 1, lambda pos: 8)
    drafts = drive(adaptive, "r", PROMPT, output, 8)
    # the last steps have only short lookup drafts left: drafts ended sooner than asked have
    # statistics bands of their own, not observed yet here
    late = drafts[len(drafts) // 3 : -3]
    assert all(d.source == "look" and not d.needs_neural for d, _ in late)
    assert np.mean([a for _, a in late]) > 5


def test_neural_is_called_only_when_chosen():
    output = list(range(100, 400))
    adaptive, neural, lookup = _make({"r": output}, lambda pos: 3, lambda pos: 0)
    drafts = drive(adaptive, "r", PROMPT, output, 6)
    chosen = sum(1 for d, _ in drafts if d.needs_neural)
    assert neural.calls == chosen > len(drafts) // 2
    assert lookup.calls == len(drafts)


def test_empty_draft_when_speculation_cannot_pay():
    output = list(range(100, 300))
    adaptive, neural, lookup = _make({"r": output}, lambda pos: 0, lambda pos: 0, batch_size=128)
    drafts = drive(adaptive, "r", PROMPT, output, 6)
    late = drafts[20:]
    # the neural drafter is retried now and then (exploration), less and less often
    assert sum(1 for d, _ in late if d.tokens) <= 0.1 * len(late)
    assert neural.calls <= 0.1 * len(drafts)
    assert sum(1 for d, _ in drafts[-50:] if d.tokens) <= 2


def test_draft_length_shrinks_as_the_batch_grows():
    """Acceptance 0.7 a token: long drafts pay at batch 1 (verification is nearly free), short ones at 64."""
    output = list(range(100, 1100))

    def make(batch):
        return _make({"r": output}, lambda pos: 0, geometric(0.7), pad=True, batch_size=batch)[0]

    lengths = late_lengths_by_batch(make, PROMPT, output, 8)
    assert lengths[1] >= 6
    assert 1 <= lengths[64] <= 4


def test_set_batch_size_switches_off_speculation():
    output = list(range(100, 200))
    adaptive, _, _ = _make({"r": output}, lambda pos: 1, lambda pos: 1)
    adaptive.start("r", PROMPT)
    assert len(adaptive.propose("r", 4).tokens) > 0
    adaptive.set_batch_size(100_000)
    assert adaptive.propose("r", 4).tokens == ()
    with pytest.raises(specplug.InvalidOptionError, match="batch_size = 0"):
        adaptive.set_batch_size(0)


def test_per_request_estimates_start_from_the_pooled_ones():
    output = list(range(100, 300))
    adaptive, _, _ = _make({"a": output, "b": output}, lambda pos: 0, lambda pos: 4)
    drive(adaptive, "a", PROMPT, output, 8)
    adaptive.start("b", PROMPT)
    lookup_index = 0
    band = score_band(None, 5, 8)  # the lookup's drafts: 4 right tokens and a wrong one, of 8 asked for
    estimate = adaptive.acceptance("b", lookup_index, band)
    assert estimate[:4].min() > 0.8 and estimate[4] < 0.5


def test_options_and_errors():
    with pytest.raises(CostModelError, match="unknown cost model 'tpu'"):
        specplug.create("adaptive", candidates=["ngram"], cost="tpu")
    with pytest.raises(specplug.InvalidOptionError, match="candidates"):
        specplug.create("adaptive", candidates=[])
    with pytest.raises(specplug.InvalidOptionError, match="cannot be a candidate of itself"):
        specplug.create("adaptive", candidates=["adaptive"])
    ngram = specplug.create("ngram")
    with pytest.raises(specplug.InvalidOptionError, match="listed twice"):
        specplug.create("adaptive", candidates=[ngram, ngram])
    adaptive = specplug.create("adaptive", candidates=["ngram", "suffix"], cost=cost_model("llama-3.1-8b-h100"))
    assert [c.name for c in adaptive.candidates] == ["ngram", "suffix"]
    assert adaptive.kinds == ["lookup", "lookup"]


def test_neural_draft_length_comes_from_what_it_showed_not_its_exploration_bonus():
    """At batch 64 a neural candidate accepting half its tokens pays with short drafts; a large
    exploration bonus may get it called, but must not lengthen its drafts."""
    output = list(range(100, 1100))
    adaptive, neural, _ = _make({"r": output}, geometric(0.5), lambda pos: 0, batch_size=64, explore=3.0)
    drafts = drive(adaptive, "r", PROMPT, output, 8)
    late = [len(d.tokens) for d, _ in drafts[len(drafts) // 2 :] if d.needs_neural]
    assert late and np.mean(late) <= 3


def test_a_lookup_is_scored_on_what_follows_even_where_it_was_not_drafted():
    # One- and two-token drafts cost more than they can win here; only a long draft pays.
    # If a lookup were scored only on the tokens a step verified, its deep positions would
    # never be observed while adaptive declines to draft them: stuck at the prior, forever plain.
    model = OnlineCostModel()
    for size, seconds in ((1, 0.025), (2, 0.060), (3, 0.095), (5, 0.100), (9, 0.110)):
        model.observe(size, seconds)
    output = list(range(100, 400))
    adaptive, _, _ = _make({"a": output}, lambda pos: 0, lambda pos: 8, prior=0.3)
    adaptive = specplug.create("adaptive", candidates=[adaptive.candidates[0]], cost=model, prior=0.3)
    drafts = drive(adaptive, "a", PROMPT, output, 8)
    assert drafts[0][0].tokens == ()  # at the prior, plain decoding wins
    # the steps of the second half with a full draft's worth of output left (the last steps
    # have only short drafts left, in bands of their own, not observed yet)
    late = with_room(drafts, output, 8)[len(drafts) // 2 :]
    assert late and all(len(draft.tokens) == 8 and accepted == 8 for draft, accepted in late)
