"""The tune / validation split of a trace set: decided before any tuning, the same on every run.

Within each workload, requests are grouped by conversation (an agent loop's turns share a
conversation: ``agentic/loop-1/turn-2`` belongs to ``agentic/loop-1``), in the order they first
appear; even-numbered conversations go to ``tune``, odd ones to ``validation``. A later turn
repeats earlier turns, so splitting inside a conversation would let the validation half see
text the tune half was tuned on.

>>> from specplug.lab.trace import TraceRecord
>>> records = [TraceRecord(v=1, id=name, workload="w", prompt_ids=[1], output_ids=[2])
...            for name in ("a/turn-1", "a/turn-2", "b", "c")]
>>> [record.id for record in split_records(records, "tune")], [record.id for record in split_records(records, "validation")]
(['a/turn-1', 'a/turn-2', 'c'], ['b'])
"""

from __future__ import annotations

from collections.abc import Sequence

from specplug._errors import InvalidOptionError
from specplug.lab.trace import TraceRecord

__all__ = ["SPLITS", "conversation_of", "split_records"]

#: the names ``--split`` takes: ``all`` keeps every request
SPLITS = ("all", "tune", "validation")


def conversation_of(record: TraceRecord) -> str:
    """The conversation a request belongs to: its id without a trailing ``/turn-N``."""
    head, sep, tail = record.id.rpartition("/turn-")
    return head if sep and tail.isdigit() else record.id


def split_records(records: Sequence[TraceRecord], split: str) -> list[TraceRecord]:
    """The requests of ``split`` (``tune``, ``validation`` or ``all``), in their order."""
    if split not in SPLITS:
        raise InvalidOptionError(f"split = {split!r} is not valid; valid: {', '.join(SPLITS)}")
    if split == "all":
        return list(records)
    order: dict[tuple[str, str], int] = {}
    counts: dict[str, int] = {}
    for record in records:
        key = (record.workload, conversation_of(record))
        if key not in order:
            order[key] = counts.get(record.workload, 0)
            counts[record.workload] = order[key] + 1
    parity = 0 if split == "tune" else 1
    return [record for record in records if order[(record.workload, conversation_of(record))] % 2 == parity]
