"""No bad draft reaches an engine: Proposer.propose rejects it, the guard empties that row only."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import specplug
from specplug import BatchDrafts, BatchStep, Draft, GuardedProposer, InvalidDraftError
from specplug.engine import EngineDrafting
from adapters.sglang._trees import draft_trees
from tests.hardening._bad import (
    BAD_BATCH_FIELDS,
    BAD_DRAFTS,
    GOOD,
    TOO_BIG_FOR_A_CHAIN,
    BadBatchFields,
    BadBatchRows,
    BadDrafts,
    ShiftingDraft,
    UncheckedBadDrafts,
)

KINDS = sorted(BAD_DRAFTS)


def valid(draft: Draft, limit: int) -> bool:
    """What an engine may read: a plain Draft whose every branch is a tuple of token ids within the limit."""
    return (
        type(draft) is Draft and type(draft.alternatives) is tuple and type(draft.source) is str
        and type(draft.needs_neural) is bool and (draft.score is None or type(draft.score) is float)
        and (draft.match is None or (type(draft.match) is int and draft.match >= 0))
        and all(
            type(branch) is tuple and len(branch) <= limit
            and all(type(token) is int and 0 <= token <= specplug.MAX_TOKEN_ID for token in branch)
            for branch in (draft.tokens, *draft.alternatives)
        )
    )


@pytest.mark.parametrize("kind", KINDS)
def test_propose_rejects_a_bad_draft_naming_it(kind):
    proposer = BadDrafts()
    proposer.start(kind, [1, 2, 3])
    with pytest.raises(InvalidDraftError) as raised:
        proposer.propose(kind, 8)
    assert raised.value.kind in ("not a Draft", "tokens not a tuple", "token not an int", "token out of range", "too long")
    assert "\n" not in str(raised.value)
    assert proposer.extend(kind, [4]) == 0  # the request goes on, with no draft pending


@pytest.mark.parametrize("proposer_class", [BadDrafts, UncheckedBadDrafts])
def test_the_guard_turns_each_bad_draft_into_that_requests_empty_draft(proposer_class, caplog):
    guard = GuardedProposer(proposer_class())
    for kind in [*KINDS, "good"]:
        guard.start(kind, [1, 2, 3])
    with caplog.at_level(logging.WARNING, logger="specplug"):
        for _ in range(2):  # twice: each kind is logged once
            drafts = {kind: guard.propose(kind, 8) for kind in [*KINDS, "good"]}
    assert drafts.pop("good").tokens == GOOD.tokens
    assert all(draft.tokens == () for draft in drafts.values())
    assert guard.counters["bad_drafts"] == 2 * len(KINDS) == guard.counters["faults"]
    logged = [record.getMessage() for record in caplog.records]
    kinds = set()
    for bad in BAD_DRAFTS.values():
        with pytest.raises(InvalidDraftError) as raised:
            specplug.check_draft(bad, 8)
        kinds.add(raised.value.kind)
    assert len(kinds) == 5 and len(logged) == len(kinds)  # once per kind of bad draft
    assert all(any(f"({kind})" in message for message in logged) for kind in kinds)
    assert all("bad draft" in message for message in logged)


@pytest.mark.parametrize("proposer_class", [BadDrafts, UncheckedBadDrafts, BadBatchRows])
def test_one_bad_row_costs_only_its_own_draft_in_an_engine_step(proposer_class):
    drafting = EngineDrafting(proposer_class())
    ids = [*KINDS, "good-1", "good-2"]
    histories = np.array([[1, 2, 3, 7, 7]] * len(ids))
    limits = [4] * len(ids)
    for length in (3, 4, 5):  # each step, every row gains a token
        drafts = drafting.step([[histories[0, length - 1]]] * len(ids), [length] * len(ids), histories, limits, ids)
        assert all(valid(draft, 4) for draft in drafts)
        by_id = dict(zip(ids, drafts))
        assert by_id["good-1"].tokens == by_id["good-2"].tokens == GOOD.tokens
        bad = ("negative", "too-long", "huge") if proposer_class is BadBatchRows else KINDS
        assert all(by_id[kind].tokens == () for kind in bad)
    assert drafting.counters["bad_drafts"] > 0


def test_a_batch_path_that_returns_no_batch_drafts_gives_empty_rows():
    class NotABatch(BadDrafts):
        def _step_batch(self, step):
            self._step_lifecycle(step)
            return None

    guard = GuardedProposer(NotABatch())
    got = guard.step_batch(BatchStep.of(["a", "b"], [[], []], [4, 4], started=[("a", [1]), ("b", [2])]))
    assert got.lengths.tolist() == [0, 0] and guard.counters["bad_drafts"] == 1
    assert guard.step_batch(BatchStep.of(["a"], [[5]], [4])).lengths.tolist() == [0]
    assert "a" in guard.proposer  # a bad result is not a fault of the request's state: it goes on


def test_unhashable_request_ids_are_a_counted_fault_not_a_type_error():
    guard = GuardedProposer(specplug.create("ngram"))
    guard.start(["a"], [1, 2])
    assert guard.propose(["a"], 4).tokens == ()
    assert guard.extend(["a"], [3]) == 0
    guard.stop(["a"])
    assert ["a"] not in guard
    got = guard.step_batch(BatchStep(request_ids=[["a"]], new_tokens=np.empty(0, dtype=np.int64),
                                     offsets=np.zeros(2, dtype=np.int64), limits=np.array([4])))
    assert got.lengths.tolist() == [0]
    assert guard.counters["faults"] == 5
    with pytest.raises(specplug.RequestStateError, match="not hashable"):
        specplug.create("ngram").start({"a": 1}, [1])


class OverDraftingHead(specplug.Proposer):
    """A neural part that drafts 20 tokens whatever it is asked for, and skips the base check."""

    name = "head"
    draft_kind = "neural"

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        return Draft(tuple(range(100, 120)), self.name)

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass

    def propose(self, request_id, max_tokens):
        return self._propose(request_id, max_tokens)


@pytest.mark.parametrize("cost", [None, "llama-3.1-8b-h100"])
def test_the_hybrid_never_passes_on_an_over_drafting_heads_extra_tokens(cost):
    hybrid = specplug.create("hybrid", neural=OverDraftingHead(), lookup="ngram", neural_max_tokens=4, cost=cost)
    guard = GuardedProposer(hybrid)
    guard.start("r", [1, 2, 3, 4, 5, 6, 7, 8])  # nothing repeats: the lookup has no draft, the head is asked
    for _ in range(3):
        draft = guard.propose("r", 20)
        assert not set(draft.tokens) & set(range(104, 120))
        guard.extend("r", [9])
    assert guard.counters["bad_drafts"] >= 1


class CertainLookup(specplug.Proposer):
    """A lookup that scores each of its drafts as certain: infinitely many expected tokens."""

    name = "certain"

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        return Draft((7,) * min(max_tokens, 3), self.name, float("inf"))

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass


def test_an_infinite_score_is_in_the_top_score_band():
    """Before the fix the band's float was cast to int64 first: inf became -2**63, and the
    composites' kernels indexed their statistics with it, out of bounds."""
    from specplug.proposers.composite._parts import SCORE_BANDS, score_bands, score_bands_of_rows

    scores, lengths, limits = np.array([[np.inf, np.inf]]), np.array([[8, 3]]), np.array([8, 8])
    top = [SCORE_BANDS - 1, 2 * SCORE_BANDS - 1]  # a full-length draft, one the lookup ended sooner
    assert score_bands_of_rows(scores, lengths, limits).tolist() == [top]
    assert score_bands(scores[0], lengths[0], limits).tolist() == top


@pytest.mark.parametrize("batch", [False, True])
def test_a_lookups_infinite_scores_are_learned_in_its_own_top_band(batch):
    """The drafts of a lookup that scores them infinite are scored in the lookup's top band (they
    are shorter than asked: the second half of the bands) and nowhere else; before the fix their
    band was -2**63 + 7 and the kernels wrote the counts into another track's statistics."""
    from specplug.proposers.composite._parts import SCORE_BANDS
    from specplug.proposers.composite.hybrid import LOOKUP

    neural = specplug.create("ngram", min_n=1, max_n=2)
    neural.draft_kind = "neural"
    hybrid = specplug.create("hybrid", neural=neural, lookup=CertainLookup(), max_positions=8)
    ids = ["a", "b"]
    if batch:
        hybrid.step_batch(BatchStep.of(ids, [[], []], [8, 8], started=[(request_id, [1, 2, 3]) for request_id in ids]))
        hybrid.step_batch(BatchStep.of(ids, [[7, 7, 7], [7, 7, 7]], [0, 0]))
    else:
        for request_id in ids:
            hybrid.start(request_id, [1, 2, 3])
            hybrid.propose(request_id, 8)
            hybrid.extend(request_id, [7, 7, 7])
    drafted = hybrid.statistics()[0]
    lookup_bands = drafted[LOOKUP].sum(axis=1)
    assert np.flatnonzero(lookup_bands).tolist() == [2 * SCORE_BANDS - 1]
    assert drafted[LOOKUP, 2 * SCORE_BANDS - 1, :3].tolist() == [2.0, 2.0, 2.0]
    others = np.delete(drafted, LOOKUP, axis=0)
    assert others[:, 1:].sum() == 0  # the neural and confirmed tracks keep band 0 alone


class OverLongBatchLookup(CertainLookup):
    """A lookup whose own batch path reports more tokens in each row than the row asked for."""

    name = "over-long"

    def _step_batch(self, step):
        self._step_lifecycle(step)
        rows, width = step.rows, int(step.limits.max()) if step.rows else 0
        tokens = np.full((rows, width), 7, dtype=np.int64)
        lengths = step.limits + 1000
        return BatchDrafts(tokens, lengths, np.zeros(rows, dtype=np.int64), [self.name] * rows, np.full(rows, np.nan),
                           np.ones(rows, dtype=bool))


class OverLongBatchHead(OverLongBatchLookup):
    name = "over-long-head"
    draft_kind = "neural"


@pytest.mark.parametrize("cost", [None, "llama-3.1-8b-h100"])
@pytest.mark.parametrize("over_long", ["lookup", "neural"])
def test_the_composites_refuse_a_parts_batch_rows_longer_than_asked(cost, over_long):
    """Before the fix the composites took a part's batch lengths as given and their kernels read
    (and wrote the rows of last drafts) that far past their arrays: a silent wrong choice, or a crash."""
    lookup = OverLongBatchLookup() if over_long == "lookup" else specplug.create("ngram", min_n=1, max_n=2)
    neural = OverLongBatchHead() if over_long == "neural" else specplug.create("ngram", min_n=1, max_n=2)
    neural.draft_kind = "neural"
    hybrid = specplug.create("hybrid", neural=neural, lookup=lookup, max_positions=8, cost=cost, explore=100.0)
    step = BatchStep.of(["a", "b"], [[], []], [8, 8], started=[("a", [1, 2, 3]), ("b", [4, 5])])
    with pytest.raises(InvalidDraftError, match=f"{lookup.name if over_long == 'lookup' else neural.name} drafted 10"):
        hybrid.step_batch(step)


class Chain(specplug.Proposer):
    """A chain proposer that fills ``alternatives`` anyway (the SGLang worker verifies ``branches()``)."""

    name = "chain"
    _start = _extend = _stop = lambda *arguments: None

    def __init__(self, draft: Draft) -> None:
        super().__init__()
        self.draft = draft

    def _propose(self, request_id, max_tokens):
        return self.draft


def test_invalid_alternatives_never_reach_an_sglang_draft_tree():
    drafting = EngineDrafting(Chain(Draft((5, 6), "chain", alternatives=((-3, 2**40),))))
    draft = drafting.step_requests([("a", [1, 2, 3], 4)])[0]
    ids, _ = draft_trees([3], [list(draft.branches())], 5)
    assert draft.tokens == () and ids.tolist() == [3, 0, 0, 0, 0]
    assert drafting.counters["faults"] == drafting.counters["bad_drafts"] == 1


@pytest.mark.parametrize("kind", sorted(set(KINDS) - set(TOO_BIG_FOR_A_CHAIN)))
def test_a_tree_engine_gets_no_bad_branch(kind):
    """The draft-tree path (``propose_alternatives``, checked or not by the base class) empties every bad tree."""

    class Trees(BadDrafts):
        proposes_alternatives = True

        def _propose_alternatives(self, request_id, max_tokens, max_branches):
            return self._propose(request_id, max_tokens)

    class UncheckedTrees(Trees):
        def propose_alternatives(self, request_id, max_tokens, max_branches):
            return self._propose(request_id, max_tokens)

    for proposer in (Trees(kind), UncheckedTrees(kind)):
        drafting = EngineDrafting(proposer)
        rows = drafting.sync_batch([[2]], [4], [[1, 2, 3, 2]], ["a"])
        drafts = drafting.draft([(rows[0], 4), (rows[0], 4)], max_branches=3)
        assert all(valid(draft, 4) and draft.tokens == () for draft in drafts)
        assert drafting.counters["bad_drafts"] == 2 == drafting.counters["faults"]


def test_a_tree_too_big_for_its_budget_is_cut_not_refused():
    for kind in TOO_BIG_FOR_A_CHAIN:
        tree = specplug.check_tree_draft(BAD_DRAFTS[kind], 4, 3)
        assert valid(tree, 4) and len(tree.alternatives) <= 2


@pytest.mark.parametrize("checked", [True, False])
def test_a_draft_that_changes_after_its_check_reaches_the_engine_as_checked(checked):
    proposer = (BadDrafts if checked else UncheckedBadDrafts)()
    proposer._propose = lambda request_id, max_tokens: ShiftingDraft((4, 5), "bad")
    drafting = EngineDrafting(proposer)
    drafts = drafting.step_requests([("a", [1, 2, 3], 4)]) + drafting.step_requests([("a", [1, 2, 3, 4], 4)])
    assert all(valid(draft, 4) and draft.tokens == (4, 5) for draft in drafts)
    assert drafting.counters["faults"] == 0


@pytest.mark.parametrize("field", sorted(BAD_BATCH_FIELDS))
def test_a_batch_paths_malformed_side_fields_cost_drafts_never_an_exception(field):
    drafting = EngineDrafting(BadBatchFields(field))
    ids = ["a", "b", "c"]
    histories = np.array([[1, 2, 3, 7, 7]] * 3)
    for length in (3, 4, 5):
        drafts = drafting.step([[histories[0, length - 1]]] * 3, [length] * 3, histories, [4] * 3, ids)
        assert len(drafts) == 3 and all(valid(draft, 4) for draft in drafts)
    if field == "shifting":  # valid when checked: copied, so its later change never shows
        assert drafting.counters["faults"] == 0 and drafts[0].tokens == GOOD.tokens
    else:
        assert drafting.counters["bad_drafts"] >= 3 and drafting.counters["faults"] >= 3
    guard = drafting.guard
    got = guard.step_batch(BatchStep.of(ids, [[1], [2], [3]], [4, 4, 4]))
    # every array an engine reads, readable and of its row count
    assert got.tokens.shape[0] == got.lengths.shape[0] == got.accepted.shape[0] == 3
    assert got.scores.shape == (3,) and got.needs_neural.shape == (3,) and len(got.sources) == 3
    assert got.matches.shape == (3,) and (got.matches >= 0).all()
    assert (got.accepted >= 0).all() and all(valid(draft, 4) for draft in got.drafts())


def test_a_plugins_batch_result_is_copied_so_it_cannot_change_after_the_check():
    class Keeps(BadBatchFields):
        def _step_batch(self, step):
            self.last = super()._step_batch(step)
            return self.last

    guard = GuardedProposer(Keeps("sources-short"))
    guard.proposer.field = "shifting"  # a valid result, whose tokens change on a later read
    got = guard.step_batch(BatchStep.of(["a"], [[]], [4], started=[("a", [1, 2])]))
    guard.proposer.last._tokens[:] = -7  # the plugin writes into the arrays it returned
    assert got.draft(0).tokens == GOOD.tokens and guard.counters["faults"] == 0
