"""The drafter and the overlay over vLLM-shaped arrays: request state, draft lengths, faults.

These drive :class:`SpecplugDrafter` and :class:`HybridOverlay` with the arrays vLLM's model
runner hands them (``sampled_token_ids``, ``num_tokens_no_spec``, ``token_ids_cpu``,
``input_batch.req_ids``) and check each draft against the same specplug method fed the same
tokens directly. The engine tests (tests/vllm/engine) run them inside vLLM itself.
"""

from __future__ import annotations

import json
import logging
import random
import sys
import types
from types import SimpleNamespace

import numpy as np
import pytest

import specplug
from specplug import Draft, GuardedProposer, InvalidOptionError, Proposer
from specplug.engine import BatchSync, StatsReporter
from specplug_adapters.vllm import SpecplugDrafter, read_stats
from specplug_adapters.vllm._hybrid import FILL_IDLE_STEPS, EngineDrafts, HybridOverlay, _like
from specplug_adapters.vllm._import_hook import when_imported
from specplug_adapters.vllm._stats import LOGGER_NAME

MAX_REQS, MAX_LEN = 4, 512


class Batch:
    """vLLM's persistent batch, as far as the drafter reads it."""

    def __init__(self) -> None:
        self.token_ids_cpu = np.zeros((MAX_REQS, MAX_LEN), dtype=np.int32)
        self.num_tokens_no_spec = np.zeros(MAX_REQS, dtype=np.int32)
        self.req_ids: list[str] = []

    def add(self, request_id: str, prompt: list[int]) -> None:
        row = len(self.req_ids)
        self.req_ids.append(request_id)
        self.token_ids_cpu[row, : len(prompt)] = prompt
        self.num_tokens_no_spec[row] = len(prompt)

    def append(self, row: int, tokens: list[int]) -> None:
        start = self.num_tokens_no_spec[row]
        self.token_ids_cpu[row, start : start + len(tokens)] = tokens
        self.num_tokens_no_spec[row] = start + len(tokens)

    def remove(self, row: int) -> None:
        """Drop a row and condense, as vLLM does when a request finishes."""
        last = len(self.req_ids) - 1
        self.token_ids_cpu[row] = self.token_ids_cpu[last]
        self.num_tokens_no_spec[row] = self.num_tokens_no_spec[last]
        self.req_ids[row] = self.req_ids[last]
        self.req_ids.pop()

    def history(self, row: int) -> list[int]:
        return self.token_ids_cpu[row, : self.num_tokens_no_spec[row]].tolist()


class Runner:
    """The model runner's attributes the drafter reads (a plain object: the drafter keeps a weak reference)."""

    def __init__(self, input_batch: Batch, requests, discard_request_mask=None) -> None:
        self.input_batch = input_batch
        self.requests = requests
        self.discard_request_mask = discard_request_mask


def vllm_config(method: str = "ngram", k: int = 4, **section) -> SimpleNamespace:
    return SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=k, num_speculative_tokens_per_batch_size=None,
                                           method="custom_class"),
        model_config=SimpleNamespace(max_model_len=MAX_LEN),
        scheduler_config=SimpleNamespace(max_num_seqs=MAX_REQS),
        additional_config={"specplug": {"method": method, **section}},
    )


def text(seed: int, length: int) -> list[int]:
    rng = random.Random(seed)
    phrase = [rng.randrange(50, 90) for _ in range(12)]
    return [token if rng.random() > 0.1 else rng.randrange(90, 99) for token in (phrase * 40)[:length]]


def run_steps(drafter, batch: Batch, streams: dict[str, list[int]], steps: int, runner=None, check=None):
    """Verify drafts greedily against each request's fixed continuation, like vLLM does."""
    position = {request_id: 0 for request_id in batch.req_ids}
    sampled = [[streams[request_id][0]] for request_id in batch.req_ids]  # the prefill's token
    for row, tokens in enumerate(sampled):
        batch.append(row, tokens)
        position[batch.req_ids[row]] = 1
    accepted_total = 0
    for _ in range(steps):
        drafts = drafter.propose(sampled, batch.num_tokens_no_spec, batch.token_ids_cpu)
        assert len(drafts) == len(batch.req_ids)
        if check is not None:
            check(drafts)
        sampled = []
        for row, (request_id, draft) in enumerate(zip(batch.req_ids, drafts)):
            truth = streams[request_id][position[request_id] :]
            accepted = 0
            while accepted < len(draft) and accepted < len(truth) - 1 and draft[accepted] == truth[accepted]:
                accepted += 1
            new = truth[: accepted + 1]
            accepted_total += accepted
            position[request_id] += len(new)
            batch.append(row, new)
            sampled.append(new)
    return accepted_total


def test_drafts_equal_the_method_fed_directly():
    batch = Batch()
    streams = {"a": text(1, 300), "b": text(2, 300)}
    batch.add("a", text(3, 40))
    batch.add("b", text(4, 40))
    runner = Runner(input_batch=batch, requests={"a": 1, "b": 1})
    drafter = SpecplugDrafter(vllm_config("ngram", k=5), runner=runner)
    direct = specplug.create("ngram")
    seen = {request_id: [] for request_id in batch.req_ids}

    def check(drafts):
        for row, request_id in enumerate(batch.req_ids):
            history = batch.history(row)
            if request_id in direct:
                direct.stop(request_id)
            direct.start(request_id, history)
            assert drafts[row] == list(direct.propose(request_id, 5).tokens), request_id
            assert len(drafts[row]) <= 5
            seen[request_id].append(len(drafts[row]))

    accepted = run_steps(drafter, batch, streams, 30, check=check)
    assert accepted > 30, "repetitive text must be drafted and accepted"
    assert all(any(lengths) for lengths in seen.values())
    assert drafter.counters["drafts.ngram"] > 0 and drafter.counters["faults"] == 0


def test_request_state_follows_ids_when_rows_move_and_requests_end():
    calls: list[tuple] = []

    class Recording(Proposer):
        name = "rec"

        def _start(self, request_id, prompt):
            calls.append(("start", request_id, len(prompt)))

        def _propose(self, request_id, max_tokens):
            return Draft((), "rec")

        def _extend(self, request_id, tokens):
            calls.append(("extend", request_id, tokens.tolist()))

        def _stop(self, request_id):
            calls.append(("stop", request_id))

    tracker = BatchSync(GuardedProposer(Recording()))
    batch = Batch()
    batch.add("a", [1, 2, 3])
    batch.add("b", [4, 5])
    batch.append(0, [6])
    batch.append(1, [7])
    assert tracker.update([[6], [7]], batch.num_tokens_no_spec, batch.token_ids_cpu, ["a", "b"], {"a", "b"}) == ["a", "b"]
    assert calls == [("start", "a", 3), ("extend", "a", [6]), ("start", "b", 2), ("extend", "b", [7])]
    calls.clear()
    batch.remove(0)  # "a" finished; "b" moves to row 0
    batch.append(0, [8, 9])
    assert tracker.update([[8, 9]], batch.num_tokens_no_spec, batch.token_ids_cpu, ["b"], {"b"}) == ["b"]
    assert calls == [("extend", "b", [8, 9]), ("stop", "a")]
    calls.clear()
    # a partial prefill has no new tokens: no draft, no state yet
    batch.add("c", [1, 1, 1])
    assert tracker.update([[1], []], batch.num_tokens_no_spec, batch.token_ids_cpu, ["b", "c"], {"b", "c"}) == [
        "b", None]
    # "b" is not scheduled this step but still alive: its state is kept
    calls.clear()
    tracker.update([[]], batch.num_tokens_no_spec, batch.token_ids_cpu, ["c"], {"b", "c"})
    assert ("stop", "b") not in calls


def test_without_a_runner_rows_are_recognised_by_their_history():
    batch = Batch()
    streams = {"a": text(5, 230)[30:], "b": text(6, 230)[30:]}
    batch.add("a", text(5, 30))
    batch.add("b", text(6, 30))
    drafter = SpecplugDrafter(vllm_config("suffix", k=4))  # no runner: rows are keys
    assert run_steps(drafter, batch, streams, 10) > 0
    starts = drafter.counters.copy()
    batch.remove(0)  # "b" moves to row 0: its history differs from what row 0 had
    sampled = [[streams["b"][50]]]
    batch.append(0, sampled[0])
    drafts = drafter.propose(sampled, batch.num_tokens_no_spec, batch.token_ids_cpu)
    assert len(drafts) == 1 and len(drafter.batch) == 1
    assert drafter.counters["faults"] == starts["faults"] == 0


def test_step_k_and_max_model_len_bound_each_draft():
    batch = Batch()
    batch.add("a", [5, 6, 7] * 10)
    drafter = SpecplugDrafter(vllm_config("ngram", k=3), runner=Runner(input_batch=batch, requests={"a"}))
    batch.append(0, [5])
    assert len(drafter.propose([[5]], batch.num_tokens_no_spec, batch.token_ids_cpu)[0]) == 3
    batch.num_tokens_no_spec[0] = MAX_LEN - 1  # no room left for a draft
    assert drafter.propose([[6]], batch.num_tokens_no_spec, batch.token_ids_cpu) == [[]]


def test_a_raising_proposer_costs_its_drafts_only(tmp_path):
    batch = Batch()
    batch.add("a", [1, 2, 3, 1, 2, 3, 1, 2])
    stats = tmp_path / "stats.json"
    drafter = SpecplugDrafter(vllm_config("ngram", stats_file=str(stats), stats_interval=0))

    class Broken:
        name = "broken"

        def __getattr__(self, name):
            def fail(*args, **kwargs):
                raise RuntimeError("injected")
            return fail

    drafter.guard.proposer = Broken()
    batch.append(0, [3])
    for token in (1, 2, 3):
        assert drafter.propose([[token]], batch.num_tokens_no_spec, batch.token_ids_cpu) == [[]]
        batch.append(0, [token])
    assert drafter.counters["faults"] >= 1
    written = read_stats(stats)
    assert written["method"] == "ngram" and written["counters"]["faults"] >= 1 and written["steps"] == 3


def test_the_drafters_own_faults_count_in_the_guard_and_log_once(caplog):
    batch = Batch()
    batch.add("a", [1, 2, 3, 1, 2, 3, 1, 2])
    drafter = SpecplugDrafter(vllm_config("adaptive"), runner=Runner(input_batch=batch, requests={"a"}))
    assert drafter.guard.proposer.name == "adaptive" and drafter.batch.proposer is drafter.guard

    def refuse(size):
        raise ValueError(f"batch {size}")

    drafter.guard.proposer.set_batch_size = refuse
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        batch.append(0, [3])
        assert drafter.propose([[3]], batch.num_tokens_no_spec, batch.token_ids_cpu)[0]  # drafts all the same
        assert drafter.passes_batch_size is False and drafter.counters["faults"] == 1
        drafter.batch = None  # the adapter's own code breaks: no drafts, vLLM goes on
        for token in (1, 2):
            assert drafter.propose([[token]], batch.num_tokens_no_spec, batch.token_ids_cpu) == [[]]
    assert drafter.counters["faults"] == 3
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "specplug adaptive: set_batch_size(1) raised ValueError; batch size no longer passed on (logged once per kind of fault)",
        "specplug adaptive: the vLLM drafter raised AttributeError; no drafts this step (logged once per kind of fault)",
    ]


def test_adaptive_gets_the_batch_size():
    batch = Batch()
    batch.add("a", [1, 2, 3] * 8)
    batch.add("b", [4, 5, 6] * 8)
    drafter = SpecplugDrafter(vllm_config("adaptive"), runner=Runner(input_batch=batch, requests={"a", "b"}))
    batch.append(0, [1])
    batch.append(1, [4])
    drafter.propose([[1], [4]], batch.num_tokens_no_spec, batch.token_ids_cpu)
    assert drafter.guard.proposer.batch_size == 2


class EnginePass:
    """vLLM's drafting of a step as the plugin hands it to the overlay: records each draft length asked."""

    def __init__(self, drafts) -> None:
        self.drafts, self.asked = drafts, []

    def __call__(self, tokens: int):
        self.asked.append(tokens)
        if isinstance(self.drafts, list):
            return [row[:tokens] for row in self.drafts]
        return self.drafts[:, :tokens]


def test_engine_drafts_and_overlay_on_lists_and_padded_tensors():
    torch = pytest.importorskip("torch") if "torch" not in sys.modules else sys.modules["torch"]
    batch = Batch()
    batch.add("a", [1, 2, 3, 4] * 6)
    batch.add("b", [9, 8, 7] * 6)
    runner = Runner(input_batch=batch, requests={"a", "b"}, discard_request_mask=None)
    config = SimpleNamespace(
        additional_config={"specplug": {"method": "hybrid", "neural": "mtp", "lookup": "ngram", "margin": 100.0,
                                        "step_costs": "off",
                                        "unused_neural_pass": "full"}},
        speculative_config=SimpleNamespace(method="mtp"),
    )
    overlay = HybridOverlay(config)  # "full": vLLM's drafter runs every step, the first overlay's way
    # after bookkeeping (lists): the lookup wins where it drafts (margin 100)
    batch.append(0, [1])
    batch.append(1, [9])
    out = overlay.apply(runner, 3, [[1], [9]], EnginePass([[50, 51, 52], [60, 61, 62]]))
    assert out == [[2, 3, 4], [8, 7, 9]]
    # before bookkeeping (draft models): the padded [batch, K + 1] tensor, -1 for rejected
    sampled = torch.tensor([[2, 3, 4, 1], [8, -1, -1, -1]])
    neural = torch.tensor([[70, 71, 72], [80, 81, 82]])
    out = overlay.apply(runner, 3, sampled, EnginePass(neural))
    assert isinstance(out, torch.Tensor) and out.shape == neural.shape
    assert out[0].tolist() == [2, 3, 4]  # after 1 2 3 4 1: the lookup's 2 3 4
    assert overlay.counters["faults"] == 0 and overlay.stats.steps == 2
    # a short choice in a tensor is padded with the engine's own tokens
    assert _like(neural, [[5], [6, 7, 8]], neural.tolist()).tolist() == [[5, 71, 72], [6, 7, 8]]


def test_engine_drafts_feed_the_hybrid_its_neural_draft():
    engine = EngineDrafts("eagle")
    hybrid = specplug.create("hybrid", neural=engine, lookup="ngram", margin=-100.0)  # the neural part wins
    hybrid.start("r", [1, 2, 3, 4])
    engine.offer("r", [7, 7, 7])
    draft = hybrid.propose("r", 3)
    assert draft.tokens == (7, 7, 7) and draft.source == "eagle"
    assert engine.draft_kind == "neural"


def test_overlay_faults_fall_back_to_the_engine_drafts():
    batch = Batch()
    batch.add("a", [1, 2, 3])
    runner = Runner(input_batch=batch, requests={"a"})
    config = SimpleNamespace(additional_config={"specplug": {"method": "hybrid", "neural": "mtp"}},
                             speculative_config=SimpleNamespace(method="mtp"))
    overlay = HybridOverlay(config)
    overlay.guard.proposer = None  # every call raises
    batch.append(0, [4])
    assert overlay.apply(runner, 2, [[4]], EnginePass([[5, 6]])) == [[5, 6]]
    assert overlay.counters["faults"] >= 1
    faults = overlay.counters["faults"]
    overlay.batch = None  # the overlay's own code breaks: vLLM's drafts go out, counted as a fault
    batch.append(0, [5])
    assert overlay.apply(runner, 2, [[5]], EnginePass([[6, 7]])) == [[6, 7]]
    assert overlay.counters["faults"] == faults + 1


def test_post_import_hook_runs_after_the_first_import(tmp_path, monkeypatch):
    module = tmp_path / "specplug_hook_probe.py"
    module.write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[types.ModuleType] = []
    when_imported("specplug_hook_probe", lambda mod: seen.append(mod))
    assert seen == []
    import specplug_hook_probe  # noqa: F401

    assert [mod.VALUE for mod in seen] == [1]
    when_imported("specplug_hook_probe", lambda mod: seen.append(mod))  # already imported: at once
    assert len(seen) == 2
    sys.modules.pop("specplug_hook_probe")


def test_stats_file_is_json_and_written_atomically(tmp_path):
    counters = GuardedProposer(specplug.create("ngram")).counters
    counters["drafts.ngram"] = 3
    reporter = StatsReporter(counters, method="ngram", path=str(tmp_path / "s-{pid}.json"), interval=0)
    reporter.step()
    files = list(tmp_path.iterdir())
    assert len(files) == 1 and not files[0].name.endswith(".tmp")
    assert json.loads(files[0].read_text())["counters"] == {"drafts.ngram": 3}


def two_row_overlay(**section) -> tuple[Batch, Runner, HybridOverlay]:
    batch = Batch()
    batch.add("a", [1, 2, 3, 4] * 6)
    batch.add("b", [9, 8, 7] * 6)
    runner = Runner(input_batch=batch, requests={"a", "b"}, discard_request_mask=None)
    # by expected accepted tokens (margin decides): no cost model learnt from times here (test_step_costs.py)
    section = {"step_costs": "off", **section}
    config = SimpleNamespace(additional_config={"specplug": {"method": "hybrid", "neural": "eagle", "lookup": "ngram",
                                                             **section}},
                             speculative_config=SimpleNamespace(method="eagle"))
    batch.append(0, [1])
    batch.append(1, [9])
    return batch, runner, HybridOverlay(config)


@pytest.mark.parametrize(("setting", "asked"), [(None, [0]), ("fill", [0]), ("skip", []), ("full", [3])])
def test_a_step_where_every_row_takes_the_lookup_runs_no_neural_draft(setting, asked):
    # margin 100: the lookup wins wherever it drafts, and both rows have a lookup draft
    section = {"margin": 100.0} if setting is None else {"margin": 100.0, "unused_neural_pass": setting}
    _, runner, overlay = two_row_overlay(**section)
    engine = EnginePass([[50, 51, 52], [60, 61, 62]])
    assert overlay.apply(runner, 3, [[1], [9]], engine) == [[2, 3, 4], [8, 7, 9]]
    # fill: only the drafter's first forward (draft length 0, its KV cache stays filled); skip: nothing
    assert engine.asked == asked
    passes = {key: count for key, count in overlay.counters.items() if key.startswith("neural_pass.")}
    assert passes == {f"neural_pass.{setting or 'fill'}": 1}
    assert overlay.counters["drafts.ngram"] == 2 and overlay.counters["faults"] == 0


@pytest.mark.parametrize("setting", ["fill", "skip"])
def test_a_row_that_takes_the_neural_draft_runs_the_drafter_once_for_the_batch(setting):
    _, runner, overlay = two_row_overlay(margin=-100.0, unused_neural_pass=setting)  # the neural part wins
    engine = EnginePass([[50, 51, 52], [60, 61, 62]])
    assert overlay.apply(runner, 3, [[1], [9]], engine) == [[50, 51, 52], [60, 61, 62]]
    assert engine.asked == [3] and overlay.counters["neural_pass.full"] == 1
    assert overlay.counters[f"neural_pass.{setting}"] == 0
    assert overlay.counters["drafts.eagle"] == 2


def _next_step(batch: Batch, runner: Runner, overlay: HybridOverlay, engine: EnginePass,
               tokens: list[int] | None = None) -> str:
    """One decoding step, each row's next token its pattern's (or ``tokens``): what vLLM's drafter did."""
    if tokens is None:
        tokens = [int(batch.token_ids_cpu[row, batch.num_tokens_no_spec[row] - 4]) for row in range(len(batch.req_ids))]
    for row, token in enumerate(tokens):
        batch.append(row, [token])
    before = dict(overlay.counters)
    overlay.apply(runner, 3, [[token] for token in tokens], engine)
    done = [key for key in ("neural_pass.full", "neural_pass.fill", "neural_pass.skip")
            if overlay.counters[key] != before.get(key, 0)]
    assert len(done) == 1
    return done[0].removeprefix("neural_pass.")


def test_fill_in_use_fills_only_while_the_head_is_taken_or_a_request_is_new():
    batch, runner, overlay = two_row_overlay(margin=100.0, unused_neural_pass="fill_in_use")  # lookups win
    batch.num_tokens_no_spec[:2] -= 1  # two_row_overlay appended each row's next token: _next_step does
    batch.token_ids_cpu[0, :32] = [1, 2, 3, 4] * 8
    batch.token_ids_cpu[1, :32] = [9, 8, 7, 6] * 8
    engine = EnginePass([[50, 51, 52], [60, 61, 62]])
    # the requests are new: their prompts, and the head's first steps, fill its KV cache; then it idles
    steps = [_next_step(batch, runner, overlay, engine) for _ in range(FILL_IDLE_STEPS + 3)]
    assert steps == ["fill"] * (FILL_IDLE_STEPS + 1) + ["skip"] * 2
    assert engine.asked == [0] * (FILL_IDLE_STEPS + 1)
    # a request joins the batch: the fill runs again for it
    batch.add("c", [5, 6, 7, 8] * 6)
    runner.requests = {"a", "b", "c"}
    assert _next_step(batch, runner, overlay, engine) == "fill"
    steps = [_next_step(batch, runner, overlay, engine) for _ in range(FILL_IDLE_STEPS + 1)]
    assert steps == ["fill"] * FILL_IDLE_STEPS + ["skip"]
    # a step off every pattern: no lookup drafts, the head's draft is taken, and the fill resumes after it
    assert _next_step(batch, runner, overlay, engine, tokens=[70, 71, 72]) == "full"
    after = [_next_step(batch, runner, overlay, engine) for _ in range(FILL_IDLE_STEPS)]
    assert "skip" not in after and "fill" in after, after  # the head's later steps take it, or the fill runs


def test_fill_in_use_keeps_the_output_of_a_plain_fill_and_skip():
    # whatever it does with vLLM's drafter, the drafts that go out are the method's, as with fill and skip
    outputs = {}
    for setting in ("fill", "skip", "fill_in_use"):
        batch, runner, overlay = two_row_overlay(margin=100.0, unused_neural_pass=setting)
        outputs[setting] = [overlay.apply(runner, 3, [[1], [9]], EnginePass([[50, 51, 52], [60, 61, 62]]))]
    assert outputs["fill_in_use"] == outputs["fill"] == outputs["skip"]


def test_vllms_own_drafter_error_is_raised_not_taken_for_a_method_fault():
    _, runner, overlay = two_row_overlay(margin=-100.0)

    def failing(tokens: int):
        raise RuntimeError("drafter out of memory")

    with pytest.raises(RuntimeError, match="drafter out of memory"):
        overlay.apply(runner, 3, [[1], [9]], failing)
    assert overlay.counters["faults"] == 0


def test_a_bad_unused_neural_pass_names_the_value_and_the_valid_ones():
    with pytest.raises(InvalidOptionError, match=r"unused_neural_pass'\] = 'never' is not valid; use one of fill, skip, full, fill_in_use"):
        two_row_overlay(unused_neural_pass="never")


def test_data_parallel_ranks_keep_the_full_pass():
    # the drafter's forwards synchronise data-parallel ranks, whose batches (so choices) differ
    config = SimpleNamespace(additional_config={"specplug": {"method": "hybrid", "neural": "eagle"}},
                             speculative_config=SimpleNamespace(method="eagle"),
                             parallel_config=SimpleNamespace(data_parallel_size=2))
    assert HybridOverlay(config).unused_neural_pass == "full"


def test_a_method_fault_before_the_choice_sends_vllms_own_drafts():
    _, runner, overlay = two_row_overlay(margin=100.0)
    overlay.guard.proposer = None  # every call raises inside the guard: no row asked for the neural draft
    engine = EnginePass([[50, 51, 52], [60, 61, 62]])
    assert overlay.apply(runner, 3, [[1], [9]], engine) == [[50, 51, 52], [60, 61, 62]]
    assert engine.asked == [3] and overlay.counters["faults"] >= 1
