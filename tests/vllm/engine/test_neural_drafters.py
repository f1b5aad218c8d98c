"""``specplug.hybrid`` over vLLM's parallel drafters in the real V1 model runner (vLLM's CPU build).

P-EAGLE (``parallel_drafting: true`` on an EAGLE-3 head): all K draft tokens come from one forward
over K masked slots, so the overlay asks vLLM's drafter for K whenever it runs it, and its ``fill``
runs as ``full`` (adapters/vllm/_neural.py). The head is random-weight of the test model's shapes
(tests/vllm/engine/_heads.py): vLLM builds and runs it, and the lookup's drafts are the accepted
ones. DFlash (a block of K masked queries after the bonus token, one forward; vLLM sets
``parallel_drafting`` itself) over a random-weight head of Qwen3 layers reading three of the
target's layers, the same way. Medusa and PARD are checked by the contract tests
(tests/vllm/contract/test_neural_drafters.py) and on a GPU by scripts/gpu_check_vllm_hybrid.py.
"""

from __future__ import annotations

from specplug_adapters.vllm import read_stats
from tests.vllm._paths import model_dir
from tests.vllm.engine._heads import dflash_head, parallel_eagle3_head
from tests.vllm.engine.conftest import assert_same_output, engine, generate
from tests.vllm.engine.test_hybrid import drafted

K = 3


def test_hybrid_over_a_parallel_eagle3_head(plain, chats, stats_path, tmp_path):
    head = parallel_eagle3_head(tmp_path / "p-eagle", model_dir())
    speculative = {"method": "specplug.hybrid", "neural": "eagle3", "model": head, "parallel_drafting": True,
                   "num_speculative_tokens": K}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        assert (spec.method, spec.parallel_drafting) == ("eagle3", True)
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over a parallel EAGLE-3 head")
    stats = read_stats(stats_path)
    counters, sources = stats["counters"], drafted(stats["counters"])
    print(f"hybrid over P-EAGLE: {run.metrics} drafts by source {sources}")
    assert counters.get("faults", 0) == 0, stats
    # both parts drafted, and the lookup's drafts were accepted (a random head's are next to never)
    assert sources.get("eagle3", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    # a parallel drafter's fill costs its whole draft: the overlay ran it as the full pass, never a fill
    assert counters.get("neural_pass.fill", 0) == 0 and counters["neural_pass.full"] > 0, counters


def test_hybrid_over_a_dflash_head(plain, chats, stats_path, tmp_path):
    head = dflash_head(tmp_path / "dflash", model_dir(), block=K + 1)
    speculative = {"method": "specplug.hybrid", "neural": "dflash", "model": head, "num_speculative_tokens": K}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        assert (spec.method, spec.parallel_drafting) == ("dflash", True)
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over a DFlash head")
    stats = read_stats(stats_path)
    counters, sources = stats["counters"], drafted(stats["counters"])
    print(f"hybrid over DFlash: {run.metrics} drafts by source {sources}")
    assert counters.get("faults", 0) == 0, stats
    assert sources.get("dflash", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    assert counters.get("neural_pass.fill", 0) == 0 and counters["neural_pass.full"] > 0, counters
