"""``learnt_state`` through ``sglang.Engine`` on this CPU: a composite served by SGLang writes its pooled
counts every SAVE_EVERY finished requests, and a restarted engine starts from them.

SGLang tells the drafter that a request left the batch only by its absence from a later step, and kills
its scheduler process on shutdown (nothing runs at exit there): so each engine here serves SAVE_EVERY
requests, then a few more, whose steps finish the first ones."""

from __future__ import annotations

import json

import numpy as np

from specplug.proposers.composite._learnt import SAVE_EVERY
from specplug_adapters.sglang import OPTIONS_ENV
from tests.sglang.engine.conftest import PROMPTS, SAMPLING, start_engine, stop_engine


def _serve(model_dir: str) -> list[str]:
    engine = start_engine(model_dir, speculative_algorithm="SPECPLUG_ADAPTIVE", speculative_num_draft_tokens=6)
    try:
        texts = []
        for requests in (SAVE_EVERY, len(PROMPTS)):
            prompts = [PROMPTS[index % len(PROMPTS)] for index in range(requests)]
            texts += [out["text"] for out in engine.generate(prompts, dict(SAMPLING))]
        return texts
    finally:
        stop_engine(engine)


def _drafted(path) -> float:
    with np.load(path, allow_pickle=False) as saved:
        return float(saved["drafted"].sum())


def test_a_restarted_engine_starts_from_the_counts_its_composite_wrote(sglang, model_dir, plain, monkeypatch, tmp_path):
    path = tmp_path / "adaptive.npz"
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"learnt_state": str(path)}))
    first = _serve(model_dir)
    assert first == [plain[index % len(plain)]["text"] for index in range(SAVE_EVERY + len(PROMPTS))]
    assert path.exists()  # written when the SAVE_EVERY-th request finished
    once = _drafted(path)
    assert once > 0
    # the same requests again: greedy text and lookups alike, so a composite that started from
    # nothing would write the same counts; one that read the file writes them on top of its counts
    again = _serve(model_dir)
    assert again == first
    assert _drafted(path) > 1.5 * once, (once, _drafted(path))
