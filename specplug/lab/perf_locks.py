"""What thread safety costs a request step: the same proposer with its lock and without.

Every built-in proposer takes its own reentrant lock around each public call
(``Proposer._lock``), so threads may share it. This times :func:`specplug.lab.perf.measure`'s
step (``propose`` + ``extend``) on the ``code-edit`` workload with the lock as shipped and with
it swapped for a no-op context (the proposer's and its parts'), alternating the two within each
repeat so that drift on a shared machine hits both alike. The difference of the medians is the
lock's cost per step; the draft checks of ``Proposer.propose`` are in both.

    python -m specplug.lab.perf_locks [--methods ngram,suffix,adaptive] [--repeats 5] [--steps 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics

import specplug
from specplug.lab.perf import build_workload, measure

__all__ = ["lock_cost", "main"]


def _unlocked(proposer: specplug.Proposer) -> specplug.Proposer:
    """``proposer`` with its lock (and its parts') replaced by a no-op."""
    proposer._lock = contextlib.nullcontext()
    for part in getattr(proposer, "parts", ()):
        _unlocked(part)
    return proposer


def lock_cost(method: str, *, repeats: int = 5, steps: int = 2000, context: int = 8192, k: int = 8) -> dict[str, float]:
    """Median ns per step with the lock and without, over ``repeats`` alternating runs."""
    workload = build_workload("code-edit", context, steps * (k + 1))
    medians: dict[str, list[float]] = {"locked": [], "unlocked": []}
    for repeat in range(repeats + 1):  # the first round warms the kernels and is not counted
        for variant in ("locked", "unlocked") if repeat % 2 else ("unlocked", "locked"):
            proposer = specplug.create(method)
            if variant == "unlocked":
                _unlocked(proposer)
            timing = measure(proposer, workload, f"r{repeat}", steps, k)
            if repeat:
                medians[variant].append(statistics.median(timing.step_ns))
    locked, unlocked = statistics.median(medians["locked"]), statistics.median(medians["unlocked"])
    return {"locked_ns": locked, "unlocked_ns": unlocked, "cost_ns": locked - unlocked, "ratio": locked / unlocked}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="ngram,suffix,adaptive")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args(argv)
    print("| method | with lock µs | without µs | lock cost µs/step | ratio |")
    print("|---|---:|---:|---:|---:|")
    for method in args.methods.split(","):
        got = lock_cost(method, repeats=args.repeats, steps=args.steps)
        print(
            f"| {method} | {got['locked_ns'] / 1000:.2f} | {got['unlocked_ns'] / 1000:.2f} | "
            f"{got['cost_ns'] / 1000:+.2f} | {got['ratio']:.3f} |"
        )


if __name__ == "__main__":
    main()
