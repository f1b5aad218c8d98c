"""The batch step (``Proposer.step_batch``) equals the per-request calls: same drafts, same learning.

Two copies of a method run the same random interleaved schedule of starts, steps and stops: one
through ``step_batch``, one through ``stop``/``start``/``extend``/``propose``. Each step's new
tokens are drawn after the previous drafts are known, so many continue a draft (acceptance, and
the composites' scoring, are exercised), others diverge.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specplug
from specplug import BatchStep, InvalidOptionError, InvalidTokensError, RequestStateError
from specplug._batch import checked_step_arrays
from specplug._drafts import MAX_TOKEN_ID
from specplug._step_arrays import step_arrays_ok
from tests.streams import repetitive_tokens

def _neural_stand_in():
    part = specplug.create("ngram", min_n=1, max_n=2)  # deterministic, declared neural
    part.draft_kind = "neural"
    return part


def _batch_kernel_always(proposer):
    proposer.batch_kernel_from = 0  # the batch kernel even for one row (else small batches go row by row)
    return proposer


def _row_by_row(proposer):
    proposer.batch_kernel_from = 1 << 30  # the per-request hooks row by row, never the kernel
    return proposer


def _parallel(proposer):
    proposer.batch_kernel_from = 0
    proposer.parallel_from = 0  # the kernel's rows spread over numba's threads
    return proposer


METHODS = {
    "ngram": lambda: specplug.create("ngram", min_n=1, max_n=3),
    "ngram-rows": lambda: _row_by_row(specplug.create("ngram", min_n=1, max_n=3)),
    "ngram-parallel": lambda: _parallel(specplug.create("ngram", min_n=1, max_n=3)),
    "ngram-kernel": lambda: _batch_kernel_always(specplug.create("ngram", min_n=1, max_n=3)),
    "ngram-kernel-hits": lambda: _batch_kernel_always(specplug.create("ngram", min_n=2, max_n=4, min_hits=2, max_tokens=5)),
    "ngram-hits": lambda: _row_by_row(specplug.create("ngram", min_n=2, max_n=4, min_hits=2, max_tokens=5)),
    "ngram-reference": lambda: specplug.create("ngram", implementation="reference", min_n=1, max_n=3),
    "suffix": lambda: specplug.create("suffix"),
    "suffix-rows": lambda: _row_by_row(specplug.create("suffix")),
    "suffix-parallel": lambda: _parallel(specplug.create("suffix")),
    "suffix-kernel": lambda: _batch_kernel_always(specplug.create("suffix")),
    "suffix-kernel-long": lambda: _batch_kernel_always(specplug.create("suffix", min_match=1, long_match=3, max_depth=6)),
    "adaptive": lambda: specplug.create("adaptive", candidates=["suffix", "ngram"]),
    "hybrid": lambda: specplug.create("hybrid", neural=_neural_stand_in(), lookup="suffix"),
}


def _per_request(proposer, stopped, started, rows, branches=1):
    for request_id in stopped:
        proposer.stop(request_id)
    for request_id, prompt in started:
        proposer.start(request_id, prompt)
    out = []
    for request_id, tokens, limit in rows:
        accepted = proposer.extend(request_id, tokens) if tokens else 0
        if not limit:
            draft = ()
        elif branches > 1:
            draft = proposer.propose_alternatives(request_id, limit, branches).tokens
        else:
            draft = proposer.propose(request_id, limit).tokens[:limit]
        out.append((tuple(draft), accepted))
    return out


@st.composite
def _schedule_and_run(draw, method):
    batch, single = METHODS[method](), METHODS[method]()
    live: dict[int, tuple[int, ...]] = {}  # request -> its last draft
    fresh = 0
    for _ in range(draw(st.integers(1, 12))):
        stopped = [rid for rid in sorted(live) if draw(st.integers(0, 5)) == 0]
        for rid in stopped:
            del live[rid]
        started = []
        for _ in range(draw(st.integers(0 if live else 1, 3))):
            started.append((fresh, draw(repetitive_tokens(max_size=120))))
            live[fresh] = ()
            fresh += 1
        order = draw(st.permutations(sorted(live)))
        chosen = order[: draw(st.integers(0, len(order)))]
        rows = []
        for rid in chosen:
            draft = live[rid]
            kind = draw(st.integers(0, 3))
            if kind == 0:
                tokens: list[int] = []
            elif kind == 1 and draft:  # accept a prefix of the draft, then the target's own token
                tokens = list(draft[: draw(st.integers(0, len(draft)))]) + [draw(st.integers(0, 9))]
            else:
                tokens = draw(st.lists(st.integers(0, 9), min_size=1, max_size=4))
            rows.append((rid, tokens, draw(st.integers(0, 6))))
        expected = _per_request(single, stopped, started, rows)
        got = batch.step_batch(
            BatchStep.of(
                [rid for rid, _, _ in rows],
                [tokens for _, tokens, _ in rows],
                [limit for _, _, limit in rows],
                started=started,
                stopped=stopped,
            )
        )
        actual = [
            (tuple(got.tokens[row, : got.lengths[row]].tolist()), int(got.accepted[row])) for row in range(len(rows))
        ]
        assert actual == expected, (stopped, started, rows)
        for (rid, _, limit), (draft, _) in zip(rows, expected):
            live[rid] = draft if limit else ()
    return True


@pytest.mark.parametrize("method", sorted(METHODS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batch_step_equals_per_request_calls(method, data):
    assert data.draw(_schedule_and_run(method))


@st.composite
def _mixed_schedule_and_run(draw, method):
    """One proposer driven by batch steps and per-request calls in turn (trees too), the other per request."""
    mixed, single = METHODS[method](), METHODS[method]()
    live: dict[int, tuple[int, ...]] = {}
    fresh = 0
    for _ in range(draw(st.integers(1, 12))):
        stopped = [rid for rid in sorted(live) if draw(st.integers(0, 5)) == 0]
        for rid in stopped:
            del live[rid]
        started = []
        for _ in range(draw(st.integers(0 if live else 1, 2))):
            started.append((fresh, draw(repetitive_tokens(max_size=80))))
            live[fresh] = ()
            fresh += 1
        order = draw(st.permutations(sorted(live)))
        rows = []
        for rid in order[: draw(st.integers(0, len(order)))]:
            draft = live[rid]
            if draft and draw(st.booleans()):
                tokens = list(draft[: draw(st.integers(0, len(draft)))]) + [draw(st.integers(0, 9))]
            else:
                tokens = draw(st.lists(st.integers(0, 9), min_size=0, max_size=3))
            rows.append((rid, tokens, draw(st.integers(0, 6))))
        way = draw(st.sampled_from(["batch", "requests", "trees"] if mixed.proposes_alternatives else ["batch", "requests"]))
        branches = 3 if way == "trees" else 1
        expected = _per_request(single, stopped, started, rows, branches)
        if way == "batch":
            got = mixed.step_batch(
                BatchStep.of([rid for rid, _, _ in rows], [t for _, t, _ in rows], [limit for _, _, limit in rows],
                             started=started, stopped=stopped)
            )
            actual = [(tuple(got.tokens[row, : got.lengths[row]].tolist()), int(got.accepted[row])) for row in range(len(rows))]
        else:
            actual = _per_request(mixed, stopped, started, rows, branches)
        assert actual == expected, (way, stopped, started, rows)
        for (rid, _, limit), (draft, _) in zip(rows, expected):
            if limit:
                live[rid] = draft
    return True


@pytest.mark.parametrize(
    "method", ["ngram", "ngram-parallel", "ngram-rows", "suffix", "suffix-parallel", "suffix-rows", "adaptive", "hybrid"]
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_batch_steps_and_per_request_calls_mix_on_one_proposer(method, data):
    assert data.draw(_mixed_schedule_and_run(method))


def test_suffix_batch_kernel_grows_rings_and_reads_the_cache_like_the_per_request_path():
    batch, single = _batch_kernel_always(specplug.create("suffix")), specplug.create("suffix")
    rng = np.random.default_rng(1)
    for generation in range(3):  # finished requests feed the global cache the next ones draft from
        ids = [f"{generation}-{row}" for row in range(3)]
        prompts = [rng.integers(0, 5, size=int(rng.integers(1, 40))).tolist() for _ in ids]
        batch.step_batch(BatchStep.of([], [], [], started=list(zip(ids, prompts))))
        for rid, prompt in zip(ids, prompts):
            single.start(rid, prompt)
        for _ in range(120):
            tokens = [rng.integers(0, 5, size=int(rng.integers(1, 9))).tolist() for _ in ids]
            got = batch.step_batch(BatchStep.of(ids, tokens, [6, 6, 6]))
            for row, rid in enumerate(ids):
                accepted = single.extend(rid, tokens[row])
                expected = single.propose(rid, 6)
                assert got.draft(row).tokens == expected.tokens and got.draft(row).score == expected.score
                assert got.draft(row).match == expected.match
                assert int(got.accepted[row]) == accepted
        batch.step_batch(BatchStep.of([], [], [], stopped=ids))
        for rid in ids:
            single.stop(rid)


def test_suffix_lockstep_kernel_equals_the_row_by_row_kernel_over_several_blocks():
    """The serial kernel walks the chains of ``LOCKSTEP_ROWS`` rows interleaved; the parallel one
    runs each row alone (``_step_row``). Over batches of several blocks (a last one part full),
    rows that ask for no draft, rings that outgrow their blocks (rows the kernel hands back) and a
    global cache, both give the same drafts, scores and acceptance, and both equal the per-request path."""
    from specplug.proposers.lookup._suffix_kernels import LOCKSTEP_ROWS

    lockstep = _batch_kernel_always(specplug.create("suffix", max_candidates=12))
    rows_alone = _parallel(specplug.create("suffix", max_candidates=12))
    single = specplug.create("suffix", max_candidates=12)
    rng = np.random.default_rng(11)
    batch = 2 * LOCKSTEP_ROWS + 3
    for generation in range(2):  # the second generation drafts from the first one's outputs too
        ids = [f"{generation}-{row}" for row in range(batch)]
        prompts = [rng.integers(0, 4, size=int(rng.integers(1, 90))).tolist() for _ in ids]
        for proposer in (lockstep, rows_alone):
            proposer.step_batch(BatchStep.of([], [], [], started=list(zip(ids, prompts))))
        for rid, prompt in zip(ids, prompts):
            single.start(rid, prompt)
        for _ in range(40):
            tokens = [rng.integers(0, 4, size=int(rng.integers(0, 12))).tolist() for _ in ids]
            limits = rng.integers(0, 7, size=batch).tolist()
            a = lockstep.step_batch(BatchStep.of(ids, tokens, limits))
            b = rows_alone.step_batch(BatchStep.of(ids, tokens, limits))
            assert a.tokens.tolist() == b.tokens.tolist() and a.lengths.tolist() == b.lengths.tolist()
            assert a.scores.tolist() == b.scores.tolist() and a.accepted.tolist() == b.accepted.tolist()
            assert a.matches.tolist() == b.matches.tolist()
            for row, rid in enumerate(ids):
                accepted = single.extend(rid, tokens[row]) if tokens[row] else 0
                if tokens[row]:
                    assert int(a.accepted[row]) == accepted
                if limits[row]:
                    expected = single.propose(rid, limits[row])
                    assert a.draft(row).tokens == expected.tokens and a.draft(row).score == expected.score
                    assert a.draft(row).match == expected.match
        for proposer in (lockstep, rows_alone):
            proposer.step_batch(BatchStep.of([], [], [], stopped=ids))
        for rid in ids:
            single.stop(rid)
    assert len(lockstep.cache) == len(rows_alone.cache) == 2 * batch


@pytest.mark.parametrize("options", [{"min_n": 1, "max_n": 3}, {"min_n": 2, "max_n": 4, "min_hits": 2, "max_tokens": 5}])
def test_ngram_serial_kernel_equals_the_row_alone_kernel_over_many_rows(options):
    """The serial kernel prefetches later rows' table slots while a row runs; the parallel one runs
    each row alone. Over batches of many rows, rows that ask for no draft, rows with more new
    tokens than are prefetched, and arrays that outgrow their room (rows the kernel hands back),
    both give the same drafts and acceptance, and both equal the per-request path."""
    from specplug.proposers.lookup._ngram_kernels import PREFETCH_TOKENS

    serial = _batch_kernel_always(specplug.create("ngram", **options))
    rows_alone = _parallel(specplug.create("ngram", **options))
    single = specplug.create("ngram", **options)
    rng = np.random.default_rng(12)
    batch = 19
    ids = [f"r{row}" for row in range(batch)]
    prompts = [rng.integers(0, 4, size=int(rng.integers(1, 90))).tolist() for _ in ids]
    for proposer in (serial, rows_alone):
        proposer.step_batch(BatchStep.of([], [], [], started=list(zip(ids, prompts))))
    for rid, prompt in zip(ids, prompts):
        single.start(rid, prompt)
    at_start = [serial.state_nbytes(rid) for rid in ids]
    for _ in range(60):
        most = [PREFETCH_TOKENS + 6 if rng.random() < 0.1 else 12 for _ in ids]
        tokens = [rng.integers(0, 4, size=int(rng.integers(0, top))).tolist() for top in most]
        limits = rng.integers(0, 7, size=batch).tolist()
        a = serial.step_batch(BatchStep.of(ids, tokens, limits))
        b = rows_alone.step_batch(BatchStep.of(ids, tokens, limits))
        assert a.tokens.tolist() == b.tokens.tolist() and a.lengths.tolist() == b.lengths.tolist()
        assert a.accepted.tolist() == b.accepted.tolist() and a.matches.tolist() == b.matches.tolist()
        for row, rid in enumerate(ids):
            accepted = single.extend(rid, tokens[row]) if tokens[row] else 0
            if tokens[row]:
                assert int(a.accepted[row]) == accepted
            if limits[row]:
                expected = single.propose(rid, limits[row])
                assert a.draft(row).tokens == expected.tokens and a.draft(row).match == expected.match
    at_end = [serial.state_nbytes(rid) for rid in ids]
    assert at_end == [single.state_nbytes(rid) for rid in ids]
    assert all(end > start for start, end in zip(at_start, at_end))  # every row outgrew its arrays


def test_ngram_batch_kernel_grows_its_arrays_like_the_per_request_path():
    batch, single = METHODS["ngram-kernel"](), METHODS["ngram"]()
    rng = np.random.default_rng(0)
    batch.step_batch(BatchStep.of([], [], [], started=[("a", [1, 2]), ("b", [3])]))
    single.start("a", [1, 2])
    single.start("b", [3])
    for _ in range(300):  # enough appends to reallocate the token arrays and the tables several times
        tokens = {rid: rng.integers(0, 4, size=int(rng.integers(1, 9))).tolist() for rid in ("a", "b")}
        got = batch.step_batch(BatchStep.of(["a", "b"], [tokens["a"], tokens["b"]], [4, 4]))
        for row, rid in enumerate(("a", "b")):
            accepted = single.extend(rid, tokens[rid])
            expected = single.propose(rid, 4)
            assert got.draft(row).tokens == expected.tokens and got.draft(row).match == expected.match
            assert int(got.accepted[row]) == accepted
    assert batch.state_nbytes("a") == single.state_nbytes("a")


@pytest.mark.parametrize("options", [{"min_n": 1, "max_n": 3}, {"min_n": 2, "max_n": 4, "min_hits": 2, "max_tokens": 5}])
def test_ngram_pool_keeps_every_request_apart_through_moves_reuse_and_per_request_calls(options):
    """ngram keeps every request's tokens and tables in one pool, a block each (``_block_pool.BlockPool``): blocks
    move when a request outgrows them, the buffer moves when it fills (every live request's arrays
    are views again), a stopped request's block is reused. Through starts and stops between
    steps, per-request calls between batch steps, and requests of many sizes, the batch kernel's
    drafts and acceptance equal the reference's (a plain scan of the history), and the run is
    checked to have moved the buffer and reused blocks."""
    batch = _batch_kernel_always(specplug.create("ngram", **options))
    reference = specplug.create("ngram", implementation="reference", **options)
    pool = batch._pool
    pool.MIN_WORDS = 64  # a small first buffer: it fills and moves many times
    rng = np.random.default_rng(5)
    live: list[str] = []
    freed: set[int] = set()
    reused = moved = 0
    for round_ in range(40):
        stopped = [rid for rid in live if rng.random() < 0.2]
        started = [(f"r{round_}-{n}", rng.integers(0, 5, size=int(rng.integers(1, 200))).tolist())
                   for n in range(int(rng.integers(0, 5)))]
        freed |= {batch._index[rid].offset for rid in stopped}
        live = [rid for rid in live if rid not in stopped] + [rid for rid, _ in started]
        tokens = [rng.integers(0, 5, size=int(rng.integers(0, 14))).tolist() for _ in live]
        limits = rng.integers(0, 6, size=len(live)).tolist()
        memory = pool.memory
        got = batch.step_batch(BatchStep.of(live, tokens, limits, started=started, stopped=stopped))
        moved += pool.memory is not memory
        expected = _per_request(reference, stopped, started, list(zip(live, tokens, limits)))
        assert [(got.draft(row).tokens, int(got.accepted[row])) for row in range(len(live))] == expected
        reused += sum(batch._index[rid].offset in freed for rid, _ in started)
        freed -= {batch._index[rid].offset for rid in live}
        for rid in live[: 3]:  # per-request calls on the same arrays, between batch steps
            more = rng.integers(0, 5, size=int(rng.integers(1, 40))).tolist()
            assert batch.extend(rid, more) == reference.extend(rid, more)
            assert batch.propose(rid, 4).tokens == reference.propose(rid, 4).tokens
    assert moved > 1 and reused > 0  # the buffer moved, and stopped requests' blocks were taken again
    for rid in live:
        index = batch._index[rid]
        assert np.shares_memory(index.buffer.array, pool.memory) and np.shares_memory(index.positions, pool.memory)


def test_a_bad_batch_step_names_the_bad_value_and_changes_nothing():
    proposer = specplug.create("ngram")
    proposer.start("a", [1, 2, 3])
    with pytest.raises(RequestStateError, match="'zz'"):
        proposer.step_batch(BatchStep.of(["a", "zz"], [[1], [2]], [2, 2]))
    with pytest.raises(InvalidOptionError, match=r"limits\[0\] = -1"):
        proposer.step_batch(BatchStep.of(["a"], [[1]], [-1]))
    with pytest.raises(InvalidTokensError, match="negative"):
        proposer.step_batch(BatchStep(["a"], np.array([-4]), np.array([0, 1]), np.array([2])))
    with pytest.raises(RequestStateError, match="already started"):
        proposer.step_batch(BatchStep.of([], [], [], started=[("a", [1])]))
    with pytest.raises(RequestStateError, match="two rows"):
        proposer.step_batch(BatchStep.of(["a", "a"], [[1], [1]], [1, 1]))
    assert proposer.active_requests() == ["a"]
    assert proposer.extend("a", [1, 2]) == 0 and proposer.propose("a", 2).tokens == (3, 1)


@pytest.mark.parametrize(
    ("step", "error", "match"),
    [
        (BatchStep(["zz"], np.array([1]), np.array([0, 1]), np.array([2])), RequestStateError, "'zz'"),
        (BatchStep([["a"]], np.array([1]), np.array([0, 1]), np.array([2])), RequestStateError, "not hashable"),
        (BatchStep(["a"], np.array([1]), np.array([0, 1]), np.array([-1])), InvalidOptionError, r"limits\[0\] = -1"),
        (BatchStep(["a"], np.array([-4]), np.array([0, 1]), np.array([2])), InvalidTokensError, "negative"),
        (BatchStep(["a"], np.array([1 << 40]), np.array([0, 1]), np.array([2])), InvalidTokensError, str(1 << 40)),
        (BatchStep(["a"], np.array([1, 2]), np.array([0, 1]), np.array([2])), InvalidTokensError, "must rise"),
        (BatchStep(["a"], np.array([1]), np.array([1, 1]), np.array([2])), InvalidTokensError, "must rise"),
        (BatchStep(["a"], np.array([1]), np.array([0, 1, 1]), np.array([2])), InvalidTokensError, "shape"),
        (BatchStep(["a"], np.array([1]), np.array([0, 1]), np.array([2]), stopped=["a"]), RequestStateError, "'a'"),
        (BatchStep(iter(["a"]), np.array([1]), np.array([0, 1]), np.array([2])), InvalidOptionError, "sequence"),
    ],
)
def test_a_bad_one_row_step_is_caught_as_a_bigger_one_is(step, error, match):
    """A one-row step takes a lean check; whatever it does not vouch for goes to the full check."""
    proposer = specplug.create("suffix")
    proposer.start("a", [1, 2, 3, 1, 2])
    with pytest.raises(error, match=match):
        proposer.step_batch(step)
    assert proposer.active_requests() == ["a"]
    assert proposer.extend("a", [3]) == 0 and proposer.propose("a", 2).tokens == (1, 2)


@settings(max_examples=300, deadline=None)
@given(
    offsets=st.lists(st.integers(-2, 6), min_size=2, max_size=6),
    limits=st.lists(st.integers(-1, 3), min_size=1, max_size=5),
    tokens=st.lists(st.sampled_from([-1, 0, 7, MAX_TOKEN_ID, MAX_TOKEN_ID + 1]), max_size=6),
)
def test_the_compiled_check_of_a_steps_arrays_passes_exactly_what_the_python_checks_pass(offsets, limits, tokens):
    """Steps of many rows take one compiled pass over their arrays; the checks in Python, which name
    what is wrong, must find nothing wrong in exactly the arrays it passes."""
    offsets, limits, tokens = (np.array(values, dtype=np.int64) for values in (offsets, limits, tokens))
    rows = len(offsets) - 1
    limits = np.resize(limits, rows)  # the shapes are checked before either runs
    try:
        checked_step_arrays(rows, offsets, limits, tokens)
        python_passes = True
    except (InvalidTokensError, InvalidOptionError):
        python_passes = False
    assert step_arrays_ok(offsets, limits, tokens, MAX_TOKEN_ID, 2**62) == python_passes


@pytest.mark.parametrize(
    ("tokens", "offsets", "limits", "error", "match"),
    [
        ([1, 2, 3], [0, 2, 1, 3], [2, 2, 2], InvalidTokensError, "must rise"),
        ([1, 2, 3], [0, 1, 2, 4], [2, 2, 2], InvalidTokensError, "must rise"),
        ([1, 2, 3], [0, 1, 2, 3], [2, -3, 2], InvalidOptionError, r"limits\[1\] = -3"),
        ([1, -2, 3], [0, 1, 2, 3], [2, 2, 2], InvalidTokensError, "negative"),
        ([1, 2, 1 << 40], [0, 1, 2, 3], [2, 2, 2], InvalidTokensError, str(1 << 40)),
    ],
)
def test_a_bad_many_row_step_names_the_bad_value(tokens, offsets, limits, error, match):
    proposer = specplug.create("suffix")
    for request_id in "abc":
        proposer.start(request_id, [1, 2, 3, 1, 2])
    with pytest.raises(error, match=match):
        proposer.step_batch(BatchStep(list("abc"), np.array(tokens), np.array(offsets), np.array(limits)))
    assert proposer.active_requests() == ["a", "b", "c"]


def test_a_steps_rows_are_checked_again_after_any_start_or_stop_and_when_the_list_changes():
    """The rows of the last step checked are not checked again while they stay the same; a start,
    a stop (in a step or alone) or a change to the caller's list of ids makes the next step check them."""
    proposer = specplug.create("suffix")
    for request_id in "abc":
        proposer.start(request_id, [1, 2, 3, 1, 2])
    ids = ["a", "b"]

    def step(ids, **lifecycle):
        return proposer.step_batch(BatchStep.of(ids, [[1]] * len(ids), [2] * len(ids), **lifecycle))

    step(ids)
    step(ids)
    ids[1] = "zz"  # the caller's own list, changed in place
    with pytest.raises(RequestStateError, match="'zz'"):
        step(ids)
    ids[1] = "b"
    step(ids)
    proposer.stop("b")
    with pytest.raises(RequestStateError, match="'b'"):
        step(ids)
    proposer.start("b", [1, 2, 3])
    step(ids)
    with pytest.raises(RequestStateError, match="'c'"):  # stopped in the step itself
        step(["a", "c"], stopped=["c"])
    step(["a", "c"])
    step(["a"], stopped=["c"])
    with pytest.raises(RequestStateError, match="'c'"):
        step(["a", "c"])
    with pytest.raises(RequestStateError, match="two rows"):
        step(["a", "a"])
    assert proposer.active_requests() == ["a", "b"]


@pytest.mark.parametrize(("method", "options"), [("suffix", {"global_cache": False}), ("ngram", {})])
def test_a_lookups_rows_find_their_slots_anew_once_a_request_id_comes_back_elsewhere(method, options):
    """The rows' slots are kept while a step's rows stay the same; a request stopped and started
    again under the same id takes another slot, and the next step with the same ids must use it."""
    proposer = specplug.create(method, **options)
    proposer.start("a", [1, 2, 3, 1, 2])
    proposer.start("b", [5, 6, 7, 5, 6])
    ids = ["a", "b"]
    proposer.step_batch(BatchStep.of(ids, [[3], [7]], [2, 2]))
    proposer.stop("a")
    proposer.start("c", [9, 8, 9, 8, 9])  # takes a's old slot
    proposer.start("a", [4, 4, 5, 4, 4])
    got = proposer.step_batch(BatchStep.of(ids, [[5], [5]], [3, 3]))
    fresh = specplug.create(method, **options)
    fresh.start("a", [4, 4, 5, 4, 4])
    fresh.start("b", [5, 6, 7, 5, 6, 7])
    expected = fresh.step_batch(BatchStep.of(ids, [[5], [5]], [3, 3]))
    assert got.draft(0).tokens == expected.draft(0).tokens == (4, 4, 5)
    assert got.draft(1).tokens == expected.draft(1).tokens


def test_a_fault_in_a_batch_path_costs_the_steps_rows_their_drafts_until_they_stop():
    from specplug import GuardedProposer
    from specplug.proposers.lookup.ngram import NgramOptions, NgramProposer

    class Breaks(NgramProposer):
        broken = False

        def _step_batch(self, step):
            if self.broken:
                raise RuntimeError("kernel bug")
            return super()._step_batch(step)

    proposer = Breaks(NgramOptions(min_n=1, max_n=2))
    guard = GuardedProposer(proposer)
    got = guard.step_batch(BatchStep.of(["a", "b"], [[2], [2]], [2, 2], started=[("a", [1, 2, 3, 1]), ("b", [5])]))
    assert got.draft(0).tokens == (3, 1)
    proposer.broken = True
    got = guard.step_batch(BatchStep.of(["a", "b"], [[3], [1]], [2, 2]))
    assert list(got.lengths) == [0, 0] and guard.counters["faults"] == 1
    proposer.broken = False
    got = guard.step_batch(BatchStep.of(["a", "b"], [[1], [1]], [2, 2]))  # still disabled: state unknown
    assert list(got.lengths) == [0, 0]
    got = guard.step_batch(BatchStep.of(["a"], [[2]], [2], stopped=["a"], started=[("a", [1, 2, 3, 1])]))
    assert got.draft(0).tokens == (3, 1)  # restarted: drafts again


def test_suffix_rings_in_one_growing_buffer_draft_as_the_reference_does():
    """Every request's ring is a block of one buffer (``_suffix_index.ring_pool``): the buffer moves as it grows,
    rings move to bigger blocks, stopped requests' blocks are reused, and every draft is still
    the brute-force reference's."""
    fast = specplug.create("suffix", global_cache=False)
    reference = specplug.create("suffix", implementation="reference", global_cache=False)
    rng = np.random.default_rng(3)
    live: list[str] = []
    moves = reused = 0
    for step in range(30):
        memory, used = fast._pool.memory, fast._pool.used
        stopped = [rid for rid in live if rng.integers(0, 4) == 0]
        started = [(f"{step}-{i}", rng.integers(0, 6, size=int(rng.integers(1, 300))).tolist()) for i in range(3)]
        tokens = [rng.integers(0, 6, size=int(rng.integers(1, 40))).tolist() for _ in live]  # rings outgrow their blocks
        rows = [rid for rid in live if rid not in stopped]
        tokens = [chunk for rid, chunk in zip(live, tokens) if rid not in stopped]
        got = fast.step_batch(BatchStep.of(rows, tokens, [5] * len(rows), started=started, stopped=stopped))
        for rid in stopped:
            reference.stop(rid)
        for rid, prompt in started:
            reference.start(rid, prompt)
        for row, rid in enumerate(rows):
            reference.extend(rid, tokens[row])
            assert got.draft(row).tokens == reference.propose(rid, 5).tokens, (step, rid)
        live = rows + [rid for rid, _ in started]
        moves += fast._pool.memory is not memory
        reused += bool(stopped) and fast._pool.used == used
    assert moves >= 1 and reused >= 1


def test_suffix_lockstep_walk_skips_rows_that_draft_nothing_whatever_their_window_start():
    """A row of a block that drafts nothing (no limit, or its ring is full) is marked done with
    ``at = -1``; the walk must not read its chain, whatever its other fields hold. Before the
    fix, the first block's ``starts`` came from ``np.empty``: a negative leftover let the walk
    follow link -1 into an arbitrary address (a segmentation fault seen in CI)."""
    from specplug.proposers.lookup._suffix_kernels import _walk_lockstep

    memory = np.zeros(64, dtype=np.int32)
    block = 3
    at = np.array([-1, -1, -1], dtype=np.int64)
    chain_at = np.array([0, 10**12, -(10**12)], dtype=np.int64)  # unset fields: any value
    tokens_at = np.zeros(block, dtype=np.int64)
    masks = np.full(block, 63, dtype=np.int64)
    starts = np.array([-5, -(2**40), 0], dtype=np.int64)
    ends = np.full((block, 4), 99, dtype=np.int64)
    found = np.zeros(block, dtype=np.int64)
    _walk_lockstep(memory, at, chain_at, tokens_at, masks, starts, block, ends, found)
    assert found.tolist() == [0, 0, 0]
    assert (ends == 99).all()
