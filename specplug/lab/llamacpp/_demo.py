"""The README's demo: a real code-editing workload on a real small model, plain vs llama.cpp vs specplug.

Two comparisons, each in one run with interleaved rounds and one thread:

1. **llama-server**: plain; llama.cpp's ``--spec-default``; the best built-in setting found by
   hand (``ngram-map-k`` n 4 m 16, measured while the adapter was built); specplug's tuned ``code-edit`` preset.
2. **llama-cpp-python** (in process): plain; its own ``LlamaPromptLookupDecoding``; specplug's
   :class:`SpecplugDraftModel`.

Run it with ``scripts/demo.sh`` (which installs everything first), or::

    .venv/bin/python -m specplug.lab.llamacpp._demo --model .models/gemma-3-270m-q4_k_m.gguf

The console gets a progress bar per comparison, then its table. Each comparison also prints a
first-look table after its first round when more rounds follow, so a first run shows figures minutes
sooner; on a terminal its final table, over all rounds, then takes the first look's place (in a pipe
or a log both stay). The engines' own logs go to a file named at the end (``--log``), or to the
console with ``--verbose``. ``scripts/demo.sh`` runs the in-process comparison first (``--only``), as it
needs only libllama, which a first run builds before llama-server.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from specplug._outputs import check_output, write_text_atomic
from specplug._presets import load_preset
from specplug.cost import OnlineCostModel
from specplug.lab.llamacpp._measure import Measurement, Setting, measure_settings
from specplug.lab.llamacpp._mtp import check_mtp_settings
from specplug.lab.llamacpp._prompts import load_prompts, shipped_prompts
from specplug_adapters.llamacpp import check_model

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_LOG = Path(tempfile.gettempdir()) / "specplug-demo-engines.log"
HAND_BEST = Setting(
    "llama.cpp ngram-map-k n4 m16 (best by hand)",
    ("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "4", "--spec-ngram-map-k-size-m", "16"),
)


def relative(a: Measurement, b: Measurement) -> tuple[float, float, float]:
    """Median and range over rounds of a's tokens per CPU-second over b's (same rounds)."""
    ratios = [x / y for x, y in zip(a.cpu_tokens_per_second, b.cpu_tokens_per_second) if y]
    return statistics.median(ratios), min(ratios), max(ratios)


def _table(title: str, rows: list[Measurement]) -> str:
    head = f"  {'setting':56s} {'tok/CPU-s':>9s} {'speedup (range)':>20s} {'wall tok/s':>10s} {'accept':>7s} {'identical':>9s}"
    lines = [title, head]
    for m in rows:
        low, high = m.spread
        accept = "-" if m.acceptance is None else f"{100 * m.acceptance:.0f}%"
        lines.append(
            f"  {m.setting.name:56s} {m.median_cpu_tps:9.1f} {m.speedup:8.2f}x ({low:.2f}-{high:.2f}) "
            f"{m.median_tps:10.1f} {accept:>7s} {m.identical:>4d}/{m.compared:<4d}"
        )
    return "\n".join(lines)


def _line(label: str, a: Measurement, b: Measurement) -> str:
    median, low, high = relative(a, b)
    return f"  {label}: {median:.2f}x (tokens per CPU-second; range {low:.2f}-{high:.2f} over {len(a.ratios)} rounds)"


def _which_table(rounds_done: int, rounds: int) -> str:
    """The title's end that says which table this is: a first look from round 1, or the final one."""
    if rounds_done < rounds:
        return f": FIRST LOOK, round 1 of {rounds} (the final table follows)"
    return f": medians of {rounds} rounds" if rounds > 1 else ": one round"


def _terminal_rows(text: str, columns: int) -> int:
    """How many terminal rows ``print(text)`` fills at this width (long lines wrap).

    >>> _terminal_rows("\\nab\\nabcdef", 4)
    4
    """
    return sum(max(1, -(-len(line) // columns)) for line in text.split("\n"))


def _on_terminal() -> bool:
    return sys.__stdout__ is not None and sys.__stdout__.isatty()


class _Tables:
    """A comparison's tables: a first look after round 1 when more rounds follow, then the final
    table with its summary lines. On a terminal the final table takes the first look's place, so the
    console stays one screen; in a pipe or a log both stay."""

    def __init__(self, title: str, rounds: int, summary: Callable[[list[Measurement]], list[str]]) -> None:
        self.title, self.rounds, self.summary = title, rounds, summary
        self._first_look_rows = 0

    def after_round(self, rounds_done: int, rows: list[Measurement]) -> None:
        """The measurement's ``after_round``: shows the first look once, after round 1."""
        if rounds_done == 1 < self.rounds:
            text = _table(f"\n{self.title}{_which_table(1, self.rounds)}", rows)
            print(text, flush=True)
            if _on_terminal():
                self._first_look_rows = _terminal_rows(text, shutil.get_terminal_size().columns)

    def final(self, rows: list[Measurement]) -> None:
        if self._first_look_rows:  # back to the first look's first row, and clear from there down
            sys.stdout.write(f"\x1b[{self._first_look_rows}F\x1b[J")
        print(_table(f"\n{self.title}{_which_table(self.rounds, self.rounds)}", rows))
        for line in self.summary(rows):
            print(line)
        sys.stdout.flush()


@contextmanager
def _steps(title: str, total: int, verbose: bool) -> Iterator[Callable[[str], None]]:
    """What the measurement calls before each step: a progress bar, or with ``verbose`` a line."""
    if verbose:
        yield lambda message: print(f"  ... {message}", file=sys.stderr, flush=True)
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(title, total=total)
        started = 0

        def step(message: str) -> None:
            nonlocal started
            # called as a step starts: the bar counts the steps finished before it
            bar.update(task, completed=started, description=f"{title}: {message}"[:72])
            started += 1

        yield step


def preset_setting(name: str) -> Setting:
    """The shipped llama-server preset the demo compares (``--preset``)."""
    preset = load_preset("llama-server", name)
    return Setting(f"specplug preset {preset.name} (tuned)", tuple(preset.flags()))


def run_server(model: Path, prompts_file: Path, args: argparse.Namespace, engine_log: TextIO) -> dict[str, Measurement]:
    prompts = load_prompts(prompts_file)
    settings = [
        Setting("plain"),
        Setting("llama.cpp --spec-default", ("--spec-default",)),
        HAND_BEST,
        preset_setting(args.preset),
    ]
    title = f"llama-server, {model.name}, {len(prompts)} code-edit prompts x {args.n_predict} tokens, 1 thread"

    def summary(rows: list[Measurement]) -> list[str]:
        named = dict(zip(("plain", "default", "hand", "tuned"), rows))
        return [_line("specplug tuned preset vs --spec-default", named["tuned"], named["default"]),
                _line("specplug tuned preset vs best hand setting", named["tuned"], named["hand"])]

    tables = _Tables(title, args.rounds, summary)
    with _steps("llama-server", args.rounds * len(prompts) * len(settings), args.verbose) as progress:
        rows = measure_settings(
            model, settings, prompts, n_predict=args.n_predict, rounds=args.rounds, threads=1,
            progress=progress, engine_log=engine_log, after_round=tables.after_round,
        )  # fmt: skip
    tables.final(rows)
    return dict(zip(("plain", "default", "hand", "tuned"), rows))


def run_inprocess(model: Path, prompts_file: Path, args: argparse.Namespace, engine_log: TextIO) -> dict[str, Measurement]:
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from specplug_adapters.llamacpp import SpecplugDraftModel
    from specplug.lab.llamacpp._inprocess import CountingDraftModel, llama_cpp_log_to, measure_draft_models

    options = json.loads(args.options)
    # each generation gets a fresh drafter (nothing learnt about one prompt's text helps the
    # next round), but they share what a step costs on this machine, as one long-lived drafter
    # would; timed in CPU seconds like the figures themselves
    step_costs = OnlineCostModel()
    factories = {
        "plain": lambda: None,
        "llama-cpp-python LlamaPromptLookupDecoding": lambda: CountingDraftModel(LlamaPromptLookupDecoding()),
        f"specplug SpecplugDraftModel({args.method!r}, max_tokens={args.max_tokens})": lambda: SpecplugDraftModel(
            args.method, max_tokens=args.max_tokens, clock="cpu", step_costs=step_costs, **options
        ),
    }
    texts = [prompt.text or "" for prompt in load_prompts(prompts_file)]
    title = f"llama-cpp-python, {model.name}, {len(texts)} code-edit prompts x {args.n_predict} tokens, 1 thread"

    def summary(rows: list[Measurement]) -> list[str]:
        named = dict(zip(("plain", "pld", "specplug"), rows))
        return [_line("specplug drafter vs LlamaPromptLookupDecoding", named["specplug"], named["pld"])]

    tables = _Tables(title, args.rounds, summary)
    with llama_cpp_log_to(engine_log), _steps("llama-cpp-python", args.rounds * len(texts) * len(factories), args.verbose) as progress:
        rows = measure_draft_models(
            model, factories, texts, n_predict=args.n_predict, rounds=args.rounds, progress=progress,
            after_round=tables.after_round,
        )  # fmt: skip
    tables.final(rows)
    return dict(zip(("plain", "pld", "specplug"), rows))


def _summary(named: dict[str, Measurement]) -> dict[str, object]:
    return {
        key: {
            "setting": m.setting.name, "tokens_per_second": m.tokens_per_second,
            "cpu_tokens_per_second": m.cpu_tokens_per_second, "speedup": m.speedup,
            "spread": m.spread, "acceptance": m.acceptance, "identical": f"{m.identical}/{m.compared}",
        }  # fmt: skip
        for key, m in named.items()
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(ROOT / ".models" / "gemma-3-270m-q4_k_m.gguf"))
    parser.add_argument("--prompts", default=None, help="JSONL prompts (default: the shipped held-out code edits)")
    parser.add_argument("--preset", default="code-edit", help="specplug llama-server preset to compare")
    parser.add_argument("--method", default="suffix", help="specplug method for the in-process drafter")
    parser.add_argument("--options", default="{}", help="JSON options of that method")
    parser.add_argument("--max-tokens", type=int, default=16, help="longest in-process draft")
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=("server", "inprocess"), default=None)
    parser.add_argument("--json", default=None, help="also write the figures to this JSON file")
    parser.add_argument("--log", default=str(DEFAULT_LOG), help="file for the engines' own logs (default: %(default)s)")
    parser.add_argument("--verbose", action="store_true", help="engines' logs and one line per step on the console, no progress bar")
    args = parser.parse_args(argv)
    if args.json:
        check_output("--json", args.json)  # before minutes of measuring
    model = Path(args.model)
    prompts_file = Path(args.prompts) if args.prompts else shipped_prompts("code_edit")
    if args.only in (None, "server"):
        # an MTP preset on a GGUF without MTP layers: refused before either comparison starts an engine
        check_model(model)
        check_mtp_settings(model, [preset_setting(args.preset)])
    results: dict[str, object] = {"model": model.name, "prompts": prompts_file.name, "rounds": args.rounds}
    rounds = f"{args.rounds} round{'' if args.rounds == 1 else 's'}"
    print(f"specplug demo: {model.name}, {rounds}, greedy, one thread; speedups are tokens per CPU-second against plain in the same round")
    with ExitStack() as stack:
        engine_log = sys.stderr if args.verbose else stack.enter_context(Path(args.log).open("w", encoding="utf-8"))
        if args.only in (None, "server"):
            results["llama-server"] = _summary(run_server(model, prompts_file, args, engine_log))
        if args.only in (None, "inprocess"):
            results["llama-cpp-python"] = _summary(run_inprocess(model, prompts_file, args, engine_log))
    if not args.verbose:
        print(f"\nthe engines' own logs: {args.log} (--verbose shows them here)")
    if args.json:
        write_text_atomic(args.json, json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    from specplug import SpecplugError

    try:
        main()
    except SpecplugError as error:
        print(f"demo: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
