"""The fast paths draft exactly what the plain reference implementations draft."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import specplug
from tests.streams import repetitive_tokens, schedules


def _run(proposer, ops):
    out = []
    for rid, action, payload in ops:
        if action == "start":
            proposer.start(rid, payload)
        elif action == "propose":
            draft = proposer.propose(rid, payload)
            out.append((rid, draft.tokens, None if draft.score is None else round(draft.score, 9)))
        elif action == "extend":
            out.append((rid, "accepted", proposer.extend(rid, payload)))
        else:
            proposer.stop(rid)
    return out


ngram_options = st.fixed_dictionaries(
    {
        "min_n": st.integers(1, 3),
        "max_n": st.integers(3, 6),
        "max_tokens": st.integers(1, 12),
        "min_hits": st.integers(1, 3),
    }
)


@settings(max_examples=300, deadline=None)
@given(options=ngram_options, ops=schedules())
def test_ngram_fast_equals_reference_interleaved(options, ops):
    fast = specplug.create("ngram", **options)
    reference = specplug.create("ngram", implementation="reference", **options)
    assert _run(fast, ops) == _run(reference, ops)


@settings(max_examples=200, deadline=None)
@given(options=ngram_options, prompt=repetitive_tokens(max_size=300), steps=st.lists(st.integers(0, 9), max_size=60))
def test_ngram_fast_equals_reference_token_by_token(options, prompt, steps):
    fast = specplug.create("ngram", **options)
    reference = specplug.create("ngram", implementation="reference", **options)
    fast.start("r", prompt)
    reference.start("r", prompt)
    for token in steps:
        assert fast.propose("r", 16).tokens == reference.propose("r", 16).tokens
        fast.extend("r", [token])
        reference.extend("r", [token])
