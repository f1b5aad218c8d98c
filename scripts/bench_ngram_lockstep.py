"""Paired benchmark of ngram's batch kernel: the kernel of ``--before`` (read from git; default
20c3785: rows one at a time, a three-row prefetch pipeline that hashes each probe three times)
against this checkout's (``_ngram_kernels.ngram_step_batch``). The lockstep kernel measured in
docs/performance.md (probes of LOCKSTEP_ROWS rows hashed once and prefetched before they run) is
commit 9a0b198: run this script from a checkout of it (it was not kept: < 10 % cheaper on code-edit).
The default --before kernel takes the typed list of per-request arrays that ngram kept until
f09676a; since then its arrays live in one pool (scripts/bench_ngram_pool.py pairs the two stores):
from a later checkout, give --before a commit from f09676a on (the script stops when the two
kernels take different arguments).

Two ngram proposers get the same rows (the perf harness's, every row at the same context) and
step in turn, one with the old kernel swapped in, one with the new; their drafts, scores and
acceptance are asserted equal at every step, and each step's CPU time of the thread
(``time.thread_time_ns``, not the wall clock: the machine is shared) is kept. The order of the
two alternates step by step, so drift hits both alike.

Usage (one thread; about a minute at 128 rows):
  NUMBA_NUM_THREADS=1 PYTHONPATH=.pypath .venv/bin/python scripts/bench_ngram_lockstep.py \
      --batch 128 --context 8192 --workloads code-edit,text --steps 120
"""

from __future__ import annotations

import sys
from pathlib import Path

from specplug.proposers.lookup import _ngram_kernels as kernels

sys.path.insert(0, str(Path(__file__).parent))
from _paired_kernel import KernelUnderTest, main  # noqa: E402

#: the commit whose ngram kernel (before the lockstep blocks) is measured against
BEFORE = "20c3785"

KERNEL = KernelUnderTest("ngram", kernels, "ngram_step_batch", "specplug/proposers/lookup/_ngram_kernels.py",
                          nan_scores=True)


if __name__ == "__main__":
    main(KERNEL, __doc__, BEFORE)
