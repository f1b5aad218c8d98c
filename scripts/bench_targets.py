"""Issue 16's targets, read from `specplug bench --json` results: one Markdown table per file.

    python scripts/bench_targets.py [--batches 1,32,128] [--before OLD.json] [--over FULL.json] RESULTS.json [more.json ...]

Per workload and batch size: each single drafter, the plain and the cost-aware hybrid, adaptive,
the best fixed (drafter, length) chosen with hindsight and the oracle, then whether adaptive >=
hybrid >= the best single drafter, the cost-aware hybrid >= the plain one, adaptive within 0.02x of
the best fixed choice, adaptive >= 1.0x, and adaptive's share of the oracle. ``--before``: the
hybrids' and adaptive's figures of an earlier run of the same command, shown as ``before → now``.
``--over``: RESULTS holds only some methods and batch sizes (a quick run of the composites, e.g.
``-m hybrid -m adaptive:candidates=suffix+neural --batch-sizes 1,32,128 --no-oracle --no-best-fixed``),
laid over a full run of the same traces that gives the other rows (single drafters, best fixed, oracle).
"""

from __future__ import annotations

import argparse
import json

SINGLES = ("ngram", "suffix", "neural")
HYBRID, PLAIN_HYBRID = "hybrid", "hybrid:cost=null"
ADAPTIVE = "adaptive:candidates=suffix+neural"
TOLERANCE = 0.02


def laid_over(full: dict, quick: dict) -> dict:
    """``full`` with each (workload, method, batch) figure that ``quick`` has replaced by it."""
    figures = _speedups(quick)
    rows = []
    for row in full["rows"]:
        replaced = figures.get((row["workload"], row["method"]))
        rows.append({**row, "speedup": {**row["speedup"], **replaced}} if replaced else row)
    return {**full, "rows": rows}


def _speedups(data: dict) -> dict[tuple[str, str], dict[str, float]]:
    return {(row["workload"], row["method"]): row["speedup"] for row in data["rows"] if row["status"] == "ok"}


def table(data: dict, batches: list[int] | None = None, before: dict | None = None) -> str:
    now, old = _speedups(data), _speedups(before) if before else {}
    lines = [
        "| workload | batch | ngram | suffix | neural | hybrid (plain) | hybrid (cost) | adaptive | best fixed (hindsight) | oracle | adaptive/oracle | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    misses = cells = 0
    worst = 0.0
    for workload in data["workloads"]:
        for batch in batches or data["batch_sizes"]:
            def x(method: str) -> float | None:
                return now.get((workload, method), {}).get(str(batch))

            def shown(method: str) -> str:
                value, earlier = x(method), old.get((workload, method), {}).get(str(batch))
                if value is None:
                    return "-"
                return f"{earlier:.2f} → {value:.2f}" if earlier is not None else f"{value:.2f}"

            singles = [x(name) for name in SINGLES]
            best_single = max(value for value in singles if value is not None)
            hybrid, plain, adaptive, fixed, oracle = x(HYBRID), x(PLAIN_HYBRID), x(ADAPTIVE), x("best fixed"), x("oracle")
            failed, shortfalls = [], []

            def miss(text: str, by: float) -> None:
                failed.append(text)
                shortfalls.append(by)

            if adaptive < hybrid:
                miss("adaptive < hybrid", hybrid - adaptive)
            if hybrid < best_single:
                miss(f"hybrid < single by {best_single - hybrid:.3f}", best_single - hybrid)
            if plain is not None and hybrid < plain:
                miss(f"cost < plain hybrid by {plain - hybrid:.3f}", plain - hybrid)
            if fixed is not None and adaptive < fixed - TOLERANCE:
                miss(f"best fixed - {fixed - adaptive:.3f}", fixed - adaptive)
            if adaptive < 1.0:
                miss("< 1.0x", 1.0 - adaptive)
            worst = max(worst, *shortfalls, 0.0)
            misses += bool(failed)
            cells += 1
            numbers = [f"{value:.2f}" if value is not None else "-" for value in singles]
            numbers += [shown(PLAIN_HYBRID), shown(HYBRID), shown(ADAPTIVE)]
            numbers += [f"{value:.2f}" if value is not None else "-" for value in (fixed, oracle)]
            share = f"{100 * adaptive / oracle:.0f}%" if oracle else "-"
            lines.append(f"| {workload} | {batch} | " + " | ".join(numbers) + f" | {share} | {', '.join(failed) or 'met'} |")
    lines.append("")
    lines.append(f"{misses} of {cells} cells miss a target" + (f" (the largest shortfall: {worst:.3f}x)." if misses else "."))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--batches", help="only these batch sizes, comma-separated")
    parser.add_argument("--before", help="an earlier run of the same command (before → now)")
    parser.add_argument("--over", help="a full run of the same traces that RESULTS (a quick run of some methods) is laid over")
    parser.add_argument("--adaptive", help="the label of the adaptive row (default: the bench's adaptive over suffix and neural)")
    args = parser.parse_args()
    if args.adaptive:
        globals()["ADAPTIVE"] = args.adaptive
    batches = [int(b) for b in args.batches.split(",")] if args.batches else None
    before = json.load(open(args.before, encoding="utf-8")) if args.before else None
    full = json.load(open(args.over, encoding="utf-8")) if args.over else None
    for path in args.results:
        with open(path, encoding="utf-8") as stream:
            data = json.load(stream)
        if full is not None:
            data = laid_over(full, data)
        print(f"**{path}** (cost model `{data['cost_model']}`, k = {data['k']})\n")
        print(table(data, batches, before))
        print()


if __name__ == "__main__":
    main()
