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
from tests.vllm.engine._heads import dflash_head, eagle3_head, medusa_head, mtp_model, pard_draft
from tests.vllm.engine.conftest import Run, assert_same_output, engine, generate
from tests.vllm.engine.test_hybrid import drafted

K = 3


def test_hybrid_over_a_parallel_eagle3_head(plain, chats, stats_path, tmp_path):
    head = eagle3_head(tmp_path / "p-eagle", model_dir(), parallel=True)
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


def test_hybrid_over_an_eagle3_head(plain, chats, stats_path, tmp_path):
    """EAGLE-3 drafting token by token: a sequential drafter, so on a step no row takes its draft the
    overlay runs its first forward only (``fill``), and vLLM drafts after bookkeeping."""
    head = eagle3_head(tmp_path / "eagle3", model_dir())
    speculative = {"method": "specplug.hybrid", "neural": "eagle3", "model": head, "num_speculative_tokens": K}
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        assert (spec.method, spec.parallel_drafting, spec.disable_padded_drafter_batch) == ("eagle3", False, True)
        run = generate(llm, chats)
    assert_same_output(plain, run, "specplug.hybrid over an EAGLE-3 head")
    stats = read_stats(stats_path)
    counters, sources = stats["counters"], drafted(stats["counters"])
    print(f"hybrid over EAGLE-3: {run.metrics} drafts by source {sources}")
    assert counters.get("faults", 0) == 0, stats
    assert sources.get("eagle3", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    # the head drafted where a row took its draft, and only kept its cache filled where none did
    assert counters.get("neural_pass.full", 0) > 0 and counters.get("neural_pass.fill", 0) > 0, counters


def _hybrid_run(speculative: dict, chats, stats_path, **overrides) -> tuple[Run, dict, dict]:
    """One generation under ``speculative``; its run, the overlay's counters and drafts by source."""
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}, **overrides) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        resolved = {"method": spec.method, "parallel_drafting": spec.parallel_drafting}
        run = generate(llm, chats)
    stats = read_stats(stats_path)
    assert stats["counters"].get("faults", 0) == 0, stats
    print(f"{resolved}: {run.metrics} drafts by source {drafted(stats['counters'])}")
    return run, stats["counters"], resolved


def test_hybrid_over_a_medusa_head(plain, chats, stats_path, tmp_path):
    """Medusa: K heads over the target's last hidden state, no cache of its own, so on a step no row
    takes its draft the overlay skips it (``fill`` runs as ``skip``)."""
    head = medusa_head(tmp_path / "medusa", model_dir(), heads=K)
    speculative = {"method": "specplug.hybrid", "neural": "medusa", "model": head, "num_speculative_tokens": K}
    run, counters, resolved = _hybrid_run(speculative, chats, stats_path)
    assert resolved == {"method": "medusa", "parallel_drafting": False}, resolved
    assert_same_output(plain, run, "specplug.hybrid over a Medusa head")
    sources = drafted(counters)
    assert sources.get("medusa", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    assert counters.get("neural_pass.full", 0) > 0 and counters.get("neural_pass.skip", 0) > 0, counters
    assert counters.get("neural_pass.fill", 0) == 0, counters


def test_hybrid_over_a_pard_draft_model(plain, chats, stats_path, tmp_path):
    """PARD: a draft model drafting all K tokens in one forward over K mask-token slots
    (``parallel_drafting: true`` on ``draft_model``), so its ``fill`` runs as the full pass."""
    draft = pard_draft(tmp_path / "pard", model_dir())
    speculative = {"method": "specplug.hybrid", "model": draft, "parallel_drafting": True, "num_speculative_tokens": K}
    run, counters, resolved = _hybrid_run(speculative, chats, stats_path)
    assert resolved == {"method": "draft_model", "parallel_drafting": True}, resolved
    assert_same_output(plain, run, "specplug.hybrid over a PARD draft model")
    sources = drafted(counters)
    assert sources.get("draft_model", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    assert counters.get("neural_pass.fill", 0) == 0 and counters["neural_pass.full"] > 0, counters


def test_hybrid_over_a_models_own_mtp_layers(vllm_cpu, chats, stats_path, tmp_path):
    """MTP: a target with its own MTP layer (a small random MiMo), drafting for itself, against the
    same target undrafted. A sequential drafter: ``fill`` where no row takes its draft."""
    target = mtp_model(tmp_path / "mimo", model_dir())
    with engine(model=target) as llm:
        reference = generate(llm, chats, top2=True)
    speculative = {"method": "specplug.hybrid", "num_speculative_tokens": K}
    run, counters, resolved = _hybrid_run(speculative, chats, stats_path, model=target)
    assert resolved == {"method": "mtp", "parallel_drafting": False}, resolved
    assert_same_output(reference, run, "specplug.hybrid over MiMo's MTP layer")
    sources = drafted(counters)
    assert sources.get("mtp", 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics
    assert counters.get("neural_pass.full", 0) > 0 and counters.get("neural_pass.fill", 0) > 0, counters
