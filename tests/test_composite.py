"""The composite base shared by hybrid and adaptive: the parts' lifecycle and later-step scoring."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug.proposers.composite._pending import PendingTable, add_pending, score_pending
from tests._scripted import Oracle


class _Broken(Oracle):
    """A lookup part that fails on start or stop, when told to."""

    def __init__(self, outputs, *, fail_start=False, fail_stop=False):
        super().__init__(outputs, lambda pos: 1, name="broken", kind="lookup")
        self.fail_start, self.fail_stop = fail_start, fail_stop

    def _start(self, rid, prompt):
        if self.fail_start:
            raise RuntimeError("start failed")
        super()._start(rid, prompt)

    def _stop(self, rid):
        super()._stop(rid)
        if self.fail_stop:
            raise RuntimeError("stop failed")


def _composites(first, second):
    yield "hybrid", specplug.create("hybrid", lookup=first, neural=second)
    yield "adaptive", specplug.create("adaptive", candidates=[first, second])


@pytest.mark.parametrize("method", ["hybrid", "adaptive"])
def test_a_part_that_fails_to_start_leaves_no_part_holding_the_request(method):
    outputs = {"r": list(range(10, 40))}
    first, broken = Oracle(outputs, lambda pos: 1, kind="lookup", name="ok"), _Broken(outputs, fail_start=True)
    composite = dict(_composites(first, broken))[method]
    with pytest.raises(RuntimeError, match="start failed"):
        composite.start("r", [1, 2])
    assert "r" not in first and "r" not in composite
    broken.fail_start = False
    composite.start("r", [1, 2])  # nothing was left behind: the request starts cleanly now
    assert "r" in first and "r" in broken


@pytest.mark.parametrize("method", ["hybrid", "adaptive"])
def test_stop_stops_every_part_and_reports_the_first_error(method):
    outputs = {"r": list(range(10, 40))}
    broken, last = _Broken(outputs, fail_stop=True), Oracle(outputs, lambda pos: 1)
    composite = dict(_composites(broken, last))[method]
    composite.start("r", [1, 2])
    with pytest.raises(RuntimeError, match="stop failed"):
        composite.stop("r")
    assert "r" not in last and "r" not in broken and "r" not in composite


def _scored(table, steps, tracks=2):
    """Counts [drafted/accepted, track, band 0, position] after the verified ``steps`` (at, tokens)."""
    counts, pooled = np.zeros((2, tracks, 1, table.positions)), np.zeros((2, tracks, 1, table.positions))
    for at, tokens in steps:
        tokens = np.array(tokens, dtype=np.int64)
        score_pending(0, tokens, 0, len(tokens), at, table.meta, table.tokens, table.count, *counts, *pooled, 1.0,
                      table.positions)
    assert np.array_equal(counts, pooled)  # one request: its counts are the pooled ones
    return counts[:, :, 0]


def test_each_position_of_a_waiting_draft_is_scored_once_as_the_verified_text_reaches_it():
    table = PendingTable(slots=1, positions=8)
    add_pending(table.meta, table.tokens, table.count, 0, 0, 0, np.array([1, 2, 3, 4, 5, 6]), 6, 0, True)
    drafted, accepted = _scored(table, ((0, [1, 2]), (2, [3]), (3, [4, 7, 8]), (6, [9])))
    # positions 1-4 matched, the fifth was contradicted (7 for 5), the sixth was never reached
    assert drafted[0].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    assert accepted[0].tolist() == [1, 1, 1, 1, 0, 0, 0, 0]
    assert table.count[0] == 0


def test_a_draft_not_followed_is_scored_on_the_next_tokens_only():
    table = PendingTable(slots=1, positions=4)
    add_pending(table.meta, table.tokens, table.count, 0, 0, 0, np.array([1, 2, 3]), 3, 0, False)  # track 0: once
    add_pending(table.meta, table.tokens, table.count, 0, 1, 0, np.array([1, 2, 3]), 3, 0, True)  # track 1: followed
    drafted, _ = _scored(table, ((0, [1]), (1, [2, 3])))
    assert drafted[0].tolist() == [1, 0, 0, 0] and drafted[1].tolist() == [1, 1, 1, 0]


def test_a_newer_draft_of_the_same_track_and_band_replaces_the_one_waiting_at_its_position():
    table = PendingTable(slots=1, positions=4)
    for draft in ([1, 2], [1, 9, 9]):  # proposed twice before any token was verified
        add_pending(table.meta, table.tokens, table.count, 0, 0, 0, np.array(draft), len(draft), 5, True)
    drafted, accepted = _scored(table, ((5, [1, 9, 9]),))
    assert drafted[0].tolist() == [1, 1, 1, 0] and accepted[0].tolist() == [1, 1, 1, 0]  # the newer one, once


@pytest.mark.parametrize("batch", [1, 32, 128])
def test_adaptive_given_the_hybrids_parts_and_options_drafts_what_the_cost_aware_hybrid_drafts(batch):
    """One cost-aware choice in the composite base: adaptive over (lookup, neural) is the hybrid's."""
    from tests._scripted import drive, geometric

    output = list(range(100, 700))

    def parts():
        neural = Oracle({"r": output}, geometric(0.6, seed=1), pad=True)
        lookup = Oracle({"r": output}, geometric(0.7, seed=2), name="look", kind="lookup", score=lambda pos: float(pos % 7))
        return lookup, neural

    options = dict(cost="llama-3.1-8b-h100", batch_size=batch, prior=0.6, prior_weight=4.0, explore=0.3, half_life=16.0)
    lookup, neural = parts()
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, max_positions=16, **options)
    lookup, neural = parts()
    adaptive = specplug.create("adaptive", candidates=[lookup, neural], max_positions=16, **options)
    by_hybrid = drive(hybrid, "r", [1, 2, 3], output, 8)
    by_adaptive = drive(adaptive, "r", [1, 2, 3], output, 8)
    assert [(d.tokens, d.needs_neural) for d, _ in by_hybrid] == [(d.tokens, d.needs_neural) for d, _ in by_adaptive]
    assert len({len(d.tokens) for d, _ in by_hybrid}) > 2  # several cuts were chosen: the comparison has teeth
