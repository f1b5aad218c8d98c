"""The CLI against a hostile user: every subcommand x bad input ends with exit 2, exactly one line on
stderr, no traceback, no partial or truncated output file, and a good output file already there
left as it was. Outputs are checked before the work starts and written whole (atomically).

Cases run in process through ``main()`` (a traceback would fail the test with the exception); a few
run as real processes too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specplug._outputs import atomic_output, check_output, write_text_atomic
from specplug.cli import main
from specplug.lab.trace import TraceRecord, read_traces, write_traces

GOOD = "a good output from an earlier run\n"
RUN = {"draft_n": 10, "draft_n_accepted": 5, "predicted_n": 14}
NINES = "9" * 5000
HUGE_COST = """name = "huge"
step_overhead = 1e308
[verify]
per_kv_token = 1e308
per_batched_token = 1e308
fixed = 1e308
[draft.lookup]
fixed = 1e308
[draft.neural]
fixed = 1e308
"""


def _record(**changes) -> dict:
    data = {
        "v": 1, "id": "a", "workload": "w", "prompt_ids": [1, 2, 3, 4, 1, 2, 3, 4, 5, 6],
        "output_ids": [1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6, 7, 8], "engine_runs": {"llama.cpp/ngram-mod": RUN},
    }  # fmt: skip
    data.update(changes)
    return data


class Files:
    """Inputs, good and bad, in a test's folder; ``good_output`` files start out holding GOOD."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        #: every file made here, so a test can tell that the CLI made none
        self.made: set[Path] = set()

    def text(self, name: str, text: str) -> str:
        return self.raw(name, text.encode("utf-8"))

    def raw(self, name: str, data: bytes) -> str:
        (self.folder / name).write_bytes(data)
        self.made.add(self.folder / name)
        return str(self.folder / name)

    def trace(self, name: str = "t.jsonl", **changes) -> str:
        return self.text(name, json.dumps(_record(**changes)) + "\n")

    def good_output(self, name: str) -> str:
        return self.text(name, GOOD)

    def folder_named(self, name: str) -> str:
        (self.folder / name).mkdir()
        return str(self.folder / name)

    def under_a_file(self, name: str) -> str:
        return str(Path(self.text("plain-file", "x")) / name)


BENCH = ["bench", "--no-peers", "--no-oracle", "--batch-sizes", "1", "-m", "ngram"]
PERF = ["perf", "--contexts", "300", "--steps", "2", "--repeats", "1", "--peers", "", "--no-cap-check"]
PROMPT = '{"id": "p", "workload": "w", "script": [{"role": "user", "content": "hi"}, {"generate": 4}]}\n'

#: id -> (argv from Files, a fragment of the one error line, outputs that must still hold GOOD)
CASES = {
    # outputs that cannot be written: found before the replay, not after it
    "bench --json unwritable": (lambda f: [*BENCH, f.trace(), "--json", f.under_a_file("r.json")], "--json", []),
    "bench --json a folder": (lambda f: [*BENCH, f.trace(), "--json", f.folder_named("r.json")], "is a folder", []),
    "bench --markdown unwritable": (
        lambda f: [*BENCH, f.trace(), "--json", f.good_output("r.json"), "--markdown", f.under_a_file("r.md")],
        "--markdown", ["r.json"],
    ),
    "bench --plots a file": (
        lambda f: [*BENCH, f.trace(), "--json", f.good_output("r.json"), "--plots", f.good_output("plots")],
        "--plots", ["r.json", "plots"],
    ),
    # inputs that are not what they should be
    "bench --cost not UTF-8": (
        lambda f: [*BENCH, f.trace(), "--cost", f.raw("c.toml", b'name = "caf\xe9"\n'), "--json", f.good_output("r.json")],
        "is not UTF-8 text: byte 0xe9 on line 1", ["r.json"],
    ),
    "bench --cost 5000-digit int": (
        lambda f: [*BENCH, f.trace(), "--cost", f.text("c.toml", f"step_overhead = {NINES}\n")],
        "a number with more than 4300 digits", [],
    ),
    "bench --cost a folder": (lambda f: [*BENCH, f.trace(), "--cost", f.folder_named("c.toml")], "cannot be read", []),
    "bench trace not UTF-8": (
        lambda f: [*BENCH, f.raw("t.jsonl", b'{"v": 1, "id": "\xe9"}\n'), "--json", f.good_output("r.json")],
        "t.jsonl:0: field (file): is not UTF-8 text", ["r.json"],
    ),
    "bench trace a folder": (lambda f: [*BENCH, f.folder_named("t.jsonl")], "cannot be read: Is a directory", []),
    "bench trace missing predicted_n": (
        lambda f: [*BENCH, f.trace(engine_runs={"llama.cpp/x": {"draft_n": 3, "draft_n_accepted": 1}}), "--json", f.good_output("r.json")],
        "field engine_runs: 'llama.cpp/x': predicted_n is missing", ["r.json"],
    ),
    "bench trace deeply nested JSON": (
        lambda f: [*BENCH, f.text("t.jsonl", "[" * 100_000 + "]" * 100_000 + "\n")], "nested too deeply", [],
    ),
    "bench trace meta nested 500 deep": (
        lambda f: [*BENCH, f.text("t.jsonl", json.dumps(_record(meta={"x": 1})).replace('{"x": 1}', '{"x": ' + "[" * 500 + "]" * 500 + "}") + "\n"), "--json", f.good_output("r.json")],
        "nested deeper than 64 levels", ["r.json"],
    ),
    "bench trace 5000-digit int": (
        lambda f: [*BENCH, f.text("t.jsonl", json.dumps(_record(prompt_ids=[1])).replace("[1]", f"[{NINES}]") + "\n")],
        "a number with more than 4300 digits", [],
    ),
    "bench trace negative counters": (
        lambda f: [*BENCH, f.trace(engine_runs={"llama.cpp/x": {**RUN, "draft_n": -1}})], "draft_n = -1", [],
    ),
    "bench trace more accepted than drafted": (
        lambda f: [*BENCH, f.trace(engine_runs={"llama.cpp/x": {**RUN, "draft_n_accepted": 20}})],
        "draft_n_accepted = 20 is larger than draft_n = 10", [],
    ),
    "bench trace rate not finite": (
        lambda f: [*BENCH, f.text("t.jsonl", json.dumps(_record(engine_runs={"x": {**RUN, "predicted_per_second": 1}})).replace(": 1}", ": NaN}") + "\n")],
        "predicted_per_second", [],
    ),
    "bench -m hybrid:neural=ngram": (
        lambda f: [*BENCH[:-2], "-m", "hybrid:neural=ngram", f.trace(), "--json", f.good_output("r.json")],
        "option 'neural' takes the engine's own drafter", ["r.json"],
    ),
    "bench -m hybrid:lookup=hybrid": (
        lambda f: [*BENCH[:-2], "-m", "hybrid:lookup=hybrid", f.trace()], "part 'hybrid' cannot be built on its own", [],
    ),
    "bench -m hybrid:cost=nope": (lambda f: [*BENCH[:-2], "-m", "hybrid:cost=nope", f.trace()], "unknown cost model 'nope'", []),
    "bench -m peer:vllm-ngram:foo=1": (
        lambda f: [*BENCH[:-2], "-m", "peer:vllm-ngram:foo=1", f.trace()], "peer 'vllm-ngram': unknown option 'foo'", [],
    ),
    "bench -m 5000-digit option": (lambda f: [*BENCH[:-2], "-m", f"ngram:min_n={NINES}", f.trace()], "option min_n", []),
    "bench --batch-sizes 5000 digits": (
        lambda f: [*BENCH, f.trace(), "--batch-sizes", NINES], "--batch-sizes '99999", [],
    ),
    "perf --json-out unwritable": (lambda f: [*PERF, "--json-out", f.under_a_file("p.json")], "--json-out", []),
    "perf --json-out a folder": (lambda f: [*PERF, "--json-out", f.folder_named("p.json")], "is a folder", []),
    "perf --contexts absurd": (
        lambda f: [*PERF, "--contexts", "99999999999k", "--json-out", f.good_output("p.json")], "give ints from 1 to", ["p.json"],
    ),
    "trace prompts not UTF-8": (
        lambda f: ["trace", f.raw("p.jsonl", b'{"id": "caf\xe9"}\n'), "--out", f.good_output("o.jsonl")], "is not UTF-8 text", ["o.jsonl"],
    ),
    "trace prompt line a bare number": (
        lambda f: ["trace", f.text("p.jsonl", PROMPT + "42\n"), "--out", f.good_output("o.jsonl")],
        "p.jsonl:2: must be a JSON object", ["o.jsonl"],
    ),
    "trace prompts deeply nested": (
        lambda f: ["trace", f.text("p.jsonl", "[" * 100_000 + "\n"), "--out", f.good_output("o.jsonl")], "nested too deeply", ["o.jsonl"],
    ),
    "trace --out unwritable": (lambda f: ["trace", f.text("p.jsonl", PROMPT), "--out", f.under_a_file("o.jsonl")], "--out", []),
    "trace --out a folder": (lambda f: ["trace", f.text("p.jsonl", PROMPT), "--out", f.folder_named("o.jsonl")], "is a folder", []),
    "calibrate --out unwritable": (lambda f: ["calibrate", "--out", f.under_a_file("c.toml")], "--out", []),
    "calibrate --out a folder": (lambda f: ["calibrate", "--out", f.folder_named("c.toml")], "is a folder", []),
    "tune --prompts not UTF-8": (
        lambda f: ["tune", "llama-server", "--model", "x.gguf", "--prompts", f.raw("p.jsonl", b'{"prompt": "\xff"}\n'), "--out", f.good_output("t.ini")],
        "is not UTF-8 text: byte 0xff", ["t.ini"],
    ),
    "tune --prompts bare number": (
        lambda f: ["tune", "llama-server", "--model", "x.gguf", "--prompts", f.text("p.jsonl", "7\n")], "p.jsonl:1: expected an object", [],
    ),
    "tune --out unwritable": (
        lambda f: ["tune", "llama-server", "--model", "x.gguf", "--prompts", f.text("p.jsonl", '{"prompt": "hi"}\n'), "--out", f.under_a_file("t.ini")],
        "--out", [],
    ),
    "trtllm check not UTF-8": (lambda f: ["trtllm", "check", f.raw("m.yaml", b"a: \xe9\n")], "is not UTF-8 text", []),
    "trtllm check deeply nested": (lambda f: ["trtllm", "check", f.text("m.yaml", "a: " + "[" * 2000 + "]" * 2000 + "\n")], "nested too deeply", []),
    "trtllm check 5000-digit int": (lambda f: ["trtllm", "check", f.text("m.yaml", f"a: {NINES}\n")], "more than 4300 digits", []),
    "trtllm tune --write a file": (lambda f: ["trtllm", "tune", "--write", f.good_output("presets")], "--write", ["presets"]),
    "trtllm tune --cost not UTF-8": (lambda f: ["trtllm", "tune", "--cost", f.raw("c.toml", b"\xe9")], "is not UTF-8 text", []),
    "preset unknown engine": (lambda f: ["preset", "no-such-engine", "x"], "no-such-engine", []),
    "usage error": (lambda f: ["bench", "--k", "0"], "--k", []),
    # sizes and values past what can be run, and paths past what a file system takes
    "bench --json 5000-character path": (
        lambda f: [*BENCH, f.trace(), "--json", str(f.folder / ("x" * 5000))], "--json", [],
    ),
    "bench trace 5000-character path": (lambda f: [*BENCH, str(f.folder / ("x" * 5000))], "cannot be read", []),
    "tune --prompts 5000-character path": (
        lambda f: ["tune", "llama-server", "--model", "x.gguf", "--prompts", str(f.folder / ("x" * 5000))], "prompt file", [],
    ),
    "tune --model 5000-character path": (
        lambda f: ["tune", "llama-server", "--model", str(f.folder / ("x" * 5000 + ".gguf")), "--prompts", f.text("p.jsonl", '{"prompt": "hi"}\n')],
        "model file", [],
    ),
    "trace prompts 5000-character path": (
        lambda f: ["trace", str(f.folder / ("x" * 5000 + ".jsonl")), "--out", f.good_output("o.jsonl")], "prompt set", ["o.jsonl"],
    ),
    "perf --steps 10**20": (lambda f: [*PERF, "--steps", str(10**20), "--json-out", f.good_output("p.json")], "--steps", ["p.json"]),
    "perf --steps 10**9": (lambda f: [*PERF, "--steps", str(10**9)], "--steps", []),
    "bench --neural-alpha nan": (lambda f: [*BENCH, f.trace(), "--neural-alpha", "nan"], "--neural-alpha", []),
    "perf --batch 4096 --contexts 4m": (lambda f: [*PERF, "--batch", "4096", "--contexts", "4096k"], "tokens held at once", []),
    "perf --repeats 10**9": (lambda f: [*PERF, "--repeats", str(10**9)], "--repeats", []),
    "tune --rounds 0": (
        lambda f: ["tune", "llama-server", "--model", "x.gguf", "--prompts", f.text("p.jsonl", '{"prompt": "hi"}\n'), "--rounds", "0"],
        "--rounds", [],
    ),
    "tune --ctx-size 10**12": (
        lambda f: ["tune", "llama-server", "--model", "x.gguf", "--prompts", f.text("p.jsonl", '{"prompt": "hi"}\n'), "--ctx-size", str(10**12)],
        "--ctx-size", [],
    ),
    "bench --cost every time 1e308": (
        lambda f: [*BENCH, f.trace(), "--cost", f.text("c.toml", HUGE_COST), "--json", f.good_output("r.json")],
        "gives no finite speedup", ["r.json"],
    ),
    "bench --cost a time of 5e-324": (
        lambda f: [*BENCH, f.trace(), "--cost", f.text("c.toml", HUGE_COST.replace("1e308", "5e-324"))],
        "gives no finite speedup", [],
    ),
}


def _leftovers(folder: Path) -> list[str]:
    """Temporary files an atomic write or a check would leave behind."""
    return sorted(p.name for p in folder.rglob("*") if p.name.startswith(".") and (p.suffix == ".tmp" or "probe" in p.name))


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_one_line_exit_2_and_outputs_stay_intact(case, tmp_path, capsys):
    argv, fragment, kept = CASES[case]
    files = Files(tmp_path)
    args = argv(files)
    with pytest.raises(SystemExit) as info:
        main(args)
    err = capsys.readouterr().err
    assert info.value.code == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("specplug: error: "), lines
    assert fragment in lines[0] and "Traceback" not in err
    assert len(lines[0]) < 1200  # a pasted 5000-digit number is not echoed whole
    for name in kept:
        assert (tmp_path / name).read_text() == GOOD, name
    assert {path for path in tmp_path.rglob("*") if path.is_file()} == files.made  # no output, whole or partial


def test_plots_without_matplotlib_fail_before_anything_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    files = Files(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*BENCH, files.trace(), "--json", files.good_output("r.json"), "--markdown", str(tmp_path / "new.md"), "--plots", str(tmp_path / "plots")])
    assert info.value.code == 2
    assert capsys.readouterr().err == "specplug: error: --plots needs matplotlib, which is not installed: pip install matplotlib, or leave --plots out\n"
    assert (tmp_path / "r.json").read_text() == GOOD
    assert not (tmp_path / "new.md").exists() and not (tmp_path / "plots").exists()


def test_engine_runs_that_make_sense_still_replay(tmp_path, capsys):
    """The checks reject nonsense, not the counters llama-server reports (no 'acc rate -2000%')."""
    files = Files(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*BENCH, files.trace(), "--json", str(tmp_path / "r.json")])
    assert info.value.code == 0
    rows = {row["method"]: row for row in json.loads((tmp_path / "r.json").read_text())["rows"]}
    assert rows["llama.cpp/ngram-mod"]["acceptance_rate"] == pytest.approx(0.5)


@pytest.mark.parametrize("case", ["bench trace missing predicted_n", "bench --json unwritable", "trtllm check deeply nested"])
def test_a_real_process_prints_one_line_and_no_traceback(case, tmp_path):
    argv, fragment, _ = CASES[case]
    result = subprocess.run(
        [sys.executable, "-c", "from specplug.cli import main; main()", *argv(Files(tmp_path))],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and fragment in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------- atomic writes


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.json"
    write_text_atomic(target, "old")
    target.chmod(0o640)
    for interruption in (RuntimeError("disk on fire"), KeyboardInterrupt()):
        with pytest.raises(type(interruption)):
            with atomic_output(target) as stream:
                stream.write("half of the new")
                raise interruption
        assert target.read_text() == "old" and _leftovers(tmp_path) == []
    write_text_atomic(target, "new")
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o640  # the user's mode is kept


def test_an_interrupted_trace_write_keeps_the_previous_file(tmp_path):
    path = tmp_path / "t.jsonl"
    first = [TraceRecord.model_validate(_record(id=f"r{index}")) for index in range(3)]
    write_traces(path, first)
    before = path.read_bytes()

    def records():
        yield first[0]
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_traces(path, records())
    assert path.read_bytes() == before and read_traces(path) == first and _leftovers(tmp_path) == []


def test_check_output_accepts_what_can_be_written_and_makes_nothing(tmp_path):
    assert check_output("--json", tmp_path / "new" / "deeper" / "r.json") == tmp_path / "new" / "deeper" / "r.json"
    assert check_output("--plots", tmp_path / "plots", folder=True) == tmp_path / "plots"
    assert sorted(tmp_path.iterdir()) == []  # the check creates no folder and leaves no probe


def test_an_input_past_the_size_limit_is_one_line_not_a_read_without_end(tmp_path, capsys, monkeypatch):
    import specplug._inputs

    monkeypatch.setattr(specplug._inputs, "MAX_INPUT_BYTES", 1 << 20)
    big = tmp_path / "t.jsonl"
    big.write_bytes(b" " * ((1 << 20) + 1))
    for source in ("/dev/zero", str(big)):
        with pytest.raises(SystemExit) as info:
            main([*BENCH, source])
        err = capsys.readouterr().err
        assert info.value.code == 2 and err.count("\n") == 1, err
        assert "is larger than 1,048,576 bytes" in err and source in err


def test_ctrl_c_at_start_up_or_in_a_run_is_one_line_and_status_130(capsys, monkeypatch):
    import specplug.cli
    import specplug.cli._app
    import specplug.lab.perf

    def interrupted(*arguments, **options):
        raise KeyboardInterrupt

    monkeypatch.setattr(specplug.lab.perf, "run_perf", interrupted)
    with pytest.raises(SystemExit) as info:
        main(PERF)
    err = capsys.readouterr().err
    assert info.value.code == specplug.cli.INTERRUPTED == 130
    assert [line for line in err.splitlines() if line] == ["specplug: interrupted"]
    monkeypatch.setattr(specplug.cli._app, "build_app", interrupted)  # while the app is being built
    with pytest.raises(SystemExit) as info:
        main(["methods"])
    assert info.value.code == 130 and capsys.readouterr().err == "specplug: interrupted\n"


def test_a_real_process_interrupted_mid_run_prints_one_line(tmp_path):
    import signal
    import time

    process = subprocess.Popen(
        # code-edit only: the text stream is too short for this many steps, so that run would end
        # on its own error if it came before the interrupt
        [sys.executable, "-c", "from specplug.cli import main; main()", *PERF, "--steps", "50000", "--repeats", "1000",
         "--workloads", "code-edit"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, cwd=tmp_path,
    )
    time.sleep(4)  # past the imports: into the app and the run
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert [line for line in err.splitlines() if line.strip()] == ["specplug: interrupted"], err
