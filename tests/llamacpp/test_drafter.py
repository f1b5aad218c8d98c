"""SpecplugDraftModel inside the real llama-cpp-python with the real SmolLM2-135M."""

from __future__ import annotations

import numpy as np
import pytest
from llama_cpp import Llama  # a missing llama-cpp-python fails this module, it is never skipped

import specplug
from specplug import Draft, Proposer
from specplug.lab.llamacpp import agreement
from specplug_adapters.llamacpp import LlamaModelProposer, SpecplugDraftModel

N_PREDICT = 64
N_CTX = 1024


def _llama(model, draft=None) -> Llama:
    return Llama(str(model), n_ctx=N_CTX, n_threads=1, n_threads_batch=1, draft_model=draft, verbose=False, logits_all=True)


def _generate(llm: Llama, prompt_ids: list[int]) -> list[int]:
    out: list[int] = []
    for token in llm.generate(prompt_ids, temp=0.0, top_k=1, reset=True):
        if token == llm.token_eos():
            break
        out.append(int(token))
        if len(out) == N_PREDICT:
            break
    return out


@pytest.fixture(scope="module")
def prompt_ids(smollm2, code_prompts) -> list[int]:
    tokenizer = Llama(str(smollm2), n_ctx=N_CTX, vocab_only=True, verbose=False)
    return tokenizer.tokenize(code_prompts[0].text.encode())


@pytest.fixture(scope="module")
def plain(smollm2, prompt_ids):
    """Plain greedy tokens, and plain's top-2 probabilities per position (one-token steps)."""
    llm = _llama(smollm2)
    tokens = _generate(llm, prompt_ids)
    top = []
    llm.reset()
    llm.eval(prompt_ids)
    for token in tokens:
        logits = llm.scores[llm.n_tokens - 1].astype(np.float64)
        probs = np.exp(logits - logits.max())
        probs /= probs.sum()
        best = np.argsort(-probs)[:2]
        top.append(tuple((int(t), float(probs[t])) for t in best))
        llm.eval([token])
    return tokens, top


@pytest.mark.parametrize("method", ["ngram", "suffix"])
def test_drafter_accepts_drafts_and_keeps_greedy_output(method, smollm2, prompt_ids, plain):
    drafter = SpecplugDraftModel(method, max_tokens=8)
    tokens = _generate(_llama(smollm2, drafter), prompt_ids)
    assert drafter.stats["accepted"] > 0 and drafter.stats["drafts"] > 0
    assert drafter.stats["generations"] == 1
    assert drafter.guard.counters["faults"] == 0
    result = agreement(plain[0], plain[1], tokens)
    assert result.ok, result.detail


class _Exploding(Proposer):
    """Drafts garbage and raises every third call: the generation must not notice."""

    name = "exploding"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _start(self, request_id, prompt):
        pass

    def _propose(self, request_id, max_tokens):
        self.calls += 1
        if self.calls % 3 == 0:
            raise RuntimeError("proposer bug")
        return Draft((1, 2, 3)[:max_tokens], self.name)

    def _extend(self, request_id, tokens):
        pass

    def _stop(self, request_id):
        pass


def test_a_faulty_proposer_costs_drafts_not_the_generation(smollm2, prompt_ids, plain):
    drafter = SpecplugDraftModel(_Exploding(), max_tokens=3)
    tokens = _generate(_llama(smollm2, drafter), prompt_ids)
    assert drafter.guard.counters["faults"] > 0
    assert len(tokens) == len(plain[0])
    assert agreement(plain[0], plain[1], tokens).ok


def test_a_new_generation_restarts_the_request_and_feeds_the_cache(smollm2, prompt_ids):
    suffix = specplug.create("suffix")
    drafter = SpecplugDraftModel(suffix, max_tokens=8)
    llm = _llama(smollm2, drafter)
    answer = _generate(llm, prompt_ids)
    _generate(llm, prompt_ids)  # same prompt again: the first request ends, a second begins
    assert drafter.stats["generations"] == 2
    # The first request's answer is in the global cache: a new request with the same prompt
    # drafts its opening from it. (Comparing the two generations' acceptance instead would
    # hinge on near-tie flips: batched verification may change a greedy token here.)
    assert len(suffix.cache) >= 1
    suffix.start("probe", prompt_ids)
    opening = suffix.propose("probe", 8).tokens
    assert len(opening) == 8 and list(opening) == answer[:8]


def test_hybrid_with_a_second_llama_as_the_neural_part(smollm2, prompt_ids, plain):
    draft_llm = Llama(str(smollm2), n_ctx=N_CTX, n_threads=1, n_threads_batch=1, verbose=False)
    neural = LlamaModelProposer(draft_llm, max_tokens=4)
    hybrid = specplug.create("hybrid", neural=neural, lookup=specplug.create("suffix", global_cache=False))
    # a draft model pays per drafted token: a composite asks it only for the length that pays
    assert neural.draft_kind == "neural" and neural.shorter_drafts_save and not hybrid.probe
    drafter = SpecplugDraftModel(hybrid, max_tokens=8)
    tokens = _generate(_llama(smollm2, drafter), prompt_ids)
    sources = {key for key in drafter.guard.counters if key.startswith("drafts.")}
    assert "drafts.llama-draft-model" in sources  # the second model drafted some steps
    assert drafter.guard.counters["faults"] == 0 and drafter.stats["accepted"] > 0
    assert agreement(plain[0], plain[1], tokens).ok


def test_bad_arguments_are_clear_errors():
    with pytest.raises(specplug.UnknownMethodError, match="valid methods"):
        SpecplugDraftModel("no-such-method")
    with pytest.raises(specplug.InvalidOptionError, match="max_tokens"):
        SpecplugDraftModel("ngram", max_tokens=0)
    with pytest.raises(specplug.InvalidOptionError, match="ready proposer"):
        SpecplugDraftModel(specplug.create("ngram"), min_n=2)


def test_adaptive_learns_step_costs_from_the_engine(smollm2, prompt_ids, plain):
    drafter = SpecplugDraftModel("adaptive", max_tokens=8, clock="cpu", candidates=["suffix"])
    assert drafter.proposer.cost is drafter.step_costs  # adaptive prices steps by what they cost here
    tokens = _generate(_llama(smollm2, drafter), prompt_ids)
    seen = [size for size in range(1, 10) if drafter.step_costs.observations(size)]
    assert 1 in seen and len(seen) >= 2  # plain steps and at least one draft length were timed
    assert drafter.step_costs.verify_time(1, 0) > 0
    assert agreement(plain[0], plain[1], tokens).ok


def test_bad_clock_is_a_clear_error():
    with pytest.raises(specplug.InvalidOptionError, match="clock = 'sundial'.*wall, cpu"):
        SpecplugDraftModel("suffix", clock="sundial")


def test_a_plugins_composite_gets_the_online_costs_like_adaptive(relay_distribution):
    head = specplug.create("ngram", min_n=1, max_n=2)
    drafter = SpecplugDraftModel("relay", max_tokens=3, head=head)
    relay = drafter.proposer
    assert relay.price is drafter.step_costs and relay.head is head  # its declared cost option, not a name
    assert drafter(np.array([1, 2, 3, 1, 2], dtype=np.intc)).tolist() == [3, 1, 2]
    assert relay.batch_sizes_seen == [1]  # one sequence at a time
    mine = specplug.cost.OnlineCostModel()
    assert SpecplugDraftModel("relay", head=head, price=mine).proposer.price is mine


@pytest.mark.parametrize(("method", "option"), [("hybrid", "neural"), ("relay", "head")])
def test_a_composing_method_needs_its_drafter_in_its_options(method, option, relay_distribution):
    with pytest.raises(specplug.InvalidOptionError, match=f"method {method!r} .* option {option!r}.*llama-cpp-python"):
        SpecplugDraftModel(method)


def test_the_drafters_own_faults_cost_one_draft():
    drafter = SpecplugDraftModel("ngram", max_tokens=4, min_n=1, max_n=2)
    real_sync = drafter._sync
    drafter._sync = None  # the adapter's own code breaks for one call
    assert drafter(np.array([1, 2, 3, 1, 2], dtype=np.intc)).tolist() == []
    assert drafter.guard.counters["faults"] == 1
    drafter._sync = real_sync
    assert drafter(np.array([1, 2, 3, 1, 2], dtype=np.intc)).tolist() == [3, 1, 2]
