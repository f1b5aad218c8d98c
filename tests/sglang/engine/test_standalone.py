"""SPECPLUG_HYBRID_STANDALONE through ``sglang.Engine`` on this CPU: SGLang's own STANDALONE worker with
the test model drafting for itself, the hybrid's lookup drafts overlaid on the draft model's chains. Greedy
output identical to no speculation, drafted tokens accepted, both sources counted in the stats file."""

from __future__ import annotations

import json

from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.engine.conftest import run_overlay


def test_the_hybrid_over_a_draft_model_is_identical_to_plain_decoding_with_both_sources_drafting(
    sglang, model_dir, plain, monkeypatch, tmp_path
):
    # the draft model is the target itself, so its chains would always win a fair choice: the lookup is
    # given the edge wherever it drafts, and the draft model drafts the rest
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"margin": 100.0, "explore": 0.0}))
    run_overlay(
        model_dir, plain, monkeypatch, tmp_path, "draft_model",
        speculative_algorithm="SPECPLUG_HYBRID_STANDALONE", speculative_draft_model_path=model_dir,
    )  # fmt: skip
