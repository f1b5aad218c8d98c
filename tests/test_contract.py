"""The contract (README and docs/architecture.md) as a user relies on it, and clear errors for every misuse."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug import BatchStep, InvalidOptionError, InvalidTokensError, RequestStateError, UnknownMethodError

METHODS = ["ngram", "suffix"]
IMPLEMENTATIONS = ["fast", "reference"]


@pytest.fixture(params=[(m, i) for m in METHODS for i in IMPLEMENTATIONS], ids=lambda p: f"{p[0]}-{p[1]}")
def proposer(request):
    method, implementation = request.param
    # suffix drafts at most max_spec_factor * match tokens: 2.0 lets a 2-token match draft 3
    extra = {"max_spec_factor": 2.0} if method == "suffix" else {}
    return specplug.create(method, implementation=implementation, **extra)


def test_lifecycle_and_inferred_acceptance(proposer):
    proposer.start("a", [1, 2, 3, 4, 5, 1, 2])
    draft = proposer.propose("a", 3)
    assert draft.tokens == (3, 4, 5)
    assert draft.source == proposer.name
    assert proposer.extend("a", [3, 4, 9]) == 2  # two accepted, then the target's own token
    assert proposer.extend("a", [7]) == 0  # no draft pending: nothing to accept
    proposer.stop("a")
    assert "a" not in proposer


def test_draft_respects_max_tokens(proposer):
    proposer.start("a", list(range(10)) * 3)
    for k in (1, 2, 5):
        assert len(proposer.propose("a", k).tokens) <= k


def test_unknown_method_lists_valid_ones():
    with pytest.raises(UnknownMethodError, match=r"unknown method 'nope'; valid methods: .*ngram.*suffix"):
        specplug.create("nope")


@pytest.mark.parametrize(
    ("method", "options", "message"),
    [
        ("ngram", {"max_n": 3, "colour": 1}, r"unknown option 'colour'.*Valid options: min_n, max_n"),
        ("ngram", {"max_tokens": 0}, r"option max_tokens = 0"),
        ("ngram", {"max_tokens": -4}, r"option max_tokens = -4"),
        ("ngram", {"min_n": "2"}, r"option min_n = '2'.*valid integer"),
        ("ngram", {"min_n": 5, "max_n": 2}, r"min_n = 5 is larger than max_n = 2"),
        ("suffix", {"min_token_prob": 1.5}, r"option min_token_prob = 1.5"),
        ("suffix", {"max_cache_bytes": 10}, r"option max_cache_bytes = 10"),
        ("suffix", {"implementation": "gpu"}, r"option implementation = 'gpu'"),
    ],
)
def test_bad_options_are_named(method, options, message):
    with pytest.raises(InvalidOptionError, match=message):
        specplug.create(method, **options)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", None, True])
def test_bad_max_tokens(proposer, bad):
    proposer.start("a", [1, 2, 1])
    with pytest.raises(InvalidOptionError, match="max_tokens"):
        proposer.propose("a", bad)


@pytest.mark.parametrize(
    ("tokens", "message"),
    [
        ([1, -2], r"token_ids\[1\] = -2 is negative"),
        ([1, 2.0], r"token_ids\[1\] = 2.0 is not an int"),
        ([True], r"token_ids\[0\] = True is not an int"),
        ("abc", "must be a sequence"),
        (5, "must be a sequence"),
        (np.array([[1, 2]]), "1-D"),
        (np.array([1.0]), "dtype float64"),
        ([2**40], "larger than"),
        ({5: 1}, "got dict"),
        ({1, 2}, "got set"),
        (None, "got NoneType"),
        (b"ab", "got bytes"),
        (np.array([1, 2], dtype="m8[s]"), "dtype timedelta64"),
        (np.array(["2026-01-01"], dtype="M8[D]"), "dtype datetime64"),
        (np.array([1], dtype=object), "dtype object"),
        (np.ma.array([1, 2], mask=[False, True]), "got MaskedArray"),
        ([np.timedelta64(1)], r"token_ids\[0\] = np.timedelta64\(1\) is not an int"),
        ([1, np.float64(2.0)], r"token_ids\[1\] = np.float64\(2.0\) is not an int"),
    ],
)
def test_bad_tokens_are_named(proposer, tokens, message):
    proposer.start("a", [1, 2, 1])
    before = proposer.propose("a", 4)
    for call, named in (
        (lambda: proposer.extend("a", tokens), "token_ids"),
        (lambda: proposer.start("b", tokens), "prompt_ids"),
        (lambda: proposer.step_batch(BatchStep.of(["a"], [tokens], [4])), r"new_tokens\[0\]"),
        (lambda: proposer.step_batch(BatchStep.of(["a"], [[]], [4], started=[("b", tokens)])), "prompt_ids"),
    ):
        with pytest.raises(InvalidTokensError, match=message.replace("token_ids", named)) as raised:
            call()
        assert "\n" not in str(raised.value) and len(str(raised.value)) < 300
    assert proposer.active_requests() == ["a"] and proposer.propose("a", 4) == before


@pytest.mark.parametrize("tokens", [iter([1, 2]), range(1, 3), (1, 2), np.array([1, 2], dtype=np.uint16)])
def test_sequences_in_order_are_taken(proposer, tokens):
    proposer.start("a", tokens)
    assert proposer.extend("a", [1]) == 0


def test_an_id_whose_repr_raises_or_is_huge_gives_a_short_specplug_error(proposer):
    class Bad:
        def __hash__(self):
            return 1

        def __repr__(self):
            raise RuntimeError("no repr")

    for request_id in (Bad(), "x" * 10_000_000):
        with pytest.raises(RequestStateError) as raised:
            proposer.propose(request_id, 4)
        assert len(str(raised.value)) < 400


def test_lifecycle_errors(proposer):
    with pytest.raises(RequestStateError, match=r"propose\(\) for request 'x', which is not started"):
        proposer.propose("x", 2)
    with pytest.raises(RequestStateError, match=r"extend\(\)"):
        proposer.extend("x", [1])
    with pytest.raises(RequestStateError, match=r"stop\(\)"):
        proposer.stop("x")
    proposer.start("x", [1])
    with pytest.raises(RequestStateError, match="already started"):
        proposer.start("x", [2])
    proposer.stop("x")
    with pytest.raises(RequestStateError, match="not started"):
        proposer.propose("x", 2)
    with pytest.raises(RequestStateError, match="not hashable"):
        proposer.start(["list"], [1])
    with pytest.raises(InvalidTokensError, match="prompt_ids"):
        proposer.start("y", [1, -1])
    assert "y" not in proposer  # a failed start leaves nothing behind


def test_errors_leave_other_requests_untouched(proposer):
    proposer.start("a", [5, 6, 7, 5, 6])
    proposer.start("b", [1, 2, 3, 1, 2])
    before = proposer.propose("a", 4)
    for bad in (lambda: proposer.extend("b", [1, -1]), lambda: proposer.propose("b", 0),
                lambda: proposer.start("b", [1]), lambda: proposer.propose_batch([("a", 2), ("zz", 2)]),
                lambda: proposer.extend_batch([("a", [7]), ("b", [-3])])):
        with pytest.raises(specplug.SpecplugError):
            bad()
    assert proposer.propose("a", 4) == before  # extend_batch checked "b" before extending "a"
    assert proposer.propose("b", 4).tokens == (3, 1, 2)


def test_batch_form_matches_single_calls(proposer):
    single = specplug.create(proposer.name, implementation="reference", **proposer.options.model_dump(exclude={"implementation"}))
    for p in (proposer, single):
        p.start(1, [1, 2, 3, 1, 2])
        p.start(2, [4, 4, 4, 4])
    drafts = proposer.propose_batch([(1, 3), (2, 2)])
    assert drafts == [single.propose(1, 3), single.propose(2, 2)]
    assert proposer.extend_batch([(1, [3, 1]), (2, [9])]) == [single.extend(1, [3, 1]), single.extend(2, [9])]


def test_ngram_longest_match_and_most_recent_occurrence():
    p = specplug.create("ngram", min_n=1, max_n=3)
    # "1 2" is followed by 3 once and by 9 later; "0 1 2" only by 3: the longer match wins
    p.start("r", [0, 1, 2, 3, 5, 1, 2, 9, 0, 1, 2])
    assert p.propose("r", 1).tokens == (3,)
    q = specplug.create("ngram", min_n=1, max_n=2)
    q.start("r", [0, 1, 2, 3, 5, 1, 2, 9, 0, 1, 2])
    assert q.propose("r", 1).tokens == (9,)  # the same length: the most recent occurrence


def test_ngram_min_hits():
    p = specplug.create("ngram", min_n=2, max_n=3, min_hits=2)
    p.start("r", [1, 2, 3, 7, 1, 2, 4, 8, 5, 2, 3, 7, 9, 2, 3])
    # "2 3" occurred twice (needs 2): drafts; "5 2 3"-style longer n-grams occurred once: skipped
    assert p.propose("r", 2).tokens == (7, 9)


def test_suffix_scores_by_frequency_and_grows_with_match():
    p = specplug.create("suffix", min_token_prob=0.0, max_spec_factor=1.0, max_tokens=8)
    # after "1 2", 3 followed twice and 4 once: 3 wins with frequency 2/3
    p.start("r", [1, 2, 3, 1, 2, 4, 1, 2, 3, 0, 1, 2])
    draft = p.propose("r", 8)
    # all three occurrences match 2 tokens, so at most 2 are drafted: 3 (2 of 3 votes), then a
    # 1-1 tie between 0 and 1 that the most recent occurrence (followed by 0) wins
    assert draft.tokens == (3, 0)
    assert draft.score == pytest.approx(2 / 3 + 2 / 3 * 1 / 2)
    short = specplug.create("suffix", max_spec_factor=1.0)
    short.start("r", [5, 6, 7, 8, 9, 10, 5, 6])
    assert len(short.propose("r", 16).tokens) == 2  # match of 2 -> at most 2 tokens
    long = specplug.create("suffix", max_spec_factor=1.0)
    long.start("r", [5, 6, 7, 8, 9, 10, 11, 12, 5, 6, 7, 8, 9])
    assert long.propose("r", 16).tokens == (10, 11, 12, 5, 6)


def test_suffix_min_token_prob_cuts_uncertain_tokens():
    history = [1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2]  # three different continuations of "1 2"
    cut = specplug.create("suffix", min_token_prob=0.5)
    cut.start("r", history)
    assert cut.propose("r", 4).tokens == ()
    keep = specplug.create("suffix", min_token_prob=0.2)
    keep.start("r", history)
    assert keep.propose("r", 4).tokens[:1] == (5,)  # a tie of 1/3 each: the most recent wins


def test_suffix_global_cache_drafts_across_requests():
    p = specplug.create("suffix")
    tool_call = [40, 41, 42, 43, 44, 45, 46, 47]
    p.start("turn1", [1, 2, 3])
    p.extend("turn1", tool_call)
    p.stop("turn1")
    p.start("turn2", [9, 8, 7, 40, 41, 42])
    assert p.propose("turn2", 8).tokens[:3] == (43, 44, 45)
    off = specplug.create("suffix", global_cache=False)
    off.start("turn1", [1, 2, 3])
    off.extend("turn1", tool_call)
    off.stop("turn1")
    off.start("turn2", [9, 8, 7, 40, 41, 42])
    assert off.propose("turn2", 8).tokens == ()


@pytest.mark.parametrize("implementation", ["fast", "reference"])
def test_suffix_longer_match_beats_a_higher_scoring_cache(implementation):
    """A lone cached occurrence scores as if certain; the source with the longer match drafts."""
    p = specplug.create("suffix", implementation=implementation)
    p.start("turn1", [1])
    p.extend("turn1", [40, 41, 50, 51, 52, 53, 54, 55, 56, 57])  # after "40 41": 8 tokens, score 8
    p.stop("turn1")
    p.start("turn2", [30, 40, 41, 60, 30, 40, 41])  # locally "30 40 41" matches 3 tokens, score 4
    draft = p.propose("turn2", 8)
    assert draft.tokens == (60, 30, 40, 41)
    assert draft.score == pytest.approx(4.0)
    p.start("turn3", [40, 41, 70, 9, 40, 41])  # equal matches (2 tokens): the higher score (the cache's) drafts
    assert p.propose("turn3", 8).tokens == (50, 51, 52, 53, 54, 55, 56, 57)


def test_suffix_global_cache_stays_under_its_caps():
    p = specplug.create("suffix", max_cached_requests=3, max_cache_bytes=8192)
    rng = np.random.default_rng(0)
    for number in range(50):
        p.start(number, [1])
        p.extend(number, rng.integers(0, 100, size=int(rng.integers(1, 300))))
        p.stop(number)
        assert len(p.cache) <= 3
        assert p.cache.nbytes() <= 8192


def test_suffix_long_anchor_finds_a_far_match_behind_many_short_ones():
    """Code rewriting: the line being copied is far back, its 2-token anchor is everywhere."""
    line = [100, 101, 102, 103, 104, 105, 106, 107, 5, 6, 200, 201, 202, 203]
    noise = [5, 6, 7] * 60  # "5 6" occurs 60 times after the line
    history = line + noise + line[:10]  # now copying the line again, up to "... 5 6"
    with_long = specplug.create("suffix", max_candidates=8)
    with_long.start("r", history)
    assert with_long.propose("r", 4).tokens == (200, 201, 202, 203)
    short_only = specplug.create("suffix", max_candidates=8, long_match=0)
    short_only.start("r", history)
    assert short_only.propose("r", 4).tokens[:1] == (7,)  # only the 8 most recent "5 6" vote
