"""Neural drafters for replay: backed by a trace's measured acceptance, or simulated.

An engine's MTP/EAGLE head cannot run here, so replay stands it in with its recorded
behaviour: at output position ``i`` it drafts ``accepted[i]`` right tokens followed by
wrong ones (``k`` tokens in all), which is exactly what verification saw from it. Where a
trace has no neural measurement, a simulated drafter accepts each token with probability
``alpha`` (fixed per request and position, so every method sees the same draws).

A trace may hold two neural columns (:mod:`specplug.lab.trace`): ``neural``, a draft model
(in the shipped traces a stand-in, SmolLM2 requantized to Q2_K), and ``neural_head``, an EAGLE
head. :func:`with_neural_column` picks the one a replay uses (``specplug bench --neural``).
"""

from __future__ import annotations

import hashlib

import numpy as np

from specplug._drafts import Draft, RequestId
from specplug._proposer import Proposer
from specplug._errors import InvalidOptionError
from specplug.lab.trace import TraceRecord

__all__ = ["NEURAL_COLUMNS", "TraceNeuralProposer", "with_neural_column"]

#: ``specplug bench --neural`` choices: the trace column each replays
NEURAL_COLUMNS = {"draft-model": "neural", "head": "neural_head"}


def with_neural_column(records: list[TraceRecord], choice: str, source: str = "") -> list[TraceRecord]:
    """``records`` whose ``neural`` column is the one ``choice`` names (see :data:`NEURAL_COLUMNS`).

    ``draft-model`` returns them as they are (a record without the column gets the simulated
    drafter); ``head`` needs every record to have a ``neural_head`` column, and the error names
    ``source`` (the trace file) and the first record without one.
    """
    if choice not in NEURAL_COLUMNS:
        raise InvalidOptionError(f"--neural {choice!r} is not valid; valid: {', '.join(NEURAL_COLUMNS)}")
    column = NEURAL_COLUMNS[choice]
    if column == "neural":
        return list(records)
    for record in records:
        if getattr(record, column) is None:
            where = f"{source}: " if source else ""
            raise InvalidOptionError(
                f"{where}record {record.id} has no {column} column, which --neural {choice} replays; "
                f"fill it with `specplug trace --refill-neural IN.jsonl --out OUT.jsonl --neural-head DIR`, "
                f"or use --neural draft-model (valid: {', '.join(NEURAL_COLUMNS)})"
            )
    return [record.model_copy(update={"neural": getattr(record, column)}) for record in records]


def _simulated(record_id: str, length: int, k: int, alpha: float) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(record_id.encode()).digest()[:8], "little")
    rng = np.random.default_rng(seed)
    return np.minimum(rng.geometric(1.0 - alpha, size=length) - 1, k)


class TraceNeuralProposer(Proposer):
    """Replays each request's neural acceptance; requests are started by their trace id."""

    name = "neural"
    draft_kind = "neural"

    def __init__(self, records: list[TraceRecord], *, k: int = 6, alpha: float = 0.6) -> None:
        super().__init__()
        self._records = {record.id: record for record in records}
        self._plans: dict[RequestId, tuple[np.ndarray, np.ndarray, int]] = {}
        self._positions: dict[RequestId, int] = {}
        self.default_k, self.alpha = k, alpha
        self.simulated = any(record.neural is None for record in records)
        # the head's fixed draft length: the traces' k (the simulated default where none)
        self.max_draft_tokens = max((r.neural.k if r.neural else k) for r in records) if records else k

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        record = self._records.get(request_id)  # type: ignore[arg-type]
        if record is None:
            raise KeyError(f"request {request_id!r} is not in the traces this neural drafter replays")
        output = np.asarray(record.output_ids, dtype=np.int64)
        if record.neural is not None:
            plan = (output, np.asarray(record.neural.accepted, dtype=np.int64), record.neural.k)
        else:
            plan = (output, _simulated(record.id, len(output), self.default_k, self.alpha), self.default_k)
        self._plans[request_id] = plan
        self._positions[request_id] = 0

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        output, accepted, k = self._plans[request_id]
        position = self._positions[request_id]
        if position >= len(output):
            return Draft((), self.name)
        width = min(max_tokens, k)
        good = min(int(accepted[position]), width, len(output) - position)
        tokens = output[position : position + good].tolist()
        if good < width and position + good < len(output):
            # a head drafts all of its tokens: the first wrong one ends what counts, the rest
            # are verified (and paid for) all the same
            wrong = int(output[position + good]) + 1
            tokens += [wrong] * (min(width, len(output) - position) - good)
        return Draft(tuple(tokens), self.name)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        self._positions[request_id] += len(tokens)

    def _stop(self, request_id: RequestId) -> None:
        del self._plans[request_id], self._positions[request_id]
