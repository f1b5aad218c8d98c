"""Creating methods for an engine by their declared capabilities (built-in and a plugin's)."""

from __future__ import annotations

import pytest

import specplug
from specplug.cost import OnlineCostModel
from specplug.engine import (
    EngineDrafts,
    StandInDrafter,
    capabilities_of,
    create_for_engine,
    methods_composing_engine_drafter,
)

# method, option taking the engine's drafter, option taking a cost model, a part option and a value for it
COMPOSITES = [("hybrid", "neural", "cost", {"lookup": "ngram"}), ("relay", "head", "price", {"backup": "suffix"})]


def option_value(proposer, option):
    """An option's value as the proposer holds it (built-ins keep their options model; relay keeps attributes)."""
    return getattr(getattr(proposer, "options", proposer), option)


@pytest.fixture(params=COMPOSITES, ids=[item[0] for item in COMPOSITES])
def composite(request, relay_distribution):
    return request.param


def test_the_engines_drafter_goes_where_the_method_declares(composite):
    method, drafter_option, _, parts = composite
    drafter = EngineDrafts("mtp")
    proposer = create_for_engine(method, parts, engine_drafter=drafter)
    assert capabilities_of(method).engine_drafter_option == drafter_option
    assert option_value(proposer, drafter_option) is drafter


def test_a_composing_method_without_a_drafter_is_refused_naming_method_and_option(composite):
    method, drafter_option, _, parts = composite
    with pytest.raises(specplug.InvalidOptionError) as raised:
        create_for_engine(method, parts, engine="some engine", hint="start it with a drafter")
    message = str(raised.value)
    assert f"method {method!r}" in message and f"option {drafter_option!r}" in message
    assert "some engine offers none" in message and message.endswith("start it with a drafter")


def test_the_user_may_give_the_drafter_where_the_engine_has_none_but_not_both(composite):
    method, drafter_option, _, parts = composite
    mine = specplug.create("ngram", min_n=1, max_n=1)
    proposer = create_for_engine(method, {**parts, drafter_option: mine})
    assert option_value(proposer, drafter_option) is mine
    with pytest.raises(specplug.InvalidOptionError, match=f"option {drafter_option!r} takes the engine's own drafter"):
        create_for_engine(method, {**parts, drafter_option: mine}, engine_drafter=EngineDrafts())


@pytest.mark.parametrize("method", ["adaptive", "hybrid", "relay"])
def test_the_engines_cost_model_goes_to_the_declared_cost_option_unless_given(method, relay_distribution):
    cost_option = capabilities_of(method).cost_option
    costs = OnlineCostModel()
    proposer = create_for_engine(method, {}, engine_drafter=StandInDrafter(), step_costs=costs)
    assert option_value(proposer, cost_option) is costs
    mine = OnlineCostModel()
    given = create_for_engine(method, {cost_option: mine}, engine_drafter=StandInDrafter(), step_costs=costs)
    assert option_value(given, cost_option) is mine  # the user's choice stands


def test_methods_that_compose_nothing_ignore_the_drafter_and_the_costs():
    proposer = create_for_engine("suffix", {"max_depth": 12}, engine_drafter=EngineDrafts(), step_costs=OnlineCostModel())
    assert proposer.name == "suffix"


def test_unknown_methods_list_the_valid_ones():
    with pytest.raises(specplug.UnknownMethodError, match="valid methods: .*suffix"):
        create_for_engine("sufix", {})
    with pytest.raises(specplug.UnknownMethodError):
        capabilities_of(None)


def test_the_composing_methods_are_found_by_capability(relay_distribution):
    composing = methods_composing_engine_drafter()
    assert {"adaptive", "hybrid", "relay"} <= set(composing) and "suffix" not in composing


def test_adaptive_takes_the_engine_drafter_as_one_more_candidate_and_runs_without_one():
    assert capabilities_of("hybrid").engine_drafter_required and not capabilities_of("adaptive").engine_drafter_required
    drafter = StandInDrafter()
    with_head = create_for_engine("adaptive", {"candidates": ["suffix"]}, engine_drafter=drafter)
    assert [candidate.name for candidate in with_head.candidates] == ["suffix", "stand-in"]
    assert with_head.candidates[-1] is drafter and with_head.draft_kind == "neural"
    alone = create_for_engine("adaptive", {"candidates": ["suffix"]}, engine="llama-cpp-python")
    assert [candidate.name for candidate in alone.candidates] == ["suffix"] and alone.draft_kind == "lookup"
    with pytest.raises(specplug.InvalidOptionError, match="hands it; remove neural"):
        create_for_engine("adaptive", {"neural": "ngram"}, engine_drafter=drafter)
    ngram = specplug.create("ngram")
    with pytest.raises(specplug.InvalidOptionError, match="also listed among candidates"):
        specplug.create("adaptive", candidates=[ngram], neural=ngram)


def test_the_stand_in_never_drafts():
    stand_in = StandInDrafter()
    stand_in.start("r", [1, 2])
    assert stand_in.propose("r", 4).tokens == () and stand_in.draft_kind == "neural"
