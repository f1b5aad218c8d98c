"""The overlay's cost model, learnt from this engine's own times (``step_costs``), and the batch-level
price of a drafter whose one pass serves every row (``Proposer.shared_pass``). No engine: a clock the
test moves stands in for vLLM's steps and its drafter's pass."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import specplug
from specplug import BatchStep, InvalidOptionError
from specplug.cost import OnlineCostModel
from specplug.engine import EngineDrafts
from specplug_adapters.vllm import translate
from specplug_adapters.vllm._hybrid import HybridOverlay

VERIFY_S = 0.010  # the engine's step, whatever its tokens (a small model on a CPU: drafts nearly free to verify)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Batch:
    def __init__(self) -> None:
        self.token_ids_cpu = np.zeros((2, 1024), dtype=np.int32)
        self.num_tokens_no_spec = np.zeros(2, dtype=np.int32)
        self.req_ids: list[str] = []


def overlay_over_a_head(pass_s: float, **section):
    """A hybrid overlay on one request whose text never repeats (the lookup has nothing), and a head
    that drafts the next 3 tokens right; its whole pass takes ``pass_s`` on the test's clock."""
    batch = Batch()
    batch.req_ids.append("r")
    prompt = list(range(1000, 1020))
    batch.token_ids_cpu[0, : len(prompt)] = prompt
    batch.num_tokens_no_spec[0] = len(prompt)
    runner = SimpleNamespace(input_batch=batch, requests={"r"}, discard_request_mask=None)
    config = SimpleNamespace(
        additional_config={"specplug": {"method": "hybrid", "neural": "eagle", "lookup": "ngram", "explore": 0.0,
                                        **section}},
        speculative_config=SimpleNamespace(method="eagle"),
    )
    overlay = HybridOverlay(config)
    clock = overlay.clock = Clock()
    asked: list[int] = []

    def head(tokens: int):
        asked.append(tokens)
        clock.now += pass_s if tokens else pass_s / 20  # 'fill' (draft length 0): the first forward only
        start = int(batch.num_tokens_no_spec[0])
        return [list(range(1000 + start, 1000 + start + tokens))]

    def run(steps: int) -> list[int]:
        """Drive ``steps`` engine steps; per step, the draft length sent to verification."""
        sent, verified = [], None
        for _ in range(steps):
            start = int(batch.num_tokens_no_spec[0])
            # the engine's verification of the last step: every drafted token right (the head's), plus one
            gained = 1 + (len(sent[-1]) if sent else 0)
            batch.token_ids_cpu[0, start : start + gained] = range(1000 + start, 1000 + start + gained)
            batch.num_tokens_no_spec[0] = start + gained
            clock.now += VERIFY_S
            out = overlay.apply(runner, 3, [list(range(1000 + start, 1000 + start + gained))], head, verified)
            sent.append(out[0])
            verified = 1 + len(out[0])
        return [len(draft) for draft in sent]

    return overlay, run, asked


def test_a_head_whose_pass_costs_more_than_it_gains_is_declined_once_timed():
    # the pass takes 8 engine steps: even 3 accepted tokens (4 per step) cannot pay for it
    overlay, run, asked = overlay_over_a_head(pass_s=8 * VERIFY_S)
    lengths = run(30)
    assert lengths[0] == 3  # untimed, the head's pass is priced at nothing: it is tried
    assert lengths[-20:] == [0] * 20  # timed: plain decoding pays more, and the head's pass is not run
    assert asked[-20:] == [0] * 20  # 'fill' only: the head's first forward, no draft token
    costs = overlay.step_costs
    assert costs.draft_time("neural", 3, 0, 0.0) == pytest.approx(8 * VERIFY_S, rel=0.1)
    assert costs.verify_time(1, 0) == pytest.approx(VERIFY_S)
    # what was learnt is in the stats, in microseconds
    assert overlay.counters["costs.step_us"] == round(VERIFY_S * 1e6)
    assert overlay.counters["costs.neural_us"] == pytest.approx(8 * VERIFY_S * 1e6, rel=0.1)
    assert overlay.counters["faults"] == 0


def test_a_head_whose_pass_pays_keeps_drafting():
    overlay, run, asked = overlay_over_a_head(pass_s=0.2 * VERIFY_S)
    lengths = run(30)
    assert lengths[-20:] == [3] * 20 and asked[-20:] == [3] * 20
    assert overlay.counters["drafts.eagle"] == 30 and overlay.counters["faults"] == 0


def test_without_step_costs_the_hybrid_takes_the_head_whatever_its_pass_costs():
    # the choice by expected accepted tokens (the overlay before step_costs): a draft beats none
    overlay, run, _ = overlay_over_a_head(pass_s=8 * VERIFY_S, step_costs="off")
    assert run(30)[-20:] == [3] * 20
    assert overlay.step_costs is None and overlay.guard.proposer.cost is None


def test_a_cost_the_user_gives_wins_over_the_learnt_one():
    overlay, _, _ = overlay_over_a_head(pass_s=0.01, cost="llama-3.1-8b-h100")
    assert overlay.guard.proposer.cost.name == "llama-3.1-8b-h100"


def test_a_fault_while_learning_costs_is_counted_and_the_step_drafts():
    overlay, run, _ = overlay_over_a_head(pass_s=0.2 * VERIFY_S)

    def broken(*args, **kwargs):
        raise RuntimeError("clock skew")

    overlay.step_costs.observe = overlay.step_costs.observe_draft = overlay.step_costs.observe_overhead = broken
    lengths = run(3)
    assert lengths == [3, 3, 3] and overlay.counters["faults"] >= 1


def test_a_bad_step_costs_names_the_value_and_the_valid_ones():
    with pytest.raises(InvalidOptionError, match=r"\['step_costs'\] = 'always' is not valid; use one of online, off"):
        translate({"method": "specplug.hybrid", "model": "/m/head", "step_costs": "always"}, None,
                  ["method", "model", "num_speculative_tokens"])


# ------------------------------------------------------------------ the batch-level price of a shared pass
class Head(EngineDrafts):
    """The engine's head offering a fixed draft for every row (shared_pass from EngineDrafts)."""

    def _propose(self, request_id, max_tokens):
        return specplug.Draft((900, 901, 902)[:max_tokens], self.name)


class OwnHead(Head):
    shared_pass = False  # as if each row paid its own pass


def flat_costs(neural_s: float) -> OnlineCostModel:
    costs = OnlineCostModel()
    for tokens in range(1, 40):
        costs.observe(tokens, VERIFY_S)
    costs.observe_draft("neural", neural_s)
    return costs


def first_step(head: EngineDrafts, prompts: dict[str, list[int]]) -> list[str]:
    hybrid = specplug.create("hybrid", neural=head, lookup="ngram", explore=0.0, cost=flat_costs(0.8 * VERIFY_S))
    head.max_draft_tokens = 3
    hybrid.set_batch_size(len(prompts))
    ids = list(prompts)
    out = hybrid.step_batch(BatchStep.of(ids, [[] for _ in ids], [3] * len(ids), started=list(prompts.items())))
    return [out.sources[row] if out.lengths[row] else "" for row in range(len(ids))]


REPEATS = [5, 6, 7, 8] * 8  # the lookup drafts its continuation
NOVEL = list(range(100, 132))  # the lookup has nothing


def test_a_shared_pass_is_priced_once_against_the_rows_that_take_it():
    # per row, as if the whole batch drafted alike, the head pays for the novel row (its pass is 0.8 of a
    # step, its 3 tokens at the prior 0.6 expect 1.18); but the pass slows the lookup's row too, and for one
    # taker the batch's tokens per second are higher without it
    assert first_step(OwnHead("eagle"), {"a": NOVEL, "b": REPEATS}) == ["eagle", "ngram"]
    assert first_step(Head("eagle"), {"a": NOVEL, "b": REPEATS}) == ["", "ngram"]


def test_a_shared_pass_that_serves_enough_rows_is_run():
    assert first_step(Head("eagle"), {"a": NOVEL, "b": [n + 50 for n in NOVEL]}) == ["eagle", "eagle"]


def test_the_heads_pass_runs_only_as_far_as_it_is_asked_while_lookups_draft_up_to_k():
    overlay, run, asked = overlay_over_a_head(pass_s=0.2 * VERIFY_S, neural_max_tokens=2)
    assert run(5) == [2] * 5 and set(asked) == {2}  # K = 3, the head's pass at its 2 tokens


def test_the_first_whole_pass_pays_vllms_setup_and_is_not_learnt():
    overlay, run, _ = overlay_over_a_head(pass_s=0.2 * VERIFY_S)
    run(1)
    assert overlay.step_costs.draft_time("neural", 3, 0, 0.0) == 0.0  # one pass: not yet timed
    run(1)
    assert overlay.step_costs.draft_time("neural", 3, 0, 0.0) == pytest.approx(0.2 * VERIFY_S, rel=0.2)


def head_taken_on_novel_text(neural_s: float) -> bool:
    """One step on text the lookup cannot draft: does an unobserved head (prior 0.2, exploration 1.0) go out?"""
    head = Head("eagle")
    head.max_draft_tokens = 3
    hybrid = specplug.create("hybrid", neural=head, lookup="ngram", prior=0.2, explore=1.0, cost=flat_costs(neural_s))
    out = hybrid.step_batch(BatchStep.of(["a"], [[]], [3], started=[("a", NOVEL)]))
    return bool(out.lengths[0]) and out.sources[0] == "eagle"


def test_exploring_the_head_is_weighed_by_what_its_pass_costs():
    # its estimate alone (3 tokens at 0.2: 0.25 expected) pays for neither pass; the optimism that tries it
    # anyway is weighed by the share of the step a failed draft keeps: nearly whole where the pass is a
    # tenth of a step (a GPU's head), half where it costs a whole step (this CPU's), and then plain decoding
    # wins. Unweighed, the bonus (1.0 * sqrt(log 2 / 4)) would lift it to 1.23 expected tokens: taken at both
    assert head_taken_on_novel_text(0.1 * VERIFY_S)
    assert not head_taken_on_novel_text(1.0 * VERIFY_S)
