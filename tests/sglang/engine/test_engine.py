"""Each SPECPLUG_* algorithm through ``sglang.Engine`` on this CPU: greedy output identical to no
speculation, with drafts verified and accepted (SGLang's own ``spec_*`` counters)."""

from __future__ import annotations

import json

import pytest

from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.engine.conftest import generate, start_engine

#: per algorithm, its JSON options (hybrid takes a lookup where a GPU would give it the model's head)
CASES = {
    "SPECPLUG_NGRAM": {},
    "SPECPLUG_SUFFIX": {},
    "SPECPLUG_ADAPTIVE": {},
    "SPECPLUG_HYBRID": {"neural": "ngram"},
}


@pytest.mark.parametrize("algorithm", sorted(CASES))
def test_output_is_identical_to_plain_decoding_with_drafts_accepted(sglang, model_dir, plain, monkeypatch, algorithm):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps(CASES[algorithm]))
    engine = start_engine(model_dir, speculative_algorithm=algorithm, speculative_num_draft_tokens=6)
    try:
        outputs = generate(engine)
    finally:
        engine.shutdown()
    assert [out["text"] for out in outputs] == [out["text"] for out in plain]
    for out in outputs:
        meta = out["meta_info"]
        assert meta["spec_verify_ct"] > 0, meta
        # every verify step yields one token of the target's own; more tokens than steps were drafts accepted
        assert meta["completion_tokens"] > meta["spec_verify_ct"], meta
        assert meta["spec_num_correct_drafts"] > 0, meta
