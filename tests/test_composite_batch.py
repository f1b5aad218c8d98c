"""The composites' batch step equals their per-request calls: same drafts, same learning.

Two copies of a composite run the same random interleaved schedule of starts, steps and stops:
one through ``step_batch``, one through ``stop``/``start``/``extend``/``propose``. Each step's
new tokens accept a random prefix of the row's last draft (or diverge), so lookups and neural
parts are chosen, cut, confirmed and scored over later steps. After every step the drafts
(tokens, source, score, whether the neural pass is needed), the acceptance counts and
everything the composite learned (pooled and per-request statistics, lengths) must be equal.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specplug
from specplug import BatchStep
from tests.streams import repetitive_tokens


def _neural(longest: int | None = None) -> specplug.Proposer:
    """A deterministic stand-in for a neural drafter: an n-gram lookup declared neural."""
    part = specplug.create("ngram", min_n=1, max_n=2)
    part.draft_kind = "neural"
    part.max_draft_tokens = longest
    return part


class _ParityEcho(specplug.Proposer):
    """A lookup drafting a request's last token twice, its drafts named by the request's parity:
    sources that differ between rows, beside a kernel lookup that names all its rows at once
    (the composites' general way of naming each row's draft)."""

    name = "echo"

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[int, int] = {}

    def _start(self, rid, prompt):
        self.last[rid] = int(prompt[-1])

    def _extend(self, rid, tokens):
        self.last[rid] = int(tokens[-1])

    def _propose(self, rid, max_tokens):
        return specplug.Draft((self.last[rid],) * min(2, max_tokens), f"echo-{rid % 2}")

    def _stop(self, rid):
        del self.last[rid]


CONFIGS = {
    "hybrid": lambda: specplug.create("hybrid", neural=_neural(), lookup="suffix", max_positions=8),
    "hybrid-margin-no-continue": lambda: specplug.create(
        "hybrid", neural=_neural(3), lookup="ngram", margin=0.5, continue_with_lookup=False, max_positions=8
    ),
    "hybrid-cost": lambda: specplug.create(
        "hybrid", neural=_neural(), lookup="suffix", cost="llama-3.1-8b-h100", batch_size=4, max_positions=8
    ),
    "hybrid-cost-probe": lambda: specplug.create(
        "hybrid", neural=_neural(4), lookup="ngram", cost="llama-3.1-8b-h100", batch_size=1, neural_probe=True,
        half_life=0.0, explore=1.0, max_positions=8,
    ),
    # the neural part declined where a bound on its calls' tokens cannot pay for its pass
    "hybrid-cost-call-bound": lambda: specplug.create(
        "hybrid", neural=_neural(3), lookup="ngram", cost="llama-3.1-8b-h100", batch_size=8, call_bound=0.3, explore=1.0,
        max_positions=8,
    ),
    "adaptive": lambda: specplug.create("adaptive", candidates=["suffix", "ngram"], max_positions=8),
    # one lookup at a large batch: plain decoding often wins (empty drafts), and the counts fade fast
    "adaptive-one-lookup-batch64": lambda: specplug.create(
        "adaptive", candidates=["ngram"], batch_size=64, half_life=4.0, max_positions=6
    ),
    "adaptive-rows-named-apart": lambda: specplug.create(
        "adaptive", candidates=["suffix", _ParityEcho()], max_positions=8
    ),
    "adaptive-neural": lambda: specplug.create(
        "adaptive", candidates=[_neural(3), "suffix", "ngram"], batch_size=2, explore=1.0, max_positions=8
    ),
    "adaptive-neural-call-bound": lambda: specplug.create(
        "adaptive", candidates=[_neural(3), "suffix", "ngram"], batch_size=2, explore=1.0, call_bound=0.1, max_positions=8
    ),
}


def _row(draft: specplug.Draft, accepted: int) -> tuple:
    return draft.tokens, draft.source, draft.score, draft.needs_neural, accepted


def _same_learning(batch, single) -> None:
    pooled_d, pooled_a, own = batch.statistics()
    single_d, single_a, single_own = single.statistics()
    assert np.array_equal(pooled_d, single_d) and np.array_equal(pooled_a, single_a)
    assert own.keys() == single_own.keys()
    for request_id, (drafted, accepted, length) in own.items():
        other = single_own[request_id]
        assert np.array_equal(drafted, other[0]) and np.array_equal(accepted, other[1]) and length == other[2]
    assert batch._steps == single._steps


@st.composite
def _schedule_and_run(draw, config):
    batch, single = CONFIGS[config](), CONFIGS[config]()
    live: dict[int, tuple[int, ...]] = {}  # request -> its last draft
    fresh = 0
    drafted = 0
    for _ in range(draw(st.integers(1, 14))):
        stopped = [rid for rid in sorted(live) if draw(st.integers(0, 7)) == 0]
        for rid in stopped:
            del live[rid]
        started = []
        for _ in range(draw(st.integers(0 if live else 1, 3))):
            started.append((fresh, draw(repetitive_tokens(min_size=1, max_size=60))))
            live[fresh] = ()
            fresh += 1
        order = draw(st.permutations(sorted(live)))
        rows = []
        for rid in order[: draw(st.integers(0, len(order)))]:
            draft = live[rid]
            kind = draw(st.integers(0, 4))
            if kind == 0:
                tokens: list[int] = []
            elif kind <= 2 and draft:  # accept a prefix of the draft, then the target's own token
                tokens = list(draft[: draw(st.integers(0, len(draft)))]) + [draw(st.integers(0, 9))]
            else:
                tokens = draw(st.lists(st.integers(0, 9), min_size=1, max_size=5))
            rows.append((rid, tokens, draw(st.integers(0, 8))))
        for rid in stopped:
            single.stop(rid)
        for rid, prompt in started:
            single.start(rid, prompt)
        expected = []
        for rid, tokens, limit in rows:
            accepted = single.extend(rid, tokens) if tokens else 0
            draft = single.propose(rid, limit) if limit else single.empty_draft()
            expected.append(_row(draft, accepted))
        got = batch.step_batch(
            BatchStep.of([r for r, _, _ in rows], [t for _, t, _ in rows], [lim for _, _, lim in rows],
                         started=started, stopped=stopped)
        )  # fmt: skip
        actual = [_row(got.draft(row), int(got.accepted[row])) for row in range(len(rows))]
        assert actual == expected, (stopped, started, rows)
        assert [got.sources[row] for row in range(len(rows))] == [row[1] for row in expected]
        _same_learning(batch, single)
        for (rid, _, limit), row in zip(rows, expected):
            live[rid] = row[0] if limit else ()
            drafted += bool(row[0])
    return drafted


@pytest.mark.parametrize("config", sorted(CONFIGS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # the first draw compiles
@given(data=st.data())
def test_composite_batch_step_equals_per_request_calls(config, data):
    data.draw(_schedule_and_run(config))


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_a_long_batch_run_drafts_learns_and_matches_the_per_request_calls(config):
    """Many rows (the lookups' batch kernels run) over many steps: every kind of choice is made."""
    batch, single = CONFIGS[config](), CONFIGS[config]()
    rng = np.random.default_rng(7)
    text = np.tile(rng.integers(0, 12, size=40), 30)  # repetitive: lookups and the stand-in neural part draft
    ids = list(range(9))
    position = {rid: 3 * rid for rid in ids}
    started = [(rid, text[: position[rid] + 20].tolist()) for rid in ids]
    for rid, prompt in started:
        position[rid] += 20
        single.start(rid, prompt)
    batch.step_batch(BatchStep.of([], [], [], started=started))
    new = {rid: [] for rid in ids}
    sources, neural_steps = set(), 0
    for _ in range(60):
        expected = []
        for rid in ids:
            accepted = single.extend(rid, new[rid]) if new[rid] else 0
            expected.append(_row(single.propose(rid, 6), accepted))
        got = batch.step_batch(BatchStep.of(ids, [new[rid] for rid in ids], [6] * len(ids)))
        assert [_row(got.draft(row), int(got.accepted[row])) for row in range(len(ids))] == expected
        for rid, row in zip(ids, expected):
            draft = row[0]
            truth = text[position[rid] : position[rid] + len(draft) + 1].tolist()
            keep = 0
            while keep < len(draft) and draft[keep] == truth[keep] and rng.random() < 0.9:
                keep += 1
            new[rid] = list(draft[:keep]) + [int(truth[keep]) if keep < len(truth) else 0]
            position[rid] += keep + 1
            sources.add((row[1], row[3]))
            neural_steps += row[3]
    _same_learning(batch, single)
    assert len(sources) > 1  # the comparison saw more than one kind of draft
    if batch.choosing.neurals:
        assert neural_steps > 0  # and steps that chose the neural part


@pytest.mark.parametrize("batch", [1, 7, 4096])
def test_the_batch_step_times_are_the_cost_models_own(batch: int) -> None:
    # the one-pass kernel (_step_times) against spec_step_times row by row, to the last bit
    from specplug.cost import spec_step_times
    from specplug.proposers.composite._composite import _KINDS

    adaptive = specplug.create("adaptive", batch_size=batch, max_positions=9)
    contexts = np.random.default_rng(batch).integers(0, 300_000, size=50)
    table = adaptive._step_times(contexts)
    for row, context in enumerate(contexts.tolist()):
        for at, kinds in enumerate(_KINDS):
            expected = spec_step_times(adaptive.cost, batch, context, 9, kinds)
            assert np.array_equal(table[row, at], expected), (batch, context, kinds)


def test_the_batch_score_bands_are_score_bands_own() -> None:
    """The batch step's bands (numpy's logarithm, one numba pass for the rest) equal
    ``score_bands`` element by element: random scores, NaN (no score), negatives, scores at and
    one ULP beside each band's edge, drafts shorter and longer than asked, matches unknown (0),
    short, at the long-match edge and beyond it."""
    from specplug.proposers.composite._parts import LONG_MATCH, _BANDS_PER_DOUBLING, score_bands, score_bands_of_rows

    rng = np.random.default_rng(5)
    edges = 2.0 ** (np.arange(12) / _BANDS_PER_DOUBLING) - 1.0
    near = np.concatenate([edges, np.nextafter(edges, -np.inf), np.nextafter(edges, np.inf)])
    for _ in range(200):
        lookups, rows = int(rng.integers(1, 4)), int(rng.integers(1, 130))
        kind = rng.integers(0, 5, size=(lookups, rows))
        scores = np.select(
            [kind == 0, kind == 1, kind == 2, kind == 3],
            [rng.exponential(3.0, size=kind.shape), rng.choice(near, size=kind.shape), np.full(kind.shape, np.nan),
             -rng.exponential(1.0, size=kind.shape)],
            rng.integers(0, 17, size=kind.shape) / rng.integers(1, 65, size=kind.shape),
        )
        lengths = rng.integers(0, 17, size=(lookups, rows))
        limits = rng.integers(0, 17, size=rows)
        matches = rng.integers(0, 2 * LONG_MATCH + 1, size=(lookups, rows))
        expected = score_bands(scores, lengths, limits[np.newaxis, :], matches)
        got = score_bands_of_rows(scores, lengths, limits, matches)
        assert got.dtype == expected.dtype and got.tolist() == expected.tolist()


_CHOICE_STATE = ("_lengths", "_step_count", "_own_drafted", "_own_accepted", "_pooled_drafted", "_pooled_accepted")


def _choice_state(composite) -> list[np.ndarray]:
    waiting = composite._waiting
    return [getattr(composite, name).copy() for name in _CHOICE_STATE] + [
        waiting.meta.copy(), waiting.tokens.copy(), waiting.count.copy()
    ]


def _set_choice_state(composite, state: list[np.ndarray]) -> None:
    for name, array in zip(_CHOICE_STATE, state):
        getattr(composite, name)[...] = array
    waiting = composite._waiting
    waiting.meta[...], waiting.tokens[...], waiting.count[...] = state[-3:]


def _run_batch_steps(composite, steps: int, seed: int, ids=range(13)) -> None:
    """``steps`` batch steps of a long run on repetitive text: some steps leave rows out, some rows
    ask for no draft (tokens only), each row's new tokens accept a random prefix of its draft."""
    rng = np.random.default_rng(seed)
    text = np.tile(rng.integers(0, 12, size=40), 30)
    ids = list(ids)
    position = {rid: 3 * rid + 20 for rid in ids}
    composite.step_batch(BatchStep.of([], [], [], started=[(rid, text[: position[rid]].tolist()) for rid in ids]))
    new = {rid: [] for rid in ids}
    for step in range(steps):
        rows = [rid for rid in ids if step % 3 or rid % 2]
        limits = [int(rng.integers(0, 8)) for _ in rows]  # 0: tokens only, no draft
        got = composite.step_batch(BatchStep.of(rows, [new[rid] for rid in rows], limits))
        for row, rid in enumerate(rows):
            draft = got.tokens[row, : got.lengths[row]].tolist()
            truth = text[position[rid] : position[rid] + len(draft) + 1].tolist()
            keep = 0
            while keep < len(draft) and draft[keep] == truth[keep] and rng.random() < 0.9:
                keep += 1
            new[rid] = draft[:keep] + [int(truth[keep])]
            position[rid] += keep + 1


_ONE_CALL = sorted(name for name in CONFIGS if CONFIGS[name]()._one_call)


def test_the_one_call_path_is_taken_by_adaptive_without_a_neural_part_only() -> None:
    assert _ONE_CALL == ["adaptive", "adaptive-one-lookup-batch64", "adaptive-rows-named-apart"]


@pytest.mark.parametrize("config", _ONE_CALL)
def test_the_one_call_choice_and_drafts_equal_the_choice_then_finish(config, monkeypatch):
    """``_choose_step.choose_and_finish`` (adaptive's default: the choice, each row priced where it
    is chosen, and the drafts in one call) against the path it replaced: bands, every row's full
    step-time table (``linear_step_times``), ``_choice.choose_rows`` with the fading of counts over
    all positions (``widest`` at the table's width, as before), then ``_choice.finish_rows``. At
    every step of a long batch run, both from the same state: choices, cuts, expectations, drafts,
    lengths, scores, whether the neural pass is needed, and all the state they change, element by
    element."""
    from specplug.proposers.composite._composite import CompositeProposer

    one_call = CompositeProposer._choose_finished
    compared = {"rows": 0, "drafted": 0, "empty": 0, "not_drafted": 0}

    def both(self, slots, new_tokens, offsets, limits, tokens, lengths, scores, matches, width):
        room = int(self._waiting.count[slots].max()) + len(self.choosing.lookups) + 3 if len(slots) else 0
        self._waiting.make_room(room)  # the old path makes this room first: grow before the snapshot
        before, widest = _choice_state(self), int(self._widest[0])
        self._widest[0] = self.positions  # the old fading: every position
        extended = offsets[1:] > offsets[:-1]
        old = [array.copy() for array in self._choose(slots, new_tokens, offsets, extended, limits, tokens, lengths,
                                                      self._bands(scores, lengths, limits, matches))]
        none = np.zeros((0, len(slots), self.positions), dtype=np.int64)
        old_out = [array.copy() for array in self._finish(slots, old, tokens, lengths, none, none[:, :, 0], width)]
        old_state = _choice_state(self)
        _set_choice_state(self, before)
        self._widest[0] = widest
        chosen, out = one_call(self, slots, new_tokens, offsets, limits, tokens, lengths, scores, matches, width)
        assert self._widest[0] == max(widest, int(limits.max(initial=0)))
        names = ("choice", "cut", "asked", "expected", "other_expected", "confirmed_cut", "confirmed_expected", "fallback",
                 "hopeful", "out", "out_lengths", "out_scores", "out_neural", "continued_by")
        for name, a, b in zip(names, [*old, *old_out], [*chosen, *out]):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist(), name
        for name, a, b in zip((*_CHOICE_STATE, "meta", "waiting", "count"), old_state, _choice_state(self)):
            assert a.tolist() == b.tolist(), name
        choice = chosen[0]
        compared["rows"] += len(slots)
        compared["drafted"] += int((choice >= 0).sum())
        compared["empty"] += int((choice == -1).sum())
        compared["not_drafted"] += int((choice == -2).sum())
        return chosen, out

    monkeypatch.setattr(CompositeProposer, "_choose_finished", both)
    composite = CONFIGS[config]()
    _run_batch_steps(composite, 50, seed=11)
    assert compared["rows"] > 500 and compared["drafted"] > 0 and compared["not_drafted"] > 0
    if config == "adaptive-one-lookup-batch64":  # at batch 64 plain decoding wins some rows
        assert compared["empty"] > 0


@pytest.mark.parametrize("config", ["adaptive", "hybrid-cost", "hybrid"])
def test_a_full_waiting_table_grows_and_the_kernel_runs_again(config, monkeypatch):
    """The batch kernels check the waiting-draft table's room before they change anything; when it
    runs out they ask for more and are called again. From a table of one entry per request, a long
    run grows it step after step and drafts and learns exactly as a twin whose table had room."""
    from specplug.proposers.composite._pending import PendingTable

    grown = []
    make_room = PendingTable.make_room

    def counted(self, most):
        before = self.capacity
        make_room(self, most)
        if self.capacity > before:
            grown.append((before, self.capacity))

    tight, roomy = CONFIGS[config](), CONFIGS[config]()
    tight._waiting = PendingTable(0, tight.positions, waiting=1)
    roomy._waiting.make_room(64)
    monkeypatch.setattr(PendingTable, "make_room", counted)
    rng = np.random.default_rng(3)
    text = np.tile(rng.integers(0, 12, size=40), 30)
    ids = list(range(9))
    started = [(rid, text[: 3 * rid + 20].tolist()) for rid in ids]
    for composite in (tight, roomy):
        composite.step_batch(BatchStep.of([], [], [], started=started))
    # one verified token a step, the text's own: the lookups' drafts agree with it and wait, a few per row
    peak = 0
    for step in range(12):
        new = [[int(text[3 * rid + 20 + step])] if step else [] for rid in ids]
        got = [composite.step_batch(BatchStep.of(ids, new, [6] * len(ids))) for composite in (tight, roomy)]
        assert got[0].tokens.tolist() == got[1].tokens.tolist() and got[0].lengths.tolist() == got[1].lengths.tolist()
        assert got[0].scores.tolist() == got[1].scores.tolist() and got[0].sources == got[1].sources
        peak = max(peak, int(tight._waiting.count.max()))
    assert grown and grown[0][0] == 1 and tight._waiting.capacity >= 8
    assert peak > 4  # the grown room was used
    _same_learning(tight, roomy)


def test_the_rows_slots_follow_restarts_of_the_same_ids() -> None:
    """The slots of a step's rows are reused while its request ids are the same as the last
    step's; a stop and a start in between (in the step, or through the per-request calls) may
    give an id another slot, so the arrays are looked up again: drafts and learning stay the per-request
    path's. The engine's list of ids, changed in place, is not mistaken for the last step's."""
    batch, single = CONFIGS["adaptive"](), CONFIGS["adaptive"]()
    text = np.tile(np.arange(7), 40).tolist()
    ids = [0, 1, 2]
    for rid in ids:
        single.start(rid, text[: 10 + rid])
    batch.step_batch(BatchStep.of([], [], [], started=[(rid, text[: 10 + rid]) for rid in ids]))
    new = {rid: [] for rid in ids}

    def step(rows, **lifecycle):
        expected = []
        for rid in lifecycle.get("stopped", []):
            single.stop(rid)
        for rid, prompt in lifecycle.get("started", []):
            single.start(rid, prompt)
        for rid in rows:
            accepted = single.extend(rid, new[rid]) if new[rid] else 0
            expected.append(_row(single.propose(rid, 5), accepted))
        got = batch.step_batch(BatchStep.of(rows, [new[rid] for rid in rows], [5] * len(rows), **lifecycle))
        assert [_row(got.draft(row), int(got.accepted[row])) for row in range(len(rows))] == expected
        for rid, row in zip(rows, expected):
            new[rid] = list(row[0][:1]) + [3]
        _same_learning(batch, single)

    rows = list(ids)
    step(rows)
    step(rows)
    # 0 stops, 9 takes its slot, 0 comes back in another: the same ids as the last step, other slots
    new[0] = new[9] = []
    step(rows, stopped=[0], started=[(9, text[:15]), (0, text[:12])])
    step(rows)
    for proposer in (batch, single):  # the same through the per-request calls between two steps
        proposer.stop(1)
        proposer.start(8, text[:20])
        proposer.start(1, text[:13])
    new[1] = []
    step(rows)
    rows.reverse()  # the engine's list, changed in place
    step(rows)
    rows[0] = 9
    step(rows)


@pytest.mark.parametrize("config", sorted(set(CONFIGS) - set(_ONE_CALL)))
def test_the_one_kernel_choice_equals_bands_step_times_and_choose_rows(config, monkeypatch):
    """``_choose_step.choose_batch`` (bands, step times and choice in one call, outputs kept between
    steps) against the functions it replaced on the batch path (``score_bands_of_rows``,
    ``linear_step_times``, ``_choice.choose_rows`` through ``_choose``): at every step of a long
    batch run, both from the same state, every output and everything they change equal element
    by element."""
    from specplug.proposers.composite._composite import CompositeProposer

    one_kernel = CompositeProposer._choose_batch
    compared = {"rows": 0, "chosen_lookup": 0, "chosen_neural": 0, "priced": 0}

    def both(self, slots, new_tokens, offsets, limits, tokens, lengths, scores, matches):
        # the old path first, on a copy of the state; then the one kernel from the same state
        room = int(self._waiting.count[slots].max()) + len(self.choosing.lookups) + 3 if len(slots) else 0
        self._waiting.make_room(room)  # both paths make this room first: grow before the snapshot
        before, widest = _choice_state(self), int(self._widest[0])
        self._widest[0] = self.positions  # the old fading: every position
        extended = offsets[1:] > offsets[:-1]
        old = [array.copy() for array in self._choose(slots, new_tokens, offsets, extended, limits, tokens, lengths,
                                                      self._bands(scores, lengths, limits, matches))]
        old_state = _choice_state(self)
        _set_choice_state(self, before)
        self._widest[0] = widest
        new = one_kernel(self, slots, new_tokens, offsets, limits, tokens, lengths, scores, matches)
        for name, a, b in zip(("choice", "cut", "asked", "expected", "other_expected", "confirmed_cut",
                               "confirmed_expected", "fallback", "hopeful"), old, new):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tolist() == b.tolist(), name
        for name, a, b in zip((*_CHOICE_STATE, "meta", "waiting", "count"), old_state, _choice_state(self)):
            assert a.tolist() == b.tolist(), name
        choice = new[0]
        compared["rows"] += len(slots)
        compared["chosen_lookup"] += int(((choice >= 0) & (choice < len(self.choosing.lookups))).sum())
        compared["chosen_neural"] += int((choice >= len(self.choosing.lookups)).sum())
        compared["priced"] += self.choosing.cost is not None
        return new

    monkeypatch.setattr(CompositeProposer, "_choose_batch", both)
    composite = CONFIGS[config]()
    _run_batch_steps(composite, 50, seed=11)
    assert compared["rows"] > 500 and compared["chosen_lookup"] > 0
    if CONFIGS[config]().choosing.neurals:
        assert compared["chosen_neural"] > 0
