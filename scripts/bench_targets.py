"""Issue 16's targets, read from `specplug bench --json` results: one Markdown table per file.

    python scripts/bench_targets.py docs/bench/targets-tune.json [more.json ...]

Per workload and batch size: each single drafter, the plain and the cost-aware hybrid, adaptive,
the best fixed (drafter, length) chosen with hindsight and the oracle, then whether adaptive >=
hybrid >= the best single drafter, adaptive within 0.02x of the best fixed choice, adaptive >= 1.0x,
and adaptive's share of the oracle.
"""

from __future__ import annotations

import json
import sys

SINGLES = ("ngram", "suffix", "neural")
HYBRID, PLAIN_HYBRID = "hybrid", "hybrid:cost=null"
ADAPTIVE = "adaptive:candidates=suffix+neural"
TOLERANCE = 0.02


def table(data: dict) -> str:
    rows = {(row["workload"], row["method"]): row for row in data["rows"] if row["status"] == "ok"}
    lines = [
        "| workload | batch | ngram | suffix | neural | hybrid (plain) | hybrid (cost) | adaptive | best fixed (hindsight) | oracle | adaptive/oracle | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    misses = 0
    for workload in data["workloads"]:
        for batch in data["batch_sizes"]:
            def x(method: str) -> float | None:
                row = rows.get((workload, method))
                return None if row is None else row["speedup"].get(str(batch))

            singles = [x(name) for name in SINGLES]
            best_single = max(value for value in singles if value is not None)
            hybrid, plain, adaptive, fixed, oracle = x(HYBRID), x(PLAIN_HYBRID), x(ADAPTIVE), x("best fixed"), x("oracle")
            failed = []
            if adaptive < hybrid:
                failed.append("adaptive<hybrid")
            if hybrid < best_single:
                failed.append("hybrid<single")
            if plain is not None and hybrid < plain:
                failed.append("cost<plain hybrid")
            if fixed is not None and adaptive < fixed - TOLERANCE:
                failed.append(f"fixed-{fixed - adaptive:.2f}")
            if adaptive < 1.0:
                failed.append("<1.0x")
            misses += bool(failed)
            cells = [f"{value:.2f}" if value is not None else "-" for value in (*singles, plain, hybrid, adaptive, fixed, oracle)]
            share = f"{100 * adaptive / oracle:.0f}%" if oracle else "-"
            lines.append(f"| {workload} | {batch} | " + " | ".join(cells) + f" | {share} | {', '.join(failed) or 'met'} |")
    lines.append("")
    lines.append(f"{misses} of {len(data['workloads']) * len(data['batch_sizes'])} cells miss a target.")
    return "\n".join(lines)


if __name__ == "__main__":
    paths = sys.argv[1:]
    if paths and paths[0].startswith("--adaptive="):  # another adaptive row of the results, by its label
        ADAPTIVE = paths.pop(0).split("=", 1)[1]
    for path in paths:
        with open(path, encoding="utf-8") as stream:
            print(f"**{path}** (cost model `{(data := json.load(stream))['cost_model']}`, k = {data['k']})\n")
        print(table(data))
        print()
