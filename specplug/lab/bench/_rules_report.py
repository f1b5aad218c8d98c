"""One table per batch size: the composites beside every engine rule, with the targets checked.

The targets (the composites against the engines' own rules): at every batch size and workload,
``hybrid`` at least each of its parts and every engine hybrid rule (shipped and tuned);
``adaptive`` at least ``hybrid``, each part and every engine rule and length policy; a cell
more than :data:`TOLERANCE` below counts as a miss; and ``adaptive`` at least 1.0x.
"""

from __future__ import annotations

from collections.abc import Sequence

from specplug.lab.bench._result import BenchResult
from specplug.lab.bench._rules import TUNED
from specplug.lab.rules import HYBRID, RULES

__all__ = ["TOLERANCE", "batch_tables", "misses"]

TOLERANCE = 0.01
HYBRID_ROW, ADAPTIVE_ROW = "hybrid", "adaptive:candidates=suffix+neural"
PARTS = ("neural", "suffix")


def _rule_of(method: str) -> str | None:
    if not method.startswith("rule:"):
        return None
    return method[len("rule:") :].removesuffix(TUNED).split(":", 1)[0]


def _bars(methods: Sequence[str]) -> tuple[list[str], list[str]]:
    """(what hybrid must reach, what adaptive must reach) among ``methods``."""
    hybrid = [m for m in methods if m in PARTS or (_rule_of(m) in RULES and RULES[_rule_of(m)].kind == HYBRID)]  # type: ignore[index]
    adaptive = [m for m in methods if m in PARTS or m == HYBRID_ROW or _rule_of(m) in RULES]
    return hybrid, adaptive


def misses(result: BenchResult, batch: int, workload: str) -> list[str]:
    """The targets missed in one cell, each as ``who < bar (figures)``."""
    figures = {row.method: row.speedup.get(batch) for row in result.rows if row.workload == workload and row.status == "ok"}
    hybrid_bars, adaptive_bars = _bars(list(figures))
    found = []
    for who, bars in ((HYBRID_ROW, hybrid_bars), (ADAPTIVE_ROW, adaptive_bars)):
        mine = figures.get(who)
        if mine is None:
            continue
        for bar in bars:
            value = figures.get(bar)
            if bar != who and value is not None and mine < value * (1.0 - TOLERANCE):
                found.append(f"{who.split(':')[0]} {mine:.2f} < {bar} {value:.2f}")
    adaptive = figures.get(ADAPTIVE_ROW)
    if adaptive is not None and adaptive < 1.0:
        found.append(f"adaptive {adaptive:.2f} < 1.0")
    return found


def _order(methods: Sequence[str]) -> list[str]:
    """Parts, engine rules (hybrid rules, then length policies; each default then tuned), the
    composites, then the hindsight bars."""
    def key(method: str) -> tuple[int, int, str]:
        rule = _rule_of(method)
        if method in PARTS:
            return (0, PARTS.index(method), method)
        if rule in RULES:
            names = list(RULES)
            return (1 if RULES[rule].kind == HYBRID else 2, names.index(rule) * 2 + method.endswith(TUNED), method)
        if method in (HYBRID_ROW, ADAPTIVE_ROW):
            return (3, (HYBRID_ROW, ADAPTIVE_ROW).index(method), method)
        return (4, 0, method)

    return sorted(methods, key=key)


def batch_tables(result: BenchResult, batches: Sequence[int] | None = None, title: str = "") -> str:
    """Markdown: per batch size, a table of methods by workload, then the targets missed."""
    lines = [f"## {title}", ""] if title else []
    workloads = result.workloads
    methods = _order(list(dict.fromkeys(row.method for row in result.rows)))
    figures = {(row.workload, row.method): row for row in result.rows}
    total = 0
    for batch in batches or result.batch_sizes:
        lines += [f"### Batch {batch}", "", "| method | " + " | ".join(workloads) + " |", "|---|" + "---:|" * len(workloads)]
        for method in methods:
            cells = []
            for workload in workloads:
                row = figures.get((workload, method))
                if row is None:
                    cells.append("")
                elif row.status != "ok":
                    cells.append("failed")
                else:
                    value = row.speedup.get(batch)
                    cells.append("" if value is None else f"{value:.2f}x")
            name = method
            if method in (HYBRID_ROW, ADAPTIVE_ROW):
                name, cells = f"**{method}**", [f"**{cell}**" if cell else cell for cell in cells]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        found = [(workload, miss) for workload in workloads for miss in misses(result, batch, workload)]
        total += len(found)
        lines.append("")
        if found:
            lines.append(f"Targets missed at batch {batch} ({len(found)}):")
            lines += [f"- {workload}: {miss}" for workload, miss in found]
        else:
            lines.append(f"Targets at batch {batch}: all met.")
        lines.append("")
    lines.append(f"Targets missed in all: {total}.")
    lines += ["", "Engine rules (`rule:NAME`; `(tuned)`: knobs chosen per batch size on the tune split, listed in the JSON):", ""]
    shown = {_rule_of(method) for method in methods} & set(RULES)
    lines += [f"- `rule:{name}`: {RULES[name].engine}" for name in RULES if name in shown]
    return "\n".join(lines) + "\n"
