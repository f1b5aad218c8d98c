"""What a benchmark reports: one row per method and workload, and the whole result.

Apart from the runner so that every source of rows (replay, the oracle, llama-server's own
counters in ``_llamacpp``) builds them without importing the runner.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = ["BenchResult", "Row"]


@dataclass
class Row:
    """One method on one workload."""

    workload: str
    method: str
    status: str = "ok"  # ok | failed
    error: str | None = None
    source: str = "replay"  # replay | llama-server | oracle
    requests: int = 0
    tokens: int = 0  # output tokens after the first (the ones decoding steps produce)
    steps: int = 0
    tokens_per_step: float = 0.0  # mean tokens per verification step (accepted + the target's own)
    accepted_per_step: float = 0.0
    acceptance_rate: float | None = None  # accepted / drafted tokens
    drafted_share: float | None = None  # steps with a non-empty draft
    micros_per_step: float | None = None  # proposer CPU time per step (propose + extend)
    speedup: dict[int, float] = field(default_factory=dict)  # modeled, by batch size
    oracle_share: dict[int, float] = field(default_factory=dict)  # speedup / oracle speedup
    notes: str = ""
    #: by batch size, each request's modeled (plain, speculative) time [requests, 2], for the
    #: sampling interval of a gap between rows (``_noise``); not written to JSON
    request_times: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class BenchResult:
    cost_model: str
    k: int
    batch_sizes: list[int]
    workloads: list[str]
    methods: list[str]
    rows: list[Row]
    #: the trace column the neural drafter replayed (``specplug bench --neural``)
    neural: str = "draft-model"

    def row(self, workload: str, method: str) -> Row:
        for row in self.rows:
            if row.workload == workload and row.method == method:
                return row
        raise KeyError((workload, method))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BenchResult:
        """The result that :meth:`to_json` wrote (to redraw plots or tables without a rerun)."""
        rows = []
        for item in data["rows"]:
            item = dict(item)
            item["speedup"] = {int(b): v for b, v in item["speedup"].items()}
            item["oracle_share"] = {int(b): v for b, v in item["oracle_share"].items()}
            rows.append(Row(**item))
        return cls(
            data["cost_model"], data["k"], data["batch_sizes"], data["workloads"], data["methods"], rows,
            data.get("neural", "draft-model"),  # results written before the choice existed replayed the draft model
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        for row in data["rows"]:
            del row["request_times"]
            row["speedup"] = {str(b): v for b, v in row["speedup"].items()}
            row["oracle_share"] = {str(b): v for b, v in row["oracle_share"].items()}
        return data
