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


def _rows():
    from specplug.lab.llamacpp._measure import Measurement, Setting

    row = Measurement(Setting("plain"))
    row.tokens_per_second, row.cpu_tokens_per_second, row.ratios = [10.0], [10.0], [1.0]
    return [row]


def test_a_first_look_table_after_round_one_only_when_more_rounds_follow(capsys, monkeypatch):
    from specplug.lab.llamacpp import _demo

    monkeypatch.setattr(_demo, "_on_terminal", lambda: False)
    for rounds in (1, 3):
        tables = _demo._Tables("T", rounds, lambda rows: ["summary"])
        for done in range(1, rounds + 1):
            tables.after_round(done, _rows())
        tables.final(_rows())
    out = capsys.readouterr().out
    # once, from the 3-round run's first round; a 1-round run has only its final table; no escapes in a pipe
    assert out.count("FIRST LOOK, round 1 of 3 (the final table follows)") == 1
    assert out.count("T: one round") == 1 and out.count("T: medians of 3 rounds") == 1 and out.count("summary") == 2
    assert "\x1b[" not in out


def test_on_a_terminal_the_final_table_replaces_the_first_look(capsys, monkeypatch):
    import os

    from specplug.lab.llamacpp import _demo

    monkeypatch.setattr(_demo, "_on_terminal", lambda: True)
    monkeypatch.setattr(_demo.shutil, "get_terminal_size", lambda *a: os.terminal_size((40, 24)))
    tables = _demo._Tables("a title long enough to wrap at forty columns", 3, lambda rows: [])
    tables.after_round(1, _rows())
    first_look = capsys.readouterr().out
    tables.final(_rows())
    final = capsys.readouterr().out
    # the rows the first look filled, counted with its wrapped lines: the cursor goes back that far
    rows = sum(max(1, -(-len(line) // 40)) for line in first_look.rstrip("\n").split("\n"))
    assert rows > len(first_look.rstrip("\n").split("\n"))  # some lines did wrap
    assert final.startswith(f"\x1b[{rows}F\x1b[J") and "medians of 3 rounds" in final
