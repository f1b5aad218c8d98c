"""Replaying traces through proposers, step by step, as a greedy engine would verify them.

The first output token comes from prefill (no draft can precede it), so each request
starts with the prompt and is extended with that token; every later step drafts up to
``k`` tokens, accepts the longest prefix that equals the recorded output, and extends
the proposer with that prefix plus the target's own next token.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specplug._drafts import accepted_prefix
from specplug._proposer import Proposer
from specplug.cost import CostModel, plain_step_time, spec_step_time
from specplug.lab.bench._metered import Metered
from specplug.lab.trace import TraceRecord

__all__ = ["LOOKUP", "NEURAL", "StepLog", "modeled_times", "oracle_replay", "replay", "timed_requests"]

LOOKUP, NEURAL = 1, 2  # bits of StepLog.kinds
_KINDS = {LOOKUP: "lookup", NEURAL: "neural"}


@dataclass
class StepLog:
    """One request's verification steps (arrays of equal length)."""

    context: np.ndarray  # tokens in the request before the step (its KV footprint)
    drafted: np.ndarray  # draft tokens verified
    accepted: np.ndarray  # of them accepted
    kinds: np.ndarray  # LOOKUP | NEURAL bits: the drafters charged for the step
    micros: np.ndarray  # proposer CPU time (propose + extend), microseconds

    @property
    def steps(self) -> int:
        return len(self.drafted)


def kind_names(bits: int) -> tuple[str, ...]:
    return tuple(name for bit, name in _KINDS.items() if bits & bit)


def _accepted(draft: Sequence[int], output: Sequence[int], position: int) -> int:
    # the last token is always the target's own, so a step emits accepted + 1 tokens; only
    # as much of the output as the draft is long is sliced (the outputs are tuples)
    return accepted_prefix(draft, output[position : min(position + len(draft), len(output) - 1)])


def _charged(leaves: Sequence[Metered]) -> int:
    bits = 0
    for leaf in leaves:
        if leaf.charged:
            bits |= NEURAL if leaf.draft_kind == "neural" else LOOKUP
        leaf.reset()
    return bits


def replay(proposer: Proposer, leaves: Sequence[Metered], records: Sequence[TraceRecord], k: int) -> list[StepLog]:
    """Replay ``records`` in order through ``proposer`` (whose drafters are ``leaves``)."""
    logs = []
    clock = time.perf_counter_ns
    for record in records:
        output = record.output_ids
        rows: list[tuple[int, int, int, int, float]] = []
        proposer.start(record.id, record.prompt_ids)
        proposer.extend(record.id, output[:1])
        _charged(leaves)
        position = 1
        while position < len(output):
            began = clock()
            draft = proposer.propose(record.id, k)
            drafted = clock()
            accepted = _accepted(draft.tokens, output, position)
            step = output[position : position + accepted + 1]
            checked = clock()
            proposer.extend(record.id, step)
            ended = clock()
            micros = ((drafted - began) + (ended - checked)) / 1000.0
            rows.append((len(record.prompt_ids) + position, len(draft.tokens), accepted, _charged(leaves), micros))
            position += len(step)
        proposer.stop(record.id)
        logs.append(_log(rows))
    return logs


def acceptance_table(leaves: Sequence[Metered], record: TraceRecord, k: int) -> list[tuple[int, np.ndarray]]:
    """For every leaf, the tokens it would get accepted at every output position.

    Each leaf is fed the output token by token and drafts at every position; a leaf's
    draft depends only on the tokens so far (lookups, trace-backed heads), so this is
    what it would draft there whichever drafter ran before. Returns ``(kind bit, accepted)``
    per leaf, ``accepted[p]`` for ``p`` in ``0..len(output)-1`` (position 0 is prefill: 0).
    """
    output = record.output_ids
    table = []
    for leaf in leaves:
        accepted = np.zeros(len(output), dtype=np.int64)
        leaf.start(record.id, record.prompt_ids)
        leaf.extend(record.id, output[:1])
        for position in range(1, len(output)):
            accepted[position] = _accepted(leaf.propose(record.id, k).tokens, output, position)
            leaf.extend(record.id, output[position : position + 1])
        leaf.stop(record.id)
        leaf.reset()
        table.append((NEURAL if leaf.draft_kind == "neural" else LOOKUP, accepted))
    return table


def oracle_replay(
    tables: Sequence[list[tuple[int, np.ndarray]]],
    records: Sequence[TraceRecord],
    cost: CostModel,
    batch: int,
) -> list[StepLog]:
    """The per-position oracle: the fastest way through each request when every step may
    take any drafter's draft, cut to any length up to what it gets accepted, or no draft.

    Dynamic programming over positions (from the end): ``best[p]`` is the least modeled
    time from position ``p`` to the end. Every method that drafts with these drafters
    walks one of the paths considered, so none can beat it under the same cost model.
    """
    logs = []
    for table, record in zip(tables, records):
        length, prompt = len(record.output_ids), len(record.prompt_ids)
        best = np.zeros(length + 1)
        choice: list[tuple[int, int]] = [(0, 0)] * (length + 1)
        for position in range(length - 1, 0, -1):
            context = prompt + position
            best[position] = plain_step_time(cost, batch, context) + best[position + 1]
            choice[position] = (0, 0)
            for bit, accepted in table:
                for drafted in range(1, int(accepted[position]) + 1):
                    time_ = spec_step_time(cost, batch, context, drafted, (_KINDS[bit],)) + best[position + drafted + 1]
                    if time_ < best[position]:
                        best[position], choice[position] = time_, (drafted, bit)
        rows: list[tuple[int, int, int, int, float]] = []
        position = 1
        while position < length:
            drafted, bit = choice[position]
            rows.append((prompt + position, drafted, drafted, bit, 0.0))
            position += drafted + 1
        logs.append(_log(rows))
    return logs


def _log(rows: list[tuple[int, int, int, int, float]]) -> StepLog:
    if not rows:
        empty = np.zeros(0, dtype=np.int64)
        return StepLog(empty, empty, empty, empty, np.zeros(0))
    array = np.asarray(rows, dtype=np.float64)
    return StepLog(
        array[:, 0].astype(np.int64),
        array[:, 1].astype(np.int64),
        array[:, 2].astype(np.int64),
        array[:, 3].astype(np.int64),
        array[:, 4],
    )


def modeled_times(logs: Sequence[StepLog], cost: CostModel, batch: int) -> tuple[float, float]:
    """(plain decoding time, speculative time) of the logged steps for a homogeneous batch.

    Plain decoding pays one step per token at each context length; speculation pays each
    logged step with its verified tokens and the drafters charged for it.
    """
    return timed_requests(logs, cost, batch)[1]


def timed_requests(logs: Sequence[StepLog], cost: CostModel, batch: int) -> tuple[np.ndarray, tuple[float, float]]:
    """Each request's (plain, speculative) time [requests, 2], and :func:`modeled_times`' totals.

    The totals run over every step in order; a request's times are what its steps added to
    them, so the totals are the same to the last bit however the requests are split out.
    """
    per_request = np.zeros((len(logs), 2))
    plain = spec = 0.0
    for index, log in enumerate(logs):
        plain_before, spec_before = plain, spec
        for context, drafted, accepted, bits in zip(
            log.context.tolist(), log.drafted.tolist(), log.accepted.tolist(), log.kinds.tolist()
        ):
            spec += spec_step_time(cost, batch, context, drafted, kind_names(bits))
            for offset in range(accepted + 1):
                plain += plain_step_time(cost, batch, context + offset)
        per_request[index] = plain - plain_before, spec - spec_before
    return per_request, (plain, spec)
