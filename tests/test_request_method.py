"""A request that names the part of a composite method drafting it (``BatchStep.methods``, the
``specplug_method`` control): its rows are drafted by that part or not at all, whatever the
composite would have chosen; rows that name nothing draft exactly as without the field."""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug import BatchStep, InvalidOptionError
from specplug.engine import EngineDrafting, served_methods


def _neural() -> specplug.Proposer:
    """A deterministic stand-in for a neural drafter: an n-gram lookup declared neural, its drafts named apart."""
    part = specplug.create("ngram", min_n=1, max_n=2)
    part.draft_kind = "neural"
    part.name = "head"
    return part


COMPOSITES = {
    "adaptive": lambda: specplug.create("adaptive"),
    "adaptive-neural": lambda: specplug.create("adaptive", neural=_neural(), explore=1.0),
    "hybrid": lambda: specplug.create("hybrid", neural=_neural(), lookup="suffix", explore=1.0),
    "hybrid-by-cost": lambda: specplug.create("hybrid", neural=_neural(), lookup="suffix", cost="llama-3.1-8b-h100",
                                              explore=1.0),
}


def _run(composite, methods_of_row, steps: int = 40, seed: int = 5) -> list[list[tuple[tuple[int, ...], str]]]:
    """``steps`` batch steps over 8 requests on repetitive text, each row's new tokens accepting a
    random prefix of its draft; per step, every row's (draft, source). ``methods_of_row``: the
    ``BatchStep.methods`` of every step (None: the field left out)."""
    rng = np.random.default_rng(seed)
    text = np.tile(rng.integers(0, 12, size=30), 40)
    ids = list(range(8))
    position = {rid: 4 * rid + 24 for rid in ids}
    composite.step_batch(BatchStep.of([], [], [], started=[(rid, text[: position[rid]].tolist()) for rid in ids]))
    new = {rid: [] for rid in ids}
    out = []
    for _ in range(steps):
        step = BatchStep.of(ids, [new[rid] for rid in ids], [6] * len(ids))
        if methods_of_row is not None:
            step = BatchStep(step.request_ids, step.new_tokens, step.offsets, step.limits, methods=list(methods_of_row))
        got = composite.step_batch(step)
        drafts = []
        for row, rid in enumerate(ids):
            draft = got.tokens[row, : got.lengths[row]].tolist()
            drafts.append((tuple(draft), got.sources[row]))
            truth = text[position[rid] : position[rid] + len(draft) + 1].tolist()
            keep = 0
            while keep < len(draft) and draft[keep] == truth[keep] and rng.random() < 0.8:
                keep += 1
            new[rid] = draft[:keep] + [int(truth[keep])]
            position[rid] += keep + 1
        out.append(drafts)
    return out


@pytest.mark.parametrize("config", sorted(COMPOSITES))
def test_rows_that_name_no_part_draft_exactly_as_without_the_field(config):
    assert _run(COMPOSITES[config](), [None] * 8) == _run(COMPOSITES[config](), None)


@pytest.mark.parametrize("config", sorted(COMPOSITES))
def test_a_row_is_drafted_only_by_the_part_it_names(config):
    composite = COMPOSITES[config]()
    names = composite.request_methods
    neural = "neural" in names
    lookup_source = {"suffix": "suffix", "ngram": "ngram", "neural": "head"}
    # rows 0-1 free, the rest restricted, each name on two rows
    methods = [None, None, *[names[i % len(names)] for i in range(6)]]
    free = _run(COMPOSITES[config](), None)
    steps = _run(composite, methods)
    drafted = {name: 0 for name in names}
    for step in steps:
        for (tokens, source), method in zip(step, methods):
            if method is None or not tokens:
                continue
            drafted[method] += 1
            assert source == lookup_source[method], (method, source)
    assert all(drafted.values()), drafted  # every part drafted its rows
    if neural:  # the free run takes the lookup's draft where it has one; a row held to the head takes the head's
        chosen = [source for step in free for (tokens, source), method in zip(step, methods) if tokens and method == "neural"]
        assert any(source != "head" for source in chosen), chosen


def test_the_parts_a_request_may_name_are_the_lookups_by_name_and_neural():
    assert specplug.create("adaptive").request_methods == ("suffix", "ngram")
    assert specplug.create("adaptive", neural=_neural()).request_methods == ("suffix", "ngram", "neural")
    assert specplug.create("hybrid", neural=_neural(), lookup="ngram").request_methods == ("ngram", "neural")
    assert served_methods("hybrid", specplug.create("hybrid", neural=_neural())) == ("hybrid", "suffix", "neural")
    assert served_methods("ngram", specplug.create("ngram")) == ("ngram",)


def test_methods_of_the_wrong_length_are_refused_naming_them():
    proposer = specplug.create("adaptive")
    proposer.start("a", [1, 2, 3, 1, 2])
    with pytest.raises(InvalidOptionError, match=r"BatchStep.methods must be None or a list of one name \(or None\) per row"):
        proposer.step_batch(BatchStep(["a"], np.empty(0, dtype=np.int64), np.zeros(2, dtype=np.int64),
                                      np.array([2]), methods=["suffix", "ngram"]))


def test_the_engine_layer_reads_counts_and_checks_a_requests_method():
    drafting = EngineDrafting(specplug.create("adaptive"), method="adaptive")
    assert drafting.request_methods == ("adaptive", "suffix", "ngram")
    assert drafting.control_of({"specplug_method": "ngram"}).method == "ngram"
    assert drafting.control_of({"specplug_method": "adaptive"}).default  # the server's own method: no restriction
    assert drafting.counters["request_control.method"] == 1 and drafting.counters["faults"] == 0
    assert drafting.control_of({"specplug_method": "eagle"}).default  # got past admission: drafts as the server is set
    assert drafting.counters["faults"] == 1
    single = EngineDrafting(specplug.create("suffix"), method="suffix")
    assert single.control_of({"specplug_method": "suffix"}).default
    assert single.control_of({"specplug_method": "ngram"}).default and single.counters["faults"] == 1


def test_the_engine_layer_carries_each_rows_method_to_the_composite():
    drafting = EngineDrafting(specplug.create("adaptive"), method="adaptive")
    text = [1, 2, 3, 4, 5, 6, 7, 8] * 6
    histories = np.array([text + [0] * 8] * 3)
    for step in range(6):
        length = 40 + step
        drafts = drafting.step([[text[length - 1]]] * 3, [length] * 3, histories, [4, 4, 4], ["a", "b", "c"],
                               methods=["ngram", None, "suffix"])
    assert [draft.source for draft in drafts] == ["ngram", "suffix", "suffix"]
    assert all(len(draft.tokens) == 4 for draft in drafts)
    # an engine that shows requests by id: rows that do not draft are left out of the step, their methods with them
    keyed = EngineDrafting(specplug.create("adaptive"), method="adaptive")
    for length in (44, 45, 46):
        rows = keyed.step_requests([("a", text[:length], 4), None, ("c", text[:length], 4)], methods=["ngram", "suffix", None])
    assert [draft.source for draft in rows] == ["ngram", "adaptive", "suffix"]
