"""scripts/causal_bounds.py: its policies are priced as the bench prices them, and its fits are ordered as they must be."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from specplug.cost import cost_model
from specplug.lab.bench import parse_method, run_benchmark
from specplug.lab.bench._synthetic import synthetic_records

_spec = importlib.util.spec_from_file_location("causal_bounds", Path(__file__).parent.parent / "scripts" / "causal_bounds.py")
causal_bounds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(causal_bounds)

COST = cost_model("llama-3.1-8b-h100")


@pytest.fixture(scope="module")
def workload():
    group = synthetic_records("stress-selective", requests=3, length=96)
    return group, causal_bounds.requests_of(group, COST, 1)


def test_a_fixed_policy_and_the_oracle_equal_the_bench(workload):
    group, requests = workload
    plain = sum(r.plain for r in requests)
    result = run_benchmark(group, [parse_method(name) for name in causal_bounds.DRAFTERS], COST, k=8, batch_sizes=[1],
                           best_fixed=True, engine_runs=False)
    figures = {row.method: row.speedup[1] for row in result.rows}
    for name in causal_bounds.DRAFTERS:  # each drafter alone asked for 8 tokens at every step
        action = causal_bounds.ACTIONS.index((causal_bounds.DRAFTERS.index(name), 8))
        assert plain / sum(r.walk(lambda p, l: action) for r in requests) == pytest.approx(figures[name], rel=1e-9), name
    assert plain / causal_bounds.oracle_time(requests, group, COST, 1) == pytest.approx(figures["oracle"], rel=1e-9)
    assert plain / causal_bounds.best_fixed(requests)[0] == pytest.approx(figures["best fixed"], rel=1e-9)


def test_fits_lie_between_the_best_fixed_choice_and_the_oracle(workload):
    group, requests = workload
    fixed, action = causal_bounds.best_fixed(requests)
    pooled, table = causal_bounds.best_map(requests, action)
    oracle = causal_bounds.oracle_time(requests, group, COST, 1)
    # the map starts from the best fixed choice everywhere, so it can only save time; no causal map beats the oracle
    assert oracle <= pooled <= fixed
    assert sum(r.walk_map(table) for r in requests) == pytest.approx(pooled)
    # on stress-selective the neural drafter pays on some requests only: a state map must find that and gain
    assert pooled < 0.99 * fixed
