"""Paired benchmark of suffix's batch kernel: the row-by-row kernel of the fifth round (read from
git at ``--before``, default fd1cbc9) against the lockstep one (``_suffix_kernels.step_batch``:
chain walks of ``LOCKSTEP_ROWS`` rows interleaved).

Two suffix proposers get the same rows (the perf harness's, every row at the same context) and
step in turn, one with the old kernel swapped in, one with the new; their drafts, scores and
acceptance are asserted equal at every step, and each step's CPU time of the thread
(``time.thread_time_ns``, not the wall clock: the machine is shared) is kept. The order of the
two alternates step by step, so drift hits both alike.

Usage (one thread; about a minute at 128 rows):
  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_suffix_lockstep.py \
      --batch 128 --context 8192 --workloads code-edit,text --steps 120
"""

from __future__ import annotations

import sys
from pathlib import Path

from specplug.proposers.lookup import _suffix_kernels as kernels

sys.path.insert(0, str(Path(__file__).parent))
from _paired_kernel import KernelUnderTest, main  # noqa: E402

#: the commit whose suffix kernel (row by row, before the lockstep walks) is measured against
BEFORE = "fd1cbc9"

KERNEL = KernelUnderTest("suffix", kernels, "step_batch", "specplug/proposers/lookup/_suffix_kernels.py")


if __name__ == "__main__":
    main(KERNEL, __doc__, BEFORE)
