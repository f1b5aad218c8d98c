"""Draft alternatives (``Proposer.propose_alternatives``): the branches of a draft tree."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug import Draft, GuardedProposer, InvalidDraftError, InvalidOptionError, Proposer, check_tree_draft
from specplug.engine import EngineDrafting

#: "1 2" was followed by 3 twice (3 9, then 3 8), then by 4 7: the vote says 3 8 (ties: the latest)
HISTORY = [1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 4, 7, 1, 2]


class Scripted(Proposer):
    """Returns whatever draft it is given: a proposer whose alternatives may be bad."""

    name = "scripted"
    proposes_alternatives = True

    def __init__(self, draft: object) -> None:
        super().__init__()
        self.draft = draft

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        return Draft((5,), self.name)

    def _propose_alternatives(self, request_id, max_tokens, max_branches):
        return self.draft

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass


@pytest.mark.parametrize("implementation", ["fast", "reference"])
def test_suffix_grows_the_split_vote_into_a_tree_and_acceptance_follows_the_right_branch(implementation):
    proposer = specplug.create("suffix", implementation=implementation)
    proposer.start("r", HISTORY)
    assert proposer.propose("r", 4).tokens == (3, 8, 1, 2)
    draft = proposer.propose_alternatives("r", 4, 4)
    # 3 (two voters of three) first; then 4 and 8 (one each) beat the draft's 1 at depth 3
    assert draft.branches() == ((3, 8), (4, 7))
    assert proposer.extend("r", [4, 7, 5]) == 2  # the target took the alternative: both accepted
    # a budget that holds every voter's continuation keeps the whole vote and adds the others
    proposer.start("s", HISTORY)
    wide = proposer.propose_alternatives("s", 20, 4)
    assert wide.tokens == proposer.propose("s", 20).tokens and set(wide.alternatives) == {(4, 7, 1, 2), (3, 9, 1, 2, 3, 8, 1, 2)}


def test_one_branch_asked_is_the_single_draft():
    proposer = specplug.create("suffix")
    proposer.start("r", HISTORY)
    assert proposer.propose_alternatives("r", 4, 1) == proposer.propose("r", 4)


def test_a_proposer_without_alternatives_gives_its_draft():
    proposer = specplug.create("ngram", min_n=1, max_n=2)
    proposer.start("r", HISTORY)
    assert not proposer.proposes_alternatives
    draft = proposer.propose_alternatives("r", 3, 4)
    assert draft.alternatives == () and draft == proposer.propose("r", 3)


@pytest.mark.parametrize("bad", [0, -1, True, 2.0, "3"])
def test_a_bad_branch_count_is_one_clear_error(bad):
    proposer = specplug.create("suffix")
    proposer.start("r", HISTORY)
    with pytest.raises(InvalidOptionError, match=f"max_branches = {bad!r} is not valid; it must be an int >= 1"):
        proposer.propose_alternatives("r", 2, bad)


def test_alternatives_are_cut_to_the_budget_and_deduplicated():
    draft = Draft((1, 2, 3), "x", alternatives=((1, 2, 9, 9), (4,), (1, 2, 3), (), (6,), (7,)))
    # six tokens: 1 2 3, then 9 9 below 1 2, then 4; no room for 6
    checked = check_tree_draft(draft, 6, 4)
    assert checked.branches() == ((1, 2, 3), (1, 2, 9, 9), (4,))
    assert check_tree_draft(draft, 4, 4).branches() == ((1, 2, 3), (1, 2, 9))  # a branch cut where room ends
    assert check_tree_draft(draft, 9, 2).branches() == ((1, 2, 3), (1, 2, 9, 9))  # two branches asked
    assert check_tree_draft(Draft((), "x", alternatives=((1,),)), 3, 3).branches() == ()  # no draft, no tree
    good = Draft((1,), "x", alternatives=((2,),))
    assert check_tree_draft(good, 3, 2) is good


@pytest.mark.parametrize(
    ("draft", "message"),
    [
        (Draft((1,), "x", alternatives=((2, -5),)), r"drafted token -5 at position 1"),
        (Draft((1,), "x", alternatives=((2, 1 << 40),)), r"drafted token 1099511627776 at position 1"),
        (Draft((1,), "x", alternatives=((np.int64(4),),)), r"drafted np.int64\(4\) \(int64\) at position 0"),
        (Draft((1, "a"), "x"), r"drafted 'a' \(str\) at position 1"),
        (Draft((1,), "x", alternatives=(5,)), r"drafted an alternative of type int"),
        ((1, 2), r"returned tuple \(1, 2\), not a Draft"),
    ],
)
def test_a_bad_draft_is_refused_naming_the_bad_value(draft, message):
    proposer = Scripted(draft)
    proposer.start("r", [1])
    with pytest.raises(InvalidDraftError, match=message):
        proposer.propose_alternatives("r", 4, 3)
    # behind the guard (inside an engine) it costs that draft only
    guarded = GuardedProposer(Scripted(draft))
    guarded.start("r", [1])
    assert guarded.propose_alternatives("r", 4, 3).branches() == ()
    assert guarded.counters["bad_drafts"] == 1


def test_the_engine_layer_asks_for_branches_only_where_a_tree_is_verified():
    drafting = EngineDrafting(specplug.create("suffix"))
    rows = drafting.sync_batch([[2]], [len(HISTORY)], [HISTORY], ["r"])
    chain = drafting.draft([(rows[0], 4)])[0]
    assert chain.branches() == ((3, 8, 1, 2),)
    tree = drafting.draft([(rows[0], 4), (None, 4)], max_branches=3)
    assert tree[0].branches() == ((3, 8), (4, 7))
    assert tree[1].branches() == ()
    assert drafting.counters["tree_drafts"] == 1 and drafting.counters["alternatives"] == 1
