"""The worker's draft source against SGLang's own n-gram corpus and tree functions (no engine started).

The worker is driven through ``_prepare_draft_tokens``, the one n-gram worker method it
replaces, with batches shaped like SGLang's ``ScheduleBatch`` (requests with ``rid``,
``origin_input_ids_unpadded`` and ``output_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import specplug
from specplug import Draft, Proposer
from specplug.engine import EngineDrafting

WIDTH = 6
HISTORIES = {
    "repeat": [5, 6, 7, 8, 9, 5, 6, 7],  # suffix and ngram continue it with 8, 9, 5, ...
    "branches": [1, 2, 3, 4, 1, 2, 7, 8, 1, 2],  # 1, 2 was followed by 3 and by 7
    "fresh": [40, 41],  # nothing to match
}


@dataclass
class Req:
    rid: str
    origin_input_ids_unpadded: list[int]
    output_ids: list[int] = field(default_factory=list)


@dataclass
class Batch:
    reqs: list[Req]
    spec_info: object = None

    def grammar_needs_sync(self) -> bool:
        return False


def _worker(algorithm: str, width: int = WIDTH, *, enable_overlap: bool = False, max_branches: int = 1):
    from specplug_adapters.sglang import SpecplugWorker

    worker = SpecplugWorker.__new__(SpecplugWorker)  # no runtime context: the draft source alone
    worker.init_drafting(algorithm, width, enable_overlap=enable_overlap, max_branches=max_branches)
    return worker


def _batch(histories: dict[str, list[int]]) -> Batch:
    # the last two tokens as output: a request's history spans prompt and output
    return Batch([Req(rid, list(tokens[:-2]), list(tokens[-2:])) for rid, tokens in histories.items()])


def _check_trees(ids: np.ndarray, mask: np.ndarray, bs: int, width: int) -> None:
    """The invariants SGLang's verify path relies on, whoever built the trees."""
    assert ids.shape == (bs * width,) and mask.shape == (bs * width * width,)
    tree = mask.reshape(bs, width, width).astype(bool)
    assert tree[:, np.arange(width), np.arange(width)].all()  # each node is its own ancestor
    assert tree[:, :, 0].all()  # everything hangs off the root
    assert not np.triu(tree, 1).any()  # ancestors come first
    for b in range(bs):  # closed: an ancestor's ancestors are ancestors
        closure = tree[b].astype(int) @ tree[b].astype(int) > 0
        assert (closure == tree[b]).all()


@pytest.fixture(scope="module")
def corpus_trees(sglang):
    """SGLang's own NgramCorpus on the same histories (the real JIT-built C++ trie)."""
    from sglang.srt.speculative.cpp_ngram.ngram_corpus import NgramCorpus

    corpus = NgramCorpus(draft_token_num=WIDTH, capacity=4096)
    corpus.batch_put([list(tokens) for tokens in HISTORIES.values()])
    corpus.synchronize()
    return corpus.batch_get(list(HISTORIES), [list(tokens) for tokens in HISTORIES.values()],
                            [len(tokens) for tokens in HISTORIES.values()])


@pytest.mark.parametrize(
    ("algorithm", "branches"),
    [("SPECPLUG_NGRAM", 1), ("SPECPLUG_SUFFIX", 1), ("SPECPLUG_ADAPTIVE", 1), ("SPECPLUG_SUFFIX", 4)],
)
def test_trees_have_the_shapes_dtypes_and_invariants_of_sglangs_corpus(sglang, corpus_trees, algorithm, branches):
    corpus_ids, corpus_mask = corpus_trees
    ids, mask = _worker(algorithm, max_branches=branches)._prepare_draft_tokens(_batch(HISTORIES))
    bs = len(HISTORIES)
    _check_trees(corpus_ids, corpus_mask, bs, WIDTH)  # the checker holds for SGLang's own trees
    _check_trees(ids, mask, bs, WIDTH)
    assert (ids.dtype, mask.dtype, ids.shape, mask.shape) == (
        corpus_ids.dtype, corpus_mask.dtype, corpus_ids.shape, corpus_mask.shape)
    roots = [tokens[-1] for tokens in HISTORIES.values()]
    assert ids.reshape(bs, WIDTH)[:, 0].tolist() == roots == corpus_ids.reshape(bs, WIDTH)[:, 0].tolist()


def test_a_draft_is_a_chain_below_the_root_and_unused_slots_pad_off_the_root(sglang):
    ids, mask = _worker("SPECPLUG_SUFFIX")._prepare_draft_tokens(_batch({"repeat": HISTORIES["repeat"]}))
    assert ids.tolist()[:4] == [7, 8, 9, 5]
    tree = mask.reshape(WIDTH, WIDTH)
    depth = tree.sum(axis=1) - 1
    drafted = int((ids[1:] != 0).sum())
    assert depth.tolist()[: drafted + 1] == list(range(drafted + 1))  # a chain
    assert (depth[drafted + 1 :] == 1).all()  # padding: children of the root


def test_sglangs_tree_links_read_the_workers_trees(sglang):
    from sglang.srt.speculative.ngram_worker import _derive_tree_links

    ids, mask = _worker("SPECPLUG_SUFFIX")._prepare_draft_tokens(_batch(HISTORIES))
    next_token, next_sibling = _derive_tree_links(mask.astype(bool), len(HISTORIES), WIDTH)
    # a chain: each drafted node's next token is the one after it
    row = ids.reshape(len(HISTORIES), WIDTH)[0]
    drafted = int((row[1:] != 0).sum())
    assert next_token[0, :drafted].tolist() == list(range(1, drafted + 1))
    # the stand-in kernel of the test harness derives the same links (the e2e runs use it)
    from sgl_kernel import _ops

    bs = len(HISTORIES)
    positions = torch.empty(bs * WIDTH, dtype=torch.int64)
    index, token, sibling = (torch.empty(bs, WIDTH, dtype=torch.int64) for _ in range(3))
    _ops.reconstruct_indices_from_tree_mask(torch.from_numpy(mask).bool(), torch.tensor([10] * bs), positions,
                                            index, token, sibling, bs, WIDTH)
    assert token.tolist() == next_token.tolist() and sibling.tolist() == next_sibling.tolist()
    assert positions.reshape(bs, WIDTH)[0, : drafted + 1].tolist() == list(range(10, 11 + drafted))


def test_variable_lengths_within_the_width(sglang):
    worker = _worker("SPECPLUG_SUFFIX", width=3)
    ids, _ = worker._prepare_draft_tokens(_batch(HISTORIES))
    assert ids.reshape(3, 3).tolist()[0] == [7, 8, 9]  # cut to width - 1 tokens
    assert ids.reshape(3, 3).tolist()[2] == [41, 0, 0]  # no draft: root and padding


class Recorder(Proposer):
    """Records the lifecycle the worker drives; drafts nothing, or raises on chosen steps."""

    name = "recorder"

    def __init__(self, fail_every: int = 0) -> None:
        super().__init__()
        self.calls: list[tuple] = []
        self.fail_every = fail_every
        self.proposals = 0

    def _start(self, request_id, prompt):
        self.calls.append(("start", request_id, prompt.tolist()))

    def _extend(self, request_id, tokens):
        self.calls.append(("extend", request_id, tokens.tolist()))

    def _stop(self, request_id):
        self.calls.append(("stop", request_id))

    def _propose(self, request_id, max_tokens):
        self.proposals += 1
        if self.fail_every and self.proposals % self.fail_every == 0:
            raise RuntimeError("drafter fault")
        return Draft((1,) * max_tokens, self.name)


def test_requests_start_extend_and_stop_as_the_decode_batch_changes(sglang):
    worker = _worker("SPECPLUG_NGRAM")
    recorder = Recorder()
    worker.drafting = EngineDrafting(recorder)
    a, b = Req("a", [1, 2, 3], [4]), Req("b", [9, 8], [7])
    worker._prepare_draft_tokens(Batch([a, b]))
    a.output_ids += [5, 6]  # one draft token accepted plus the target's own
    worker._prepare_draft_tokens(Batch([a]))  # b finished or was aborted: it left the batch
    # one batch step per decode step: a first sight starts with the whole history; stops come first
    assert recorder.calls == [
        ("start", "a", [1, 2, 3, 4]), ("start", "b", [9, 8, 7]),
        ("stop", "b"), ("extend", "a", [5, 6]),
    ]
    worker.clear_cache_pool()  # SGLang flushes its cache: every request goes
    assert recorder.calls[-1] == ("stop", "a")


def test_overlap_splices_the_accepted_tokens_not_yet_in_output_ids(sglang):
    worker = _worker("SPECPLUG_SUFFIX", enable_overlap=True)
    info = SimpleNamespace(accept_tokens=torch.tensor([8, 9, 0, 0, 0, 0]), accept_lens=torch.tensor([2]))
    batch = Batch([Req("r", [5, 6, 7, 8, 9, 5, 6], [7])], spec_info=info)
    ids, _ = worker._prepare_draft_tokens(batch)
    assert ids.tolist()[0] == 9  # the root is the last accepted token, not output_ids[-1]
    assert ids.tolist()[1:3] == [5, 6]


def test_a_drafter_that_raises_every_third_step_costs_only_those_drafts(sglang):
    worker = _worker("SPECPLUG_NGRAM")
    worker.drafting = EngineDrafting(Recorder(fail_every=3))
    req = Req("r", [1, 2, 3], [4])
    drafted = []
    for step in range(6):
        ids, _ = worker._prepare_draft_tokens(Batch([req]))
        drafted.append(int((ids[1:] != 0).sum()))
        req.output_ids.append(10 + step)
    assert drafted == [5, 5, 0, 5, 5, 0]
    assert worker.drafting.counters["faults"] == 2


def test_a_fault_in_the_glue_costs_the_steps_drafts_and_restarts_the_requests(sglang, monkeypatch):
    worker = _worker("SPECPLUG_SUFFIX")
    batch = _batch({"repeat": HISTORIES["repeat"]})
    monkeypatch.setattr(worker.drafting, "step_requests", lambda *a, **k: 1 / 0)
    ids, mask = worker._prepare_draft_tokens(batch)
    assert ids.tolist() == [7, 0, 0, 0, 0, 0]
    _check_trees(ids, mask, 1, WIDTH)
    monkeypatch.undo()
    ids, _ = worker._prepare_draft_tokens(batch)
    assert ids.tolist()[:3] == [7, 8, 9]  # drafting again from the next step


def test_batch_size_reaches_composites(sglang):
    worker = _worker("SPECPLUG_ADAPTIVE")
    seen = []
    monkey = worker.drafting.guard.proposer
    original = monkey.set_batch_size
    monkey.set_batch_size = lambda size: (seen.append(size), original(size))[1]
    worker._prepare_draft_tokens(_batch(HISTORIES))
    assert seen == [len(HISTORIES)]


def test_the_external_corpus_api_is_refused_clearly(sglang):
    from specplug_adapters.sglang._worker import _NoCorpus

    with pytest.raises(ValueError, match="external n-gram corpora belong to SGLang's NGRAM"):
        _NoCorpus().load_external_corpus_named("c", [[1, 2]])
    assert specplug.method_specs()  # the core is untouched by the adapter


def test_alternatives_make_a_real_tree_that_sglang_links_as_siblings(sglang):
    from sglang.srt.speculative.ngram_worker import _derive_tree_links

    from specplug_adapters.sglang import draft_trees

    # two alternatives sharing their first token, one chain, one row with nothing
    ids, mask = draft_trees([5, 9, 3], [[(6, 7, 1), (6, 8)], [(10,)], []], WIDTH)
    _check_trees(ids, mask, 3, WIDTH)
    assert ids.reshape(3, WIDTH).tolist() == [[5, 6, 7, 8, 1, 0], [9, 10, 0, 0, 0, 0], [3, 0, 0, 0, 0, 0]]
    next_token, next_sibling = _derive_tree_links(mask.astype(bool), 3, WIDTH)
    assert next_token[0, :3].tolist() == [1, 2, 4]  # root -> 6 -> 7 -> 1
    assert next_sibling[0, 2] == 3  # 7 and 8 are siblings under 6
    # cut at the width: the first branch (the proposer's own draft) whole first, then the others,
    # and a node never lands without its parent
    ids, mask = draft_trees([5], [[(6, 7, 1, 2), (6, 8, 3, 4)]], 4)
    assert ids.tolist() == [5, 6, 7, 1]
    _check_trees(ids, mask, 1, 4)
    ids, mask = draft_trees([5], [[(6, 7), (9, 8, 3, 4)]], 6)
    assert ids.tolist() == [5, 6, 9, 7, 8, 3]  # numbered breadth first
    _check_trees(ids, mask, 1, 6)


@pytest.mark.parametrize(("width", "message"), [(0, "width = 0 is not valid"), (True, "width = True is not valid")])
def test_a_bad_width_is_one_clear_error(width, message):
    from specplug_adapters.sglang import draft_trees

    with pytest.raises(ValueError, match=message):
        draft_trees([1], [[]], width)


#: "1 2" was followed by "3 9", "3 8" and "4 7": suffix votes for 3 (two of three), its first candidate
FIRST_CANDIDATE_WRONG = [1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 4, 7, 1, 2]
#: what the target generates next: the alternative
TRUTH = [4, 7, 1, 2, 5]


def _accepted_by_sglangs_verify(ids: np.ndarray, mask: np.ndarray, truth: list[int]) -> int:
    """Drafted tokens the greedy tree verify accepts, for a target that continues with ``truth``.

    The links come from SGLang's own ``_derive_tree_links``; the walk is the verify op the CPU
    runs (the test harness's ``verify_tree_greedy_cpu``, what the end-to-end runs use).
    """
    from sglang.srt.speculative.ngram_worker import _derive_tree_links
    from sgl_kernel import _ops

    n = len(ids)
    tree = mask.reshape(n, n).astype(bool)
    next_token, next_sibling = _derive_tree_links(tree, 1, n)
    # the target's token after each node: the truth's next token where the node's path is on it
    target = []
    for node in range(n):
        path = [int(ids[j]) for j in range(1, node + 1) if tree[node, j]]
        target.append(truth[len(path)] if path == truth[: len(path)] else 99)
    accept_index = torch.full((1, n), -1, dtype=torch.int64)
    accept_count = torch.zeros(1, dtype=torch.int64)
    _ops.verify_tree_greedy_cpu(
        torch.zeros(n, dtype=torch.int64), accept_index, accept_count, torch.from_numpy(ids).reshape(1, n),
        torch.arange(n).reshape(1, n), next_token, next_sibling, torch.tensor(target),
    )
    return int(accept_count[0])


def test_a_tree_is_sent_and_accepts_the_alternative_where_the_first_candidate_is_wrong(sglang):
    batch = _batch({"r": FIRST_CANDIDATE_WRONG})
    chain_ids, chain_mask = _worker("SPECPLUG_SUFFIX", width=8)._prepare_draft_tokens(batch)
    tree_worker = _worker("SPECPLUG_SUFFIX", width=8, max_branches=4)
    tree_ids, tree_mask = tree_worker._prepare_draft_tokens(batch)
    _check_trees(tree_ids, tree_mask, 1, 8)
    # the chain is the vote's draft; the tree keeps it whole and adds the other continuations
    assert chain_ids.tolist()[:3] == tree_ids.tolist()[:2] + [8] == [2, 3, 8]
    depth_one = [int(tree_ids[node]) for node in range(1, 8) if tree_mask.reshape(8, 8)[node].sum() == 2]
    assert {3, 4} <= set(depth_one)  # two branches below the root: more than a chain
    assert tree_worker.drafting.counters["tree_drafts"] == 1
    chain, tree = _accepted_by_sglangs_verify(chain_ids, chain_mask, TRUTH), _accepted_by_sglangs_verify(
        tree_ids, tree_mask, TRUTH)
    # the tree here: 3 -> {8 -> 1, 9} and 4 -> 7 -> 1; the target walks the whole 4 7 1 branch
    assert tree_ids.tolist() == [2, 3, 4, 8, 9, 7, 1, 1]
    assert (chain, tree) == (0, 3)
    # the price: where the vote is right, the tree accepts its first branch (3 8 1), whose tail
    # it gave to alternatives as probable as that tail (one voter in three), and the chain more
    right = [3, 8, 1, 2, 4, 7, 1, 2]
    assert (_accepted_by_sglangs_verify(chain_ids, chain_mask, right),
            _accepted_by_sglangs_verify(tree_ids, tree_mask, right)) == (7, 3)


def test_the_next_step_counts_acceptance_along_the_alternative(sglang):
    worker = _worker("SPECPLUG_SUFFIX", width=8, max_branches=4)
    req = Req("r", FIRST_CANDIDATE_WRONG[:-2], FIRST_CANDIDATE_WRONG[-2:])
    worker._prepare_draft_tokens(Batch([req]))
    req.output_ids += [4, 7, 1, 2]  # the verify accepted 4 7 1 along the alternative, then the target's 2
    accepted = []
    guard = worker.drafting.guard
    original = guard.step_batch
    guard.step_batch = lambda step: (got := original(step), accepted.extend(got.accepted.tolist()))[0]
    worker._prepare_draft_tokens(Batch([req]))
    assert accepted == [3]  # the chain (3 8 1 2 ...) would count 0
