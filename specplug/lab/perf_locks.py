"""What thread safety costs a request step: the same proposer with its lock and without.

Every built-in proposer takes its own reentrant lock around each public call
(``Proposer._lock``), so threads may share it. This times :func:`specplug.lab.perf.measure`'s
step (``propose`` + ``extend``) on the ``code-edit`` workload with the lock as shipped and with
it swapped for a no-op context (the proposer's and its parts'), alternating the two within each
repeat so that drift on a shared machine hits both alike. The difference of the medians is the
lock's cost per step; the draft checks of ``Proposer.propose`` are in both. On a loaded machine
that difference drowns in noise, so it also counts the locks a step takes (the parts' included)
and times one ``with`` over the lock against a no-op context (best of 25 runs).

    python -m specplug.lab.perf_locks [--methods ngram,suffix,adaptive] [--repeats 9] [--steps 500]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import threading
import timeit

import specplug
from specplug._drafts import accepted_prefix
from specplug.lab.perf import build_workload, measure

__all__ = ["acquisitions_per_step", "enter_exit_ns", "lock_cost", "main"]


def _unlocked(proposer: specplug.Proposer) -> specplug.Proposer:
    """``proposer`` with its lock (and its parts') replaced by a no-op."""
    proposer._lock = contextlib.nullcontext()
    for part in getattr(proposer, "parts", ()):
        _unlocked(part)
    return proposer


class _Counting:
    """A reentrant lock that counts how often it is taken."""

    def __init__(self) -> None:
        self.lock, self.taken = threading.RLock(), 0

    def __enter__(self) -> None:
        self.taken += 1
        self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def _counting(proposer: specplug.Proposer, locks: list[_Counting]) -> specplug.Proposer:
    proposer._lock = lock = _Counting()
    locks.append(lock)
    for part in getattr(proposer, "parts", ()):
        _counting(part, locks)
    return proposer


def acquisitions_per_step(method: str, steps: int = 200, context: int = 8192, k: int = 8) -> float:
    """How many times a step (``propose`` + ``extend``) takes a lock, the parts' included."""
    locks: list[_Counting] = []
    proposer = _counting(specplug.create(method), locks)
    workload = build_workload("code-edit", context, steps * (k + 1))
    proposer.start("r", workload.context)
    start = sum(lock.taken for lock in locks)
    done = len(measure_steps(proposer, workload, steps, k))
    return (sum(lock.taken for lock in locks) - start) / done


def measure_steps(proposer: specplug.Proposer, workload, steps: int, k: int) -> list[int]:
    """Steps of an already started request ``"r"`` (no timing), the tokens each appended."""
    truth, position, appended = workload.continuation, 0, []
    for _ in range(steps):
        if position >= len(truth):
            break
        draft = proposer.propose("r", k)
        chunk = truth[position : position + accepted_prefix(draft.tokens, truth[position:]) + 1].tolist()
        proposer.extend("r", chunk)
        position += len(chunk)
        appended.append(len(chunk))
    return appended


def enter_exit_ns(repeats: int = 25, number: int = 100_000) -> tuple[float, float]:
    """ns of one ``with`` over the shipped lock and over a no-op context (best of ``repeats``:
    the least disturbed run, on a shared machine)."""
    lock, null = threading.RLock(), contextlib.nullcontext()

    def best(context) -> float:
        return min(timeit.repeat(lambda: _enter(context), number=number, repeat=repeats)) / number * 1e9

    return best(lock), best(null)


def _enter(context) -> None:
    with context:
        pass


def lock_cost(method: str, *, repeats: int = 9, steps: int = 500, context: int = 8192, k: int = 8) -> dict[str, float]:
    """The lock's cost per step of ``method``, two ways.

    ``locked_ns``/``unlocked_ns``: median step times with the lock and with a no-op, over
    ``repeats`` runs of ``steps`` steps that alternate the two; ``paired_ns``: the median of each
    repeat's difference (drift cancels within a pair). ``per_step_ns``: locks taken per step
    times what one ``with`` over the lock costs beyond a no-op context (best of 25 runs),
    the figure that load disturbs least.
    """
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
    paired = statistics.median(a - b for a, b in zip(medians["locked"], medians["unlocked"]))
    taken = acquisitions_per_step(method, min(steps, 200), context, k)
    with_lock, without = enter_exit_ns()
    return {
        "locked_ns": locked, "unlocked_ns": unlocked, "paired_ns": paired, "ratio": locked / unlocked,
        "locks_per_step": taken, "enter_exit_ns": with_lock - without, "per_step_ns": taken * (with_lock - without),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="ngram,suffix,adaptive")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args(argv)
    print("| method | with lock µs | without µs | paired difference µs | locks per step | lock µs/step (locks x ns) |")
    print("|---|---:|---:|---:|---:|---:|")
    for method in args.methods.split(","):
        got = lock_cost(method, repeats=args.repeats, steps=args.steps)
        print(
            f"| {method} | {got['locked_ns'] / 1000:.2f} | {got['unlocked_ns'] / 1000:.2f} | "
            f"{got['paired_ns'] / 1000:+.2f} | {got['locks_per_step']:.1f} | "
            f"{got['per_step_ns'] / 1000:.3f} ({got['enter_exit_ns']:.0f} ns each) |"
        )


if __name__ == "__main__":
    main()
