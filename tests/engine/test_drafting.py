"""One drafting step in the engine layer: batch size, guard, counters, stats."""

from __future__ import annotations

import json
import logging

import numpy as np

import specplug
from specplug import Draft, Proposer
from specplug.engine import EngineDrafting, StatsReporter, read_stats


class Scripted(Proposer):
    """Drafts a fixed draft per request; raises for the requests in ``faulty``; records batch sizes."""

    name = "scripted"
    takes_batch_size = True

    def __init__(self, drafts: dict, faulty: set | None = None) -> None:
        super().__init__()
        self.drafts = drafts
        self.faulty = faulty or set()
        self.batch_sizes: list[int] = []

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_sizes.append(batch_size)

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        if request_id in self.faulty:
            raise RuntimeError(f"bug drafting {request_id}")
        return Draft(self.drafts.get(request_id, ()), self.name)

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass


def started(proposer: Proposer, *request_ids) -> EngineDrafting:
    drafting = EngineDrafting(proposer)
    for request_id in request_ids:
        drafting.guard.start(request_id, [1, 2, 3])
    return drafting


def test_a_faulty_proposer_costs_one_draft():
    proposer = Scripted({"a": (5, 6), "b": (7,), "c": (8, 9)}, faulty={"b"})
    drafting = started(proposer, "a", "b", "c")
    drafts = drafting.draft([("a", 4), ("b", 4), ("c", 4)])
    assert [draft.tokens for draft in drafts] == [(5, 6), (), (8, 9)]
    assert drafting.counters["faults"] == 1 and drafting.counters["empty_drafts"] == 1
    assert drafting.counters["drafts.scripted"] == 2 and drafting.counters["draft_tokens"] == 4
    proposer.faulty.clear()  # the request itself goes on: the next step drafts for it again
    assert drafting.draft([("b", 4)])[0].tokens == (7,)


def test_the_batch_size_reaches_the_proposer_before_it_drafts():
    proposer = Scripted({"a": (1,)})
    drafting = started(proposer, "a")
    drafting.draft([("a", 2), (None, 2), (None, 2)])
    drafting.draft([("a", 2)], batch_size=64)  # an engine whose batch holds more than the rows it drafts for
    assert proposer.batch_sizes == [3, 64]
    drafting.draft([])
    assert proposer.batch_sizes == [3, 64]  # no rows, nothing to size


def test_every_proposer_is_given_the_batch_size_by_its_declared_method():
    adaptive = specplug.create("adaptive")
    drafting = started(adaptive, "a")
    drafting.draft([("a", 4), (None, 4)])
    assert adaptive.batch_size == 2
    started(specplug.create("ngram"), "a").draft([("a", 4)])  # the contract's no-op: nothing to check but no error


def test_a_set_batch_size_that_raises_is_counted_once_and_not_asked_again(caplog):
    proposer = Scripted({"a": (4,)})

    def refuse(size):
        raise ValueError(f"batch {size}")

    proposer.set_batch_size = refuse
    drafting = started(proposer, "a")
    with caplog.at_level(logging.WARNING, logger="specplug.engine"):
        assert drafting.draft([("a", 2)])[0].tokens == (4,)  # drafts all the same
        assert drafting.draft([("a", 2)])[0].tokens == (4,)
    assert drafting.passes_batch_size is False and drafting.counters["faults"] == 1
    assert [record.getMessage() for record in caplog.records] == [
        "specplug scripted: set_batch_size(1) raised ValueError; batch size no longer passed on "
        "(logged once per kind of fault)"
    ]


def test_rows_without_request_or_room_get_empty_drafts_and_overlong_drafts_are_dropped():
    class Overshoots(Scripted):
        def _propose(self, request_id, max_tokens):
            return Draft((1, 2, 3, 4, 5)[: max_tokens + 3], self.name)  # ignores max_tokens

    drafting = started(Overshoots({}), "a")
    drafts = drafting.draft([("a", 2), (None, 4), ("a", 0)])
    # a draft longer than asked is a bad draft: none of it reaches the engine
    assert [draft.tokens for draft in drafts] == [(), (), ()]
    assert drafting.counters["bad_drafts"] == 1 and drafting.counters["empty_drafts"] == 1
    # rows that were not asked are not counted as empty drafts


def test_sync_then_draft_over_a_batch_and_close():
    drafting = EngineDrafting(specplug.create("ngram", min_n=1, max_n=2))
    histories = np.array([[1, 2, 3, 1, 2, 0], [4, 5, 4, 5, 0, 0]])
    rows = drafting.sync_batch([[2], [5]], [5, 4], histories, ["a", "b"])
    drafts = drafting.draft([(request_id, 2) for request_id in rows])
    assert [draft.tokens for draft in drafts] == [(3, 1), (4, 5)]
    drafting.close()
    assert len(drafting.batch) == 0 and drafting.guard.proposer.active_requests() == []


def test_stats_go_to_the_adapters_logger_and_file(tmp_path, caplog):
    path = tmp_path / "stats-{pid}.json"
    drafting = EngineDrafting(
        Scripted({"a": (1,)}), method="scripted-method", logger="someengine.specplug", stats_file=str(path),
        stats_interval=0, details={"engine": "some engine"},
    )
    drafting.guard.start("a", [1])
    with caplog.at_level(logging.INFO, logger="someengine.specplug"):
        drafting.draft([("a", 1)])
        drafting.close()
    (written,) = tmp_path.iterdir()
    stats = read_stats(written)
    assert stats["method"] == "scripted-method" and stats["steps"] == 1 and stats["engine"] == "some engine"
    assert stats["counters"] == {"draft_tokens": 1, "drafts.scripted": 1}
    assert any(record.name == "someengine.specplug" and "steps=1" in record.getMessage() for record in caplog.records)


def test_stats_reporter_writes_atomically_and_checks_its_interval(tmp_path):
    reporter = StatsReporter(specplug.GuardedProposer(specplug.create("ngram")).counters, method="ngram",
                             path=str(tmp_path / "s.json"), interval=0)
    reporter.counters["drafts.ngram"] = 3
    reporter.step()
    assert [entry.name for entry in tmp_path.iterdir()] == ["s.json"]
    assert json.loads((tmp_path / "s.json").read_text())["counters"] == {"drafts.ngram": 3}
    try:
        StatsReporter(reporter.counters, method="ngram", interval=-1)
    except specplug.InvalidOptionError as error:
        assert "interval = -1" in str(error)
    else:
        raise AssertionError("a negative interval must be refused")


def test_a_rows_control_is_counted_and_a_bad_one_costs_a_fault_not_the_step():
    drafting = EngineDrafting(specplug.create("ngram", min_n=1, max_n=2))
    assert drafting.control_of(None).limit(4) == 4 and drafting.control_of({"other": 1}).limit(4) == 4
    assert drafting.control_of({"specplug_draft": "off"}).limit(4) == 0
    assert drafting.control_of({"specplug_max_draft_tokens": 2}).limit(4) == 2
    assert drafting.counters["request_control.off"] == 1 and drafting.counters["request_control.capped"] == 1
    assert drafting.counters["faults"] == 0
    assert drafting.control_of({"specplug_draft": "maybe"}).limit(4) == 4  # as the server is set
    assert drafting.counters["faults"] == 1
