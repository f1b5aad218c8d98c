"""GuardedProposer: a fault costs one draft (or the request's speculation), never the caller."""

from __future__ import annotations

import logging

import specplug
from specplug import Draft, GuardedProposer


class Flaky(specplug.Proposer):
    name = "flaky"

    def __init__(self, fail_propose_every: int = 0, fail_extend: bool = False) -> None:
        super().__init__()
        self.calls = 0
        self.fail_propose_every = fail_propose_every
        self.fail_extend = fail_extend

    def _start(self, rid, prompt):
        pass

    def _propose(self, rid, max_tokens):
        self.calls += 1
        if self.fail_propose_every and self.calls % self.fail_propose_every == 0:
            raise ZeroDivisionError("proposer bug")
        return Draft((1,), self.name, 1.0)

    def _extend(self, rid, tokens):
        if self.fail_extend:
            raise IndexError("state bug")

    def _stop(self, rid):
        pass


def test_propose_fault_costs_one_draft_and_is_logged_once(caplog):
    guarded = GuardedProposer(Flaky(fail_propose_every=2))
    guarded.start("r", [1])
    with caplog.at_level(logging.WARNING, logger="specplug"):
        drafts = [guarded.propose("r", 4).tokens for _ in range(6)]
        for _ in range(6):
            guarded.extend("r", [1])
    assert drafts == [(1,), (), (1,), (), (1,), ()]
    assert guarded.counters["faults"] == 3
    assert guarded.counters["drafts.flaky"] == 3 and guarded.counters["empty_drafts"] == 3
    assert len([r for r in caplog.records if "raised in propose()" in r.getMessage()]) == 1


def test_extend_fault_turns_speculation_off_for_that_request_only():
    guarded = GuardedProposer(Flaky(fail_extend=True))
    guarded.start("a", [1])
    guarded.start("b", [1])
    guarded.propose("a", 2)
    assert guarded.extend("a", [1]) == 0
    assert guarded.propose("a", 2).tokens == ()
    assert guarded.propose("b", 2).tokens == (1,)
    guarded.stop("a")
    guarded.stop("b")
    assert guarded.counters["faults"] == 1


def test_failed_start_is_isolated_and_stop_is_quiet():
    guarded = GuardedProposer(specplug.create("ngram"))
    guarded.start("r", [1, -5])  # bad prompt: the request just runs without speculation
    assert guarded.propose("r", 4).tokens == ()
    guarded.stop("r")
    assert guarded.counters["faults"] == 1


def test_adapter_faults_count_with_the_proposers_and_are_logged_once_per_place_and_kind(caplog):
    guarded = GuardedProposer(Flaky(fail_propose_every=1))
    guarded.start("r", [1])
    with caplog.at_level(logging.WARNING, logger="specplug"):
        guarded.propose("r", 4)
        for _ in range(3):
            guarded.record_fault("the step", KeyError("row"), "no drafts this step")
        guarded.record_fault("the step", ValueError("bad"), "no drafts this step")
        guarded.record_fault("set_batch_size(2)", KeyError("row"), "batch size no longer passed on")
    assert guarded.counters["faults"] == 6
    messages = [r.getMessage() for r in caplog.records]
    assert messages.count("specplug flaky: the step raised KeyError; no drafts this step (logged once per kind of fault)") == 1
    assert len([m for m in messages if "the step raised ValueError" in m]) == 1
    assert len([m for m in messages if "set_batch_size(2) raised KeyError; batch size" in m]) == 1
    assert len([m for m in messages if "raised in propose()" in m]) == 1
    assert all(r.exc_info for r in caplog.records)
