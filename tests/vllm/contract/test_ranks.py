"""Tensor-parallel ranks make the overlay's choices alike: two simulated ranks, each with its own clock,
run the hybrid overlay in two threads joined by a stand-in for vLLM's tensor-parallel group."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from specplug.engine import AgreedObservations
from specplug_adapters.vllm import _hybrid
from specplug_adapters.vllm._hybrid import EXCHANGE_EVERY, HybridOverlay
from tests.vllm.contract.test_step_costs import VERIFY_S, overlay_over_a_head

STEPS = 40


class Group:
    """A broadcast from rank 0 that every rank must reach before any returns (as a collective)."""

    def __init__(self, size: int) -> None:
        self.barrier = threading.Barrier(size, timeout=10)
        self.sent: list = []
        self.calls = [0] * size

    def share_of(self, rank: int):
        def share(mine: list) -> list:
            self.calls[rank] += 1
            if rank == 0:
                self.sent = list(mine)
            self.barrier.wait()
            got = list(self.sent)
            self.barrier.wait()
            return got

        return share


def run_ranks(pass_seconds: list[float], group: Group | None) -> list[tuple[list[int], list[int]]]:
    """Each rank's (draft lengths, vLLM drafter's pass lengths) over STEPS steps; rank r's clock times
    the drafter's pass at ``pass_seconds[r]``."""
    ranks = [overlay_over_a_head(pass_s=seconds) for seconds in pass_seconds]
    for rank, (overlay, _, _) in enumerate(ranks):
        share = group.share_of(rank) if group is not None else None
        overlay.agreed = AgreedObservations(share, every=EXCHANGE_EVERY)
    results: list = [None] * len(ranks)
    errors: list[BaseException] = []

    def run(rank: int) -> None:
        try:
            _, steps, asked = ranks[rank]
            results[rank] = (steps(STEPS), asked)
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)

    threads = [threading.Thread(target=run, args=(rank,)) for rank in range(len(ranks))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results


# rank 0's clock says the head's pass costs 8 engine steps (declined once timed), rank 1's a fifth of one
CLOCKS = [8 * VERIFY_S, 0.2 * VERIFY_S]


def test_ranks_with_different_clocks_run_the_drafters_pass_alike():
    group = Group(2)
    (lengths_0, passes_0), (lengths_1, passes_1) = run_ranks(CLOCKS, group)
    assert passes_0 == passes_1  # the same pass, at the same length, on the same steps: the collectives match
    assert lengths_0 == lengths_1
    assert passes_0[-20:] == [0] * 20  # both follow rank 0's times: the pass is declined (fill only)
    assert group.calls == [STEPS // EXCHANGE_EVERY] * 2  # one exchange every EXCHANGE_EVERY steps


def test_without_the_exchange_the_same_clocks_split_the_ranks():
    # what the exchange prevents: each rank learning its own clock runs the drafter's pass differently
    (_, passes_0), (_, passes_1) = run_ranks(CLOCKS, None)
    assert passes_0[-20:] == [0] * 20 and passes_1[-20:] == [3] * 20


def _overlay(tensor_parallel: int, **section) -> HybridOverlay:
    return HybridOverlay(SimpleNamespace(
        additional_config={"specplug": {"method": "hybrid", "neural": "eagle", "lookup": "ngram", **section}},
        speculative_config=SimpleNamespace(method="eagle"),
        parallel_config=SimpleNamespace(tensor_parallel_size=tensor_parallel, data_parallel_size=1),
    ))


@pytest.mark.parametrize(("tensor_parallel", "section", "shares"), [
    (2, {}, True),  # online costs and a pass the choice may skip: exchanged through vLLM's group
    (1, {}, False),  # one rank: its own clock
    (2, {"unused_neural_pass": "full"}, False),  # the pass runs every step whatever is chosen
    (2, {"step_costs": "off"}, False),  # nothing timed
])
def test_the_overlay_exchanges_times_only_where_ranks_could_split(tensor_parallel, section, shares):
    overlay = _overlay(tensor_parallel, **section)
    assert (overlay.agreed.share is _hybrid._tensor_parallel_share) is shares


def test_a_failed_exchange_costs_the_steps_times_never_the_step():
    overlay, steps, _ = overlay_over_a_head(pass_s=0.2 * VERIFY_S)

    def broken(mine: list) -> list:
        raise RuntimeError("group gone")

    overlay.agreed = AgreedObservations(broken)
    assert steps(3) == [3, 3, 3]
    assert overlay.counters["faults"] == 3 and overlay.step_costs.observations(1) == 0


def test_agreed_observations_apply_rank_zeros_list_at_each_exchange():
    sent: list[list] = []

    def share(mine: list) -> list:
        sent.append(mine)
        return ["rank 0's"]

    agreed = AgreedObservations(share, every=2)
    agreed.record("mine")
    assert agreed.take() == []  # between exchanges nothing is applied
    assert agreed.take() == ["rank 0's"] and sent == [["mine"]]
    with pytest.raises(ValueError, match="every = 0 is not valid; it must be >= 1"):
        AgreedObservations(share, every=0)
