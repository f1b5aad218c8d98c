"""One table per batch size: the composites beside every engine rule, with the targets checked.

The targets (the composites against the engines' own rules): at every batch size and workload,
``hybrid`` at least each of its parts and every engine hybrid rule (shipped and tuned);
``adaptive`` at least ``hybrid``, each part and every engine rule and length policy; a cell
more than :data:`TOLERANCE` below counts as a miss; and ``adaptive`` at least 1.0x. The targets
are checked for the composites as a fresh server runs them and, where the bench replayed them
warm (``--warm``: from the statistics learnt over the other split), for those rows too, each
against the same bars (the warm adaptive against the warm hybrid).

Each miss between two replayed rows also carries the interval of their ratio over the
workload's requests resampled (``_noise``), and the tally says how many stay misses at the
interval's upper end: with few requests a gap can be the sample's, and the report says which.
"""

from __future__ import annotations

from collections.abc import Sequence

from specplug.lab.bench._noise import LEVEL, ratio_interval
from specplug.lab.bench._result import BenchResult, Row
from specplug.lab.bench._rules import TUNED
from specplug.lab.bench._run import warm_label
from specplug.lab.rules import HYBRID, RULES

__all__ = ["TOLERANCE", "batch_tables", "misses"]

TOLERANCE = 0.01
HYBRID_ROW, ADAPTIVE_ROW = "hybrid", "adaptive:candidates=suffix+neural"
PARTS = ("neural", "suffix")


def _rule_of(method: str) -> str | None:
    if not method.startswith("rule:"):
        return None
    return method[len("rule:") :].removesuffix(TUNED).split(":", 1)[0]


def _composites(warm: bool) -> tuple[str, str]:
    return (warm_label(HYBRID_ROW), warm_label(ADAPTIVE_ROW)) if warm else (HYBRID_ROW, ADAPTIVE_ROW)


def _bars(methods: Sequence[str], warm: bool = False) -> tuple[list[str], list[str]]:
    """(what hybrid must reach, what adaptive must reach) among ``methods``."""
    hybrid_row = _composites(warm)[0]
    hybrid = [m for m in methods if m in PARTS or (_rule_of(m) in RULES and RULES[_rule_of(m)].kind == HYBRID)]  # type: ignore[index]
    adaptive = [m for m in methods if m in PARTS or m == hybrid_row or _rule_of(m) in RULES]
    return hybrid, adaptive


def misses(result: BenchResult, batch: int, workload: str, warm: bool = False) -> list[str]:
    """The targets missed in one cell, each as ``who < bar (figures)``, with the ratio's interval
    over resampled requests where both rows timed theirs (``_noise``); ``warm``: by the warm rows."""
    return [text for text, _ in _misses(result, batch, workload, warm)]


def _misses(result: BenchResult, batch: int, workload: str, warm: bool) -> list[tuple[str, bool]]:
    # (the miss, whether it stays a miss across the interval: its upper end below the tolerance too)
    rows = {row.method: row for row in result.rows if row.workload == workload and row.status == "ok"}
    figures = {method: row.speedup.get(batch) for method, row in rows.items()}
    hybrid_bars, adaptive_bars = _bars(list(figures), warm)
    hybrid_row, adaptive_row = _composites(warm)
    found = []
    for who, bars in ((hybrid_row, hybrid_bars), (adaptive_row, adaptive_bars)):
        mine = figures.get(who)
        if mine is None:
            continue
        for bar in bars:
            value = figures.get(bar)
            if bar != who and value is not None and mine < value * (1.0 - TOLERANCE):
                text = f"{_short(who)} {mine:.2f} < {bar} {value:.2f}"
                interval = _interval(rows[who], rows[bar], batch)
                if interval is not None:
                    text += f" (x{mine / value:.3f}; over resampled requests, {LEVEL:.0%} within x{interval[0]:.3f} to x{interval[1]:.3f})"
                found.append((text, interval is not None and interval[1] < 1.0 - TOLERANCE))
    adaptive = figures.get(adaptive_row)
    if adaptive is not None and adaptive < 1.0:
        found.append((f"{_short(adaptive_row)} {adaptive:.2f} < 1.0", True))
    return found


def _interval(mine: Row, bar: Row, batch: int) -> tuple[float, float] | None:
    times, bar_times = mine.request_times.get(batch), bar.request_times.get(batch)
    return None if times is None or bar_times is None else ratio_interval(times, bar_times)


def _short(row: str) -> str:
    """``adaptive:candidates=... (warm)`` as ``adaptive (warm)``."""
    warm = row.endswith(warm_label(""))
    name = row.removesuffix(warm_label("")).split(":")[0]
    return warm_label(name) if warm else name


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
        composites = (HYBRID_ROW, ADAPTIVE_ROW, *_composites(warm=True))
        if method in composites:
            return (3, composites.index(method), method)
        return (4, 0, method)

    return sorted(methods, key=key)


def batch_tables(result: BenchResult, batches: Sequence[int] | None = None, title: str = "") -> str:
    """Markdown: per batch size, a table of methods by workload, then the targets missed."""
    lines = [f"## {title}", ""] if title else []
    workloads = result.workloads
    methods = _order(list(dict.fromkeys(row.method for row in result.rows)))
    figures = {(row.workload, row.method): row for row in result.rows}
    replayed = {row.method for row in result.rows}
    states = [warm for warm in (False, True) if _composites(warm)[0] in replayed or _composites(warm)[1] in replayed]
    total, beyond = dict.fromkeys(states, 0), dict.fromkeys(states, 0)
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
            if method in (HYBRID_ROW, ADAPTIVE_ROW, *_composites(warm=True)):
                name, cells = f"**{method}**", [f"**{cell}**" if cell else cell for cell in cells]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
        for warm in states:
            found = [(workload, miss, kept) for workload in workloads for miss, kept in _misses(result, batch, workload, warm)]
            total[warm] += len(found)
            beyond[warm] += sum(kept for _, _, kept in found)
            which = " (warm)" if warm else ""
            if found:
                lines.append(f"Targets{which} missed at batch {batch} ({len(found)}):")
                lines += [f"- {workload}: {miss}" for workload, miss, _ in found]
            else:
                lines.append(f"Targets{which} at batch {batch}: all met.")
            lines.append("")
    lines.append("Targets missed in all: " + ", ".join(f"{count}{' (warm)' if warm else ''}" for warm, count in total.items()) + ".")
    lines += ["", f"Of them, beyond the sampling noise (the {LEVEL:.0%} interval of the ratio over resampled requests ends more "
              f"than {TOLERANCE:.0%} below the bar): " + ", ".join(f"{count}{' (warm)' if warm else ''}" for warm, count in beyond.items())
              + "."]
    lines += ["", "Engine rules (`rule:NAME`; `(tuned)`: knobs chosen per batch size on the tune split, listed in the JSON):", ""]
    shown = {_rule_of(method) for method in methods} & set(RULES)
    lines += [f"- `rule:{name}`: {RULES[name].engine}" for name in RULES if name in shown]
    return "\n".join(lines) + "\n"
