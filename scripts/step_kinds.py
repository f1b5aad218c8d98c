"""A workload's replay steps by the drafters charged, per method: how many steps, their mean drafted
and mean accepted tokens, and the modeled speedup (cost model `llama-3.1-8b-h100`, k = 8).

    python scripts/step_kinds.py COLUMN WORKLOAD BATCH METHOD [METHOD ...]

COLUMN is the traces' neural column (`draft-model` or `head`, as `specplug bench --neural`); METHOD a
`specplug bench -m` spec (e.g. `hybrid:explore=0`). All requests of the workload in the shipped traces
(no tune/validation split). Prints `lookup: steps / drafted / accepted; lookup+neural: ...` per method.
"""

from __future__ import annotations

import collections
import glob
import sys

from specplug.cost import cost_model
from specplug.lab.bench._methods import build, parse_method
from specplug.lab.bench._neural import with_neural_column
from specplug.lab.bench._replay import kind_names, replay
from specplug.lab.bench._run import _speedup
from specplug.lab.trace import read_traces


def main() -> None:
    column, workload, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    paths = sorted(glob.glob("specplug/lab/data/traces/*.jsonl"))
    records = [record for path in paths for record in with_neural_column(read_traces(path), column, path)]
    group = [record for record in records if record.workload == workload]
    model = cost_model("llama-3.1-8b-h100")
    for spec in sys.argv[4:]:
        built = build(parse_method(spec), group, model, batch, 0.6)
        logs = replay(built.proposer, built.leaves, group, 8)
        kinds: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])  # steps, drafted, accepted
        for log in logs:
            for drafted, accepted, bits in zip(log.drafted.tolist(), log.accepted.tolist(), log.kinds.tolist()):
                counts = kinds["+".join(kind_names(bits)) or "none"]
                counts[0] += 1
                counts[1] += drafted
                counts[2] += accepted
        shown = "; ".join(f"{name}: {n} / {d / n:.2f} / {a / n:.2f}" for name, (n, d, a) in sorted(kinds.items()))
        print(f"{spec:32s} x{_speedup(logs, model, batch):.3f}", shown)


if __name__ == "__main__":
    main()
