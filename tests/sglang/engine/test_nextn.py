"""SPECPLUG_HYBRID_NEXTN (and SPECPLUG_HYBRID_EAGLE given the model's own path) through ``sglang.Engine`` on this
CPU: SGLang's EAGLE worker drafting with a model's own MTP layer (tests/sglang/engine/mtp_model.py, a random MiMo
that SGLang loads as ``MiMoMTP`` for the draft), the hybrid's lookup drafts overlaid on the MTP layer's. Greedy
output identical to the same model undrafted, drafted tokens accepted, both sources counted in the stats file."""

from __future__ import annotations

import pytest

from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.engine.conftest import generate, run_overlay, start_engine, stop_engine
from tests.sglang.engine.mtp_model import make_mimo_mtp_model


@pytest.fixture(scope="module")
def mtp_model(model_dir, tmp_path_factory) -> str:
    return str(make_mimo_mtp_model(model_dir, tmp_path_factory.mktemp("mimo-mtp")))


@pytest.fixture(scope="module")
def mtp_plain(sglang, mtp_model) -> list[dict]:
    """The MTP model's outputs without speculation."""
    engine = start_engine(mtp_model)
    try:
        return generate(engine)
    finally:
        stop_engine(engine)


@pytest.mark.parametrize(
    ("algorithm", "source", "given_path"),
    [("SPECPLUG_HYBRID_NEXTN", "mtp", False), ("SPECPLUG_HYBRID_EAGLE", "eagle", True)],
)
def test_the_hybrid_over_a_models_own_mtp_layer_is_identical_to_plain_decoding_with_both_sources_drafting(
    sglang, mtp_model, mtp_plain, monkeypatch, tmp_path, algorithm, source, given_path
):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    # NEXTN needs no draft path (the model's own is the draft); EAGLE is given it, as SGLang's NEXTN resolves to
    draft = {"speculative_draft_model_path": mtp_model} if given_path else {}
    counters = run_overlay(mtp_model, mtp_plain, monkeypatch, tmp_path, source, speculative_algorithm=algorithm,
                                  **draft)
    # the lookup's drafts went to verify in the MTP layer's place
    assert counters["overlaid_rows"] > 0, counters
