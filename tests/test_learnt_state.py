"""The composites' pooled statistics kept in a ``learnt_state`` file across a server's restarts."""

from __future__ import annotations

import gc
import logging
import subprocess
import sys

import numpy as np
import pytest

from specplug import create
from specplug._errors import InvalidOptionError
from specplug.cost import cost_model
from specplug.lab.bench._metered import Metered
from specplug.lab.bench._methods import parse_method
from specplug.lab.bench._neural import TraceNeuralProposer
from specplug.lab.bench._replay import replay
from specplug.lab.bench._rules_report import batch_tables, misses
from specplug.lab.bench._run import run_benchmark, warm_label
from specplug.lab.trace import NeuralTrace, TraceRecord
from specplug.proposers.composite._choice import KIND_LOOKUP_NEURAL, KIND_NEURAL
from specplug.proposers.composite._learnt import SAVE_EVERY

OUTPUT = list(range(1000, 1100))


def _records(count: int, accepted: int, first: int = 0, workload: str = "w") -> list[TraceRecord]:
    """Requests of text of their own (no lookup drafts one from another), whose head accepts
    ``accepted`` tokens at every position."""
    return [
        TraceRecord(v=1, id=f"r{index}", workload=workload, prompt_ids=[1, 2, 3],
                    output_ids=[token + 1000 * index for token in OUTPUT],
                    neural=NeuralTrace(k=8, accepted=[accepted] * len(OUTPUT)))
        for index in range(first, first + count)
    ]


def _hybrid(records: list[TraceRecord], **options):
    neural = Metered(TraceNeuralProposer(records), "neural")
    lookup = Metered(create("suffix"))
    hybrid = create("hybrid", neural=neural, lookup=lookup, cost=cost_model("llama-3.1-8b-h100"), **options)
    return hybrid, neural, lookup


def test_a_restarted_hybrid_starts_from_the_counts_it_kept(tmp_path):
    path = tmp_path / "hybrid.npz"
    served = _records(SAVE_EVERY, accepted=0)
    first, neural, lookup = _hybrid(served, learnt_state=str(path))
    replay(first, [neural, lookup], served[: SAVE_EVERY - 1], 8)
    assert not path.exists()  # written every SAVE_EVERY finished requests, not before
    replay(first, [neural, lookup], served[SAVE_EVERY - 1 :], 8)
    assert path.exists()
    again, _, _ = _hybrid(served, learnt_state=str(path))
    assert np.array_equal(again._pooled_drafted, first._pooled_drafted)
    assert np.array_equal(again._pooled_accepted, first._pooled_accepted)
    assert again._pooled_drafted.sum() > 0


def test_a_warm_hybrid_spends_fewer_steps_on_a_head_it_learnt_is_useless(tmp_path):
    path = tmp_path / "hybrid.npz"
    learnt, neural, lookup = _hybrid(_records(8, accepted=0), learnt_state=str(path))
    replay(learnt, [neural, lookup], _records(8, accepted=0), 8)
    learnt.save_learnt_state()
    fresh_requests = _records(2, accepted=0, first=100)
    calls = {}
    for name, options in (("cold", {}), ("warm", {"learnt_state": str(path)})):
        hybrid, neural, lookup = _hybrid(fresh_requests, **options)
        logs = replay(hybrid, [neural, lookup], fresh_requests, 8)
        calls[name] = sum(int(np.isin(log.kinds, (KIND_NEURAL, KIND_LOOKUP_NEURAL)).sum()) for log in logs)
        assert sum(int(log.accepted.sum()) for log in logs) == 0  # nothing to accept either way: same tokens out
    assert calls["warm"] < calls["cold"], calls


def test_counts_of_another_configuration_are_refused_with_both_layouts(tmp_path):
    path = tmp_path / "state.npz"
    hybrid, _, _ = _hybrid(_records(1, 1), learnt_state=str(path))
    hybrid.save_learnt_state()
    with pytest.raises(InvalidOptionError, match=r"learnt_state = '.*state.npz' holds the statistics of hybrid over \(suffix, neural\).*not of this adaptive"):
        create("adaptive", learnt_state=str(path))
    with pytest.raises(InvalidOptionError, match="not of this hybrid over"):
        create("hybrid", neural=create("ngram"), lookup="suffix", learnt_state=str(path), max_positions=16)


def test_counts_kept_before_the_long_match_bands_are_read_into_the_bands_they_meant(tmp_path):
    """A file written when the counts had half the bands (no bands for drafts after a long match):
    an upgraded server starts from those counts, in the same bands, the new bands empty."""
    import json

    path = tmp_path / "state.npz"
    hybrid, _, _ = _hybrid(_records(1, 1), learnt_state=str(path))
    tracks, bands, positions = hybrid._pooled_drafted.shape
    rng = np.random.default_rng(0)
    drafted = rng.integers(5, 50, size=(tracks, bands // 2, positions)).astype(float)
    accepted = np.floor(drafted / 2)
    layout = {**hybrid._learnt.layout, "shape": [tracks, bands // 2, positions]}
    np.savez(path, layout=np.array(json.dumps(layout)), drafted=drafted, accepted=accepted)
    again, _, _ = _hybrid(_records(1, 1), learnt_state=str(path))
    assert np.array_equal(again._pooled_drafted[:, : bands // 2], drafted)
    assert np.array_equal(again._pooled_accepted[:, : bands // 2], accepted)
    assert not again._pooled_drafted[:, bands // 2 :].any()
    more = {**layout, "shape": [tracks, bands + 1, positions]}  # more bands than this version has: refused
    np.savez(path, layout=np.array(json.dumps(more)), drafted=np.zeros(more["shape"]), accepted=np.zeros(more["shape"]))
    with pytest.raises(InvalidOptionError, match="not of this hybrid"):
        _hybrid(_records(1, 1), learnt_state=str(path))


@pytest.mark.parametrize("content", [b"", b"not numpy", b"PK\x03\x04 broken zip"])
def test_a_file_that_is_not_learnt_state_is_one_clear_error(tmp_path, content):
    path = tmp_path / "state.npz"
    path.write_bytes(content)
    with pytest.raises(InvalidOptionError, match="is not a file of specplug's learnt statistics; remove it or give another path"):
        create("adaptive", learnt_state=str(path))


def test_impossible_counts_are_refused(tmp_path):
    path = tmp_path / "state.npz"
    hybrid, _, _ = _hybrid(_records(1, 1), learnt_state=str(path))
    hybrid._pooled_drafted[0, 0, 0] = 1.0
    hybrid._pooled_accepted[0, 0, 0] = 2.0  # more accepted than drafted
    hybrid.save_learnt_state()
    with pytest.raises(InvalidOptionError, match="more accepted than drafted"):
        _hybrid(_records(1, 1), learnt_state=str(path))


def test_a_failed_write_is_logged_once_and_drafting_goes_on(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = blocker / "state.npz"  # a folder that is a file: every write fails
    served = _records(2 * SAVE_EVERY, accepted=2)
    hybrid, neural, lookup = _hybrid(served, learnt_state=str(path))
    with caplog.at_level(logging.WARNING, logger="specplug"):
        logs = replay(hybrid, [neural, lookup], served, 8)
    assert sum(int(log.accepted.sum()) for log in logs) > 0
    warnings = [record for record in caplog.records if "could not write learnt_state" in record.getMessage()]
    assert len(warnings) == 1
    assert not list(tmp_path.glob("**/*.partial"))


def test_saving_without_a_file_and_an_empty_path_are_errors():
    hybrid, _, _ = _hybrid(_records(1, 1))
    with pytest.raises(InvalidOptionError, match="no learnt_state file to write"):
        hybrid.save_learnt_state()
    with pytest.raises(InvalidOptionError, match="learnt_state"):
        create("adaptive", learnt_state="")


def test_the_bench_replays_composites_warm_from_the_other_split_and_checks_their_targets():
    cost = cost_model("llama-3.1-8b-h100")
    methods = [parse_method(spec) for spec in ("neural", "suffix", "hybrid")]
    served, learning = _records(3, accepted=0), _records(6, accepted=0, first=10)
    result = run_benchmark(served, methods, cost, batch_sizes=[1, 64], engine_runs=False, warm_records=learning)
    assert warm_label("hybrid") in result.methods and warm_label("suffix") not in result.methods
    warm, cold = result.row("w", warm_label("hybrid")), result.row("w", "hybrid")
    assert warm.status == "ok" and warm.speedup[1] > 0
    assert warm.speedup[1] != cold.speedup[1]  # it started from other counts: it drafted otherwise
    warm.speedup[1] = 0.5
    assert any(miss.startswith("hybrid (warm) 0.50 <") for miss in misses(result, 1, "w", warm=True))
    assert not any("(warm)" in miss for miss in misses(result, 1, "w"))
    text = batch_tables(result)
    assert "Targets (warm) missed at batch 1" in text and "**hybrid (warm)**" in text


def test_an_engine_keeps_what_its_composite_learnt_when_it_closes(tmp_path):
    from specplug.engine import EngineDrafting

    path = tmp_path / "adaptive.npz"
    drafting = EngineDrafting(create("adaptive", learnt_state=str(path)))
    histories = np.array([[1, 2, 3, 1, 2, 3, 1, 2], [7, 8, 9, 7, 8, 9, 7, 0]])
    for _ in range(3):
        rows = drafting.sync_batch([[3], [8]], [8, 7], histories, ["a", "b"])
        drafting.draft([(rows[0], 4), (rows[1], 4)])
    assert not path.exists()  # two requests, none finished: nothing written yet
    drafting.close()
    assert create("adaptive", learnt_state=str(path))._pooled_drafted.sum() > 0


#: a process that serves ``finished`` requests through an adaptive with learnt_state (fewer than
#: SAVE_EVERY: nothing is written on the way) and exits, in itself or in a multiprocessing child
_SERVE_AND_EXIT = """
import multiprocessing, sys
from specplug import create

def serve(path, finished):
    adaptive = create("adaptive", learnt_state=path)
    for index in range(finished + 1):
        request = f"r{index}"
        adaptive.start(request, [1, 2, 3, 1, 2, 3])
        adaptive.extend(request, [1, 2])
        adaptive.propose(request, 4)
        adaptive.extend(request, [3])
        if index < finished:  # the last one is still being served at exit
            adaptive.stop(request)
    serve.kept = adaptive  # alive until the process ends, as an engine's drafter is

if __name__ == "__main__":
    path, finished, where = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if where == "main":
        serve(path, finished)
    else:
        child = multiprocessing.get_context(where).Process(target=serve, args=(path, finished))
        child.start()
        child.join()
        sys.exit(child.exitcode)
"""


@pytest.mark.parametrize("where", ["main", "fork", "spawn"])
def test_a_process_that_exits_keeps_what_finished_since_the_last_write(tmp_path, where):
    # vLLM and SGLang never close their drafter: what the last requests taught would be lost on a
    # restart, were it not written as the process (an engine's worker: a multiprocessing child) exits
    script = tmp_path / "serve.py"
    script.write_text(_SERVE_AND_EXIT)
    path = tmp_path / "adaptive.npz"
    subprocess.run([sys.executable, str(script), str(path), "3", where], check=True, timeout=300)
    assert create("adaptive", learnt_state=str(path))._pooled_drafted.sum() > 0


def test_a_dropped_composite_keeps_what_finished_since_the_last_write(tmp_path):
    path = tmp_path / "adaptive.npz"
    adaptive = create("adaptive", learnt_state=str(path))
    adaptive.start("r", [1, 2, 3, 1, 2, 3])
    adaptive.extend("r", [1, 2])
    adaptive.propose("r", 4)
    adaptive.extend("r", [3])
    adaptive.stop("r")
    assert not path.exists()
    del adaptive
    gc.collect()
    assert create("adaptive", learnt_state=str(path))._pooled_drafted.sum() > 0


def test_a_process_that_finished_nothing_since_the_last_write_writes_nothing_at_exit(tmp_path):
    script = tmp_path / "serve.py"
    script.write_text(_SERVE_AND_EXIT)
    path = tmp_path / "adaptive.npz"
    subprocess.run([sys.executable, str(script), str(path), "0", "main"], check=True, timeout=300)
    assert not path.exists()
