"""hybrid: lookup vs neural by expected accepted tokens, skipping the neural pass, continuation."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug.cost import CostModelError, OnlineCostModel
from tests._scripted import Oracle, drive, geometric, late_lengths_by_batch, with_room

PROMPT = [1, 2, 3]


def test_lookup_wins_when_it_expects_more_and_neural_is_skipped():
    output = list(range(100, 160))
    outputs = {"r": output}
    neural = Oracle(outputs, lambda pos: 1)  # accepts one token a step
    lookup = Oracle(outputs, lambda pos: 8, name="look", kind="lookup", score=lambda pos: 6.0)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup)
    drafts = drive(hybrid, "r", PROMPT, output, 8)
    late = with_room(drafts, output, 8)[3:]  # the last steps have only short lookup drafts left
    assert all(d.source == "look" and not d.needs_neural for d, _ in late)
    assert neural.calls <= 3
    assert all(accepted > 0 for _, accepted in late)


def test_a_lookup_draft_after_a_long_match_is_judged_apart_from_one_after_a_short_match():
    """The lookup's drafts score alike (a vote of one occurrence), but those copied after a match of
    4+ tokens are right and those after a 1-token match wrong: the hybrid drafts the former and
    calls the neural part for the latter, where one pooled estimate would choose alike for both."""
    output = list(range(1000, 2600))
    outputs = {"r": output}

    def long_match(pos):
        return (pos // 40) % 2 == 0

    neural = Oracle(outputs, lambda pos: 2, pad=True)
    lookup = Oracle(outputs, lambda pos: 8 if long_match(pos) else 0, name="look", kind="lookup", pad=True,
                    score=lambda pos: 8.0, match=lambda pos: 6 if long_match(pos) else 1)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, cost="llama-3.1-8b-h100", batch_size=8)
    drafts = drive(hybrid, "r", PROMPT, output, 8)
    position, by_match = 0, {True: [], False: []}
    for draft, accepted in drafts:
        if position >= len(output) // 4 and position + 8 < len(output):
            by_match[long_match(position)].append(draft.source == "look")
        position += accepted + 1
    assert np.mean(by_match[True]) > 0.9  # long matches: the lookup's draft
    assert np.mean(by_match[False]) < 0.1  # short ones: the neural part's


def test_neural_wins_when_the_lookup_has_no_draft():
    output = list(range(200, 240))
    outputs = {"r": output}
    neural = Oracle(outputs, lambda pos: 2)
    lookup = Oracle(outputs, lambda pos: 0, name="look", kind="lookup", score=lambda pos: 0.0)
    lookup.outputs = {"r": output}
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup)
    drafts = drive(hybrid, "r", PROMPT, output, 4)
    assert all(d.needs_neural and d.source.startswith("neural") for d, _ in drafts)
    assert neural.calls == len(drafts)
    # the running estimate learns the neural drafter's 2 accepted tokens a step
    hybrid.start("x", PROMPT)
    _, neural_expected = hybrid.expected("x", lookup_tokens=0, lookup_band=0, neural_tokens=4)
    # (with its exploration bonus; the third position leans on the second until it has been seen
    # often: after 14 rejections it still holds about 0.2)
    assert 1.8 < neural_expected < 2.6


def test_lookup_calibration_learns_an_overconfident_score():
    """A lookup that claims 6 but gets 0 loses to a neural drafter that gets 2."""
    output = list(range(300, 400))
    outputs = {"r": output}
    neural = Oracle(outputs, lambda pos: 2)
    liar = Oracle(outputs, lambda pos: 0, name="look", kind="lookup", score=lambda pos: 6.0)
    hybrid = specplug.create("hybrid", neural=neural, lookup=liar)
    drafts = drive(hybrid, "r", PROMPT, output, 6)
    late = [d.source for d, _ in drafts[len(drafts) // 2 :]]
    assert late.count("neural") == len(late)


def test_switches_per_step_on_mixed_text():
    """Copy spans go to the lookup, novel spans to the neural drafter: more tokens per step than either."""
    output = list(range(1000, 1300))
    outputs = {"r": output}
    copy_span = lambda pos: (pos // 50) % 2 == 0  # noqa: E731
    neural = Oracle(outputs, lambda pos: 2)
    lookup = Oracle(
        outputs,
        lambda pos: 8 if copy_span(pos) else 0,
        name="look",
        kind="lookup",
        score=lambda pos: 5.0 if copy_span(pos) else 0.0,
    )
    hybrid_steps = len(drive(specplug.create("hybrid", neural=neural, lookup=lookup), "r", PROMPT, output, 8))
    neural_steps = len(drive(Oracle(outputs, lambda pos: 2), "r", PROMPT, output, 8))
    lookup_steps = len(drive(Oracle(outputs, lambda pos: 8 if copy_span(pos) else 0, kind="lookup"), "r", PROMPT, output, 8))
    assert hybrid_steps < min(neural_steps, lookup_steps)


def test_neural_draft_is_continued_by_an_agreeing_lookup():
    output = list(range(500, 540))
    outputs = {"r": output}
    neural = Oracle(outputs, lambda pos: 10)  # always right, but the head drafts 2 tokens
    lookup = Oracle(outputs, lambda pos: 10, name="look", kind="lookup", score=lambda pos: 0.5)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, neural_max_tokens=2, margin=-10.0)
    hybrid.start("r", PROMPT)
    draft = hybrid.propose("r", 6)
    assert draft.tokens == tuple(output[:6]) and draft.source == "neural+look" and draft.needs_neural
    off = specplug.create(
        "hybrid", neural=Oracle(outputs, lambda pos: 10), lookup=Oracle(outputs, lambda pos: 10, name="l2", kind="lookup", score=lambda pos: 0.5),
        neural_max_tokens=2, margin=-10.0, continue_with_lookup=False,
    )
    off.start("r", PROMPT)
    assert off.propose("r", 6).tokens == tuple(output[:2])


def test_lookup_by_name_and_bad_options():
    neural = specplug.create("ngram")
    hybrid = specplug.create("hybrid", neural=neural)
    assert hybrid.lookup.name == "suffix"
    with pytest.raises(specplug.InvalidOptionError, match="neural"):
        specplug.create("hybrid", lookup="ngram")
    with pytest.raises(specplug.UnknownMethodError, match="unknown method 'nope'"):
        specplug.create("hybrid", neural=neural, lookup="nope")
    with pytest.raises(specplug.InvalidOptionError, match="same proposer object"):
        specplug.create("hybrid", neural=neural, lookup=neural)
    with pytest.raises(specplug.InvalidOptionError, match="unknown option 'k'"):
        specplug.create("hybrid", neural=neural, k=3)


def test_lifecycle_errors_leave_parts_consistent():
    neural = specplug.create("ngram")
    hybrid = specplug.create("hybrid", neural=neural, lookup="ngram")
    with pytest.raises(specplug.RequestStateError):
        hybrid.propose("missing", 3)
    hybrid.start("r", [1, 2, 1, 2])
    hybrid.stop("r")
    assert "r" not in neural and "r" not in hybrid.lookup


# ---------------------------------------------------------------- with a cost model


def test_cost_model_prefers_the_cheap_lookup_when_expectations_are_close():
    """Neural 3 accepted a step, lookup about 2.7: by tokens the neural drafter wins, by tokens/s the lookup
    (a neural step costs the head's forward passes, a lookup next to nothing)."""
    output = list(range(100, 700))
    outputs = {"r": output}
    short = np.random.default_rng(1).random(len(output)) < 0.3  # where the lookup gets 2, not 3

    def parts():
        neural = Oracle(outputs, lambda pos: 3, pad=True)
        lookup = Oracle(outputs, lambda pos: 2 if short[pos] else 3, name="look", kind="lookup", score=lambda pos: 2.5)
        return neural, lookup

    by_tokens = specplug.create("hybrid", neural=parts()[0], lookup=parts()[1])
    late = drive(by_tokens, "r", PROMPT, output, 8)[20:]
    assert sum(d.source == "neural" for d, _ in late) > 0.9 * len(late)
    neural, lookup = parts()
    by_cost = specplug.create("hybrid", neural=neural, lookup=lookup, cost="llama-3.1-8b-h100", batch_size=1)
    late = drive(by_cost, "r", PROMPT, output, 8)[20:]
    assert sum(d.source == "look" and not d.needs_neural for d, _ in late) > 0.9 * len(late)


def test_cost_model_cuts_drafts_short_at_large_batch():
    """Acceptance 0.7 a token: the whole lookup draft pays at batch 1, a short cut of it at batch 64."""
    output = list(range(100, 1100))

    def make(batch):
        neural = Oracle({"r": output}, lambda pos: 0, pad=True)
        lookup = Oracle({"r": output}, geometric(0.7), name="look", kind="lookup", pad=True)
        return specplug.create("hybrid", neural=neural, lookup=lookup, cost="llama-3.1-8b-h100", batch_size=batch)

    lengths = late_lengths_by_batch(make, PROMPT, output, 8)
    assert lengths[1] >= 6
    assert 1 <= lengths[64] <= 4


def test_cost_model_drafts_nothing_when_neither_part_can_pay():
    output = list(range(100, 400))
    neural = Oracle({"r": output}, lambda pos: 0, pad=True)
    lookup = Oracle({"r": output}, lambda pos: 0, name="look", kind="lookup", pad=True)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, cost="llama-3.1-8b-h100", batch_size=128)
    drafts = drive(hybrid, "r", PROMPT, output, 6)
    assert sum(1 for d, _ in drafts[-100:] if d.tokens) <= 5
    assert neural.calls <= 0.1 * len(drafts)  # retried now and then (exploration), not every step
    # the same parts at batch 1: both are tried while their estimates are young, then
    # nothing pays there either -- but a part that does pay is drafted (next test)
    hybrid.set_batch_size(1)
    with pytest.raises(specplug.InvalidOptionError, match="batch_size = 0"):
        hybrid.set_batch_size(0)


def test_cost_model_never_drops_a_part_that_pays():
    """At batch 128 a neural drafter that gets 3 of 4 tokens still beats plain decoding: once seen, it drafts
    (the first step, on the prior alone, may take the lookup's draft, which costs no pass)."""
    output = list(range(100, 600))
    neural = Oracle({"r": output}, lambda pos: 3, pad=True)
    lookup = Oracle({"r": output}, lambda pos: 0, name="look", kind="lookup")
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, cost="llama-3.1-8b-h100", batch_size=128, neural_max_tokens=4)
    drafts = drive(hybrid, "r", PROMPT, output, 8)
    assert all(d.tokens and d.needs_neural for d, _ in drafts[1:-1])
    assert np.mean([a for _, a in drafts]) > 2.5


def test_cost_model_extends_a_confirmed_neural_draft():
    """A lookup that is right on one stretch in six loses to a 2-token neural head that is always
    right; where the lookup agrees with the head, its longer draft continues the head's."""
    output = list(range(500, 1500))
    outputs = {"r": output}
    neural = Oracle(outputs, lambda pos: 10)  # always right, but the head drafts 2 tokens
    good = lambda pos: (pos // 30) % 6 == 0  # noqa: E731
    lookup = Oracle(outputs, lambda pos: 10 if good(pos) else 0, name="look", kind="lookup", score=lambda pos: 2.0, pad=True)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, neural_max_tokens=2, cost="llama-3.1-8b-h100")
    drafts = drive(hybrid, "r", PROMPT, output, 8)[30:-1]
    extended = [(d, a) for d, a in drafts if d.source == "neural+look"]
    assert len(extended) >= 10 and sum(d.source == "look" for d, _ in drafts) <= 0.1 * len(drafts)
    assert all(d.needs_neural and len(d.tokens) == a == 8 for d, a in extended)
    assert all(len(d.tokens) == 2 for d, _ in drafts if d.source == "neural")


def test_cost_option_errors():
    neural = specplug.create("ngram")
    with pytest.raises(CostModelError, match="unknown cost model 'tpu'"):
        specplug.create("hybrid", neural=neural, cost="tpu")
    hybrid = specplug.create("hybrid", neural=neural, cost="llama-3.1-8b-h100", batch_size=8)
    assert hybrid.cost.name == "llama-3.1-8b-h100" and hybrid.batch_size == 8
    assert specplug.create("hybrid", neural=specplug.create("ngram")).cost is None


def test_positions_past_a_cut_are_scored_on_what_later_steps_verify():
    # One- and two-token drafts cost more than they win here; only a long draft pays. Scored
    # only on the tokens its own step verified, a lookup draft cut to nothing (plain decoding)
    # would teach its first position alone: the later ones would stay at the prior, forever plain.
    model = OnlineCostModel()
    for size, seconds in ((1, 0.025), (2, 0.060), (3, 0.095), (5, 0.100), (9, 0.110)):
        model.observe(size, seconds)
    output = list(range(100, 400))
    neural = Oracle({"a": output}, lambda pos: 0, pad=True)
    lookup = Oracle({"a": output}, lambda pos: 8, name="look", kind="lookup", pad=True)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, cost=model, prior=0.3, explore=0.0)
    drafts = drive(hybrid, "a", PROMPT, output, 8)
    assert drafts[0][0].tokens == ()  # at the prior, plain decoding wins
    late = drafts[len(drafts) // 2 : -3]  # (the last steps have only short drafts left)
    assert all(d.source == "look" and len(d.tokens) == 8 and accepted == 8 for d, accepted in late)
    assert neural.calls == 0


class _Asked(Oracle):
    """An Oracle recording the draft length it is asked for at each call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[int] = []

    def _propose(self, rid, max_tokens):
        self.asked.append(max_tokens)
        return super()._propose(rid, max_tokens)


class _DraftModel(_Asked):
    shorter_drafts_save = True  # one forward per drafted token, as llama.cpp's draft model


def _over_one_lookup(method: str, neural, lookup, **options):
    """``method`` (hybrid or adaptive) over ``neural`` and one lookup, priced by the H100 cost model."""
    parts = {"lookup": lookup} if method == "hybrid" else {"candidates": [lookup]}
    return specplug.create(method, neural=neural, **parts, cost="llama-3.1-8b-h100", **options)


@pytest.mark.parametrize("method", ["hybrid", "adaptive"])
def test_a_part_that_pays_per_drafted_token_is_asked_only_for_what_pays(method):
    # At batch 64 a neural draft accepted at 0.7 a token pays only cut short. A head that drafts
    # its full length anyway is asked for all of it (the probe scores the tokens past the cut);
    # a draft model, which pays per token, only for the cut, unless neural_probe says otherwise.
    output = list(range(100, 1100))

    def late_asks(part_class, **options):
        neural = part_class({"r": output}, geometric(0.7), pad=True)
        lookup = Oracle({"r": output}, lambda pos: 0, name="look", kind="lookup")
        composite = _over_one_lookup(method, neural, lookup, batch_size=64, **options)
        drive(composite, "r", PROMPT, output[:200], 8)
        assert neural.asked, "the neural part was never called"
        return neural.asked[len(neural.asked) // 2 :]

    assert set(late_asks(_Asked)) == {8}
    assert max(late_asks(_DraftModel)) < 8
    assert set(late_asks(_DraftModel, neural_probe=True)) == {8}


def test_a_neural_part_that_cannot_pay_for_its_pass_is_left_alone():
    """At batch 1 a head's pass costs about 30 % of a step, so a head that gets a fifth of a token a
    call loses to plain decoding. Its exploration bonus counts at each position as often as the
    position is reached, so the bonuses of the positions it never reaches do not keep it called.
    With a large bonus it is called on and on; ``call_bound`` then decides by its calls' tokens, at
    an upper confidence bound, and it is left alone."""
    output = list(range(100, 700))  # no repeats: the n-gram lookup never drafts

    def calls(**options):
        neural = Oracle({"r": output}, lambda pos: 1 if pos % 5 == 0 else 0, pad=True)
        hybrid = specplug.create("hybrid", neural=neural, lookup="ngram", cost="llama-3.1-8b-h100", batch_size=1, **options)
        drafts = drive(hybrid, "r", PROMPT, output, 6)
        return neural.calls, sum(d.needs_neural and bool(d.tokens) for d, _ in drafts[len(drafts) // 2 :])

    assert calls()[1] <= 3
    unbounded, unbounded_late = calls(explore=1.0)
    bounded, bounded_late = calls(explore=1.0, call_bound=0.03)
    assert unbounded_late >= 20 and bounded_late <= 5
    assert bounded <= unbounded / 4


@pytest.mark.parametrize("method", ["hybrid", "adaptive"])
@pytest.mark.parametrize("batch_size", [8, 32])
def test_a_head_that_pays_is_not_given_up_after_unlucky_first_calls(method, batch_size):
    """A head accepting 0.45 a token pays at batch 8 and 32 (about 310-410 steps for 600 tokens
    where it drafts). What a fresh composite first sees of it is luck: a few short drafts can rate
    it below plain decoding, and then only its exploration bonus gets it called again. With the
    default bonus every seeded run finds it; with a third of it (explore=0.1) 2 of these 12 runs at
    batch 8 and 6 at batch 32 decode the whole request plainly (about 600 steps)."""
    output = list(range(100, 700))  # no repeats: the n-gram lookup never drafts

    def steps(seed: int) -> int:
        neural = Oracle({"r": output}, geometric(0.45, seed), pad=True)
        composite = _over_one_lookup(method, neural, "ngram", batch_size=batch_size)
        return len(drive(composite, "r", PROMPT, output, 8))

    assert max(steps(seed) for seed in range(12)) < 450


def test_call_bound_keeps_a_neural_part_that_pays():
    output = list(range(100, 600))
    neural = Oracle({"r": output}, lambda pos: 3, pad=True)
    lookup = Oracle({"r": output}, lambda pos: 0, name="look", kind="lookup")
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, cost="llama-3.1-8b-h100", batch_size=128,
                             neural_max_tokens=4, call_bound=0.03)
    drafts = drive(hybrid, "r", PROMPT, output, 8)
    assert all(d.tokens and d.needs_neural for d, _ in drafts[1:-1])  # the first on the prior alone
