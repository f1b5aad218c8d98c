"""Tuning TensorRT-LLM's native speculation knobs by replaying specplug's shipped traces.

TensorRT-LLM's drafters cannot run here, so each is modeled from its source and replayed
over the traces (greedy outputs of real requests), the way ``specplug bench`` replays
specplug's own methods:

- the suffix automaton (SA) of ``sa_config`` and of ``decoding_type: SA``: the longest suffix
  of the request's tokens seen earlier in the request, drafting the tokens that followed its
  *first* occurrence; with ``sa_config`` it replaces all K neural draft tokens of a request when
  that match is at least ``threshold`` long (kernels under ``suffixAutomaton/``, ``sa_enhancer.py``);
- the MTP/Eagle3 head: the trace's measured neural acceptance at each position (a draft model
  measured by llama.cpp; it stands in for the head);
- the NGram pool (``ngram.py``): pattern -> continuations, shared across requests by default.

Every step verifies K + 1 tokens whatever was drafted (TensorRT-LLM pads drafts to
``max_draft_len`` for its CUDA graphs). Step times come from a specplug cost model, so all
speedups are *modeled*. Requests are split by task into a tuning half and a held-out half:
choices are made on the tuning half and reported on both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from specplug.cost import CostModel, cost_model, plain_step_time, spec_step_time
from specplug.lab.trace import TraceRecord, read_traces

__all__ = [
    "BATCHES",
    "Figures",
    "NgramPool",
    "Steps",
    "SuffixAutomaton",
    "TuneReport",
    "compile_schedule",
    "figures",
    "load_records",
    "replay_neural_sa",
    "replay_ngram",
    "replay_sa",
    "schedule_lengths",
    "split",
    "tune",
]

#: batch sizes the figures report (modeled)
BATCHES = (1, 8, 32)
#: the largest batch size a compiled schedule covers
MAX_BATCH = 256
#: relative tokens/step difference below which two sa_config thresholds count as equal
TIE = 0.005


def _shipped_traces() -> list[Path]:
    # the traces the lab ships (specplug/lab/data/traces); read directly, so tuning needs no bench code
    folder = resources.files("specplug.lab") / "data" / "traces"
    return sorted(Path(str(entry)) for entry in folder.iterdir() if entry.name.endswith(".jsonl"))


def load_records(paths: Iterable[Path] | None = None) -> list[TraceRecord]:
    """The records of ``paths`` (default: the traces shipped with specplug)."""
    return [record for path in (paths or _shipped_traces()) for record in read_traces(path)]


def _task(record: TraceRecord) -> str:
    # turns of one agentic task share their history: they stay on one side of the split
    head, _, tail = record.id.rpartition("/")
    return head if tail.startswith("turn-") else record.id


def split(records: Sequence[TraceRecord]) -> tuple[list[TraceRecord], list[TraceRecord]]:
    """(tuning, held-out): within each workload, tasks in sorted order alternate between the halves."""
    tasks: dict[str, list[str]] = {}
    for record in records:
        names = tasks.setdefault(record.workload, [])
        if _task(record) not in names:
            names.append(_task(record))
    tuning = {name for names in tasks.values() for name in sorted(names)[0::2]}
    return [r for r in records if _task(r) in tuning], [r for r in records if _task(r) not in tuning]


# ------------------------------------------------------------------------- the drafters
class SuffixAutomaton:
    """A suffix automaton over a growing token list, each state with its first end position.

    >>> sa = SuffixAutomaton([1, 2, 3, 9, 1, 2])
    >>> sa.lookup(3)     # "1 2" was seen before: draft what followed its first occurrence
    (2, [3, 9, 1])
    """

    def __init__(self, tokens: Iterable[int] = ()) -> None:
        self.tokens: list[int] = []
        self._edges: list[dict[int, int]] = [{}]
        self._link = [-1]
        self._length = [0]
        self._first = [-1]
        self._last = 0
        for token in tokens:
            self.extend(token)

    def _state(self, length: int, link: int, first: int, edges: dict[int, int]) -> int:
        self._edges.append(edges)
        self._length.append(length)
        self._link.append(link)
        self._first.append(first)
        return len(self._length) - 1

    def extend(self, token: int) -> None:
        self.tokens.append(token)
        cur = self._state(self._length[self._last] + 1, 0, len(self.tokens) - 1, {})
        state = self._last
        while state != -1 and token not in self._edges[state]:
            self._edges[state][token] = cur
            state = self._link[state]
        if state != -1:
            target = self._edges[state][token]
            if self._length[state] + 1 == self._length[target]:
                self._link[cur] = target
            else:
                clone = self._state(self._length[state] + 1, self._link[target], self._first[target], dict(self._edges[target]))
                while state != -1 and self._edges[state].get(token) == target:
                    self._edges[state][token] = clone
                    state = self._link[state]
                self._link[target] = self._link[cur] = clone
        self._last = cur

    def lookup(self, k: int) -> tuple[int, list[int]]:
        """(match length, up to ``k`` tokens after the match's first occurrence); (0, []) when none."""
        end = len(self.tokens) - 1
        state = self._last
        while state > 0:
            if self._first[state] < end:
                start = self._first[state] + 1
                return self._length[state], self.tokens[start : start + k]
            state = self._link[state]
        return 0, []


class NgramPool:
    """TensorRT-LLM's NGram drafter as its source describes it: a pool of pattern -> continuations.

    Each step the tokens since the request's last update are scanned: every pattern of
    ``1..max_matching_ngram_size`` tokens records the (up to ``max_draft_len``) tokens that
    follow it; with ``is_keep_all`` several continuations are kept (shorter ones dropped when a
    longer new one comes), else only the longest. The draft is the continuation of the longest
    pattern that ends the request, the oldest or newest kept (``is_use_oldest``). The pool is
    shared by all requests (``is_public_pool``) or private to each.
    """

    def __init__(self, max_draft_len: int, max_matching_ngram_size: int = 2, *, keep_all: bool = True,
                 use_oldest: bool = True, public: bool = True) -> None:  # fmt: skip
        self.k, self.n = max_draft_len, max_matching_ngram_size
        self.keep_all, self.use_oldest, self.public = keep_all, use_oldest, public
        self._pools: dict[Any, dict[tuple[int, ...], list[tuple[int, ...]]]] = {}
        self._starts: dict[Any, int] = {}

    def draft(self, request: Any, tokens: Sequence[int], room: int) -> list[int]:
        pool = self._pools.setdefault(None if self.public else request, {})
        start = self._starts.get(request, 0)
        seen = tokens[start:]
        for size in range(min(self.n, len(tokens) - 1), 0, -1):
            for left in range(len(seen) - size):
                pattern = tuple(seen[left : left + size])
                follow = tuple(seen[left + size : min(left + size + self.k, len(seen))])
                kept = pool.get(pattern)
                if kept is None or (not self.keep_all and len(follow) > len(kept[0])):
                    pool[pattern] = [follow]
                elif follow not in kept:
                    kept[:] = [match for match in kept if len(match) >= len(follow)] + [follow]
        self._starts[request] = max(0, len(tokens) - (self.k + self.n - 1))
        if room <= 0:
            return []
        for size in range(min(self.n, len(tokens) - 1), 0, -1):
            kept = pool.get(tuple(tokens[len(tokens) - size :]))
            if kept:
                return list(kept[0 if self.use_oldest else -1])[:room]
        return []

    def finish(self, request: Any) -> None:
        self._starts.pop(request, None)
        if not self.public:
            self._pools.pop(request, None)


# ----------------------------------------------------------------------------- replay
@dataclass
class Steps:
    """The verification steps of a replay: context before each step, tokens verified beyond the
    target's own (K), draft tokens accepted, and the drafter kinds charged."""

    rows: list[tuple[int, int, int, tuple[str, ...]]] = field(default_factory=list)
    tokens: int = 0  # output tokens produced by the steps

    def add(self, context: int, width: int, accepted: int, kinds: tuple[str, ...]) -> None:
        self.rows.append((context, width, accepted, kinds))
        self.tokens += accepted + 1


def _prefix(draft: Sequence[int], output: Sequence[int], position: int) -> int:
    limit = min(len(draft), len(output) - position - 1)
    count = 0
    while count < limit and draft[count] == output[position + count]:
        count += 1
    return count


def _walk(records: Sequence[TraceRecord], step: Callable[[TraceRecord, int, list[int]], tuple[int, int, tuple[str, ...]]]) -> Steps:
    """Replay each record from its second output token: ``step(record, position, history)``
    returns (tokens verified beyond the target's own, accepted, kinds)."""
    steps = Steps()
    for record in records:
        output = record.output_ids
        history = list(record.prompt_ids) + [output[0]]
        position = 1
        while position < len(output):
            width, accepted, kinds = step(record, position, history)
            steps.add(len(history), width, accepted, kinds)
            history += output[position : position + accepted + 1]
            position += accepted + 1
    return steps


def _neural_accepted(record: TraceRecord, position: int, k: int) -> int:
    if record.neural is None:
        raise ValueError(f"trace {record.id} has no neural acceptance; MTP/Eagle3 replay needs it")
    return min(int(record.neural.accepted[position]), k, len(record.output_ids) - position - 1)


def replay_neural_sa(records: Sequence[TraceRecord], k: int, threshold: int | None) -> Steps:
    """MTP/Eagle3 drafting ``k`` tokens, with ``sa_config.threshold`` (None: no sa_config)."""
    automata: dict[str, SuffixAutomaton] = {}
    kinds = ("neural",) if threshold is None else ("neural", "lookup")

    def step(record: TraceRecord, position: int, history: list[int]) -> tuple[int, int, tuple[str, ...]]:
        accepted = _neural_accepted(record, position, k)
        if threshold is not None:
            sa = automata.get(record.id)
            if sa is None:
                sa = automata[record.id] = SuffixAutomaton(history)
            else:
                for token in history[len(sa.tokens) :]:
                    sa.extend(token)
            match, draft = sa.lookup(k)
            if match >= threshold:
                accepted = _prefix(draft, record.output_ids, position)
        return k, accepted, kinds

    return _walk(records, step)


def replay_sa(records: Sequence[TraceRecord], k: int) -> Steps:
    """Standalone SA (``decoding_type: SA``, longest match) drafting up to ``k`` tokens."""
    automata: dict[str, SuffixAutomaton] = {}

    def step(record: TraceRecord, position: int, history: list[int]) -> tuple[int, int, tuple[str, ...]]:
        sa = automata.setdefault(record.id, SuffixAutomaton())
        for token in history[len(sa.tokens) :]:
            sa.extend(token)
        _, draft = sa.lookup(k)
        return k, _prefix(draft, record.output_ids, position), ("lookup",)

    return _walk(records, step)


def replay_ngram(records: Sequence[TraceRecord], k: int, ngram: int, *, use_oldest: bool = True, public: bool = True) -> Steps:
    """TensorRT-LLM's NGram drafter (``max_draft_len=k``, ``max_matching_ngram_size=ngram``)."""
    pool = NgramPool(k, ngram, use_oldest=use_oldest, public=public)
    finished: set[str] = set()

    def step(record: TraceRecord, position: int, history: list[int]) -> tuple[int, int, tuple[str, ...]]:
        room = len(record.prompt_ids) + len(record.output_ids) - len(history) - 1
        draft = pool.draft(record.id, history, min(k, room))
        return k, _prefix(draft, record.output_ids, position), ("lookup",)

    steps = Steps()
    for record in records:  # one request at a time, so a public pool sees earlier requests
        part = _walk([record], step)
        steps.rows += part.rows
        steps.tokens += part.tokens
        pool.finish(record.id)
        finished.add(record.id)
    return steps


# ---------------------------------------------------------------------------- figures
@dataclass(frozen=True)
class Figures:
    """Replay figures: tokens per step, acceptance of the verified draft tokens, modeled speedup by batch."""

    tokens_per_step: float
    acceptance: float
    speedup: dict[int, float]

    def line(self) -> str:
        speedups = "  ".join(f"b{batch} {value:.2f}x" for batch, value in self.speedup.items())
        return f"{self.tokens_per_step:.2f} tok/step  acc {100 * self.acceptance:.0f}%  {speedups}"


def speedup(steps: Steps, cost: CostModel, batch: int) -> float:
    """Modeled plain-decoding time over speculative time, for ``batch`` requests like these."""
    plain = spec = 0.0
    for context, width, accepted, kinds in steps.rows:
        spec += spec_step_time(cost, batch, context, width, kinds)
        for offset in range(accepted + 1):
            plain += plain_step_time(cost, batch, context + offset)
    return plain / spec if spec else 0.0


def figures(steps: Steps, cost: CostModel, batches: Sequence[int] = BATCHES) -> Figures:
    count = len(steps.rows)
    verified = sum(row[1] for row in steps.rows)
    accepted = sum(row[2] for row in steps.rows)
    return Figures(
        steps.tokens / count if count else 0.0,
        accepted / verified if verified else 0.0,
        {batch: speedup(steps, cost, batch) for batch in batches},
    )


def _score(result: Figures) -> float:
    # one number to tune on: the geometric mean of the modeled speedups over BATCHES
    return math.exp(sum(math.log(max(value, 1e-9)) for value in result.speedup.values()) / len(result.speedup))


# -------------------------------------------------------------------------- schedules
def schedule_lengths(by_length: dict[int, Steps], cost: CostModel, max_batch: int = MAX_BATCH) -> list[int]:
    """The best draft length at every batch size 1..max_batch (0: plain decoding wins), never
    growing with the batch: ``by_length[k]`` is a replay at draft length ``k``."""
    lengths: list[int] = []
    for batch in range(1, max_batch + 1):
        best, best_speedup = 0, 1.0
        for k, steps in sorted(by_length.items()):
            value = speedup(steps, cost, batch)
            if value > best_speedup:
                best, best_speedup = k, value
        lengths.append(min(best, lengths[-1]) if lengths else best)
    return lengths


def compile_schedule(lengths: Sequence[int]) -> dict[int, int]:
    """A ``draft_len_schedule`` for draft lengths by batch size (``lengths[b - 1]`` at batch ``b``).

    TensorRT-LLM releases read the schedule differently: the drafter's lookup took the largest
    key <= batch ("from this batch size on"), newer code the smallest key >= batch ("up to this
    batch size", 0 past the last key). Keying both ends of every run of equal lengths gives the
    same length at every batch size up to the last key under either reading.

    >>> compile_schedule([4, 4, 2, 2, 2, 0, 0])
    {1: 4, 2: 4, 3: 2, 5: 2, 6: 0}
    >>> compile_schedule([3, 3, 3])
    {1: 3, 3: 3}
    """
    schedule: dict[int, int] = {}
    start = 1
    for batch in range(1, len(lengths) + 1):
        last = batch == len(lengths) or lengths[batch] != lengths[batch - 1]
        if last:
            schedule[start] = lengths[start - 1]
            if lengths[start - 1] == 0:
                break  # 0 from here on: one key says it under both readings
            schedule[batch] = lengths[start - 1]
            start = batch + 1
    return schedule


# ------------------------------------------------------------------------------- tune
@dataclass
class TuneReport:
    """What ``tune`` chose and the figures behind it, on the tuning and the held-out halves."""

    cost: str
    tuning_ids: list[str]
    heldout_ids: list[str]
    rows: list[tuple[str, str, Figures, Figures]] = field(default_factory=list)  # (group, setting, tuning, held-out)
    chosen: dict[str, Any] = field(default_factory=dict)

    def add(self, group: str, setting: str, tuning: Figures, heldout: Figures) -> None:
        self.rows.append((group, setting, tuning, heldout))

    def table(self) -> str:
        lines = [f"modeled with cost model {self.cost}; tuning half {len(self.tuning_ids)} requests, held-out {len(self.heldout_ids)}"]
        group = None
        for name, setting, tuning, heldout in self.rows:
            if name != group:
                lines.append(f"\n{name}")
                group = name
            lines.append(f"  {setting:<28} tuning: {tuning.line()}   held-out: {heldout.line()}")
        return "\n".join(lines)


def tune(records: Sequence[TraceRecord] | None = None, cost: str = "llama-3.1-8b-h100", *, mtp_k: int = 3,
         thresholds: Sequence[int] = tuple(range(1, 13)), progress: Callable[[str], None] | None = None) -> TuneReport:  # fmt: skip
    """Choose the sa_config threshold, the draft_len_schedule, NGram's and SA's settings by replay."""
    records = list(records if records is not None else load_records())
    tuning, heldout = split(records)
    model = cost_model(cost)
    say = progress or (lambda message: None)
    report = TuneReport(cost, [r.id for r in tuning], [r.id for r in heldout])

    def both(run: Callable[[Sequence[TraceRecord]], Steps]) -> tuple[Figures, Figures]:
        return figures(run(tuning), model), figures(run(heldout), model)

    say("sa_config threshold")
    group = f"MTP/Eagle3 (trace drafter) K={mtp_k} + sa_config"
    alone = both(lambda rs: replay_neural_sa(rs, mtp_k, None))
    report.add(group, "no sa_config", *alone)
    results = []
    for threshold in thresholds:
        result = both(lambda rs, t=threshold: replay_neural_sa(rs, mtp_k, t))
        report.add(group, f"threshold {threshold}", *result)
        results.append((threshold, result[0].tokens_per_step))
    # the smallest threshold within TIE of the best: differences below that are replay noise, and
    # a lower threshold lets the automaton act on more text that repeats
    top = max(value for _, value in results)
    best = (min(t for t, value in results if value >= top * (1 - TIE)),)
    report.chosen["sa_threshold"] = best[0]

    say("draft_len_schedule")
    k_max = min(record.neural.k for record in records if record.neural is not None)
    by_length = {k: replay_neural_sa(tuning, k, best[0]) for k in range(1, k_max + 1)}
    lengths = schedule_lengths(by_length, model)
    schedule = compile_schedule(lengths)
    report.chosen["schedule"] = schedule
    report.chosen["schedule_max_draft_len"] = lengths[0]
    group = f"Eagle3 (trace drafter) + sa_config threshold {best[0]}: draft length by batch"
    for batch in (1, 8, 32, 64, 128, 256):
        k = lengths[batch - 1]
        if k:
            held = replay_neural_sa(heldout, k, best[0])
            report.add(group, f"batch {batch}: K={k}", figures(by_length[k], model, (batch,)), figures(held, model, (batch,)))

    say("NGram")
    group = "NGram (is_keep_all, public pool)"
    scored = []
    for k in (2, 3, 4, 6, 8):
        for ngram in (1, 2, 3, 4, 6):
            for oldest in (True, False):
                result = figures(replay_ngram(tuning, k, ngram, use_oldest=oldest), model)
                scored.append((_score(result), k, ngram, oldest))
    _, k, ngram, oldest = max(scored)
    default = both(lambda rs: replay_ngram(rs, 2, 2))
    report.add(group, "default (max_draft_len 2, ngram 2)", *default)
    report.add(group, f"tuned (max_draft_len {k}, ngram {ngram}, oldest {oldest})",
               *both(lambda rs: replay_ngram(rs, k, ngram, use_oldest=oldest)))  # fmt: skip
    report.chosen["ngram"] = {"max_draft_len": k, "max_matching_ngram_size": ngram, "is_use_oldest": oldest}

    say("SA")
    group = "SA (standalone, longest match)"
    scored_sa = []
    for k in (2, 3, 4, 6, 8):
        result = figures(replay_sa(tuning, k), model)
        scored_sa.append((_score(result), k))
    _, k = max(scored_sa)
    report.add(group, f"tuned max_draft_len {k}", *both(lambda rs: replay_sa(rs, k)))
    report.chosen["sa_max_draft_len"] = k
    return report


# ---------------------------------------------------------------------------- presets
def _yaml(lines: list[str], body: dict[str, Any]) -> str:
    import yaml

    return "\n".join(f"# {line}" if line else "#" for line in lines) + "\n" + yaml.safe_dump(body, sort_keys=False)


def _row(report: TuneReport, group_start: str, setting: str) -> tuple[Figures, Figures]:
    for group, name, tuning, heldout in report.rows:
        if group.startswith(group_start) and name.startswith(setting):
            return tuning, heldout
    raise KeyError((group_start, setting))


def render_presets(report: TuneReport) -> dict[str, str]:
    """The tuned model.yaml presets (file name -> text), each saying what it was tuned on."""
    how = (f"Tuned by `specplug trtllm tune`: replay of specplug's shipped traces (44 requests, 4 workloads, split by task "
           f"into a tuning and a held-out half), modeled with cost model {report.cost}.")  # fmt: skip
    check = "Checked against TensorRT-LLM's own config schema: `specplug trtllm check FILE`."
    threshold = report.chosen["sa_threshold"]
    alone_t, alone_h = _row(report, "MTP/Eagle3", "no sa_config")
    with_t, with_h = _row(report, "MTP/Eagle3", f"threshold {threshold}")
    sa_lines = [
        f"threshold {threshold}: the best tokens/step on the tuning half ({with_t.tokens_per_step:.2f} vs "
        f"{alone_t.tokens_per_step:.2f} without sa_config);",
        f"held-out: {with_h.tokens_per_step:.2f} vs {alone_h.tokens_per_step:.2f} tok/step, modeled speedup at batch 1 "
        f"{with_h.speedup[1]:.2f}x vs {alone_h.speedup[1]:.2f}x (the neural part is a draft model's measured acceptance).",
    ]
    presets = {
        "mtp-sa.yaml": _yaml(
            ["MTP heads with the suffix-automaton override (sa_config), threshold tuned by replay",
             "Use for a model with MTP layers (DeepSeek-V3/R1, Qwen3-Next, ...): the native one-model path, whose",
             "SA replaces all K draft tokens of a request when its suffix match is at least `threshold` long.",
             how, *sa_lines, check],
            {"speculative_config": {"decoding_type": "MTP", "max_draft_len": 3, "sa_config": {"threshold": threshold}}},
        ),  # fmt: skip
        "eagle3-sa.yaml": _yaml(
            ["Eagle3 draft head with the suffix-automaton override (sa_config), threshold tuned by replay",
             "Use for a model with an Eagle3 draft checkpoint (set speculative_model to it).",
             how, *sa_lines, check],
            {"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model": "/path/to/eagle3-draft",
                                    "sa_config": {"threshold": threshold}}},
        ),  # fmt: skip
        # PARD's K masked drafts come from one forward of a draft model: the modeled neural part is one already
        "pard-sa.yaml": _yaml(
            ["PARD parallel draft model with the suffix-automaton override (sa_config), threshold tuned by replay",
             "Use for a PARD draft model of the target (set speculative_model to it): its K tokens come from one",
             "forward, and the SA replaces all K when its suffix match is at least `threshold` long.",
             how, *sa_lines, check],
            {"speculative_config": {"decoding_type": "PARD", "max_draft_len": 3, "speculative_model": "/path/to/pard-draft",
                                    "sa_config": {"threshold": threshold}}},
        ),  # fmt: skip
    }
    schedule = report.chosen["schedule"]
    longest = report.chosen["schedule_max_draft_len"]
    rows = [(name, tuning, heldout) for group, name, tuning, heldout in report.rows if "draft length by batch" in group]
    presets["eagle3-schedule.yaml"] = _yaml(
        ["Eagle3 + sa_config with a draft_len_schedule: specplug's adaptive draft length compiled into the native knob",
         "Use when the batch size varies: drafts shrink as verification stops being free (needs a release whose",
         "one-model Eagle3 supports draft_len_schedule; keys name both ends of each run, so either reading of the",
         "schedule gives the same lengths up to batch 256).",
         how,
         "At each batch size 1-256 the draft length with the best modeled tokens/s on the tuning half (0 = none), never growing:",
         *[f"  {name}: held-out {heldout.tokens_per_step:.2f} tok/step, modeled {next(iter(heldout.speedup.values())):.2f}x"
           for name, _, heldout in rows],
         check],
        {"speculative_config": {"decoding_type": "Eagle3", "max_draft_len": longest, "speculative_model": "/path/to/eagle3-draft",
                                "sa_config": {"threshold": threshold}, "draft_len_schedule": schedule}},
    )  # fmt: skip
    ngram = report.chosen["ngram"]
    default_t, default_h = _row(report, "NGram", "default")
    tuned_t, tuned_h = _row(report, "NGram", "tuned")
    presets["ngram.yaml"] = _yaml(
        ["TensorRT-LLM's native NGram drafter, settings tuned by replay (no draft model needed)",
         "Use for any model on text that repeats its prompt (code edits, RAG, agentic turns).",
         how,
         f"Best geometric-mean modeled speedup over batch 1/8/32 on the tuning half; held-out: {tuned_h.line()}",
         f"(the defaults, max_draft_len 2 and ngram 2: {default_h.line()}).",
         check],
        {"speculative_config": {"decoding_type": "NGram", **ngram, "is_keep_all": True, "is_public_pool": True}},
    )  # fmt: skip
    k = report.chosen["sa_max_draft_len"]
    sa_t, sa_h = _row(report, "SA", "tuned")
    presets["sa.yaml"] = _yaml(
        ["TensorRT-LLM's standalone suffix automaton (SA), draft length tuned by replay",
         "Use for any model without a draft head: GPU-side longest-match lookup, CUDA graphs and overlap scheduler kept.",
         how,
         f"Best geometric-mean modeled speedup over batch 1/8/32 on the tuning half; held-out: {sa_h.line()}.",
         check],
        {"speculative_config": {"decoding_type": "SA", "max_draft_len": k, "max_matching_ngram_size": -1}},
    )  # fmt: skip
    return presets
