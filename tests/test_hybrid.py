"""hybrid: lookup vs neural by expected accepted tokens, skipping the neural pass, continuation."""

from __future__ import annotations

import pytest

import specplug
from tests._scripted import Oracle, drive

PROMPT = [1, 2, 3]


def test_lookup_wins_when_it_expects_more_and_neural_is_skipped():
    output = list(range(100, 160))
    outputs = {"r": output}
    neural = Oracle(outputs, lambda pos: 1)  # accepts one token a step
    lookup = Oracle(outputs, lambda pos: 8, name="look", kind="lookup", score=lambda pos: 6.0)
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup)
    drafts = drive(hybrid, "r", PROMPT, output, 8)
    late = drafts[3:-1]  # the last step has only a short lookup draft left
    assert all(d.source == "look" and not d.needs_neural for d, _ in late)
    assert neural.calls <= 3
    assert all(accepted > 0 for _, accepted in late)


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
    assert 1.8 < neural_expected < 2.5


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
