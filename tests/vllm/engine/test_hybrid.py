"""``specplug.hybrid`` over vLLM's own neural drafters, in the real V1 model runner.

- EAGLE, with the head trained for SmolLM2-135M (scripts/train_eagle_head.py, shipped in
  models/smollm2-135m-instruct-eagle, installed by scripts/setup_vllm.sh): vLLM's real
  ``EagleProposer``, drafting after bookkeeping (``disable_padded_drafter_batch``), the path MTP
  and EAGLE models take on GPUs, with drafts that are accepted on their own (plain ``eagle``).
  The method decides before vLLM's drafter runs: on steps where every row takes the lookup's
  draft the head runs its first forward only (``unused_neural_pass = "fill"``).
- ``specplug.adaptive`` over the same head: the head is one more of its candidates.
- a draft model (SmolLM2 drafting for itself), which vLLM runs on the padded batch before
  bookkeeping, drafts as a tensor.
- the traces' ``neural_head`` column (``specplug trace --neural-head``, torch outside vLLM) replayed
  as ``specplug bench`` replays it gives vLLM's own eagle counters on the same outputs.
"""

from __future__ import annotations

import pytest

from specplug.lab.trace import TraceRecord
from specplug_adapters.vllm import read_stats
from tests.vllm._paths import eagle_head_dir, model_dir
from tests.vllm.engine.conftest import Run, assert_same_output, engine, generate

K = 3


def drafted(counters: dict) -> dict:
    return {key.removeprefix("drafts."): value for key, value in counters.items() if key.startswith("drafts.")}


def acceptance(metrics: dict) -> float:
    return metrics["spec_decode_num_accepted_tokens"] / max(1.0, metrics["spec_decode_num_draft_tokens"])


@pytest.fixture(scope="module")
def eagle_alone(vllm_cpu, chats) -> Run:
    """vLLM's own eagle method with the trained head, on the shared prompts."""
    with engine({"method": "eagle", "model": eagle_head_dir(), "num_speculative_tokens": K}) as llm:
        return generate(llm, chats)


def test_trained_eagle_head_alone(plain, eagle_alone):
    """vLLM's own eagle method with the trained head: its drafts alone are accepted."""
    run = eagle_alone
    assert_same_output(plain, run, "vLLM eagle with the trained head")
    print(f"trained head in vLLM eagle: {run.metrics}")
    assert run.metrics["spec_decode_num_drafts"] > 0, run.metrics
    # a random-weight head's drafts are next to never accepted (1 in 49152 per token); this one's are
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics


def test_the_head_column_of_a_trace_replays_to_vllms_own_eagle_counters(eagle_alone):
    """What ``specplug trace --neural-head`` records, replayed as ``specplug bench --neural head`` does,
    drafts and gets accepted exactly what vLLM's eagle method did with the same head on the same outputs."""
    from specplug.lab.bench._neural import TraceNeuralProposer
    from specplug.lab.bench._replay import replay
    from specplug.lab.bench._tracegen import head_acceptance

    run = eagle_alone
    records = [TraceRecord(v=1, id=f"chat-{index}", workload="w", prompt_ids=prompt, output_ids=output)
               for index, (prompt, output) in enumerate(zip(run.prompts, run.tokens, strict=True))]
    columns = head_acceptance(records, eagle_head_dir(), model_dir(), K)
    replayed = [record.model_copy(update={"neural": column}) for record, column in zip(records, columns)]
    logs = replay(TraceNeuralProposer(replayed), [], replayed, K)
    # every step of a request drafts K tokens (fewer at its end) until its last token, as vLLM does
    drafts = sum(int((log.drafted > 0).sum()) for log in logs)
    accepted = sum(int(log.accepted.sum()) for log in logs)
    print(f"head column replayed: {drafts} drafts, {accepted} accepted; vLLM: {run.metrics}")
    assert accepted > 0
    assert (drafts, accepted) == (run.metrics["spec_decode_num_drafts"], run.metrics["spec_decode_num_accepted_tokens"])


def test_hybrid_over_trained_eagle(plain, chats, stats_path):
    # by expected accepted tokens (no cost model: step_costs off), so that both parts draft whatever this
    # machine's costs; the default, costs learnt online, is the next test
    speculative = {"method": "specplug.hybrid", "neural": "eagle", "model": eagle_head_dir(), "num_speculative_tokens": K}
    settings = {"stats_file": str(stats_path), "stats_interval": 0, "step_costs": "off"}
    with engine(speculative, {"specplug": settings}) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        assert (spec.method, spec.disable_padded_drafter_batch) == ("eagle", True)
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over the trained eagle head")
    stats = read_stats(stats_path)
    print(f"hybrid over the trained head: {run.metrics} drafts by source {drafted(stats['counters'])}")
    assert stats["method"] == "hybrid" and stats["steps"] > 0 and "hybrid" in stats["vllm_plugin"], stats
    sources = drafted(stats["counters"])
    # both parts drafted: the trained EAGLE head and the lookup (on the repetition prompt)
    assert sources.get("eagle", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert stats["counters"].get("faults", 0) == 0
    assert acceptance(run.metrics) > 0.2, run.metrics
    # the hybrid decided first: vLLM's head ran its draft only on steps where a row took it, and
    # only its first forward (KV cache kept filled, draft length 0) on the others
    passes = {key: value for key, value in stats["counters"].items() if key.startswith("neural_pass.")}
    assert passes.get("neural_pass.full", 0) > 0 and passes.get("neural_pass.fill", 0) > 0, passes


def test_hybrid_over_trained_eagle_learns_this_machines_costs(plain, chats, stats_path):
    """The default (``step_costs`` online): the overlay times vLLM's steps and the head's pass, and the
    hybrid takes the head's draft only where its expected tokens pay for the pass."""
    speculative = {"method": "specplug.hybrid", "neural": "eagle", "model": eagle_head_dir(), "num_speculative_tokens": K}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over the trained eagle head, costs learnt online")
    stats = read_stats(stats_path)
    counters = stats["counters"]
    print(f"hybrid over the trained head, costs learnt: {run.metrics} {counters}")
    assert counters.get("faults", 0) == 0, counters
    # it learnt a step's time and the head's pass (untimed at first, the head is tried, so timed)
    assert counters["costs.step_us"] > 0 and counters["costs.neural_us"] > 0, counters
    sources = drafted(counters)
    assert sources.get("eagle", 0) > 0 and sources.get("suffix", 0) > 0, sources


def test_adaptive_chooses_among_the_trained_eagle_head_and_a_lookup(plain, chats, stats_path):
    """``specplug.adaptive`` with a model: the head joins its candidates (the overlay, as hybrid's)."""
    speculative = {"method": "specplug.adaptive", "neural": "eagle", "model": eagle_head_dir(), "num_speculative_tokens": K,
                   "candidates": ["suffix"]}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        assert llm.llm_engine.vllm_config.speculative_config.method == "eagle"
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.adaptive over the trained eagle head")
    stats = read_stats(stats_path)
    sources = drafted(stats["counters"])
    print(f"adaptive over the trained head: {run.metrics} drafts by source {sources}")
    assert stats["method"] == "adaptive" and stats["steps"] > 0 and "hybrid" in stats["vllm_plugin"], stats
    assert sources.get("eagle", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert stats["counters"].get("faults", 0) == 0, stats


def test_hybrid_over_a_draft_model(plain, chats, stats_path):
    speculative = {"method": "specplug.hybrid", "model": model_dir(), "num_speculative_tokens": 4,
                   "lookup": "suffix"}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        assert llm.llm_engine.vllm_config.speculative_config.method == "draft_model"
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over a draft model")
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    stats = read_stats(stats_path)
    assert stats["method"] == "hybrid" and stats["steps"] > 0 and "hybrid" in stats["vllm_plugin"], stats
    assert stats["counters"].get("faults", 0) == 0, stats
    # the overlay saw vLLM's draft-model drafts (as drafted, or extended by the lookup)
    assert any(source.startswith("draft_model") for source in drafted(stats["counters"])), stats
