"""The benchmark: every method on every workload, figures per workload, oracle shares."""

from __future__ import annotations

import os
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from specplug.cost import CostModel
from specplug.lab.bench._llamacpp import engine_rows
from specplug.lab.bench._metered import Metered
from specplug.lab.bench._methods import BenchMethod, build, is_composite
from specplug.lab.bench._noise import speedup_of
from specplug.lab.bench._replay import StepLog, acceptance_table, modeled_times, oracle_replay, replay
from specplug.lab.bench._result import BenchResult, Row
from specplug.lab.bench._rules import tuned_label, tuned_rows
from specplug.lab.trace import TraceRecord

__all__ = ["BATCH_SIZES", "BEST_FIXED", "run_benchmark", "warm_label", "workloads_of"]

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
#: the row of the best fixed (drafter, draft length), chosen per batch size with hindsight
BEST_FIXED = "best fixed"
MIXED = "mixed"

Progress = Callable[[str], None]


def workloads_of(records: Sequence[TraceRecord], mixed: bool = True) -> dict[str, list[TraceRecord]]:
    """Records grouped by workload, in order, plus ``mixed`` (all recorded ones, the synthetic
    stress workloads left out) when there are several."""
    groups: dict[str, list[TraceRecord]] = {}
    for record in records:
        groups.setdefault(record.workload, []).append(record)
    recorded = [record for record in records if not record.meta.get("synthetic")]
    if mixed and len({record.workload for record in recorded}) > 1:
        groups[MIXED] = recorded
    return groups


def _figures(row: Row, logs: Sequence[StepLog], with_micros: bool = True) -> None:
    steps = sum(log.steps for log in logs)
    drafted = sum(int(log.drafted.sum()) for log in logs)
    accepted = sum(int(log.accepted.sum()) for log in logs)
    row.steps = steps
    row.tokens = accepted + steps
    row.requests = len(logs)
    row.tokens_per_step = row.tokens / steps if steps else 0.0
    row.accepted_per_step = accepted / steps if steps else 0.0
    row.acceptance_rate = accepted / drafted if drafted else None
    row.drafted_share = sum(int((log.drafted > 0).sum()) for log in logs) / steps if steps else None
    if with_micros:
        micros = np.concatenate([log.micros for log in logs]) if logs else np.zeros(0)
        row.micros_per_step = float(micros.mean()) if micros.size else None


def _speedup(logs: Sequence[StepLog], cost: CostModel, batch: int) -> float:
    plain, spec = modeled_times(logs, cost, batch)
    return plain / spec if spec else 0.0


def run_benchmark(
    records: Sequence[TraceRecord],
    methods: Sequence[BenchMethod],
    cost: CostModel,
    *,
    k: int = 8,
    batch_sizes: Sequence[int] = BATCH_SIZES,
    oracle: bool = True,
    best_fixed: bool = True,
    engine_runs: bool = True,
    neural_alpha: float = 0.6,
    neural: str = "draft-model",
    progress: Progress | None = None,
    tuned_rules: dict[str, dict[int, dict]] | None = None,
    warm_records: Sequence[TraceRecord] | None = None,
) -> BenchResult:
    """Replay every method over every workload; a method that raises fails only its row.

    ``engine_runs``: also report the engine methods recorded in the traces (llama.cpp's
    n-gram drafters measured through llama-server on the same prompts). ``best_fixed``: add
    the best fixed (drafter, draft length) per batch size, chosen afterwards with hindsight.
    ``neural``: which trace column the records' ``neural`` was taken from, ``draft-model`` or
    ``head``; :func:`~specplug.lab.bench._neural.with_neural_column` makes the records, and the
    result keeps the name so its tables say which drafter they replayed. ``tuned_rules``: engine
    rules with a knob setting per batch size (:func:`~specplug.lab.bench._rules.tune_rules`),
    each replayed as a row of its own. ``warm_records``: also replay every composite warm (a row
    ``NAME (warm)``), starting from the statistics it learnt over these records of the same workload
    (the other split), as a server that has served such traffic a while starts
    (``learnt_state``).
    """
    groups = workloads_of(records)
    rows: list[Row] = []
    tick = progress or (lambda label: None)
    for workload, group in groups.items():
        done = [_run_one(workload, group, method, cost, k, batch_sizes, neural_alpha, tick) for method in methods]
        rows += done
        if warm_records is not None:
            warm_group = workloads_of(warm_records).get(workload, [])
            rows += [_run_warm(workload, group, warm_group, method, cost, k, batch_sizes, neural_alpha, tick)
                     for method in methods if is_composite(method)]
        if tuned_rules:
            rows += tuned_rows(workload, group, tuned_rules, cost, k, batch_sizes, neural_alpha=neural_alpha, progress=tick)
        if engine_runs:
            rows += engine_rows(workload, group, cost, batch_sizes)
        # the oracle and the best fixed choice take the drafters that ran cleanly on this workload
        # (an engine rule's own lookups stay out: the bars are over the drafters specplug composes)
        clean = [method for method, row in zip(methods, done) if row.status == "ok" and not method.rule]
        if best_fixed:
            rows.append(_run_best_fixed(workload, group, clean, cost, k, batch_sizes, neural_alpha, tick))
        if oracle:
            rows.append(_run_oracle(workload, group, clean, cost, k, batch_sizes, neural_alpha, tick))
            best = rows[-1]
            if best.status == "ok":
                for row in rows:
                    if row.workload == workload and row.status == "ok":
                        row.oracle_share = {
                            b: row.speedup[b] / best.speedup[b] for b in batch_sizes if best.speedup.get(b)
                        }
    names = [method.label for method in methods]
    if warm_records is not None:
        names += [warm_label(method.label) for method in methods if is_composite(method)]
    names += [tuned_label(name) for name in tuned_rules or {}]
    names += sorted({row.method for row in rows if row.source == "llama-server"})
    return BenchResult(
        cost_model=getattr(cost, "name", type(cost).__name__),
        k=k,
        batch_sizes=list(batch_sizes),
        workloads=list(groups),
        methods=names + ([BEST_FIXED] if best_fixed else []) + (["oracle"] if oracle else []),
        rows=rows,
        neural=neural,
    )


def _failed(row: Row, error: BaseException) -> Row:
    row.status = "failed"
    frame = traceback.extract_tb(error.__traceback__)[-1] if error.__traceback__ else None
    where = f" (at {frame.filename.rsplit('/', 1)[-1]}:{frame.lineno})" if frame else ""
    row.error = f"{type(error).__name__}: {error}{where}"
    row.speedup, row.oracle_share = {}, {}
    return row


def _run_one(
    workload: str,
    group: list[TraceRecord],
    method: BenchMethod,
    cost: CostModel,
    k: int,
    batch_sizes: Sequence[int],
    neural_alpha: float,
    tick: Progress,
) -> Row:
    row = Row(workload, method.label)
    try:
        # a throwaway instance replays the first two requests first (the second one reaches
        # cross-request caches), so one-time costs (numba compilation, worker start-up)
        # stay out of the microseconds per step
        throwaway = build(method, group[:2], cost, batch_sizes[0], neural_alpha)
        replay(throwaway.proposer, throwaway.leaves, group[:2], k)
        built = build(method, group, cost, batch_sizes[0], neural_alpha)
        if built.simulated_neural:
            row.notes = f"neural simulated (alpha {neural_alpha})"
        logs = replay(built.proposer, built.leaves, group, k)
        _figures(row, logs)
        tick(f"{workload}: {method.label}")
        for batch in batch_sizes:
            # a method whose drafts depend on the batch size is replayed again at each one
            if built.takes_batch_size and batch != batch_sizes[0]:
                again = build(method, group, cost, batch, neural_alpha)
                logs = replay(again.proposer, again.leaves, group, k)
            row.speedup[batch], row.request_times[batch] = speedup_of(logs, cost, batch)
        return row
    except Exception as error:  # noqa: BLE001 - a failing proposer fails its row, not the benchmark
        tick(f"{workload}: {method.label} FAILED")
        return _failed(row, error)


def warm_label(label: str) -> str:
    return f"{label} (warm)"


def _run_warm(
    workload: str,
    group: list[TraceRecord],
    warm_group: list[TraceRecord],
    method: BenchMethod,
    cost: CostModel,
    k: int,
    batch_sizes: Sequence[int],
    neural_alpha: float,
    tick: Progress,
) -> Row:
    """A composite replayed over ``group`` from the statistics it learnt replaying ``warm_group``
    first, at each batch size (what it learns depends on what it chose to draft). Only the pooled
    statistics carry over: the lookups start empty, so no request's text is seen twice."""
    row = Row(workload, warm_label(method.label))
    try:
        if not warm_group:
            raise ValueError(f"no requests of workload {workload!r} to learn from in the other split")
        with tempfile.TemporaryDirectory(prefix="specplug-warm-") as folder:
            for batch in batch_sizes:
                path = os.path.join(folder, f"{batch}.npz")
                learnt = replace(method, options={**method.options, "learnt_state": path})
                learning = build(learnt, warm_group, cost, batch, neural_alpha)
                replay(learning.proposer, learning.leaves, warm_group, k)
                learning.proposer.save_learnt_state()  # type: ignore[attr-defined]
                built = build(learnt, group, cost, batch, neural_alpha)
                logs = replay(built.proposer, built.leaves, group, k)
                row.speedup[batch], row.request_times[batch] = speedup_of(logs, cost, batch)
                if batch == batch_sizes[0]:
                    _figures(row, logs, with_micros=False)
        tick(f"{workload}: {row.method}")
        return row
    except Exception as error:  # noqa: BLE001 - a failing proposer fails its row, not the benchmark
        tick(f"{workload}: {row.method} FAILED")
        return _failed(row, error)


def _leaf_builders(
    group: list[TraceRecord], methods: Sequence[BenchMethod], cost: CostModel, batch: int, neural_alpha: float
) -> dict[str, Callable[[], Metered]]:
    """Every drafter that any method uses (the parts of composites included), once, by name:
    a function that builds a fresh one (a lookup's cache must not carry over between replays)."""
    builders: dict[str, Callable[[], Metered]] = {}
    for method in methods:
        for index, leaf in enumerate(build(method, group, cost, batch, neural_alpha).leaves):
            name = leaf.name if not method.peer else method.label

            def fresh(method: BenchMethod = method, index: int = index) -> Metered:
                return build(method, group, cost, batch, neural_alpha).leaves[index]

            builders.setdefault(name, fresh)
    return builders


def _run_best_fixed(
    workload: str,
    group: list[TraceRecord],
    methods: Sequence[BenchMethod],
    cost: CostModel,
    k: int,
    batch_sizes: Sequence[int],
    neural_alpha: float,
    tick: Progress,
) -> Row:
    """The best fixed choice of drafter and draft length at each batch size, chosen with
    hindsight: every drafter replayed alone at every length 1..k (and no draft, 1.0x); the
    bar a per-step choice has to clear, since it may take any of these at every step."""
    row = Row(workload, BEST_FIXED, source="hindsight")
    try:
        best: dict[int, tuple[float, str]] = {batch: (1.0, "none") for batch in batch_sizes}
        first_logs: list[StepLog] = []  # the figures of the row: the best choice at the first batch size
        for name, fresh in _leaf_builders(group, methods, cost, batch_sizes[0], neural_alpha).items():
            probe = fresh()
            longest = min(k, probe.max_draft_tokens or k)
            for length in range(1, longest + 1):
                leaf = fresh()
                logs = replay(leaf, [leaf], group, length)
                for batch in batch_sizes:
                    speedup = _speedup(logs, cost, batch)
                    if speedup > best[batch][0]:
                        best[batch] = (speedup, f"{name}@{length}")
                        if batch == batch_sizes[0]:
                            first_logs = logs
        if not first_logs:  # no draft pays at all: plain decoding, one token a step
            plain = oracle_replay([[] for _ in group], group, cost, batch_sizes[0])
            first_logs = plain
        _figures(row, first_logs, with_micros=False)
        row.speedup = {batch: value for batch, (value, _) in best.items()}
        row.notes = "; ".join(f"{batch}: {choice}" for batch, (_, choice) in best.items())
        tick(f"{workload}: {BEST_FIXED}")
        return row
    except Exception as error:  # noqa: BLE001
        return _failed(row, error)


def _run_oracle(
    workload: str,
    group: list[TraceRecord],
    methods: Sequence[BenchMethod],
    cost: CostModel,
    k: int,
    batch_sizes: Sequence[int],
    neural_alpha: float,
    tick: Progress,
) -> Row:
    row = Row(workload, "oracle", source="oracle", notes="best drafter per position")
    try:
        # every drafter that any method uses (the parts of hybrid and adaptive included), once
        leaves = [fresh() for fresh in _leaf_builders(group, methods, cost, batch_sizes[0], neural_alpha).values()]
        tables = [acceptance_table(leaves, record, k) for record in group]
        for batch in batch_sizes:
            logs = oracle_replay(tables, group, cost, batch)
            if batch == batch_sizes[0]:
                _figures(row, logs, with_micros=False)
            row.speedup[batch] = _speedup(logs, cost, batch)
        tick(f"{workload}: oracle")
        return row
    except Exception as error:  # noqa: BLE001
        return _failed(row, error)
