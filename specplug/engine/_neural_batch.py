"""A batch step for the engine layer's parts whose drafts are handed to them (:class:`StandInDrafter`).

Inside a composite these parts step with every row of every engine step, but draft for only
the rows that chose them (the others are asked for 0 tokens), and their own hooks do nothing
but hand back an offered draft. The base class's per-row path would still call two hooks,
check a draft and count acceptance for every row; here the rows that drafted nothing are
handled by a few dict and array operations in C, and Python runs only for rows with a draft.
What it drafts, counts and keeps as each request's last draft is what the per-row path gives
(``tests/engine/test_neural_batch.py``). It can hand out offered drafts (:class:`EngineDrafts`'s
way), but EngineDrafts keeps the per-row path: with a quarter of 128 rows offered, this path
measured slower (its per-row numpy writes), so only the stand-in, which never drafts, uses it.
"""

from __future__ import annotations

from itertools import compress

import numpy as np

from specplug import BatchDrafts, BatchStep, Draft, Proposer, RequestId, check_draft, draft_accepted

__all__ = ["step_offered"]


def step_offered(proposer: Proposer, step: BatchStep, offered: dict[RequestId, tuple[int, ...]], unoffered: Draft) -> BatchDrafts:
    """One batch step of a part whose ``_propose`` is ``Draft(offered.pop(id, ())[:limit], name)``
    (or ``unoffered`` for a request with no offer), whose ``_extend`` does nothing and that does
    not ``_observe``. A row asked for 0 tokens gets ``proposer.empty_draft()``, as in the per-row path."""
    proposer._step_lifecycle(step)
    ids = step.request_ids
    rows = len(ids)
    limits = step.limits.tolist()
    offsets = step.offsets
    extended = (offsets[1:] > offsets[:-1]).tolist()
    pending = proposer._pending
    accepted = np.zeros(rows, dtype=np.int64)
    grown = list(compress(ids, extended))
    lasts = list(map(pending.__getitem__, grown))
    if any(lasts):  # a last draft with tokens: count what the new tokens accepted of it (Draft's len)
        bounds, flat = offsets.tolist(), step.new_tokens.tolist()
        for row, last in zip(compress(range(rows), extended), lasts):
            if last:
                accepted[row] = draft_accepted(last, flat[bounds[row] : bounds[row + 1]])
    pending.update(dict.fromkeys(grown))
    width = max(limits, default=0)
    tokens = np.zeros((rows, width), dtype=np.int64)
    lengths = np.zeros(rows, dtype=np.int64)
    empty = proposer.empty_draft()
    scores = np.full(rows, empty.score)
    asked = [limit > 0 for limit in limits]
    asked_ids = list(compress(ids, asked))
    pending.update(dict.fromkeys(asked_ids, unoffered))
    if unoffered.score is None:
        scores[np.flatnonzero(asked)] = np.nan
    if offered:
        name = proposer.name
        for row in compress(range(rows), asked):
            request_id = ids[row]
            if request_id in offered:
                limit = limits[row]
                draft = check_draft(Draft(offered.pop(request_id)[:limit], name), limit, name)
                pending[request_id] = draft
                lengths[row] = len(draft.tokens)
                tokens[row, : len(draft.tokens)] = draft.tokens
    sources = [proposer.name] * rows  # every draft, offered or empty, is the part's own
    return BatchDrafts(tokens, lengths, accepted, sources, scores, np.ones(rows, dtype=np.bool_))
