"""SPECPLUG_HYBRID_NEXTN (and SPECPLUG_HYBRID_EAGLE given the model's own path) through ``sglang.Engine`` on this
CPU: SGLang's EAGLE worker drafting with a model's own MTP layer (tests/sglang/engine/mtp_model.py, a random MiMo
that SGLang loads as ``MiMoMTP`` for the draft), the hybrid's lookup drafts overlaid on the MTP layer's. Greedy
output identical to the same model undrafted, drafted tokens accepted, both sources counted in the stats file."""

from __future__ import annotations

import pytest

from specplug.engine import read_stats
from specplug_adapters.sglang import OPTIONS_ENV, STATS_FILE_ENV, STATS_INTERVAL_ENV
from tests.sglang.engine.conftest import generate, start_engine, stop_engine
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
    monkeypatch.setenv(STATS_FILE_ENV, str(tmp_path / "stats-{pid}.json"))
    monkeypatch.setenv(STATS_INTERVAL_ENV, "0")
    # NEXTN needs no draft path (the model's own is the draft); EAGLE is given it, as SGLang's NEXTN resolves to
    draft = {"speculative_draft_model_path": mtp_model} if given_path else {}
    engine = start_engine(mtp_model, speculative_algorithm=algorithm, speculative_num_steps=3, **draft)
    try:
        outputs = generate(engine)
    finally:
        stop_engine(engine)
    assert [out["text"] for out in outputs] == [out["text"] for out in mtp_plain]
    metas = [out["meta_info"] for out in outputs]
    assert all(meta["spec_verify_ct"] > 0 for meta in metas), metas
    # the random model's greedy text repeats itself: the lookup drafts it and SGLang accepts it
    assert all(meta["spec_num_correct_drafts"] > 0 for meta in metas), metas
    assert all(meta["completion_tokens"] > meta["spec_verify_ct"] for meta in metas), metas
    [stats_file] = tmp_path.glob("stats-*.json")  # one scheduler process
    stats = read_stats(stats_file)
    assert stats["method"] == algorithm and stats["num_draft_tokens"] == 4, stats
    counters = stats["counters"]
    assert counters.get("faults", 0) == 0, counters
    # both sources reached the hybrid's choice, and its lookup drafts went to verify in the MTP layer's place
    assert counters[f"drafts.{source}"] > 0 and counters["drafts.suffix"] > 0, counters
    assert counters["overlaid_rows"] > 0, counters
