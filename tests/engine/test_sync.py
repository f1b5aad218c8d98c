"""Request sync: an engine's per-step view of its requests turned into start/extend/stop."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug import Draft, GuardedProposer, Proposer
from specplug.engine import BatchSync, HistorySync, SingleRequestSync


class Recording(Proposer):
    """Records every lifecycle call it gets; never drafts."""

    name = "rec"

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple] = []

    def _start(self, request_id, prompt):
        self.calls.append(("start", request_id, prompt.tolist()))

    def _propose(self, request_id, max_tokens):
        return Draft((), self.name)

    def _extend(self, request_id, tokens):
        self.calls.append(("extend", request_id, tokens.tolist()))

    def _stop(self, request_id):
        self.calls.append(("stop", request_id))


class Rows:
    """A batch of rows as engines keep it: a 2-D history buffer, lengths, request ids."""

    def __init__(self, width: int = 64, rows: int = 4) -> None:
        self.histories = np.zeros((rows, width), dtype=np.int32)
        self.lengths = np.zeros(rows, dtype=np.int32)
        self.ids: list[str] = []

    def add(self, request_id: str, prompt: list[int]) -> None:
        row = len(self.ids)
        self.ids.append(request_id)
        self.histories[row, : len(prompt)] = prompt
        self.lengths[row] = len(prompt)

    def append(self, row: int, tokens: list[int]) -> list[int]:
        start = self.lengths[row]
        self.histories[row, start : start + len(tokens)] = tokens
        self.lengths[row] = start + len(tokens)
        return tokens

    def remove(self, row: int) -> None:
        """Drop a row and move the last one into its place, as engines condense their batch."""
        last = len(self.ids) - 1
        self.histories[row] = self.histories[last]
        self.lengths[row] = self.lengths[last]
        self.ids[row] = self.ids[last]
        self.ids.pop()


def test_by_id_rows_move_finished_requests_stop_and_prefill_waits():
    proposer = Recording()
    sync = BatchSync(GuardedProposer(proposer))
    rows = Rows()
    rows.add("a", [1, 2, 3])
    rows.add("b", [4, 5])
    new = [rows.append(0, [6]), rows.append(1, [7])]
    assert sync.update(new, rows.lengths, rows.histories, rows.ids, {"a", "b"}) == ["a", "b"]
    assert proposer.calls == [("start", "a", [1, 2, 3]), ("extend", "a", [6]), ("start", "b", [4, 5]),
                              ("extend", "b", [7])]
    proposer.calls.clear()
    rows.remove(0)  # "a" finished; "b" moves to row 0 and keeps its state
    assert sync.update([rows.append(0, [8, 9])], rows.lengths, rows.histories, rows.ids, {"b"}) == ["b"]
    assert proposer.calls == [("extend", "b", [8, 9]), ("stop", "a")]
    proposer.calls.clear()
    rows.add("c", [1, 1, 1])  # a partial prefill: no new tokens yet, so no request and no draft
    assert sync.update([rows.append(0, [3]), []], rows.lengths, rows.histories, rows.ids) == ["b", None]
    assert proposer.calls == [("extend", "b", [3])] and len(sync) == 1  # "c" is not tracked before it drafts
    proposer.calls.clear()
    # "b" is not scheduled this step but still alive (live): its state stays; without live it stops
    sync.update([[]], rows.lengths[1:], rows.histories[1:], ["c"], {"b", "c"})
    assert proposer.calls == []
    sync.update([[]], rows.lengths[1:], rows.histories[1:], ["c"])
    assert proposer.calls == [("stop", "b")]


def test_by_id_a_history_that_does_not_continue_restarts_the_request():
    proposer = Recording()
    sync = BatchSync(GuardedProposer(proposer))
    rows = Rows()
    rows.add("a", [1, 2])
    sync.update([rows.append(0, [3])], rows.lengths, rows.histories, ["a"])
    rows.lengths[0] = 2  # the engine rolled the request back (preempted and recomputed)
    proposer.calls.clear()
    sync.update([rows.append(0, [9])], rows.lengths, rows.histories, ["a"])
    assert proposer.calls == [("stop", "a"), ("start", "a", [1, 2]), ("extend", "a", [9])]


def test_by_row_a_moved_request_starts_afresh_and_a_staying_one_continues():
    proposer = Recording()
    sync = BatchSync(GuardedProposer(proposer))
    rows = Rows()
    rows.add("a", [1, 2, 3])
    rows.add("b", [7, 8])
    first = sync.update([rows.append(0, [4]), rows.append(1, [9])], rows.lengths, rows.histories)
    assert first[0] != first[1] and all(isinstance(request_id, str) for request_id in first)
    again = sync.update([rows.append(0, [5]), rows.append(1, [9])], rows.lengths, rows.histories)
    assert again == first  # same rows, histories continue: the same requests
    proposer.calls.clear()
    rows.remove(0)  # "b" moves to row 0; its history is not the one row 0 held
    moved = sync.update([rows.append(0, [6])], rows.lengths, rows.histories)
    assert moved[0] not in first  # a fresh request: the moved one loses its state, never gets a wrong draft
    assert proposer.calls == [("stop", first[0]), ("start", moved[0], [7, 8, 9, 9]), ("extend", moved[0], [6]),
                              ("stop", first[1])]
    assert len(sync) == 1


def test_by_row_the_fingerprint_catches_a_new_request_of_the_same_length():
    proposer = Recording()
    sync = BatchSync(GuardedProposer(proposer))
    rows = Rows()
    rows.add("a", [1, 2, 3])
    (first,) = sync.update([rows.append(0, [4])], rows.lengths, rows.histories)
    rows.histories[0, :4] = [5, 6, 7, 8]  # another request of the same length took the row
    (second,) = sync.update([rows.append(0, [9])], rows.lengths, rows.histories)
    assert second != first and ("stop", first) in proposer.calls


def test_stop_all_and_row_count_checks():
    proposer = Recording()
    sync = BatchSync(GuardedProposer(proposer))
    rows = Rows()
    rows.add("a", [1])
    rows.add("b", [2])
    sync.update([rows.append(0, [3]), rows.append(1, [4])], rows.lengths, rows.histories, rows.ids)
    sync.stop_all()
    assert len(sync) == 0 and proposer.active_requests() == []
    with pytest.raises(ValueError, match="2 rows of new tokens but 1 request ids"):
        sync.update([[1], [2]], rows.lengths, rows.histories, ["a"])


def test_history_sync_says_what_a_history_adds():
    sync = HistorySync()
    buffer = np.array([1, 2, 3, 0, 0], dtype=np.intc)
    assert sync.advance(buffer[:3]) is None
    buffer[3:] = [4, 5]  # the engine reuses its buffer: the sync kept a copy
    assert sync.history.tolist() == [1, 2, 3]
    assert sync.advance(buffer).tolist() == [4, 5]
    assert sync.advance(buffer).tolist() == []  # the same history again adds nothing
    assert sync.advance([1, 2]) is None  # shorter: a new sequence
    sync.reset()
    assert sync.advance([1, 2]) is None
    with pytest.raises(specplug.InvalidTokensError, match="1-D"):
        sync.advance([[1, 2]])


def test_single_request_sync_extends_restarts_and_closes():
    proposer = Recording()
    sync = SingleRequestSync(GuardedProposer(proposer))
    assert sync.request_id is None
    step = sync.update([1, 2, 3])
    assert (step.request_id, step.started, step.new_tokens.tolist(), step.accepted) == (1, True, [], 0)
    step = sync.update([1, 2, 3, 4])
    assert (step.request_id, step.started, step.new_tokens.tolist()) == (1, False, [4])
    proposer.calls.clear()
    assert sync.update([1, 2, 3, 4]).new_tokens.tolist() == []  # same history: no extend (it would drop the draft)
    assert proposer.calls == []
    step = sync.update([9, 9])  # a new generation
    assert (step.request_id, step.started) == (2, True) and sync.generations == 2
    assert proposer.calls == [("stop", 1), ("start", 2, [9, 9])]
    sync.close()
    assert sync.request_id is None and proposer.active_requests() == []
    assert sync.update([9, 9, 1]).started  # after close, even a continuing history starts afresh


def test_single_request_sync_counts_acceptance_of_the_last_draft():
    proposer = specplug.create("ngram", min_n=1, max_n=2)
    sync = SingleRequestSync(proposer)
    sync.update([1, 2, 3, 1, 2])
    assert proposer.propose(sync.request_id, 3).tokens == (3, 1, 2)
    assert sync.update([1, 2, 3, 1, 2, 3, 1, 7]).accepted == 2


def test_single_request_sync_a_start_that_raises_leaves_no_request():
    class FailsToStart(Recording):
        def _start(self, request_id, prompt):
            raise RuntimeError("no room")

    sync = SingleRequestSync(FailsToStart())  # unguarded: the error reaches the caller
    with pytest.raises(RuntimeError):
        sync.update([1, 2])
    assert sync.request_id is None
    with pytest.raises(RuntimeError):  # the next history starts again rather than extend a request that never began
        sync.update([1, 2, 3])
