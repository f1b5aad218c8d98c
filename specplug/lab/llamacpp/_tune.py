"""``specplug tune llama-server``: measure candidate speculative settings, keep the fastest.

The candidates are llama.cpp's own n-gram drafters over a grid of their sizes (plus the
defaults and ``--spec-default``); each is measured against plain decoding in the same run
(:mod:`._measure`). The winner is written as a llama-server preset (``--models-preset`` INI)
whose comments record the model, the prompts, the measured speedup with its spread, and the
command that reproduces it.
"""

from __future__ import annotations

import datetime
import os
import shlex
from collections.abc import Callable, Sequence
from pathlib import Path

from specplug import InvalidOptionError
from specplug._outputs import check_output, write_text_atomic
from specplug._presets import load_preset
from specplug.lab.llamacpp._chain import Drafter
from specplug.lab.llamacpp._measure import Measurement, Setting, measure_settings
from specplug.lab.llamacpp._prompts import load_prompts

__all__ = ["DEFAULT_CANDIDATES", "best", "preset_settings", "preset_text", "select_candidates", "tune"]


def _map_k(kind: str, n: int, m: int, hits: int = 1) -> Setting:
    name = f"{kind} n{n} m{m}" + (f" hits{hits}" if hits != 1 else "")
    flags = ("--spec-type", kind, f"--spec-{kind}-size-n", str(n), f"--spec-{kind}-size-m", str(m))
    if hits != 1 and kind != "ngram-simple":  # ngram-simple ignores min-hits
        flags += (f"--spec-{kind}-min-hits", str(hits))
    return Setting(name, flags)


def _mod(match: int, n_min: int, n_max: int) -> Setting:
    # ngram-mod (what --spec-default enables) with a shorter lookup or shorter drafts: on a CPU
    # each drafted position costs an output projection, so a 48-64-token draft must mostly hold
    flags = ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", str(match))
    flags += ("--spec-ngram-mod-n-min", str(n_min), "--spec-ngram-mod-n-max", str(n_max))
    return Setting(f"ngram-mod match{match} min{n_min} max{n_max}", flags)


#: the grid measured by default: built-in defaults first, then n-gram sizes around the
#: values that did well on code here (a hand search while the adapter was built found
#: ngram-map-k n 4 m 16 best, 2.75x plain by the wall clock on a code prompt)
DEFAULT_CANDIDATES: tuple[Setting, ...] = (
    Setting("spec-default", ("--spec-default",)),
    Setting("ngram-simple", ("--spec-type", "ngram-simple")),
    Setting("ngram-map-k", ("--spec-type", "ngram-map-k")),
    Setting("ngram-cache", ("--spec-type", "ngram-cache")),
    _map_k("ngram-simple", 3, 16),
    _map_k("ngram-map-k", 3, 16),
    _map_k("ngram-map-k", 4, 16),
    _map_k("ngram-map-k", 4, 32),
    _map_k("ngram-map-k", 6, 24),
    _map_k("ngram-map-k", 8, 48),
    _map_k("ngram-map-k", 4, 16, hits=2),
    _map_k("ngram-map-k4v", 4, 16),
    Setting("ngram-mod match16", ("--spec-type", "ngram-mod", "--spec-ngram-mod-n-match", "16")),
    _mod(24, 16, 32),
    _mod(16, 8, 32),
    _mod(12, 16, 64),
    _mod(32, 32, 64),
)


def select_candidates(names: Sequence[str] | None) -> tuple[Setting, ...]:
    """The default candidates with these names (all of them for None or no names).

    >>> [setting.name for setting in select_candidates(["ngram-simple", "spec-default"])]
    ['ngram-simple', 'spec-default']
    """
    if not names:
        return DEFAULT_CANDIDATES
    by_name = {setting.name: setting for setting in DEFAULT_CANDIDATES}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise InvalidOptionError(f"unknown candidate(s) {unknown}; valid candidates: {', '.join(by_name)}")
    return tuple(by_name[name] for name in names)


def preset_settings(names: Sequence[str]) -> tuple[Setting, ...]:
    """Shipped llama-server presets as settings to measure (``specplug tune --presets``); a bad name lists them.

    >>> preset_settings(["mtp"])[0]
    Setting(name='preset mtp', flags=('--spec-type', 'draft-mtp', '--spec-draft-n-max', '3'))
    """
    return tuple(Setting(f"preset {name}", tuple(load_preset("llama-server", name).flags())) for name in names)


def best(measurements: Sequence[Measurement]) -> Measurement:
    """The fastest speculative setting (by median speedup over plain in the same rounds)."""
    candidates = [m for m in measurements if m.setting.flags]
    if not candidates:
        raise InvalidOptionError("no speculative setting was measured; give at least one candidate")
    return max(candidates, key=lambda m: (m.speedup, m.median_cpu_tps))


def preset_text(name: str, winner: Measurement, plain: Measurement, *, summary: str, notes: Sequence[str]) -> str:
    """The winner as a ``--models-preset`` INI file with its measurement in comments."""
    low, high = winner.spread
    lines = [
        f"# {summary}",
        f"# setting: {winner.setting.name}; measured {winner.speedup:.2f}x plain (tokens per CPU-second of the "
        f"server, median of {len(winner.ratios)} rounds, range {low:.2f}-{high:.2f}x; "
        f"{winner.median_cpu_tps:.1f} vs {plain.median_cpu_tps:.1f}; wall clock {winner.median_tps:.1f} vs "
        f"{plain.median_tps:.1f} tok/s), acceptance {_percent(winner.acceptance)}, "
        f"output identical to plain in {winner.identical}/{winner.compared}",
        *(f"# {note}" for note in notes),
        f"[{name}]",
    ]
    flags = list(winner.setting.flags)
    index = 0
    while index < len(flags):
        key = flags[index].lstrip("-")
        has_value = index + 1 < len(flags) and not flags[index + 1].startswith("--")
        lines.append(f"{key} = {flags[index + 1] if has_value else 'true'}")
        index += 2 if has_value else 1
    return "\n".join(lines) + "\n"


def _percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def tune(
    model: str | os.PathLike[str],
    prompts_file: str | os.PathLike[str],
    *,
    name: str = "tuned",
    out: str | os.PathLike[str] | None = None,
    candidates: Sequence[Setting] = DEFAULT_CANDIDATES,
    n_predict: int = 128,
    rounds: int = 3,
    threads: int = 1,
    ctx_size: int = 4096,
    binary: str | None = None,
    summary: str | None = None,
    command: str | None = None,
    progress: Callable[[str], None] | None = None,
    drafter: Drafter | None = None,
) -> tuple[list[Measurement], Path]:
    """Measure ``candidates`` on ``prompts_file`` and write the fastest as preset ``name``.

    ``drafter`` says the candidates chain a lookup with this model drafter (``chain_settings``),
    for the preset's summary and notes. Returns every measurement (plain first) and the path of
    the preset written.
    """
    if rounds < 1 or n_predict < 1 or threads < 1:
        raise InvalidOptionError(f"rounds, n_predict and threads must be >= 1 (got {rounds}, {n_predict}, {threads})")
    prompts = load_prompts(prompts_file)
    path = check_output("--out", out if out is not None else f"{name}.ini")  # before minutes of measuring
    measurements = measure_settings(
        model, candidates, prompts, n_predict=n_predict, rounds=rounds, threads=threads,
        ctx_size=ctx_size, binary=binary, progress=progress,
    )  # fmt: skip
    plain = next(m for m in measurements if not m.setting.flags)
    winner = best(measurements)
    notes = [
        f"tuned {datetime.date.today().isoformat()} on {Path(model).name} with {Path(prompts_file).name} "
        f"({len(prompts)} prompts, {n_predict} tokens each, {threads} thread(s))",
        *([f"chain: a lookup tried first, then {drafter.describe()}"]
          if drafter is not None else []),
        "reproduce: " + (command or shlex.join(["specplug", "tune", "llama-server", "--model", str(model), "--prompts", str(prompts_file)])),
    ]
    what = f"chain of a lookup and {drafter.kind}" if drafter is not None else "n-gram setting"
    text = preset_text(name, winner, plain, summary=summary or f"{name}: fastest llama.cpp {what} found by specplug tune", notes=notes)
    write_text_atomic(path, text)
    return measurements, path
