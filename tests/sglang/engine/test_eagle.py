"""SPECPLUG_HYBRID_EAGLE and SPECPLUG_ADAPTIVE_EAGLE through ``sglang.Engine`` on this CPU: SGLang's
own EAGLE worker with a random-weight head (tests/sglang/engine/eagle_head.py), the method's lookup
drafts overlaid on the head's (for adaptive the head is one more candidate). The head's drafts are near-random, so what gets accepted is the lookup's: greedy output
identical to no speculation, drafted tokens accepted, both sources counted in the stats file."""

from __future__ import annotations

import pytest

from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.engine.conftest import run_overlay
from tests.sglang.engine.eagle_head import make_sglang_eagle_head


@pytest.mark.parametrize("algorithm", ["SPECPLUG_HYBRID_EAGLE", "SPECPLUG_ADAPTIVE_EAGLE"])
def test_a_method_over_eagle_is_identical_to_plain_decoding_with_lookup_drafts_accepted(
    sglang, model_dir, plain, monkeypatch, tmp_path, algorithm
):
    head = make_sglang_eagle_head(model_dir, tmp_path / "eagle-head")
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    # the first prompt's answer copies its lines: the lookup drafts them and SGLang accepts them
    counters = run_overlay(model_dir, plain, monkeypatch, tmp_path, "eagle", accepting=[0],
                                  speculative_algorithm=algorithm, speculative_draft_model_path=str(head))
    # its lookup drafts went to SGLang's verify in the head's place
    assert counters["overlaid_rows"] > 0, counters
