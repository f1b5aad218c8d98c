"""Option fuzz: any option set is either refused in one line or drafts without error, and the
fast and reference paths draft the same under every option set that is accepted."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specplug
from tests.streams import schedules
from tests.test_reference_equality import _run

#: values that nonsense options are made of
NASTY = st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 10**20, -(10**20), -1, 0, 2**31, True, "3", None])


def option(valid):
    """Mostly a valid value (so accepted sets are common), sometimes a nasty one."""
    return st.one_of(valid, valid, valid, NASTY)


SUFFIX = {
    "max_depth": st.integers(1, 20),
    "min_match": st.integers(1, 4),
    "long_match": st.integers(0, 8),
    "max_candidates": st.integers(1, 70),
    "max_tokens": st.integers(1, 20),
    "max_spec_factor": st.floats(0, 1024),
    "max_spec_offset": st.floats(-1024, 1024),
    "min_token_prob": st.floats(0, 1),
    "global_cache": st.booleans(),
    "max_cached_requests": st.integers(0, 5),
    "max_cache_bytes": st.integers(4096, 1 << 16),
}
NGRAM = {
    "min_n": st.integers(1, 6),
    "max_n": st.integers(1, 8),
    "max_tokens": st.integers(1, 16),
    "min_hits": st.integers(1, 4),
}
COMPOSITE = {
    "prior": st.floats(0, 1),
    "prior_weight": st.floats(0, 1e6),
    "explore": st.floats(0, 100),
    "max_positions": st.integers(1, 40),
    "batch_size": st.integers(1, 4096),
}
HYBRID = {**COMPOSITE, "margin": st.floats(-1024, 1024), "neural_max_tokens": st.integers(1, 20)}
ADAPTIVE = {**COMPOSITE, "min_gain": st.floats(0, 100)}


def option_sets(fields):
    return st.fixed_dictionaries({}, optional={name: option(valid) for name, valid in fields.items()})


def created(method, options, **fixed):
    """The proposer, or None when the options were refused as they must be: one clear line."""
    try:
        return specplug.create(method, **fixed, **options)
    except specplug.SpecplugError as error:
        message = str(error)
        assert "\n" not in message and "Traceback" not in message, message
        return None


def assert_valid(drafts, ops):
    asked = [payload for _, action, payload in ops if action == "propose"]
    got = [entry[1] for entry in drafts if entry[1] != "accepted"]
    assert len(got) == len(asked)
    for tokens, limit in zip(got, asked):
        assert len(tokens) <= limit and all(type(t) is int and 0 <= t <= specplug.MAX_TOKEN_ID for t in tokens)


@pytest.mark.parametrize(("method", "fields"), [("suffix", SUFFIX), ("ngram", NGRAM)])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_accepted_lookup_options_draft_and_fast_equals_reference(method, fields, data):
    options = data.draw(option_sets(fields), label="options")
    fast = created(method, options)
    reference = created(method, options, implementation="reference")
    assert (fast is None) == (reference is None)  # both paths take the same options
    if fast is None:
        return
    ops = data.draw(schedules(requests=3), label="ops")
    drafts = _run(fast, ops)
    assert drafts == _run(reference, ops)
    assert_valid(drafts, ops)


@pytest.mark.parametrize(("method", "fields"), [("hybrid", HYBRID), ("adaptive", ADAPTIVE)])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_accepted_composite_options_draft_without_error(method, fields, data):
    options = data.draw(option_sets(fields), label="options")
    cost = data.draw(st.sampled_from([None, "llama-3.1-8b-h100"]) if method == "hybrid" else st.just("llama-3.1-8b-h100"))
    fixed = {"cost": cost}
    if method == "hybrid":
        fixed["neural"] = specplug.create("ngram", min_n=1, max_n=1)
    proposer = created(method, options, **fixed)
    if proposer is None:
        return
    ops = data.draw(schedules(requests=3), label="ops")
    assert_valid(_run(proposer, ops), ops)
