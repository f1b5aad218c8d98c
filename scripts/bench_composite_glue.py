"""Paired benchmark of the composites' own Python around their kernels: hybrid and adaptive built on
the ``CompositeProposer`` of ``--before`` (read from git) against this checkout's, beside suffix.

Per workload, suffix and each composite (old and new) step in turn on the perf harness's rows (every
row at the same context), the order rotated each step; old and new are asserted to draft, score,
accept and name their sources alike at every step. Each step's CPU time of the thread
(``time.thread_time_ns``: the machine is shared) is kept; medians after ``--skip`` warm-up steps,
µs per row, and each composite over suffix. ``--refcounts`` then counts the call sites of numba's
reference-count updates in adaptive's choice kernel, old and new.

Usage (one thread; about a minute at 128 rows):
  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_composite_glue.py \\
      --before HEAD --batch 128 --workloads code-edit,text --steps 60
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import specplug
from specplug.engine import StandInDrafter
from specplug.lab._perf_batch import _create_method, _rows

sys.path.insert(0, str(Path(__file__).parent))
from _before import module_at, paired_parser, source_at  # noqa: E402
from bench_ngram_pool import Stepper, time_in_turn  # noqa: E402


#: the composite's own modules, loaded from ``--before`` under other names (each importing the others' old copies):
#: its kernels change with it
_OWN = ("_step_times", "_pending", "_choice", "_choose_step", "_composite")


def _copies_imports(text: str, suffix: str = "before") -> str:
    """``text`` importing the copies of :data:`_OWN` named ``{name}_{suffix}`` instead of this checkout's."""
    for name in _OWN:
        text = text.replace(f"from specplug.proposers.{name} import", f"from {name}_{suffix} import")
    return text.replace("from specplug.proposers import _choice, _row_drafts",
                        f"import _choice_{suffix} as _choice\nfrom specplug.proposers import _row_drafts")


def old_composites(commit: str, folder: Path) -> dict[str, object]:
    """hybrid's and adaptive's proposer classes on ``commit``'s ``CompositeProposer``, with their options."""
    for name in _OWN:
        path = f"specplug/proposers/{name}.py"
        module_at(commit, path, f"{name}_before", folder, text=_copies_imports(source_at(commit, path)))
    out = {}
    for name in ("hybrid", "adaptive"):
        path = f"specplug/proposers/{name}.py"
        text = source_at(commit, path).replace(
            "from specplug.proposers.composite._composite import", "from _composite_before import"
        ).replace("@hookimpl", "")
        module = module_at(commit, path, f"_{name}_before", folder, text=text)
        proposer = getattr(module, f"{name.capitalize()}Proposer")
        out[name] = lambda proposer=proposer, name=name: proposer(_resolved_options(name))
    return out


def _resolved_options(name: str):
    """Options as ``specplug.create`` resolves them (parts, cost model), from a proposer made for the
    purpose and dropped: a class built outside ``create`` resolves no names."""
    return _create_method(name).options


def run(workload: str, batch: int, context: int, steps: int, k: int, skip: int, old) -> None:
    rows = _rows(workload, context, batch, steps * (k + 1) + 1, seed=0)
    subjects = {("suffix", "-"): Stepper(specplug.create("suffix"), rows, k)}
    for name in ("hybrid", "adaptive"):
        subjects[(name, "old")] = Stepper(old[name](), rows, k)
        subjects[(name, "new")] = Stepper(_create_method(name), rows, k)
    us = time_in_turn(subjects, steps, skip, batch, ("hybrid", "adaptive"))
    suffix = us[("suffix", "-")]
    cells = []
    for name in ("hybrid", "adaptive"):
        old_us, new_us = us[(name, "old")], us[(name, "new")]
        cells += [f"{old_us:.2f}", f"{new_us:.2f}", f"{new_us / old_us:.3f}", f"{old_us / suffix:.2f}", f"{new_us / suffix:.2f}"]
    print(f"| {workload} | {batch} | {steps - skip} | {suffix:.2f} | " + " | ".join(cells) + f" | {os.getloadavg()[0]:.1f} |", flush=True)


def refcounts(before: str, folder: Path) -> None:
    """Call sites of numba's reference-count updates in the compiled LLVM of adaptive's batch choice
    (``_choose_step.choose_and_finish`` and every function it calls), ``before``'s (compiled afresh by
    the run) and this checkout's (compiled afresh from copies of its files: numba's cache keeps no LLVM),
    for the signatures the run called it with."""
    from _paired_kernel import refcount_sites

    from specplug.proposers.composite import _choose_step

    for name in _OWN:
        path = Path("specplug/proposers") / f"{name}.py"
        module_at("HEAD", str(path), f"{name}_now", folder, text=_copies_imports(path.read_text(), "now"))
    print("\n| choose_and_finish | NRT_incref call sites | NRT_decref call sites | functions |")
    print("|---|---:|---:|---:|")
    for label, suffix in ((f"{before} (old)", "before"), ("this checkout (new)", "now")):
        kernel = sys.modules[f"_choose_step_{suffix}"].choose_and_finish
        for signature in _choose_step.choose_and_finish.signatures:
            kernel.compile(signature)
        counts = refcount_sites(kernel)
        print(f"| {label} | {counts['incref']} | {counts['decref']} | {counts['functions']} |")


def main() -> None:
    parser = paired_parser(__doc__, before="HEAD", what="CompositeProposer", steps=60)
    parser.add_argument("--refcounts", action="store_true", help="then count, in adaptive's choice kernel's compiled "
                        "LLVM (old and new), the call sites of numba's reference-count updates")
    args = parser.parse_args()
    print("| workload | batch | steps | suffix µs/row | hybrid old | hybrid new | new ÷ old | old × suffix | new × suffix | "
          "adaptive old | adaptive new | new ÷ old | old × suffix | new × suffix | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        old = old_composites(args.before, Path(folder))
        for workload in args.workloads.split(","):
            run(workload, args.batch, args.context, args.steps, args.k, args.skip, old)
        if args.refcounts:
            refcounts(args.before, Path(folder))


if __name__ == "__main__":
    main()
