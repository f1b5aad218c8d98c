"""step_offered drafts, counts and remembers what the per-row path does.

A random schedule of starts, offers, steps (some rows asked for nothing, as a composite asks
the rows that did not choose its neural part) and stops runs twice: through step_offered and
through the base class's per-row hooks.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import specplug
from specplug import BatchStep
from specplug import Draft
from specplug.engine import EngineDrafts, StandInDrafter
from specplug.engine._neural_batch import step_offered


class _BatchOffers(EngineDrafts):
    """EngineDrafts through step_offered (EngineDrafts itself keeps the per-row path)."""

    def _step_batch(self, step):
        return step_offered(self, step, self._offered, Draft((), self.name))


class _RowByRowStandIn(StandInDrafter):
    pass


def _outcome(got):
    scores = got.scores
    return (got.tokens.tolist(), got.lengths.tolist(), got.accepted.tolist(), list(got.sources),
            np.where(np.isnan(scores), -1.0, scores).tolist(), got.needs_neural.tolist())


_ROW = st.tuples(st.integers(0, 5), st.lists(st.integers(0, 3), max_size=4), st.integers(0, 4), st.booleans())
_STEP = st.tuples(st.lists(_ROW, max_size=6), st.lists(st.integers(0, 5), max_size=2))


def _run(proposer, schedule, offers: bool):
    if isinstance(proposer, StandInDrafter):
        proposer.batch_from = 0  # the batch path at every size (the reference subclass never takes it)
    live: set[int] = set()
    out = []
    for rows, stops in schedule:
        stopped = sorted(set(stops) & live)
        live -= set(stopped)
        ids, new, limits, started = [], [], [], []
        for request_id, tokens, limit, offer in rows:
            if request_id in ids:
                continue
            if request_id not in live:
                started.append((request_id, [1, 2]))
                live.add(request_id)
                tokens = []
            if offers and offer:
                proposer.offer(request_id, [t + 1 for t in tokens] + [2, 3, 1])
            ids.append(request_id)
            new.append(tokens)
            limits.append(limit)
        step = BatchStep.of(ids, new, limits, started=started, stopped=stopped)
        got = proposer.step_batch(step)
        out.append((_outcome(got), {k: v for k, v in proposer._pending.items()}))
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=8))
def test_engine_drafts_batch_step_is_its_per_row_path(schedule):
    assert _run(_BatchOffers("mtp"), schedule, True) == _run(EngineDrafts("mtp"), schedule, True)


@settings(max_examples=40, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=8))
def test_stand_in_batch_step_is_its_per_row_path(schedule):
    assert _run(StandInDrafter(), schedule, False) == _run(_RowByRowStandIn(), schedule, False)


def test_a_hybrid_over_engine_drafts_takes_the_offered_draft_in_a_batch_step():
    neural = EngineDrafts("mtp")
    hybrid = specplug.create("hybrid", neural=neural, lookup="suffix")
    hybrid.step_batch(BatchStep.of([], [], [], started=[("a", [5, 6, 7, 8]), ("b", [9, 9])]))
    neural.offer_rows(["a", "b"], [[4, 4, 4], [1, 2]])
    got = hybrid.step_batch(BatchStep.of(["a", "b"], [[1], [3]], [3, 3]))
    drafts = [got.draft(row) for row in range(2)]
    # no lookup match for either row: both take the neural part's offer, cut to the limit
    assert [d.tokens for d in drafts] == [(4, 4, 4), (1, 2)] and all(d.source.startswith("mtp") for d in drafts)
