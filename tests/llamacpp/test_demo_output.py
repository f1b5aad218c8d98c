"""The demo's console: a line saying what runs, the two tables, where the engines' logs went.

Run for real (SmolLM2, one round, short completions): llama-server's and llama-cpp-python's own
log lines go to the log file, not to the console, and the console output fits one screen.
"""

from __future__ import annotations

import subprocess
import sys

SCREEN_LINES = 24


def test_demo_console_holds_the_tables_and_the_engine_logs_go_to_the_file(smollm2, tmp_path):
    log = tmp_path / "engines.log"
    command = [sys.executable, "-m", "specplug.lab.llamacpp._demo", "--model", str(smollm2),
               "--rounds", "1", "--n-predict", "16", "--log", str(log)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.splitlines()
    assert len(lines) <= SCREEN_LINES, result.stdout
    assert any(line.startswith("llama-server, ") for line in lines)
    assert any(line.startswith("llama-cpp-python, ") for line in lines)
    assert str(log) in lines[-1]
    for stream in (result.stdout, result.stderr):
        assert "llama_" not in stream and "load_tensors" not in stream, stream[-3000:]
    text = log.read_text(encoding="utf-8")
    assert text.count("==== llama-server, round 1/1") == 4  # plain, --spec-default, hand setting, preset
    assert "llama_model_loader" in text and "llama_kv_cache" in text


def test_verbose_shows_the_engine_logs_and_writes_no_file(smollm2, tmp_path):
    log = tmp_path / "engines.log"
    command = [sys.executable, "-m", "specplug.lab.llamacpp._demo", "--model", str(smollm2), "--only", "inprocess",
               "--rounds", "2", "--n-predict", "8", "--log", str(log), "--verbose"]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # model loading itself stays quiet: llama-cpp-python silences it with verbose=False
    assert "llama_context" in result.stderr and "... round 1/2, prompt 1: plain" in result.stderr
    assert not log.exists()
    # the in-process comparison shows a first look after round 1 (the demo's first table on a first
    # run, before llama-server is compiled), then its final table
    titles = [line for line in result.stdout.splitlines() if line.startswith("llama-cpp-python, ")]
    assert [title.split(": ", 1)[1] for title in titles] == [
        "FIRST LOOK, round 1 of 2 (the final table follows)", "medians of 2 rounds"]


def test_a_first_look_table_after_round_one_only_when_more_rounds_follow():
    from specplug.lab.llamacpp._demo import _first_look, _which_table

    shown: list[int] = []
    for rounds in (1, 3):
        after_round = _first_look(lambda done, rows: shown.append(done), rounds)
        for done in range(1, rounds + 1):
            after_round(done, [])
    assert shown == [1]  # once, from the 3-round run's first round; a 1-round run has only its final table
    assert "FIRST LOOK, round 1 of 3" in _which_table(1, 3) and "final table follows" in _which_table(1, 3)
    assert _which_table(3, 3) == ": medians of 3 rounds" and _which_table(1, 1) == ": one round"
