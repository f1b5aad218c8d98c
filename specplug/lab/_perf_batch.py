"""``specplug perf --batch``: one engine step for a whole batch, beside vLLM's NgramProposer on the same batch.

Every row of the batch is a request at the same context size (each its own slice of the
workload's stream), stepping as an engine would: each step, every row gains the accepted
prefix of its last draft plus the next true token, and every row is drafted for. specplug is
timed from the rows' new tokens to its drafts: building the :class:`~specplug.BatchStep` (flat new
tokens and offsets, as the engine layer builds it) and one :meth:`~specplug.Proposer.step_batch`. The
new tokens come as vLLM's model runner hands its drafter the sampled tokens: a list of ints per row,
made just before the call (``tolist`` of the sampler's output, the engine's work with or without a
drafter; untimed). vLLM's ``NgramProposer`` is
timed in its ``propose(k, sampled, num_tokens_no_spec, token_ids_cpu)`` with the same rows
(writing the new tokens into ``token_ids_cpu`` is the engine's work, outside the timing).
The subjects of one batch, context and workload run one after another, or (``interleave``) step in
turn, each on its own copy of the rows.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from specplug._batch import BatchDrafts, BatchStep
from specplug._drafts import accepted_prefix
from specplug._proposer import Proposer
from specplug._errors import InvalidOptionError
from specplug.engine import step_of_pieces
from specplug.lab.perf import build_workload

__all__ = ["BatchRow", "run_batch_perf"]

#: targets of the batch step: a lookup's µs per row at the largest batch
TARGET_US_PER_ROW = 5.0
#: a composite's step time, at most this many times the suffix lookup's on the same batch
TARGET_COMPOSITE_RATIO = 2.0
#: row r's context starts (r * ROW_OFFSET) % ROW_SPAN tokens into the stream: rows differ, and the
#: offsets stay within what the standard library's text stream holds (about 211k tokens) at 64k
ROW_OFFSET = 1543
ROW_SPAN = 1 << 16
#: suffix of a subject timed through the per-request API (``ngram/requests``)
PER_REQUEST = "/requests"


@dataclass
class BatchRow:
    proposer: str
    workload: str
    context_tokens: int
    batch: int
    steps: int
    median_us: float  # per engine step, median over the run's steps, then over repeats
    per_row_us: float
    spread_pct: float
    accepted_per_row_step: float
    ratio_to_vllm: float | None = None
    ratio_to_suffix: float | None = None
    #: this row's time over suffix's in each repeat (seconds apart, or stepping in turn): the ratio's noise, which
    #: the ratio of the medians above hides (drift between repeats moves both alike)
    suffix_ratios: list[float] | None = None


def _create_method(name: str) -> Proposer:
    import specplug
    from specplug.engine import StandInDrafter

    if name == "hybrid":  # no engine here: a neural part that never drafts, so the lookup side is what is timed
        return specplug.create("hybrid", neural=StandInDrafter())
    return specplug.create(name)


def _vllm_ngram(batch: int, max_len: int, k: int, min_n: int, max_n: int) -> Any:
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    from vllm.config import SpeculativeConfig
    from vllm.v1.spec_decode.ngram_proposer import NgramProposer

    speculative = SpeculativeConfig(
        method="ngram", num_speculative_tokens=k, prompt_lookup_min=min_n, prompt_lookup_max=max_n
    )
    config = SimpleNamespace(
        speculative_config=speculative,
        model_config=SimpleNamespace(max_model_len=max_len),
        scheduler_config=SimpleNamespace(max_num_seqs=batch),
        parallel_config=SimpleNamespace(tensor_parallel_size=1),
    )
    return NgramProposer(config)


def _rows(workload: str, size: int, batch: int, continuation: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    out = []
    for row in range(batch):
        made = build_workload(workload, size, continuation, seed=seed * 1000 + row, offset=(row * ROW_OFFSET) % ROW_SPAN)
        out.append((made.context, made.continuation))
    return out


class _BatchSubject:
    """A proposer on its own copy of the rows, one engine step at a time through ``step_batch``."""

    def __init__(self, proposer: Proposer, rows: list[tuple[np.ndarray, np.ndarray]], k: int) -> None:
        self.proposer, self.rows = proposer, rows
        self.ids = list(range(len(rows)))
        proposer.step_batch(BatchStep(self.ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                                      [(row, rows[row][0]) for row in self.ids]))
        self.position = [0] * len(rows)
        self.new: list[np.ndarray] = [np.empty(0, np.int64)] * len(rows)
        self.limits = np.full(len(rows), k, dtype=np.int64)
        self.accepted = 0

    def step(self) -> int:
        # the new tokens as vLLM's sampler hands them to a drafter: lists of ints, made just before its call
        sampled = [tokens.tolist() for tokens in self.new]
        t0 = time.perf_counter_ns()
        got = self.proposer.step_batch(step_of_pieces(self.ids, sampled, self.limits))  # as the engine layer builds it
        ns = time.perf_counter_ns() - t0
        self.accepted += _advance(self.rows, got, self.position, self.new)
        return ns

    def close(self) -> None:
        self.proposer.step_batch(BatchStep([], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64), (),
                                           self.ids))


def _advance(rows: list[tuple[np.ndarray, np.ndarray]], got: BatchDrafts, position: list[int], new: list[np.ndarray]) -> int:
    """Verify each row's draft against its true continuation: ``new[row]`` becomes the tokens the
    next step brings (the accepted prefix and one more), ``position[row]`` moves past them. The
    accepted tokens of all rows."""
    lengths, drafted = got.lengths.tolist(), got.tokens.tolist()
    return _accept(rows, [tokens[:length] for tokens, length in zip(drafted, lengths)], position, new)


def _accept(rows: list[tuple[np.ndarray, np.ndarray]], drafts: list, position: list[int], new: list[np.ndarray]) -> int:
    """:func:`_advance` for drafts given as one token sequence per row."""
    accepted_total = 0
    for row, (_, truth) in enumerate(rows):
        accepted = accepted_prefix(drafts[row], truth[position[row] :])
        new[row] = truth[position[row] : position[row] + accepted + 1]
        position[row] += accepted + 1
        accepted_total += accepted
    return accepted_total


class _PerRequestSubject:
    """The same steps through the per-request API (``extend`` then ``propose`` per row), for the
    batch path's own comparison: a batch step should cost no more than its rows' calls."""

    def __init__(self, proposer: Proposer, rows: list[tuple[np.ndarray, np.ndarray]], k: int) -> None:
        self.proposer, self.rows, self.k = proposer, rows, k
        self.ids = list(range(len(rows)))
        for row in self.ids:
            proposer.start(row, rows[row][0])
        self.position = [0] * len(rows)
        self.new: list[np.ndarray] = [np.empty(0, np.int64)] * len(rows)
        self.accepted = 0

    def step(self) -> int:
        proposer, new = self.proposer, self.new
        t0 = time.perf_counter_ns()
        drafts = []
        for row in self.ids:
            if len(new[row]):
                proposer.extend(row, new[row])
            drafts.append(proposer.propose(row, self.k).tokens)
        ns = time.perf_counter_ns() - t0
        self.accepted += _accept(self.rows, drafts, self.position, new)
        return ns

    def close(self) -> None:
        for row in self.ids:
            self.proposer.stop(row)


class _VllmSubject:
    """vLLM's ``NgramProposer`` on the same rows: the new tokens are written into its
    ``token_ids_cpu`` between its timed ``propose`` calls, as the engine does."""

    def __init__(self, proposer: Any, rows: list[tuple[np.ndarray, np.ndarray]], k: int, max_len: int) -> None:
        self.proposer, self.rows, self.k = proposer, rows, k
        self.token_ids = np.zeros((len(rows), max_len), dtype=np.int32)
        self.lengths = np.zeros(len(rows), dtype=np.int32)
        for row, (context, _) in enumerate(rows):
            self.token_ids[row, : len(context)] = context
            self.lengths[row] = len(context)
        self.position = [0] * len(rows)
        self.sampled = [[0]] * len(rows)
        self.accepted = 0

    def step(self) -> int:
        t0 = time.perf_counter_ns()
        drafts = self.proposer.propose(self.k, self.sampled, self.lengths, self.token_ids)
        ns = time.perf_counter_ns() - t0
        for row, (_, truth) in enumerate(self.rows):
            at, length = self.position[row], self.lengths[row]
            accepted = accepted_prefix(drafts[row], truth[at:])
            chunk = truth[at : at + accepted + 1]
            self.token_ids[row, length : length + len(chunk)] = chunk
            self.lengths[row] += len(chunk)
            self.position[row] += len(chunk)
            self.accepted += accepted
        return ns

    def close(self) -> None:
        pass


def run_batch_perf(
    batches: Sequence[int],
    contexts: Sequence[int],
    *,
    workloads: Sequence[str] = ("code-edit", "text"),
    methods: Sequence[str] = ("ngram", "suffix", "hybrid", "adaptive"),
    vllm: bool = True,
    steps: int = 200,
    repeats: int = 3,
    max_tokens: int = 8,
    progress: Callable[[str], None] | None = None,
    per_request_at: Sequence[int] = (1,),
    interleave: bool = False,
) -> list[BatchRow]:
    """Per engine step, every method (and vLLM's NgramProposer) on every batch size, context and workload."""
    if not batches or min(batches) < 1:
        raise InvalidOptionError(f"batch sizes {list(batches)}: give sizes of at least 1")
    say = progress or (lambda _message: None)
    import specplug

    ngram = specplug.create("ngram").options
    continuation = steps * (max_tokens + 1) + 1
    max_len = max(contexts) + continuation + 16
    subjects = list(methods) + (["vllm-ngram"] if vllm else [])
    # at the batch sizes in per_request_at, each lookup through the per-request API too ("ngram/requests")
    per_request = [f"{name}{PER_REQUEST}" for name in methods if name in ("ngram", "suffix")]
    times: dict[tuple[str, str, int, int], list[tuple[float, int, int]]] = {}
    for repeat in range(repeats):
        for workload in workloads:
            for size in contexts:
                for batch in batches:
                    rows = _rows(workload, size, batch, continuation, repeat)
                    timed = subjects + (per_request if batch in per_request_at else [])
                    say(f"repeat {repeat + 1}/{repeats}: {', '.join(timed)} at batch {batch}, {workload}, {size} tokens")
                    got = _timed(timed, rows, steps, max_tokens, max_len, ngram, interleave)
                    for name, (step_ns, accepted) in got.items():
                        times.setdefault((name, workload, size, batch), []).append(
                            (statistics.median(step_ns) / 1000, accepted, len(step_ns))
                        )
    out: list[BatchRow] = []
    for (name, workload, size, batch), runs in times.items():
        medians = [run[0] for run in runs]
        median = statistics.median(medians)
        out.append(
            BatchRow(
                name, workload, size, batch, sum(run[2] for run in runs), median, median / batch,
                100 * (max(medians) - min(medians)) / median if median else 0.0,
                sum(run[1] for run in runs) / (batch * sum(run[2] for run in runs)),
            )
        )
    index = {(row.proposer, row.workload, row.context_tokens, row.batch): row for row in out}
    for row in out:
        key = (row.workload, row.context_tokens, row.batch)
        peer, suffix = index.get(("vllm-ngram", *key)), index.get(("suffix", *key))
        row.ratio_to_vllm = row.median_us / peer.median_us if peer and row.proposer != "vllm-ngram" else None
        if suffix and row.proposer != "suffix":
            row.ratio_to_suffix = row.median_us / suffix.median_us
            pairs = zip(times[(row.proposer, *key)], times[("suffix", *key)])
            row.suffix_ratios = [mine[0] / theirs[0] for mine, theirs in pairs]
    return out


def _subject(name: str, rows: list[tuple[np.ndarray, np.ndarray]], k: int, max_len: int, ngram: Any) -> Any:
    """``name`` (a method, ``<lookup>/requests`` or ``vllm-ngram``) started on ``rows``."""
    if name == "vllm-ngram":
        return _VllmSubject(_vllm_ngram(len(rows), max_len, k, ngram.min_n, ngram.max_n), rows, k, max_len)
    if name.endswith(PER_REQUEST):
        return _PerRequestSubject(_create_method(name.removesuffix(PER_REQUEST)), rows, k)
    return _BatchSubject(_create_method(name), rows, k)


def _timed(
    names: Sequence[str], rows: list[tuple[np.ndarray, np.ndarray]], steps: int, k: int, max_len: int, ngram: Any,
    interleave: bool,
) -> dict[str, tuple[list[int], int]]:
    """Each subject's step times and accepted tokens, each on its own copy of the same rows: one
    after another, each started just before its steps (its state warm in the caches, as the
    earlier rounds measured), or with ``interleave`` all started, then taking turns step by step
    (the order rotated each step), so that drift on a shared machine, which lasts seconds, hits
    them all alike, and each step finds the caches as the others left them."""
    out: dict[str, tuple[list[int], int]] = {}
    if not interleave:
        for name in names:
            subject = _subject(name, rows, k, max_len, ngram)
            try:
                step_ns = [subject.step() for _ in range(steps)]
            finally:
                subject.close()
            out[name] = (step_ns, subject.accepted)
        return out
    subjects: dict[str, Any] = {}
    try:
        for name in names:
            subjects[name] = _subject(name, rows, k, max_len, ngram)
        times: dict[str, list[int]] = {name: [] for name in names}
        for index in range(steps):
            for name in names[index % len(names) :] + names[: index % len(names)]:
                times[name].append(subjects[name].step())
    finally:
        for subject in subjects.values():
            subject.close()
    return {name: (times[name], subjects[name].accepted) for name in names}


def rows_to_json(rows: Sequence[BatchRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]
