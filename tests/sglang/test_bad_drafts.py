"""The bad-draft matrix through the SGLang worker's draft source (no engine started).

Whatever the proposer returns, the trees SGLang verifies hold only the root for a bad row, and
the good rows keep their drafts; the trees keep the invariants SGLang's verify path relies on.
"""

from __future__ import annotations

import numpy as np

from specplug.engine import EngineDrafting
from tests.hardening._bad import GOOD, KINDS, BadDrafts
from tests.sglang.test_worker import WIDTH, Batch, Req, _check_trees, _worker


def test_bad_rows_draft_nothing_and_good_rows_their_drafts(sglang):
    worker = _worker("SPECPLUG_NGRAM")
    worker.drafting = EngineDrafting(BadDrafts())
    rids = [*KINDS, "good-1", "good-2"]
    reqs = [Req(rid, [1, 2, 3], [4]) for rid in rids]
    for step in range(3):
        ids, mask = worker._prepare_draft_tokens(Batch(reqs))
        _check_trees(np.asarray(ids), np.asarray(mask), len(reqs), WIDTH)
        rows = np.asarray(ids).reshape(len(reqs), WIDTH)
        assert (rows >= 0).all()
        for rid, row in zip(rids, rows):
            drafted = row[1 : 1 + len(GOOD.tokens)].tolist()
            assert drafted == (list(GOOD.tokens) if rid.startswith("good") else [0, 0]), (rid, row)
        for req in reqs:
            req.output_ids.append(10 + step)
    assert worker.drafting.counters["bad_drafts"] == 3 * len(KINDS)
