"""The linear cost model's step times for every row of a batch, in one numba call.

Why: the composites price every row's step at every engine step (each drafter kind, each draft
length). As numpy expressions over [rows, kinds, lengths] that was a dozen temporaries and
about 1 µs per row at batch 128; here it is one pass. The arithmetic is the numpy version's,
operation for operation and in the same order, so the times are equal to the last bit (no
fastmath: numba does not fuse a multiply and an add unless told to).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["kind_step_times_to", "linear_step_times", "row_step_times"]


@njit(cache=True)
def linear_step_times(contexts, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, out):
    """``out[row, kind, length]``: the step time of drafting ``length`` tokens with ``kind``'s drafters.

    ``verify`` = (per KV token, per batched token × batch, fixed, step overhead); per kind, its
    drafters' (per KV token, fixed) terms (``kind_terms`` of them), its verify fraction and its
    per draft token × batch.
    """
    for row in range(len(contexts)):
        row_step_times(contexts[row], batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, out[row])


@njit(cache=True)
def row_step_times(context, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, out):
    """One row of :func:`linear_step_times`: ``out[kind, length]`` at ``context``."""
    for kind in range(out.shape[0]):
        kind_step_times_to(context, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, out, kind,
                           out.shape[1])


@njit(cache=True, inline="always")
def kind_step_times_to(context, batch, verify, kind_kv, kind_fixed, kind_terms, fractions, per_token, out, kind, lengths):
    """``out[kind, :lengths]`` of :func:`row_step_times`: one drafter kind, the draft lengths ``0 ..
    lengths - 1`` only, for a choice that reads no others (each time is computed alone, so the ones
    written are the same to the last bit)."""
    v_kv, v_tok_batch, v_fixed, overhead = verify[0], verify[1], verify[2], verify[3]
    kv = np.float64(batch * context)
    base = v_kv * kv + v_fixed
    fixed = overhead
    for term in range(kind_terms[kind]):
        fixed = fixed + (kind_kv[kind, term] * kv + kind_fixed[kind, term])
    fraction, slope = fractions[kind], per_token[kind]
    for length in range(lengths):
        at = np.float64(length)
        time = base + v_tok_batch * (at + 1.0)
        out[kind, length] = time * fraction + fixed + slope * at
