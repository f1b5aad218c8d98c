"""Replaying traces through proposers, step by step, as a greedy engine would verify them.

The first output token comes from prefill (no draft can precede it), so each request
starts with the prompt and is extended with that token; every later step drafts up to
``k`` tokens, accepts the longest prefix that equals the recorded output, and extends
the proposer with that prefix plus the target's own next token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from specplug._contract import Proposer
from specplug.bench._metered import Metered
from specplug.cost import CostModel, plain_step_time, spec_step_time
from specplug.trace import TraceRecord

__all__ = ["LOOKUP", "NEURAL", "StepLog", "oracle_replay", "replay"]

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
    # the last token is always the target's own, so a step emits accepted + 1 tokens
    count, limit = 0, min(len(draft), len(output) - position - 1)
    while count < limit and draft[count] == output[position + count]:
        count += 1
    return count


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


def oracle_replay(
    leaves: Sequence[Metered],
    records: Sequence[TraceRecord],
    k: int,
    cost: CostModel,
    batch: int,
) -> list[StepLog]:
    """The per-position oracle: at every step each leaf drafts, and the one whose accepted
    prefix gives the best tokens per second (truncated to what is accepted, so nothing is
    wasted) is taken, or plain decoding when none beats it. An upper bound for any policy
    that picks one of these drafters per step."""
    logs = []
    for record in records:
        output = record.output_ids
        rows: list[tuple[int, int, int, int, float]] = []
        for leaf in leaves:
            leaf.start(record.id, record.prompt_ids)
            leaf.extend(record.id, output[:1])
        position = 1
        while position < len(output):
            context = len(record.prompt_ids) + position
            best_rate, best = 1.0 / plain_step_time(cost, batch, context), (0, 0)
            for leaf in leaves:
                accepted = _accepted(leaf.propose(record.id, k).tokens, output, position)
                bit = NEURAL if leaf.draft_kind == "neural" else LOOKUP
                if accepted:
                    rate = (1 + accepted) / spec_step_time(cost, batch, context, accepted, (_KINDS[bit],))
                    if rate > best_rate:
                        best_rate, best = rate, (accepted, bit)
            accepted, bit = best
            step = output[position : position + accepted + 1]
            for leaf in leaves:
                leaf.extend(record.id, step)
                leaf.reset()
            rows.append((context, accepted, accepted, bit, 0.0))
            position += len(step)
        for leaf in leaves:
            leaf.stop(record.id)
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
    plain = spec = 0.0
    for log in logs:
        for context, drafted, accepted, bits in zip(
            log.context.tolist(), log.drafted.tolist(), log.accepted.tolist(), log.kinds.tolist()
        ):
            spec += spec_step_time(cost, batch, context, drafted, kind_names(bits))
            for offset in range(accepted + 1):
                plain += plain_step_time(cost, batch, context + offset)
    return plain, spec


Factory = Callable[[], tuple[Proposer, list[Metered]]]
