"""``specplug.hybrid`` over vLLM's own neural drafters, in the real V1 model runner.

No small model with trained MTP/EAGLE weights installs here, so the two neural paths the
overlay handles run with what does:

- EAGLE, with a random-weight head made in the test (:mod:`.eagle_head`): vLLM's real
  ``EagleProposer``, drafting after bookkeeping (``disable_padded_drafter_batch``), the path
  MTP and EAGLE models take on GPUs. Its own drafts are near-random, so what is accepted is
  what the hybrid took from the lookup instead.
- a draft model (SmolLM2 drafting for itself), which vLLM runs on the padded batch before
  bookkeeping, drafts as a tensor.
"""

from __future__ import annotations

from specplug_adapters.vllm import read_stats
from tests.vllm._paths import model_dir
from tests.vllm.engine.conftest import assert_same_output, engine, generate
from tests.vllm.engine.eagle_head import make_eagle_head


def drafted(counters: dict) -> dict:
    return {key.removeprefix("drafts."): value for key, value in counters.items() if key.startswith("drafts.")}


def test_hybrid_over_eagle(plain, chats, stats_path, tmp_path):
    head = make_eagle_head(model_dir(), tmp_path / "eagle-head")
    speculative = {"method": "specplug.hybrid", "neural": "eagle", "model": str(head), "num_speculative_tokens": 3}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        assert (spec.method, spec.disable_padded_drafter_batch) == ("eagle", True)
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over eagle")
    stats = read_stats(stats_path)
    assert stats["method"] == "hybrid" and stats["steps"] > 0 and "hybrid" in stats["vllm_plugin"], stats
    sources = drafted(stats["counters"])
    # both parts drafted: vLLM's EAGLE head at first, the lookup once its calibration showed it better
    assert sources.get("eagle", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert stats["counters"].get("faults", 0) == 0
    # a random head's drafts are almost never accepted; the lookup's are
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0.2 * run.metrics["spec_decode_num_draft_tokens"]


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
