"""Variants of the cost-aware hybrid against issue 16's targets, each as both composites.

    python scripts/bench_variants.py FULL.json QUICK.json

QUICK is a `specplug bench --json` run of `hybrid:OPTIONS` rows (e.g. `-m hybrid -m hybrid:call_bound=0.03
--no-oracle --no-best-fixed`) on the same traces as FULL (a full run, docs/bench/targets-SPLIT.json).
adaptive over suffix and neural makes the cost-aware hybrid's choice on the same parts (docs/benchmarks.md),
so each variant's rows stand for both `hybrid` and `adaptive:candidates=suffix+neural`, laid over FULL
(`bench_targets.laid_over`). Per variant: the cells that miss a target and the largest shortfall (as
`bench_targets.py` counts them), the sum of adaptive's changes over every cell against FULL, the cells
newly met and newly missed, and every cell that moved by 0.01x or more.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_targets as targets  # noqa: E402


def _verdicts(text: str) -> dict[tuple[str, str], str]:
    # (workload, batch) -> the targets column of bench_targets.table's rows
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| workload")]
    return {tuple(cell.strip() for cell in line.split("|")[1:3]): line.rsplit("|", 2)[-2].strip() for line in rows}


def main() -> None:
    full, quick = (json.load(open(path, encoding="utf-8")) for path in sys.argv[1:3])
    base, base_verdicts = targets._speedups(full), _verdicts(targets.table(full))
    for method in dict.fromkeys(row["method"] for row in quick["rows"]):
        rows = [{**row, "method": name} for row in quick["rows"] if row["method"] == method
                for name in (targets.HYBRID, targets.ADAPTIVE)]
        data = targets.laid_over(full, {**quick, "rows": rows})
        text, now = targets.table(data), targets._speedups(data)
        total, moved = 0.0, []
        for (workload, name), speedups in base.items():
            if name != targets.ADAPTIVE:
                continue
            for batch, before in speedups.items():
                after = now[(workload, name)][batch]
                total += after - before
                if abs(after - before) >= 0.01:
                    moved.append(f"{workload}@{batch} {before:.3f}->{after:.3f}")
        verdicts = _verdicts(text)
        met = [f"{w}@{b}" for (w, b), v in verdicts.items() if base_verdicts[(w, b)] != "met" and v == "met"]
        missed = [f"{w}@{b} ({v})" for (w, b), v in verdicts.items() if base_verdicts[(w, b)] == "met" and v != "met"]
        print(f"== {method}: {text.splitlines()[-1]}  sum of adaptive's changes {total:+.3f}")
        print("   newly met:", ", ".join(met) or "-")
        print("   newly missed:", ", ".join(missed) or "-")
        print("   moved by 0.01x or more:", "; ".join(moved) or "-")


if __name__ == "__main__":
    main()
