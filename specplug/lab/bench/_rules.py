"""The engines' rules in the benchmark: their shipped defaults, and their knobs tuned by hand.

A tuned row holds each rule to the best a user could set: for every batch size, the knob
setting (from the rule's grid, :mod:`specplug.lab.rules`) with the best modeled speedup over
the traces' tune split, every workload of it replayed together as one server's traffic. The
choice is made once, before any row is replayed, and the same choice is replayed on every
split, so the validation split tells whether it holds. :func:`tune_rules` makes it;
:func:`save_tuned` / :func:`load_tuned` keep it in a JSON file between runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from specplug._errors import InvalidOptionError
from specplug._outputs import write_text_atomic
from specplug.cost import CostModel
from specplug.lab.bench._methods import BenchMethod, build
from specplug.lab.bench._noise import speedup_of
from specplug.lab.bench._replay import StepLog, modeled_times, replay
from specplug.lab.bench._result import Row
from specplug.lab.rules import RULES, rule_options
from specplug.lab.trace import TraceRecord

__all__ = ["TUNED", "default_rules", "load_tuned", "save_tuned", "tune_rules", "tuned_label", "tuned_rows"]

#: the suffix of a tuned rule's row
TUNED = " (tuned)"
Progress = Callable[[str], None]
#: rule -> batch size -> the knob setting chosen for it
Tuned = dict[str, dict[int, dict[str, Any]]]


def default_rules() -> list[BenchMethod]:
    """Every engine rule with its shipped defaults, as benchmark methods."""
    return [BenchMethod(f"rule:{name}", name, {}, rule=True) for name in RULES]


def tuned_label(name: str) -> str:
    return f"rule:{name}{TUNED}"


def _speedup(logs: Sequence[StepLog], cost: CostModel, batch: int) -> float:
    plain, spec = modeled_times(logs, cost, batch)
    return plain / spec if spec else 0.0


def _signature(name: str, options: Any, batch: int) -> Any:
    spec = RULES[name]
    if spec.signature is not None:
        return spec.signature(options, batch)
    return batch if spec.factory.takes_batch_size else None  # type: ignore[attr-defined]


def _logs_at(
    name: str, setting: dict[str, Any], records: list[TraceRecord], cost: CostModel, k: int, batch: int,
    neural_alpha: float, cache: dict[Any, list[StepLog]],
) -> list[StepLog]:
    """The replay of ``setting`` at ``batch``, shared with every batch size it drafts alike at."""
    key = (json.dumps(setting, sort_keys=True, default=str), _signature(name, rule_options(name, setting), batch))
    if key not in cache:
        built = build(BenchMethod(f"rule:{name}", name, setting, rule=True), records, cost, batch, neural_alpha)
        cache[key] = replay(built.proposer, built.leaves, records, k)
    return cache[key]


def tune_rules(
    records: list[TraceRecord], cost: CostModel, k: int, batch_sizes: Sequence[int], *,
    neural_alpha: float = 0.6, names: Sequence[str] | None = None, progress: Progress | None = None,
) -> Tuned:
    """Per rule (with a grid) and batch size, the knob setting of best speedup over ``records``."""
    tick = progress or (lambda label: None)
    chosen: Tuned = {}
    for name in names or list(RULES):
        spec = RULES[name]
        if not spec.grid:
            continue
        best: dict[int, tuple[float, dict[str, Any]]] = {}
        cache: dict[Any, list[StepLog]] = {}
        for setting in spec.grid:
            for batch in batch_sizes:
                speedup = _speedup(_logs_at(name, setting, records, cost, k, batch, neural_alpha, cache), cost, batch)
                if batch not in best or speedup > best[batch][0]:
                    best[batch] = (speedup, setting)
            cache.clear()  # settings do not share replays; a setting's batch sizes do
        chosen[name] = {batch: setting for batch, (_, setting) in best.items()}
        tick(f"tuned rule:{name}")
    return chosen


def _knobs(setting: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in setting.items())


def tuned_rows(
    workload: str, group: list[TraceRecord], tuned: Tuned, cost: CostModel, k: int, batch_sizes: Sequence[int], *,
    neural_alpha: float = 0.6, progress: Progress | None = None,
) -> list[Row]:
    """A row per tuned rule on ``group``: at each batch size, the setting chosen for it."""
    tick = progress or (lambda label: None)
    rows = []
    for name, choices in tuned.items():
        row = Row(workload, tuned_label(name), source="rule, tuned")
        missing = [batch for batch in batch_sizes if batch not in choices]
        if missing:
            row.status, row.error = "failed", f"no tuned setting for batch size(s) {missing}; tune again with these sizes"
            rows.append(row)
            continue
        cache: dict[Any, list[StepLog]] = {}
        for batch in batch_sizes:
            logs = _logs_at(name, choices[batch], group, cost, k, batch, neural_alpha, cache)
            row.speedup[batch], row.request_times[batch] = speedup_of(logs, cost, batch)
            if batch == batch_sizes[0]:
                steps = sum(log.steps for log in logs)
                accepted = sum(int(log.accepted.sum()) for log in logs)
                drafted = sum(int(log.drafted.sum()) for log in logs)
                row.steps, row.requests = steps, len(logs)
                row.tokens = accepted + steps
                row.tokens_per_step = row.tokens / steps if steps else 0.0
                row.accepted_per_step = accepted / steps if steps else 0.0
                row.acceptance_rate = accepted / drafted if drafted else None
                row.drafted_share = sum(int((log.drafted > 0).sum()) for log in logs) / steps if steps else None
        row.notes = "; ".join(f"{batch}: {_knobs(choices[batch])}" for batch in batch_sizes)
        rows.append(row)
        tick(f"{workload}: {row.method}")
    return rows


def save_tuned(tuned: Tuned, path: str | Path, about: dict[str, Any]) -> None:
    """Write the tuned settings with what they were tuned on (``about``: traces, cost, k)."""
    data = {"about": about, "rules": {name: {str(b): s for b, s in choices.items()} for name, choices in tuned.items()}}
    write_text_atomic(path, json.dumps(data, indent=1, default=list) + "\n")


def load_tuned(path: str | Path, about: dict[str, Any]) -> Tuned | None:
    """The settings in ``path`` if they were tuned on what ``about`` says, else None."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InvalidOptionError(f"--tuned-rules {path}: not a tuned-rules file ({error})") from None
    if data.get("about") != json.loads(json.dumps(about, default=list)):
        return None
    tuned: Tuned = {}
    for name, choices in data.get("rules", {}).items():
        if name not in RULES:
            return None
        tuned[name] = {int(batch): _restored(setting) for batch, setting in choices.items()}
    return tuned


def _restored(setting: dict[str, Any]) -> dict[str, Any]:
    # JSON keeps dict keys as strings and tuples as lists: the options models take both back,
    # except schedules keyed by batch size
    out = dict(setting)
    if isinstance(out.get("draft_len_schedule"), dict):
        out["draft_len_schedule"] = {int(key): value for key, value in out["draft_len_schedule"].items()}
    if isinstance(out.get("slots"), dict):
        out["slots"] = {int(key): value for key, value in out["slots"].items()}
    if isinstance(out.get("num_speculative_tokens_per_batch_size"), list):
        out["num_speculative_tokens_per_batch_size"] = [tuple(item) for item in out["num_speculative_tokens_per_batch_size"]]
    return out
