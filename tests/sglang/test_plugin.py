"""The plugin against SGLang's own registry and argument resolution (no engine started)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import pytest

import specplug
from specplug_adapters.sglang import (
    DEFAULT_NUM_DRAFT_TOKENS,
    DISABLE_ENV,
    OPTIONS_ENV,
    algorithm_names,
    register,
    registered,
    version_problem,
)

ALGORITHMS = sorted(algorithm_names())
#: hybrid composes the engine's drafter, which SGLang's n-gram path does not have: it takes one in its options
OPTIONS = {"SPECPLUG_HYBRID": {"neural": "ngram"}}


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh Python, where only the installed entry point can register anything."""
    environ = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=environ, timeout=300
    )


LOAD = """
    from sglang.srt.plugins import load_plugins
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
    load_plugins()
    load_plugins()
    names = []
    for name in {names!r}:
        try:
            names.append(type(SpeculativeAlgorithm.from_string(name)).__name__)
        except ValueError:
            names.append(None)
    print(names)
"""


def test_one_name_per_registered_method():
    assert ALGORITHMS == sorted("SPECPLUG_" + method.upper() for method in specplug.method_specs())
    assert {"SPECPLUG_ADAPTIVE", "SPECPLUG_HYBRID", "SPECPLUG_NGRAM", "SPECPLUG_SUFFIX"} <= set(ALGORITHMS)


def test_the_installed_entry_point_registers_every_name_through_sglangs_loader(sglang):
    (entry,) = [ep for ep in importlib.metadata.entry_points(group="sglang.srt.plugins") if ep.name == "specplug"]
    assert entry.value == "specplug_adapters.sglang:register"
    result = _run(LOAD.format(names=ALGORITHMS))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(["SpecplugSpecAlgo"] * len(ALGORITHMS))


@pytest.mark.parametrize("env", [{DISABLE_ENV: "0"}, {"SGLANG_PLUGINS": "some-other-plugin"}])
def test_the_off_switch_and_sglangs_allow_list_keep_the_names_out(sglang, env):
    result = _run(LOAD.format(names=ALGORITHMS[:1]), **env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[None]"


def test_register_is_idempotent(sglang):
    before = registered()
    register()
    register()
    assert registered() == before
    # the built-in methods' names; a plugin method registered by an earlier test (the end-to-end
    # fault test installs one in this process) may stand beside them
    assert set(ALGORITHMS) <= set(before)


def test_the_spec_class_answers_everything_sglang_asks_an_algorithm(sglang):
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    from specplug_adapters.sglang import SpecplugSpecAlgo

    # every method the enum defines for its members: the scheduler calls them on any algorithm
    asked = {
        name
        for name, value in vars(SpeculativeAlgorithm).items()
        if callable(value) and not name.startswith("_") and name not in ("from_string", "register")
    }
    assert {"carries_draft_hidden_states", "create_future_map", "need_topk", "get_platform_worker_cls"} <= asked
    assert sorted(asked - set(dir(SpecplugSpecAlgo))) == []
    spec = SpeculativeAlgorithm.from_string("specplug_suffix")  # SGLang takes either case
    assert isinstance(spec, SpecplugSpecAlgo) and spec.name == "SPECPLUG_SUFFIX"
    # NGRAM's scheduler paths: no draft KV, no hidden states, no top-k, no platform worker
    assert spec.is_ngram() and not spec.has_draft_kv() and not spec.carries_draft_hidden_states()
    assert not spec.need_topk() and spec.get_platform_worker_cls() is None and not spec.is_eagle()
    assert spec.supports_overlap


def _resolve(argv: list[str]):
    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.arg_groups.pipeline import run_resolution_pipeline
    from sglang.srt.server_args import prepare_server_args

    server_args = prepare_server_args(argv)
    run_resolution_pipeline(server_args)
    return resolving_view(server_args)


def _refusal(args: list[str], capsys) -> str:
    """The one line a bad configuration is refused with: printed before exit status 2 once specplug's hook on
    SGLang's command-line parsing is registered in this process (an earlier test may have registered it), else
    SGLang's or specplug's own exception."""
    try:
        _resolve(args)
    except SystemExit as stop:
        assert stop.code == 2
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("specplug: error: "), lines
        return lines[0]
    except (ValueError, specplug.InvalidOptionError) as error:
        return str(error)
    pytest.fail(f"{args} was not refused")


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_name_parses_with_the_defaults_applied(sglang, model_dir, monkeypatch, algorithm):
    monkeypatch.setenv(OPTIONS_ENV, json.dumps(OPTIONS.get(algorithm, {})))
    args = ["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", algorithm]
    view = _resolve(args)
    assert view.speculative_algorithm == algorithm
    assert view.speculative_num_draft_tokens == DEFAULT_NUM_DRAFT_TOKENS
    assert view.speculative_num_steps == DEFAULT_NUM_DRAFT_TOKENS - 1
    assert view.speculative_eagle_topk == 1
    assert view.enable_mixed_chunk is False
    assert view.disable_overlap_schedule is True  # a CPU runs no overlap schedule
    assert view.max_running_requests == 48


def test_sglangs_own_width_argument_is_kept(sglang, model_dir, monkeypatch):
    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    view = _resolve(["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", "SPECPLUG_SUFFIX",
                     "--speculative-num-draft-tokens", "5", "--max-running-requests", "4"])
    assert (view.speculative_num_draft_tokens, view.speculative_num_steps, view.max_running_requests) == (5, 4, 4)


@pytest.mark.parametrize(
    ("algorithm", "options", "extra", "message"),
    [
        ("SPECPLUG_NOPE", {}, [], "Unknown speculative algorithm name: SPECPLUG_NOPE"),
        ("SPECPLUG_SUFFIX", {"bogus": 1}, [], "bogus"),
        ("SPECPLUG_SUFFIX", "[1, 2]", [], f"{OPTIONS_ENV} = '[1, 2]' is not valid; give one JSON object"),
        ("SPECPLUG_SUFFIX", "{nope", [], f"{OPTIONS_ENV} = '{{nope' is not valid JSON"),
        ("SPECPLUG_HYBRID", {}, [], "runs none of its own and SPECPLUG_SGLANG_OPTIONS gives no 'neural'"),
        ("SPECPLUG_NGRAM", {}, ["--speculative-num-draft-tokens", "1"], "--speculative-num-draft-tokens = 1 is not valid"),
        ("SPECPLUG_SUFFIX", {}, ["--speculative-ngram-max-bfs-breadth", "0"],
         "--speculative-ngram-max-bfs-breadth = 0 is not valid for SPECPLUG_SUFFIX"),
    ],
)
def test_a_bad_name_or_option_is_one_clear_error_before_any_process_starts(
    sglang, model_dir, monkeypatch, capsys, algorithm, options, extra, message
):
    monkeypatch.setenv(OPTIONS_ENV, options if isinstance(options, str) else json.dumps(options))
    args = ["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", algorithm, *extra]
    refusal = _refusal(args, capsys)
    assert message in refusal
    assert "\n" not in refusal.strip()


def test_a_bad_stats_interval_is_one_clear_error(sglang, model_dir, monkeypatch, capsys):
    from specplug_adapters.sglang import STATS_INTERVAL_ENV

    monkeypatch.delenv(OPTIONS_ENV, raising=False)
    monkeypatch.setenv(STATS_INTERVAL_ENV, "soon")
    refusal = _refusal(["--model-path", model_dir, "--device", "cpu", "--speculative-algorithm", "SPECPLUG_SUFFIX"], capsys)
    assert f"{STATS_INTERVAL_ENV} = 'soon' is not valid; give seconds >= 0" in refusal


def test_an_unknown_name_lists_the_valid_ones():
    from specplug_adapters.sglang import method_of

    with pytest.raises(specplug.UnknownMethodError) as caught:
        method_of("SPECPLUG_NOPE")
    assert "SPECPLUG_SUFFIX" in str(caught.value)


def test_the_installed_sglang_is_in_the_tested_range(sglang):
    assert version_problem(importlib.metadata.version("sglang")) is None
    assert "outside the range" in version_problem("0.6.0")
