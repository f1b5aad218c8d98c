"""The bad-draft matrix through each adapter's drafter, called as its engine calls it.

llama-cpp-python: the real ``llama_cpp`` (the drafter is its ``LlamaDraftModel``, and one real
generation with SmolLM2 runs with a proposer that drafts nothing but bad drafts). vLLM: the
drafter on vLLM-shaped batch arrays (``tests/vllm/contract``'s stand-ins for the runner). TensorRT-LLM:
its drafter on the source-shaped stand-ins of ``tests/trtllm``. Whatever the proposer returns,
every row gets a list of Python ints in ``[0, MAX_TOKEN_ID]`` within its limit, and the good
rows keep their drafts.
"""

from __future__ import annotations

import numpy as np
import pytest
from llama_cpp import Llama, LlamaDraftModel

import specplug
from specplug.engine import EngineDrafting
from specplug_adapters.llamacpp import SpecplugDraftModel
from tests.hardening._bad import GOOD, KINDS, BadDrafts, UncheckedBadDrafts, kind_of
from tests.llamacpp.conftest import SMOLLM2


def clean(tokens, limit: int) -> bool:
    values = [int(token) for token in tokens]
    return len(values) <= limit and all(0 <= value <= specplug.MAX_TOKEN_ID for value in values)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("proposer_class", [BadDrafts, UncheckedBadDrafts])
def test_llama_cpp_drafter_hands_llama_cpp_no_bad_draft(kind, proposer_class):
    drafter = SpecplugDraftModel(proposer_class(every=kind), max_tokens=8)
    assert isinstance(drafter, LlamaDraftModel)
    history = [1, 2, 3, 1, 2]
    for token in (3, 1, 2):
        got = drafter(np.array(history, dtype=np.intc))
        assert got.dtype == np.intc and got.tolist() == []
        history.append(token)
    assert drafter.guard.counters["bad_drafts"] == 3 and drafter.guard.counters["faults"] == 3


def test_a_real_llama_cpp_generation_with_only_bad_drafts_equals_plain():
    def generate(draft_model):
        llm = Llama(str(SMOLLM2), n_ctx=512, n_threads=1, n_threads_batch=1, draft_model=draft_model, verbose=False)
        prompt = llm.tokenize(b"def add(a, b):\n    return a + b\n\ndef sub(a, b):\n")
        out = []
        for token in llm.generate(prompt, temp=0.0, top_k=1, reset=True):
            out.append(int(token))
            if len(out) == 24 or token == llm.token_eos():
                break
        return out

    class Cycling(BadDrafts):  # a different bad kind every step
        calls = 0

        def _propose(self, request_id, max_tokens):
            self.calls += 1
            return BadDrafts(every=KINDS[self.calls % len(KINDS)])._propose(request_id, max_tokens)

    drafter = SpecplugDraftModel(Cycling(), max_tokens=8)
    assert generate(drafter) == generate(None)
    assert drafter.guard.counters["bad_drafts"] >= len(KINDS)


def rebuilt(drafter, proposer):
    """The adapter's drafter with its engine layer rebuilt around ``proposer``."""
    EngineDrafting.__init__(drafter, proposer)
    return drafter


@pytest.mark.parametrize("proposer_class", [BadDrafts, UncheckedBadDrafts])
def test_vllm_drafter_gives_good_rows_their_drafts_and_bad_rows_none(proposer_class):
    from specplug_adapters.vllm import SpecplugDrafter
    from tests.vllm.contract.test_drafter_logic import Batch, Runner, vllm_config

    ids = [*KINDS, "good-1", "good-2"]
    batch = Batch()
    batch.token_ids_cpu = np.zeros((len(ids), 64), dtype=np.int32)
    batch.num_tokens_no_spec = np.zeros(len(ids), dtype=np.int32)
    for request_id in ids:
        batch.add(request_id, [1, 2, 3])
    runner = Runner(input_batch=batch, requests=set(ids))  # held: the drafter keeps a weak reference
    drafter = SpecplugDrafter(vllm_config("ngram", k=4), runner=runner)
    rebuilt(drafter, proposer_class())
    for token in (7, 8, 9):
        for row in range(len(ids)):
            batch.append(row, [token])
        drafts = drafter.propose([[token]] * len(ids), batch.num_tokens_no_spec, batch.token_ids_cpu)
        assert all(type(token) is int for draft in drafts for token in draft)
        assert all(clean(draft, 4) for draft in drafts)
        assert [tuple(draft) for draft in drafts[-2:]] == [GOOD.tokens] * 2  # one bad row empties no other
        assert all(draft == [] for request_id, draft in zip(ids, drafts) if kind_of(request_id))
    assert drafter.counters["bad_drafts"] == 3 * len(KINDS)


def test_trtllm_drafter_gives_good_requests_their_drafts_and_bad_ones_none():
    from specplug_adapters.trtllm import DrafterSettings
    from specplug_adapters.trtllm._drafter import drafter_class
    from tests.trtllm._standins import Drafter, ScheduledRequests
    from tests.trtllm.test_drafter import generation_request

    drafter = drafter_class(Drafter)(DrafterSettings("ngram", {}, 4), proposer=BadDrafts())
    requests = [generation_request(index, [1, 2, 3, 1, 2]) for index in range(len(KINDS) + 2)]
    for _ in range(3):
        drafter.prepare_draft_tokens(ScheduledRequests(generation_requests=requests))
        for index, request in enumerate(requests):
            assert clean(request.py_draft_tokens, 4)
            assert tuple(request.py_draft_tokens) == (() if index < len(KINDS) else GOOD.tokens)
