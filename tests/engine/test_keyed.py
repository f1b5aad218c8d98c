"""KeyedHistorySync: requests shown by id with their full history, ended by the engine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import specplug
from specplug import Draft, GuardedProposer, Proposer
from specplug.engine import EngineDrafting, KeyedHistorySync


class Recording(Proposer):
    """Records every lifecycle call and rebuilds each request's history from them; never drafts."""

    name = "rec"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []
        self.histories: dict = {}

    def _start(self, request_id, prompt):
        self.calls.append(("start", request_id, prompt.tolist()))
        self.histories[request_id] = prompt.tolist()

    def _propose(self, request_id, max_tokens):
        return Draft((), self.name)

    def _extend(self, request_id, tokens):
        self.calls.append(("extend", request_id, tokens.tolist()))
        self.histories[request_id] += tokens.tolist()

    def _stop(self, request_id):
        self.calls.append(("stop", request_id))
        del self.histories[request_id]


def test_first_sight_starts_growth_extends_and_the_same_history_changes_nothing():
    proposer = Recording()
    sync = KeyedHistorySync(GuardedProposer(proposer))
    assert sync.observe(7, [1, 2, 3]) == 3
    assert sync.observe(7, [1, 2, 3, 4, 5]) == 5
    assert sync.observe(7, [1, 2, 3, 4, 5]) == 5  # no new tokens: no extend (it would drop the pending draft)
    assert proposer.calls == [("start", 7, [1, 2, 3]), ("extend", 7, [4, 5])]
    assert 7 in sync and len(sync) == 1


def test_stop_on_free_or_completion_and_a_reused_id_starts_afresh():
    proposer = Recording()
    sync = KeyedHistorySync(GuardedProposer(proposer))
    sync.observe("a", [1, 2, 3])
    sync.stop("a")  # the engine freed it
    sync.stop("a")  # freeing again, or an id never seen, is harmless
    sync.stop("never")
    assert "a" not in sync and proposer.active_requests() == []
    proposer.calls.clear()
    sync.observe("a", [1, 2, 3, 4])  # the id reused after completion, even with a history that looks continued
    assert proposer.calls == [("start", "a", [1, 2, 3, 4])]


def test_a_history_that_does_not_continue_restarts_the_request():
    proposer = Recording()
    sync = KeyedHistorySync(GuardedProposer(proposer))
    sync.observe("a", [1, 2, 3, 4])
    proposer.calls.clear()
    sync.observe("a", [1, 2, 9, 9, 9])  # reused while nobody said the old request ended
    assert proposer.calls == [("stop", "a"), ("start", "a", [1, 2, 9, 9, 9])]
    proposer.calls.clear()
    sync.observe("a", [1, 2])  # shorter: rewound (preempted and recomputed)
    assert proposer.calls == [("stop", "a"), ("start", "a", [1, 2])]


def test_it_keeps_no_reference_to_the_engines_history():
    proposer = Recording()
    sync = KeyedHistorySync(GuardedProposer(proposer))
    buffer = np.array([1, 2, 3, 0, 0], dtype=np.int32)
    sync.observe("a", buffer[:3])
    buffer[:3] = [7, 7, 7]  # the engine rewrote the tokens in place: a different history
    proposer.calls.clear()
    sync.observe("a", buffer[:4])
    assert proposer.calls[0] == ("stop", "a")


def test_drafts_follow_the_synced_history():
    proposer = specplug.create("ngram", min_n=1, max_n=2)
    sync = KeyedHistorySync(proposer)
    sync.observe("r", [1, 2, 3, 1, 2])
    assert proposer.propose("r", 3).tokens == (3, 1, 2)
    sync.observe("r", [1, 2, 3, 1, 2, 3, 1, 2, 3])  # all three accepted, then the target's own 3
    assert proposer.propose("r", 3).tokens == (1, 2, 3)


def test_a_fault_behind_the_guard_costs_that_request_its_drafts_only():
    class FailsFor(Recording):
        def _start(self, request_id, prompt):
            if request_id == "bad":
                raise RuntimeError("no room")
            super()._start(request_id, prompt)

    guard = GuardedProposer(FailsFor())
    sync = KeyedHistorySync(guard)
    sync.observe("bad", [1, 2])
    sync.observe("bad", [1, 2, 3])  # extended in the sync's view; the guard keeps it undrafted
    sync.observe("ok", [1, 2])
    assert guard.propose("bad", 2).tokens == () and guard.counters["faults"] == 1
    sync.stop_all()
    assert len(sync) == 0 and guard.proposer.active_requests() == []


def test_unguarded_a_start_that_raises_leaves_the_request_untracked():
    class FailsToStart(Recording):
        def _start(self, request_id, prompt):
            raise RuntimeError("no room")

    sync = KeyedHistorySync(FailsToStart())
    with pytest.raises(RuntimeError):
        sync.observe("a", [1, 2])
    assert "a" not in sync


def test_engine_drafting_keeps_requests_by_id_and_close_stops_them():
    drafting = EngineDrafting(specplug.create("ngram", min_n=1, max_n=2))
    drafting.requests.observe(1, [1, 2, 3, 1, 2])
    drafting.requests.observe(2, [5, 6])
    drafts = drafting.draft([(1, 2), (2, 2), (None, 2)])
    assert [draft.tokens for draft in drafts] == [(3, 1), (), ()]
    assert drafting.counters["drafts.ngram"] == 1
    drafting.close()
    assert len(drafting.requests) == 0 and drafting.guard.proposer.active_requests() == []


# an engine's life of requests: a step grows some, frees some, reuses ids (after a free or not)
_event = st.tuples(
    st.sampled_from(["grow", "free", "reuse"]),
    st.integers(0, 3),  # request id
    st.lists(st.integers(0, 5), min_size=0, max_size=4),  # tokens
)


@given(st.lists(_event, max_size=60))
def test_the_proposer_always_holds_each_live_request_s_history(events):
    proposer = Recording()
    sync = KeyedHistorySync(GuardedProposer(proposer))
    engine: dict[int, list[int]] = {}
    for action, request_id, tokens in events:
        if action == "free":
            engine.pop(request_id, None)
            sync.stop(request_id)
            continue
        if action == "reuse" or request_id not in engine:
            engine[request_id] = list(tokens)  # a new request under this id; the sync may not be told
        else:
            engine[request_id] += tokens
        sync.observe(request_id, engine[request_id])
        assert proposer.histories[request_id] == engine[request_id]
    assert set(proposer.histories) == set(engine) and len(sync) == len(engine)
