"""``specplug.hybrid`` over each of vLLM's neural drafters in the real V1 model runner (vLLM's CPU build).

No trained drafter but the EAGLE head (tests/vllm/engine/test_hybrid.py) exists for the test model, so
each drafter here is random-weight, of the test model's shapes (tests/vllm/engine/_heads.py): vLLM
builds and runs it, its drafts reach the overlay, and the lookup's drafts are the accepted ones. Each
run is greedy-identical to plain decoding, and what the overlay ran of the drafter on steps no row took
its draft follows the drafter's kind (adapters/vllm/_neural.py):

- sequential, with a cache (EAGLE-3, MTP): its first forward only (``fill``);
- parallel (P-EAGLE: ``parallel_drafting`` on an EAGLE-3 head; PARD: on a draft model; DFlash, a block
  of K masked queries after the bonus token): its first forward is its whole draft, so ``fill`` runs as
  ``full`` and it is always asked for K;
- Medusa (K heads over the target's last hidden state, no cache): ``fill`` is a ``skip``.

MTP needs a target with MTP layers: a small random MiMo (Qwen2 + one MTP layer) is both the target
and its drafter, compared with itself undrafted.
"""

from __future__ import annotations

from specplug_adapters.vllm import read_stats
from tests.vllm._paths import model_dir
from tests.vllm.engine._heads import dflash_head, eagle3_head, medusa_head, mtp_model, pard_draft
from tests.vllm.engine.conftest import Run, assert_same_output, engine, generate
from tests.vllm.engine.test_hybrid import drafted

K = 3


def hybrid_run(speculative: dict, chats, stats_path, **overrides) -> tuple[Run, dict, dict]:
    """One generation under ``speculative``: its run, the overlay's counters, and vLLM's resolved method."""
    with engine(speculative, {"specplug": {"stats_file": str(stats_path), "stats_interval": 0}}, **overrides) as llm:
        spec = llm.llm_engine.vllm_config.speculative_config
        resolved = {"method": spec.method, "parallel_drafting": spec.parallel_drafting,
                    "unpadded": spec.disable_padded_drafter_batch}
        run = generate(llm, chats)
    counters = read_stats(stats_path)["counters"]
    print(f"{resolved}: {run.metrics} drafts by source {drafted(counters)}, passes "
          f"{ {key: value for key, value in counters.items() if key.startswith('neural_pass.')} }")
    return run, counters, resolved


def assert_composed(reference: Run, run: Run, counters: dict, source: str, label: str) -> None:
    """Greedy output unchanged, no fault, both parts drafted, and drafts accepted (the lookup's: a
    random-weight drafter's are next to never)."""
    assert_same_output(reference, run, f"specplug.hybrid over {label}")
    assert counters.get("faults", 0) == 0, counters
    sources = drafted(counters)
    assert sources.get(source, 0) > 0 and sources.get("suffix", 0) > 0, sources
    assert run.metrics["spec_decode_num_accepted_tokens"] > 0, run.metrics


def assert_fill_runs_full(counters: dict) -> None:
    """A parallel drafter's fill costs its whole draft: the overlay ran it as the full pass, never a fill."""
    assert counters.get("neural_pass.fill", 0) == 0 and counters.get("neural_pass.full", 0) > 0, counters


def assert_fill_runs_first_forward(counters: dict) -> None:
    """A sequential drafter drafted where a row took its draft, and only kept its cache filled where none did."""
    assert counters.get("neural_pass.full", 0) > 0 and counters.get("neural_pass.fill", 0) > 0, counters


def test_hybrid_over_a_parallel_eagle3_head(plain, chats, stats_path, tmp_path):
    head = eagle3_head(tmp_path / "p-eagle", model_dir(), parallel=True)
    speculative = {"method": "specplug.hybrid", "neural": "eagle3", "model": head, "parallel_drafting": True,
                   "num_speculative_tokens": K}
    run, counters, resolved = hybrid_run(speculative, chats, stats_path)
    assert (resolved["method"], resolved["parallel_drafting"]) == ("eagle3", True), resolved
    assert_composed(plain, run, counters, "eagle3", "a parallel EAGLE-3 head")
    assert_fill_runs_full(counters)


def test_hybrid_over_a_dflash_head(plain, chats, stats_path, tmp_path):
    head = dflash_head(tmp_path / "dflash", model_dir(), block=K + 1)
    speculative = {"method": "specplug.hybrid", "neural": "dflash", "model": head, "num_speculative_tokens": K}
    run, counters, resolved = hybrid_run(speculative, chats, stats_path)
    assert (resolved["method"], resolved["parallel_drafting"]) == ("dflash", True), resolved
    assert_composed(plain, run, counters, "dflash", "a DFlash head")
    assert_fill_runs_full(counters)


def test_hybrid_over_a_pard_draft_model(plain, chats, stats_path, tmp_path):
    """PARD: a draft model drafting all K tokens in one forward over K mask-token slots
    (``parallel_drafting: true`` on ``draft_model``; vLLM reads the mask token from its config)."""
    draft = pard_draft(tmp_path / "pard", model_dir())
    speculative = {"method": "specplug.hybrid", "model": draft, "parallel_drafting": True, "num_speculative_tokens": K}
    run, counters, resolved = hybrid_run(speculative, chats, stats_path)
    assert (resolved["method"], resolved["parallel_drafting"]) == ("draft_model", True), resolved
    assert_composed(plain, run, counters, "draft_model", "a PARD draft model")
    assert_fill_runs_full(counters)


def test_hybrid_over_an_eagle3_head(plain, chats, stats_path, tmp_path):
    """EAGLE-3 drafting token by token (no ``parallel_drafting``): vLLM drafts after bookkeeping."""
    head = eagle3_head(tmp_path / "eagle3", model_dir())
    speculative = {"method": "specplug.hybrid", "neural": "eagle3", "model": head, "num_speculative_tokens": K}
    run, counters, resolved = hybrid_run(speculative, chats, stats_path)
    assert resolved == {"method": "eagle3", "parallel_drafting": False, "unpadded": True}, resolved
    assert_composed(plain, run, counters, "eagle3", "an EAGLE-3 head")
    assert_fill_runs_first_forward(counters)


def test_hybrid_over_a_models_own_mtp_layers(vllm_cpu, chats, stats_path, tmp_path):
    """MTP: a target with its own MTP layer (a small random MiMo) drafting for itself, against the
    same target undrafted."""
    target = mtp_model(tmp_path / "mimo", model_dir())
    with engine(model=target) as llm:
        reference = generate(llm, chats, top2=True)
    speculative = {"method": "specplug.hybrid", "num_speculative_tokens": K}
    run, counters, resolved = hybrid_run(speculative, chats, stats_path, model=target)
    assert resolved == {"method": "mtp", "parallel_drafting": False, "unpadded": True}, resolved
    assert_composed(reference, run, counters, "mtp", "MiMo's MTP layer")
    assert_fill_runs_first_forward(counters)


def test_hybrid_over_a_medusa_head(plain, chats, stats_path, tmp_path):
    """Medusa: K heads over the target's last hidden state, one pass, no cache of its own; on a step
    no row takes its draft the overlay skips it (``fill`` runs as ``skip``)."""
    head = medusa_head(tmp_path / "medusa", model_dir(), heads=K)
    speculative = {"method": "specplug.hybrid", "neural": "medusa", "model": head, "num_speculative_tokens": K}
    run, counters, resolved = hybrid_run(speculative, chats, stats_path)
    assert resolved["method"] == "medusa", resolved
    assert_composed(plain, run, counters, "medusa", "a Medusa head")
    assert counters.get("neural_pass.full", 0) > 0 and counters.get("neural_pass.skip", 0) > 0, counters
    assert counters.get("neural_pass.fill", 0) == 0, counters
