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
            out.append((rid, draft.tokens, None if draft.score is None else round(draft.score, 9), draft.match))
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


_suffix_base = st.fixed_dictionaries(
    {
        "max_depth": st.integers(2, 12),
        "min_match": st.integers(1, 2),
        "max_candidates": st.integers(1, 8),
        "max_tokens": st.integers(1, 12),
        "max_spec_factor": st.sampled_from([0.5, 1.0, 2.0]),
        "max_spec_offset": st.sampled_from([0.0, 1.0, 3.0]),
        "min_token_prob": st.sampled_from([0.0, 0.1, 0.5]),
        "global_cache": st.booleans(),
        "max_cached_requests": st.integers(0, 4),
        # 4096 bytes = 128 token slots: eviction by size happens within a test
        "max_cache_bytes": st.sampled_from([4096, 8192, 1 << 20]),
    }
)


@st.composite
def _with_long_anchor(draw, base=_suffix_base):
    options = draw(base)
    low, high = options["min_match"] + 1, options["max_depth"]
    options["long_match"] = draw(st.sampled_from([0, *range(low, min(high, 5) + 1)]))
    return options


suffix_options = _with_long_anchor()


@settings(max_examples=400, deadline=None)
@given(options=suffix_options, ops=schedules(requests=4))
def test_suffix_fast_equals_reference_interleaved(options, ops):
    fast = specplug.create("suffix", **options)
    reference = specplug.create("suffix", implementation="reference", **options)
    assert _run(fast, ops) == _run(reference, ops)


@settings(max_examples=150, deadline=None)
@given(
    options=suffix_options,
    outputs=st.lists(repetitive_tokens(min_size=1, max_size=120), min_size=1, max_size=12),
    prompt=repetitive_tokens(max_size=40),
)
def test_suffix_global_cache_equals_reference_across_evictions(options, outputs, prompt):
    fast = specplug.create("suffix", **options)
    reference = specplug.create("suffix", implementation="reference", **options)
    for number, output in enumerate(outputs):
        for proposer in (fast, reference):
            proposer.start(number, [])
            proposer.extend(number, output)
            proposer.stop(number)
        assert fast.cache.nbytes() <= options["max_cache_bytes"]
        fast.start("probe", prompt)
        reference.start("probe", prompt)
        for token in output[:10]:
            got, want = fast.propose("probe", 12), reference.propose("probe", 12)
            assert got.tokens == want.tokens and round(got.score, 9) == round(want.score, 9) and got.match == want.match
            fast.extend("probe", [token])
            reference.extend("probe", [token])
        fast.stop("probe")
        reference.stop("probe")


def _run_alternatives(proposer, ops, branches):
    out = []
    for rid, action, payload in ops:
        if action == "start":
            proposer.start(rid, payload)
        elif action == "propose":
            draft = proposer.propose_alternatives(rid, payload, branches)
            out.append((rid, draft.tokens, draft.alternatives, draft.match))
        elif action == "extend":
            out.append((rid, "accepted", proposer.extend(rid, payload)))
        else:
            proposer.stop(rid)
    return out


@settings(max_examples=300, deadline=None)
@given(options=suffix_options, ops=schedules(requests=4), branches=st.integers(1, 6))
def test_suffix_alternatives_fast_equal_reference_interleaved(options, ops, branches):
    fast = specplug.create("suffix", **options)
    reference = specplug.create("suffix", implementation="reference", **options)
    got = _run_alternatives(fast, ops, branches)
    assert got == _run_alternatives(reference, ops, branches)
    # the tree's first branch is the draft propose() makes, cut where alternatives took the budget
    plain = [item for item in _run(specplug.create("suffix", **options), ops) if item[1] != "accepted"]
    trees = [item for item in got if item[1] != "accepted"]
    assert len(plain) == len(trees)
    for (_, tree_tokens, _, _), (_, plain_tokens, _, _) in zip(trees, plain):
        assert plain_tokens[: len(tree_tokens)] == tree_tokens and bool(tree_tokens) == bool(plain_tokens)
