"""The hybrid over SGLang's EAGLE worker (SPECPLUG_<METHOD>_EAGLE/_EAGLE3) without an engine:
registration, argument resolution and errors, the overlay on verify inputs shaped like SGLang's,
and the test harness's EAGLE tree build against its n-gram link derivation."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import specplug
from specplug_adapters.sglang import OPTIONS_ENV, eagle_algorithm_names
from tests.sglang.test_plugin import LOAD, _refusal, _resolve, _run

EAGLE_ALGORITHMS = sorted(eagle_algorithm_names())


@pytest.fixture(scope="module")
def head(model_dir, tmp_path_factory) -> str:
    from tests.sglang.engine.eagle_head import make_sglang_eagle_head

    return str(make_sglang_eagle_head(model_dir, tmp_path_factory.mktemp("eagle-head")))


def test_one_eagle_and_one_eagle3_name_per_composing_method():
    from specplug.engine import methods_composing_engine_drafter

    composing = methods_composing_engine_drafter()
    assert "hybrid" in composing
    expected = {f"SPECPLUG_{m.upper()}_EAGLE{v}": (m, v == "3") for m in composing for v in ("", "3")}
    assert eagle_algorithm_names() == expected


def test_the_installed_entry_point_registers_the_eagle_names(sglang):
    result = _run(LOAD.format(names=EAGLE_ALGORITHMS))
    assert result.returncode == 0, result.stderr[-2000:]
    kinds = ["SpecplugEagle3SpecAlgo" if name.endswith("3") else "SpecplugEagleSpecAlgo" for name in EAGLE_ALGORITHMS]
    assert result.stdout.strip() == str(kinds)


def test_the_eagle_spec_class_answers_as_sglangs_eagle_and_builds_the_overlay_worker(sglang):
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from specplug_adapters.sglang import SpecplugEagle3SpecAlgo, SpecplugEagleSpecAlgo, SpecplugEagleWorker

    asked = {
        name
        for name, value in vars(SpeculativeAlgorithm).items()
        if callable(value) and not name.startswith("_") and name not in ("from_string", "register")
    }
    assert sorted(asked - set(dir(SpecplugEagleSpecAlgo))) == []
    eagle = SpeculativeAlgorithm.from_string("specplug_hybrid_eagle")
    eagle3 = SpeculativeAlgorithm.from_string("SPECPLUG_HYBRID_EAGLE3")
    assert type(eagle) is SpecplugEagleSpecAlgo and type(eagle3) is SpecplugEagle3SpecAlgo
    for spec in (eagle, eagle3):
        # SGLang's EAGLE paths: draft KV, hidden states carried, top-k, not the n-gram path
        assert spec.is_eagle() and spec.has_draft_kv() and spec.carries_draft_hidden_states() and spec.need_topk()
        assert not spec.is_ngram() and not spec.is_standalone() and spec.get_platform_worker_cls() is None
        assert spec.create_worker(SimpleNamespace(disable_overlap_schedule=True)) is SpecplugEagleWorker
    assert eagle3.is_eagle3() and not eagle.is_eagle3()


@pytest.mark.parametrize("algorithm", EAGLE_ALGORITHMS)
def test_every_eagle_name_parses_with_a_chain_and_no_overlap(sglang, model_dir, head, monkeypatch, algorithm):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    view = _resolve(["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", algorithm,
                     "--speculative-draft-model-path", head])
    assert view.speculative_algorithm == algorithm
    assert (view.speculative_eagle_topk, view.speculative_num_steps, view.speculative_num_draft_tokens) == (1, 3, 4)
    assert view.disable_overlap_schedule is True and view.enable_mixed_chunk is False
    assert view.max_running_requests == 48


def test_the_chain_follows_sglangs_step_count(sglang, model_dir, head, monkeypatch):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps({"lookup": "ngram"}))
    view = _resolve(["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", "SPECPLUG_HYBRID_EAGLE",
                     "--speculative-draft-model-path", head, "--speculative-num-steps", "5"])
    assert (view.speculative_num_steps, view.speculative_num_draft_tokens) == (5, 6)


@pytest.mark.parametrize(
    ("options", "extra", "message"),
    [
        ({}, None, "SGLang's EAGLE worker is given no --speculative-draft-model-path; run SPECPLUG_HYBRID_EAGLE"),
        ({}, ["--speculative-eagle-topk", "2"], "--speculative-eagle-topk = 2 is not valid for SPECPLUG_HYBRID_EAGLE"),
        ({}, ["--speculative-use-rejection-sampling"], "--speculative-use-rejection-sampling is not valid"),
        ({"neural": "ngram"}, [], "option 'neural' takes the engine's own drafter"),
        ({"bogus": 1}, [], "bogus"),
    ],
)
def test_a_bad_eagle_setting_or_option_is_one_clear_error(
    sglang, model_dir, head, monkeypatch, capsys, options, extra, message
):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps(options))
    args = ["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", "SPECPLUG_HYBRID_EAGLE"]
    if extra is not None:
        args += ["--speculative-draft-model-path", head, *extra]
    refusal = _refusal(args, capsys)
    assert message in refusal
    assert "\n" not in refusal.strip()


# ---- the overlay on verify inputs shaped like SGLang's (topk 1: [root, chain...] per request) ----------------

#: a history whose end repeats earlier text: the lookup drafts what followed it (8, 9, 10)
REPEATING = [5, 6, 7, 8, 9, 10, 11, 5, 6, 7]
HEAD_CHAIN = [900, 901, 902]


def _batch(*histories: list[int], forward_mode=None) -> SimpleNamespace:
    reqs = [
        SimpleNamespace(rid=f"r{row}", origin_input_ids_unpadded=history[:-1], output_ids=history[-1:])
        for row, history in enumerate(histories)
    ]
    return SimpleNamespace(reqs=reqs, forward_mode=forward_mode)


def _verify_input(rows: list[list[int]]) -> SimpleNamespace:
    return SimpleNamespace(draft_token=torch.tensor(rows, dtype=torch.int64).reshape(-1), draft_token_num=len(rows[0]))


def _overlay(monkeypatch, **options):
    from specplug_adapters.sglang import EagleOverlay

    monkeypatch.setenv(OPTIONS_ENV, json.dumps(options))
    return EagleOverlay("SPECPLUG_HYBRID_EAGLE", "hybrid", "eagle")


def test_where_the_hybrid_picks_the_lookup_its_chain_replaces_the_heads(sglang, monkeypatch):
    overlay = _overlay(monkeypatch, margin=100.0, explore=0.0)  # the lookup wins wherever it drafts
    no_match = [20, 21, 22, 23]
    verify = _verify_input([[7, *HEAD_CHAIN], [23, 800, 801, 802]])
    overlay.apply(_batch(REPEATING, no_match), verify)
    rows = verify.draft_token.view(2, 4).tolist()
    assert rows[0] == [7, 8, 9, 10]  # root kept, the lookup's chain in the head's place
    assert rows[1] == [23, 800, 801, 802]  # nothing to look up: the head's chain goes to verify
    counters = overlay.counters
    assert counters["overlaid_rows"] == 1 and counters["drafts.suffix"] == 1 and counters.get("faults", 0) == 0


def test_a_shorter_choice_keeps_the_heads_tokens_after_it(sglang, monkeypatch):
    overlay = _overlay(monkeypatch)
    monkeypatch.setattr(overlay, "draft", lambda rows, **kwargs: [specplug.Draft((8, 9), "suffix") for _ in rows])
    chosen = overlay.choose(["r"], [_history(REPEATING)], [[900, 901, 902, 903]])
    # verified like any draft token: the head's tail can only be accepted where the target agrees
    assert chosen == [[8, 9, 902, 903]]


def _history(tokens: list[int]):
    from specplug_adapters.sglang._worker import _History

    return _History(tokens[:-1], tokens[-1:], ())


def test_where_the_hybrid_picks_the_head_its_chain_is_left_as_drafted(sglang, monkeypatch):
    overlay = _overlay(monkeypatch, margin=-100.0, explore=0.0, continue_with_lookup=False)
    verify = _verify_input([[7, *HEAD_CHAIN]])
    overlay.apply(_batch(REPEATING), verify)
    assert verify.draft_token.tolist() == [7, *HEAD_CHAIN]
    assert overlay.counters.get("overlaid_rows", 0) == 0 and overlay.counters["drafts.eagle"] == 1


def test_a_row_whose_history_does_not_end_at_the_root_keeps_the_heads_chain(sglang, monkeypatch):
    overlay = _overlay(monkeypatch, margin=100.0, explore=0.0)
    verify = _verify_input([[6, *HEAD_CHAIN]])  # the root is not the history's last token
    overlay.apply(_batch(REPEATING), verify)
    assert verify.draft_token.tolist() == [6, *HEAD_CHAIN]
    assert overlay.counters.get("overlaid_rows", 0) == 0


def test_requests_are_followed_across_steps_and_stopped_when_gone(sglang, monkeypatch):
    overlay = _overlay(monkeypatch, margin=100.0, explore=0.0)
    overlay.apply(_batch(REPEATING, [1, 2, 3]), _verify_input([[7, *HEAD_CHAIN], [3, *HEAD_CHAIN]]))
    grown = [*REPEATING, 8, 9]  # r0 accepted 8 and got 9 from the target; r1 finished
    verify = _verify_input([[9, *HEAD_CHAIN]])
    overlay.apply(_batch(grown), verify)
    assert verify.draft_token.tolist() == [9, 10, 11, 5]
    assert set(overlay._lengths) == {"r0"} and overlay._lengths["r0"] == len(grown)
    assert len(overlay.batch) == 1  # r1 stopped in the proposer


def test_an_overlay_fault_costs_its_choice_never_the_step(sglang, monkeypatch):
    overlay = _overlay(monkeypatch, margin=100.0, explore=0.0)

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(overlay, "draft", broken)
    verify = _verify_input([[7, *HEAD_CHAIN]])
    overlay.apply(_batch(REPEATING), verify)
    assert verify.draft_token.tolist() == [7, *HEAD_CHAIN]
    assert overlay.counters["faults"] == 1 and overlay._lengths == {}


def test_the_overridden_draft_runs_sglangs_then_the_overlay_and_skips_idle_batches(sglang, monkeypatch):
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

    from specplug_adapters.sglang._eagle import _OverlaidDraftWorker

    made = []

    def sglang_draft(self, batch, *, with_topology=False):
        made.append(_verify_input([[7, *HEAD_CHAIN]]))
        return (made[-1], "parents", "scores") if with_topology else made[-1]

    monkeypatch.setattr(EagleDraftWorker, "draft", sglang_draft)
    worker = object.__new__(_OverlaidDraftWorker)
    worker.overlay = _overlay(monkeypatch, margin=100.0, explore=0.0)
    decode = SimpleNamespace(is_idle=lambda: False)
    assert worker.draft(_batch(REPEATING, forward_mode=decode)).draft_token.tolist() == [7, 8, 9, 10]
    verify, parents, _ = worker.draft(_batch([*REPEATING, 8, 9], forward_mode=decode), with_topology=True)
    assert parents == "parents" and verify.draft_token.tolist()[0] == 7  # overlaid in the tuple too
    idle = SimpleNamespace(is_idle=lambda: True)
    assert worker.draft(_batch(REPEATING, forward_mode=idle)).draft_token.tolist() == [7, *HEAD_CHAIN]


# ---- the test harness's EAGLE tree build (a stand-in for sgl_kernel's) ------------------------------------------


def test_the_harness_tree_build_matches_the_links_derived_from_its_own_mask(sglang):
    from sgl_kernel import _ops

    # topk 2, two steps, four verified tokens: picks 0 and 1 are the root's children, pick 2 the first
    # child of pick 0 (score block 1, whose parent is score 0): root -> 1 -> 3, root -> 2
    n, seq_len = 4, 10
    parent_list = torch.tensor([[-1, 0, 1]])
    picks = torch.tensor([[0, 1, 2]])
    seq_lens = torch.tensor([seq_len])
    for mode in (1, 0):  # QLEN_ONLY (a CPU's), FULL_MASK (a GPU's)
        mask = torch.ones(n * n + (seq_len * n if mode == 0 else 0), dtype=torch.bool)
        positions = torch.empty(n, dtype=torch.long)
        links = torch.full((3, 1, n), -1, dtype=torch.long)
        _ops.build_tree_kernel_efficient_cpu(parent_list, picks, seq_lens, mask, positions, *links, 2, 2, n, mode)
        tree = mask.reshape(n, -1)[:, seq_len:] if mode == 0 else mask.reshape(n, n)
        assert tree.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
        if mode == 0:
            assert bool(mask.reshape(n, -1)[:, :seq_len].all())  # the prefix columns as the caller filled them
        assert positions.tolist() == [10, 11, 11, 12]
        assert links[1].tolist() == [[1, 3, -1, -1]] and links[2].tolist() == [[-1, 2, -1, -1]]
        derived_positions = torch.empty(n, dtype=torch.long)
        derived = torch.full((3, 1, n), -1, dtype=torch.long)
        _ops.reconstruct_indices_from_tree_mask(tree.reshape(-1), seq_lens, derived_positions, *derived, 1, n)
        assert derived_positions.tolist() == positions.tolist()
        assert derived.tolist() == links.tolist()
