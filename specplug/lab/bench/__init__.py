"""Trace replay and benchmark: replays recorded requests against proposers and reports goodput.

>>> from specplug.lab.bench import default_traces, parse_method, run_benchmark
>>> from specplug.cost import cost_model
>>> from specplug.lab.trace import read_traces
>>> records = read_traces(default_traces()[0])[:1]
>>> result = run_benchmark(records, [parse_method("suffix")], cost_model("llama-3.1-8b-h100"), batch_sizes=[1])
>>> result.row(records[0].workload, "suffix").tokens_per_step >= 1.0
True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from specplug.lab.bench._methods import BenchMethod, parse_method
from specplug.lab.bench._neural import TraceNeuralProposer
from specplug.lab.bench._report import markdown_tables, print_table, write_json, write_markdown, write_plots
from specplug.lab.bench._result import BenchResult, Row
from specplug.lab.bench._run import BATCH_SIZES, run_benchmark, workloads_of

__all__ = [
    "BATCH_SIZES",
    "BenchMethod",
    "BenchResult",
    "DEFAULT_METHODS",
    "Row",
    "TraceNeuralProposer",
    "default_traces",
    "markdown_tables",
    "parse_method",
    "print_table",
    "run_benchmark",
    "workloads_of",
    "write_json",
    "write_markdown",
    "write_plots",
]

#: what ``specplug bench`` replays when no method is named (adaptive choosing between a lookup
#: and the trace's neural drafter, as hybrid combines them)
DEFAULT_METHODS = ("ngram", "suffix", "neural", "hybrid", "adaptive:candidates=suffix+neural")


def default_traces() -> list[Path]:
    """The trace files shipped with specplug (``specplug/lab/data/traces/*.jsonl``)."""
    folder = resources.files("specplug.lab") / "data" / "traces"
    return sorted(Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".jsonl"))
