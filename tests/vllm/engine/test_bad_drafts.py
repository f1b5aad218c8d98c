"""The bad-draft matrix through the vLLM drafter built from vLLM's own config objects.

No engine is started (that is ``test_faults.py``'s job): a real ``VllmConfig`` with a real
``SpeculativeConfig`` (method ``custom_class``, the drafter's dotted path) builds the drafter as
vLLM's model runner would, and the drafter is called with the arrays the runner hands it. Every
row gets a list of Python ints in ``[0, MAX_TOKEN_ID]`` within the step's K; a bad row costs only
its own draft.
"""

from __future__ import annotations

import numpy as np
import pytest

import specplug
from specplug.engine import EngineDrafting
from tests.hardening._bad import GOOD, KINDS, BadDrafts, UncheckedBadDrafts, kind_of
from tests.vllm._paths import model_dir


@pytest.fixture(scope="module")
def vllm_config(vllm_cpu):
    from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig, VllmConfig

    model = ModelConfig(model=model_dir(), max_model_len=256, dtype="float32")
    speculative = SpeculativeConfig(
        model="specplug_adapters.vllm.SpecplugDrafter", num_speculative_tokens=4,
        target_model_config=model, target_parallel_config=ParallelConfig(),
    )
    config = VllmConfig(model_config=model, speculative_config=speculative, additional_config={"specplug": {"method": "ngram"}})
    assert config.speculative_config.method == "custom_class"
    return config


class Runner:
    """The model runner's attributes the drafter reads."""

    def __init__(self, ids: list[str], width: int) -> None:
        self.input_batch = type("InputBatch", (), {})()
        self.input_batch.req_ids = list(ids)
        self.input_batch.token_ids_cpu = np.zeros((len(ids), width), dtype=np.int32)
        self.requests = set(ids)


@pytest.mark.parametrize("proposer_class", [BadDrafts, UncheckedBadDrafts])
def test_bad_rows_get_no_draft_and_good_rows_theirs(vllm_config, proposer_class):
    from specplug_adapters.vllm import SpecplugDrafter

    ids = [*KINDS, "good-1", "good-2"]
    runner = Runner(ids, 64)
    drafter = SpecplugDrafter(vllm_config, runner=runner)
    assert drafter.num_speculative_tokens == 4
    EngineDrafting.__init__(drafter, proposer_class())  # the engine layer around the bad proposer
    tokens = runner.input_batch.token_ids_cpu
    lengths = np.zeros(len(ids), dtype=np.int32)
    tokens[:, :3] = [1, 2, 3]
    lengths[:] = 3
    for step, token in enumerate((7, 8, 9)):
        tokens[:, lengths[0]] = token
        lengths += 1
        drafts = drafter.propose([[token]] * len(ids), lengths, tokens)
        assert all(type(t) is int and 0 <= t <= specplug.MAX_TOKEN_ID for draft in drafts for t in draft)
        assert all(len(draft) <= 4 for draft in drafts)
        assert [tuple(draft) for draft in drafts[-2:]] == [GOOD.tokens] * 2
        assert all(draft == [] for request_id, draft in zip(ids, drafts) if kind_of(request_id)), (step, drafts)
    assert drafter.counters["bad_drafts"] == 3 * len(KINDS)
