"""SpecplugDrafter and SpecplugResourceManager driven the way TensorRT-LLM's executor drives them."""

from __future__ import annotations

import gc
import pickle
import random
import sys

import numpy as np
import pytest

import specplug
from specplug import Draft, Proposer
from specplug_adapters.trtllm import DrafterSettings
from specplug_adapters.trtllm._drafter import SpecplugDrafter, drafter_class
from specplug_adapters.trtllm._resources import SpecplugResourceManager, resource_manager_class
from tests.trtllm._standins import (
    BaseResourceManager,
    Drafter,
    Executor,
    LlmRequest,
    LlmRequestState,
    ScheduledRequests,
    markov_target,
    plain_output,
)

DrafterOnSource = drafter_class(Drafter)
ResourcesOnSource = resource_manager_class(BaseResourceManager)


def pair(method: str = "suffix", k: int = 6, **kwargs):
    drafter = DrafterOnSource(DrafterSettings(method, kwargs.pop("options", {}), k), **kwargs)
    return drafter, ResourcesOnSource(drafter)


def generation_request(request_id: int, tokens, max_new: int = 64) -> LlmRequest:
    request = LlmRequest(request_id, tokens, max_new)
    request.state = LlmRequestState.GENERATION_IN_PROGRESS
    request.is_first_context_chunk = False
    return request


def test_the_class_completes_the_source_drafter_abc():
    drafter, resources = pair(k=5)
    assert isinstance(drafter, Drafter) and isinstance(resources, BaseResourceManager)
    assert (drafter.max_draft_len, drafter.max_total_draft_tokens, drafter._static_max_total_draft_tokens) == (5, 5, 5)
    assert resources.get_max_resource_count() == 0  # never gates TensorRT-LLM's scheduler
    assert resources.get_needed_resource_to_completion(generation_request(1, [1, 2])) == 0
    # without TensorRT-LLM the shipped class stands on a fallback with the same attributes
    assert SpecplugDrafter(DrafterSettings("ngram", {}, 4)).max_total_draft_tokens == 4


@pytest.mark.parametrize("method", ["suffix", "ngram", "adaptive"])
def test_greedy_output_is_unchanged_and_drafts_are_accepted(method):
    target = markov_target()
    rng = random.Random(3)
    prompts = {rid: [rng.randrange(40) for _ in range(rng.randrange(5, 150))] for rid in range(12)}
    drafter, resources = pair(method, 6)
    engine = Executor(drafter, resources, target, chunk=32)
    for rid, prompt in prompts.items():
        engine.add(LlmRequest(rid, prompt, max_new_tokens=20 + 7 * rid))
    engine.run()
    for rid, prompt in prompts.items():
        assert engine.outputs[rid] == plain_output(target, prompt, 20 + 7 * rid), rid
    assert engine.accepted > 50  # speculation happened, and paid
    assert all(length <= limit for length, limit in engine.drafted_lengths)
    assert len(drafter.runtime.sync) == 0 and drafter.runtime.guard.proposer.active_requests() == []


def test_drafts_follow_the_scheduled_length_and_the_remaining_room():
    target = markov_target()
    drafter, resources = pair("ngram", 6, options={"min_n": 1, "max_n": 2})
    schedule = lambda batch: 6 if batch <= 2 else (3 if batch <= 4 else 0)  # noqa: E731
    engine = Executor(drafter, resources, target, chunk=512, schedule=schedule)
    for rid in range(6):
        engine.add(LlmRequest(rid, [1, 2, 3, 4] * 10, max_new_tokens=5 + 10 * rid))
    engine.run()
    assert {limit for _, limit in engine.drafted_lengths} == {0, 3, 6}
    assert all(length <= limit for length, limit in engine.drafted_lengths)
    assert any(length == 6 for length, _ in engine.drafted_lengths)
    near_end = generation_request(9, [1, 2, 3, 4] * 10 + [1], max_new=3)
    near_end._tokens += [2, 3]  # two of three new tokens done: room for none beyond the target's own
    drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[near_end]))
    assert near_end.py_draft_tokens == []


class Recording(Proposer):
    """Drafts the last token repeated; records the batch sizes it is given."""

    name = "recording"
    takes_batch_size = True

    def __init__(self) -> None:
        super().__init__()
        self.sizes: list[int] = []
        self.tokens: dict = {}

    def set_batch_size(self, batch_size: int) -> None:
        self.sizes.append(batch_size)

    def _start(self, request_id, prompt):
        self.tokens[request_id] = int(prompt[-1])

    def _propose(self, request_id, max_tokens):
        return Draft((self.tokens[request_id],) * max_tokens, self.name)

    def _extend(self, request_id, tokens):
        self.tokens[request_id] = int(tokens[-1])

    def _stop(self, request_id):
        del self.tokens[request_id]


def test_batch_sizes_1_to_256_reach_the_method_each_step():
    recording = Recording()
    drafter, resources = pair(k=4, proposer=recording)
    sizes = [1, 2, 3, 7, 64, 255, 256, 17, 1]
    for step, size in enumerate(sizes):
        batch = ScheduledRequests(generation_requests=[generation_request(rid, [5, 6, 7 + step]) for rid in range(size)])
        batch.generation_requests.append(generation_request(10_000, [1, 2]))
        batch.generation_requests[-1].is_cuda_graph_dummy = True  # padding: neither counted nor drafted
        drafter.prepare_draft_tokens(batch)
        assert all(len(request.py_draft_tokens) == 4 for request in batch.generation_requests[:-1])
        assert batch.generation_requests[-1].py_draft_tokens == []
    assert recording.sizes == sizes
    assert 10_000 not in drafter.runtime.sync


class Faulty(Proposer):
    """Raises for chosen requests in propose, extend or set_batch_size."""

    name = "faulty"
    takes_batch_size = True

    def __init__(self, inner: Proposer, bad: set) -> None:
        super().__init__()
        self.inner, self.bad = inner, bad

    def set_batch_size(self, batch_size):
        raise RuntimeError("no batch sizes today")

    def _start(self, request_id, prompt):
        self.inner.start(request_id, prompt)

    def _propose(self, request_id, max_tokens):
        if request_id in self.bad:
            raise ValueError(f"cannot draft {request_id}")
        return self.inner.propose(request_id, max_tokens)

    def _extend(self, request_id, tokens):
        if request_id == "never":
            raise KeyError(request_id)
        self.inner.extend(request_id, tokens)

    def _stop(self, request_id):
        self.inner.stop(request_id)


def test_faults_cost_one_request_its_draft_never_the_executor():
    target = markov_target()
    faulty = Faulty(specplug.create("ngram", min_n=1, max_n=3), bad={1, 3})
    drafter, resources = pair(k=5, proposer=faulty)
    engine = Executor(drafter, resources, target)
    prompts = {rid: [rid % 7, 3, 4, 5, 3, 4, 5, 9] * 4 for rid in range(5)}
    for rid, prompt in prompts.items():
        engine.add(LlmRequest(rid, prompt, max_new_tokens=40))

    class Broken(LlmRequest):
        def get_tokens(self, beam):
            raise RuntimeError("binding went away")

    broken = Broken(99, [1, 2, 3], 5)
    broken.state = LlmRequestState.GENERATION_IN_PROGRESS
    batch = ScheduledRequests(generation_requests=[broken, generation_request(98, [3, 4, 5, 3, 4])])
    drafter.prepare_draft_tokens(batch)
    assert broken.py_draft_tokens == [] and batch.generation_requests[1].py_draft_tokens
    engine.run()
    for rid, prompt in prompts.items():
        assert engine.outputs[rid] == plain_output(target, prompt, 40)
    counters = drafter.counters
    assert counters["faults"] >= 3 and counters["draft_tokens"] > 0
    assert engine.accepted > 0


def test_a_reused_request_id_starts_afresh():
    drafter, resources = pair("ngram", 3, options={"min_n": 1, "max_n": 1})
    first = generation_request(7, [1, 2, 1])
    drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[first]))
    assert first.py_draft_tokens[:1] == [2]
    first.state = LlmRequestState.GENERATION_COMPLETE
    resources.update_resources(ScheduledRequests(generation_requests=[first]))
    assert 7 not in drafter.runtime.sync
    # the same id again, freed by nobody this time: the history does not continue, so it restarts
    second = generation_request(7, [4, 5, 4])
    drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[second]))
    third = generation_request(7, [8, 9, 8, 9, 8])
    drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[third]))
    assert third.py_draft_tokens[:1] == [9]
    # a first context chunk of a tracked id (reuse seen by the resource manager) drops the old state
    context = LlmRequest(7, [1, 1, 1], 4)
    resources.prepare_resources(ScheduledRequests(context_requests=[context]))
    assert 7 not in drafter.runtime.sync
    resources.free_resources(context)  # freeing an id not tracked is harmless


def test_memory_stays_flat_over_100k_requests():
    proposer = Recording()
    drafter, resources = pair(k=2, proposer=proposer)
    prompt = [3, 1, 4, 1, 5]

    def wave(start: int) -> None:
        requests = [generation_request(start + i, prompt) for i in range(250)]
        batch = ScheduledRequests(generation_requests=requests)
        drafter.prepare_draft_tokens(batch)
        for request in requests:
            request._tokens += [9, 2]
        drafter.prepare_draft_tokens(batch)
        for request in requests:
            request.state = LlmRequestState.GENERATION_COMPLETE
        resources.update_resources(batch)
        for request in requests[::2]:
            resources.free_resources(request)

    for start in range(0, 10_000, 250):
        wave(start)
    gc.collect()
    blocks = sys.getallocatedblocks()  # every live object: a leak of one per request shows as 90k
    for start in range(10_000, 100_000, 250):
        wave(start)
    gc.collect()
    grown = sys.getallocatedblocks() - blocks
    assert grown < 2_000, f"{grown} more memory blocks held after 90k more requests"
    assert len(drafter.runtime.sync) == 0 and proposer.active_requests() == [] and proposer.tokens == {}
    assert proposer.sizes[-1] == 250


def test_the_pair_pickles_together_and_rebuilds_the_method_where_it_lands():
    drafter = SpecplugDrafter(DrafterSettings("suffix", {"max_depth": 12}, 5))
    resources = SpecplugResourceManager(drafter)
    drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[generation_request(1, [1, 2, 1, 2, 1])]))
    copy_drafter, copy_resources = pickle.loads(pickle.dumps((drafter, resources)))
    assert copy_drafter.runtime is copy_resources.runtime
    assert copy_drafter.max_draft_len == 5 and copy_drafter.runtime.settings.options == {"max_depth": 12}
    assert len(copy_drafter.runtime.sync) == 0  # request state stays behind; the method is rebuilt
    request = generation_request(2, [1, 2, 1, 2, 1])
    copy_drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[request]))
    assert request.py_draft_tokens and request.py_draft_tokens[0] == 2
    copy_resources.shutdown()
    assert len(copy_drafter.runtime.sync) == 0


def test_a_method_that_fails_to_build_in_the_executor_drafts_nothing():
    drafter = DrafterOnSource(DrafterSettings("suffix", {"max_depth": "deep"}, 4))  # unchecked on purpose
    request = generation_request(1, [1, 2, 1, 2])
    drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=[request]))
    assert request.py_draft_tokens == []
    assert isinstance(np.zeros(1), np.ndarray)
