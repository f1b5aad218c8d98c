"""``specplug perf --batch``: one engine step for a whole batch, beside vLLM's NgramProposer on the same batch.

Every row of the batch is a request at the same context size (each its own slice of the
workload's stream), stepping as an engine would: each step, every row gains the accepted
prefix of its last draft plus the next true token, and every row is drafted for. specplug is
timed from the rows' new tokens to its drafts: building the :class:`~specplug.BatchStep` (flat new
tokens and offsets, as the engine layer builds it) and one :meth:`~specplug.Proposer.step_batch`. vLLM's ``NgramProposer`` is
timed in its ``propose(k, sampled, num_tokens_no_spec, token_ids_cpu)`` with the same rows
(writing the new tokens into ``token_ids_cpu`` is the engine's work, outside the timing).
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

from specplug._contract import BatchDrafts, BatchStep, Proposer, accepted_prefix
from specplug._errors import InvalidOptionError
from specplug.engine import step_of_pieces
from specplug.lab.perf import build_workload

__all__ = ["BatchRow", "run_batch_perf"]

#: targets of the batch step (issue 11): a lookup's µs per row at the largest batch
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
    #: this row's time over suffix's in each repeat (the two ran seconds apart): the ratio's noise, which
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


def _time_method(proposer: Proposer, rows: list[tuple[np.ndarray, np.ndarray]], steps: int, k: int) -> tuple[list[int], int]:
    batch = len(rows)
    ids = list(range(batch))
    proposer.step_batch(BatchStep(ids[:0], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                                  [(row, rows[row][0]) for row in ids]))
    position = [0] * batch
    new: list[np.ndarray] = [np.empty(0, np.int64)] * batch
    limits = np.full(batch, k, dtype=np.int64)
    clock = time.perf_counter_ns
    times, accepted_total = [], 0
    for _ in range(steps):
        t0 = clock()
        got = proposer.step_batch(step_of_pieces(ids, new, limits))  # as the engine layer builds it
        times.append(clock() - t0)
        accepted_total += _advance(rows, got, position, new)
    proposer.step_batch(BatchStep([], np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64), (), ids))
    return times, accepted_total


def _advance(rows: list[tuple[np.ndarray, np.ndarray]], got: BatchDrafts, position: list[int], new: list[np.ndarray]) -> int:
    """Verify each row's draft against its true continuation: ``new[row]`` becomes the tokens the
    next step brings (the accepted prefix and one more), ``position[row]`` moves past them. The
    accepted tokens of all rows."""
    lengths, drafted = got.lengths.tolist(), got.tokens.tolist()
    accepted_total = 0
    for row, (_, truth) in enumerate(rows):
        accepted = accepted_prefix(drafted[row][: lengths[row]], truth[position[row] :])
        new[row] = truth[position[row] : position[row] + accepted + 1]
        position[row] += accepted + 1
        accepted_total += accepted
    return accepted_total


def _time_per_request(proposer: Proposer, rows: list[tuple[np.ndarray, np.ndarray]], steps: int, k: int) -> tuple[list[int], int]:
    """The same steps through the per-request API (``extend`` then ``propose`` per row), for the
    batch path's own comparison: a batch step should cost no more than its rows' calls."""
    batch = len(rows)
    ids = list(range(batch))
    for row in ids:
        proposer.start(row, rows[row][0])
    position = [0] * batch
    new: list[np.ndarray] = [np.empty(0, np.int64)] * batch
    clock = time.perf_counter_ns
    times, accepted_total = [], 0
    for _ in range(steps):
        t0 = clock()
        drafts = []
        for row in ids:
            if len(new[row]):
                proposer.extend(row, new[row])
            drafts.append(proposer.propose(row, k).tokens)
        times.append(clock() - t0)
        for row in ids:
            truth = rows[row][1]
            accepted = accepted_prefix(drafts[row], truth[position[row] :])
            new[row] = truth[position[row] : position[row] + accepted + 1]
            position[row] += accepted + 1
            accepted_total += accepted
    for row in ids:
        proposer.stop(row)
    return times, accepted_total


def _time_vllm(proposer: Any, rows: list[tuple[np.ndarray, np.ndarray]], steps: int, k: int, max_len: int) -> tuple[list[int], int]:
    batch = len(rows)
    token_ids = np.zeros((batch, max_len), dtype=np.int32)
    lengths = np.zeros(batch, dtype=np.int32)
    for row, (context, _) in enumerate(rows):
        token_ids[row, : len(context)] = context
        lengths[row] = len(context)
    position = [0] * batch
    clock = time.perf_counter_ns
    times, accepted_total = [], 0
    sampled = [[0]] * batch
    for _ in range(steps):
        t0 = clock()
        drafts = proposer.propose(k, sampled, lengths, token_ids)
        times.append(clock() - t0)
        for row in range(batch):
            truth = rows[row][1]
            accepted = accepted_prefix(drafts[row], truth[position[row] :])
            chunk = truth[position[row] : position[row] + accepted + 1]
            token_ids[row, lengths[row] : lengths[row] + len(chunk)] = chunk
            lengths[row] += len(chunk)
            position[row] += len(chunk)
            accepted_total += accepted
    return times, accepted_total


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
                    for name in timed:  # interleaved: drift on a shared machine hits all alike
                        say(f"repeat {repeat + 1}/{repeats}: {name} at batch {batch}, {workload}, {size} tokens")
                        if name == "vllm-ngram":
                            peer = _vllm_ngram(batch, max_len, max_tokens, ngram.min_n, ngram.max_n)
                            step_ns, accepted = _time_vllm(peer, rows, steps, max_tokens, max_len)
                        elif name.endswith(PER_REQUEST):
                            step_ns, accepted = _time_per_request(
                                _create_method(name.removesuffix(PER_REQUEST)), rows, steps, max_tokens
                            )
                        else:
                            step_ns, accepted = _time_method(_create_method(name), rows, steps, max_tokens)
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


def rows_to_json(rows: Sequence[BatchRow]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]
