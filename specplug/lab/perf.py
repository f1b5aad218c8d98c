"""Speed and memory of proposers for one request step, side by side with vLLM's NgramProposer.

One *step* is what an engine asks of a proposer per request per verification:
``propose(rid, k)`` then ``extend(rid, accepted + next token)``. :func:`run_perf` times that
pair (``time.perf_counter_ns``, one thread, after a warm-up request that also fills the
global caches) at long contexts made from real token streams, and reports the median and
p90 per step, the per-request state in bytes per token (``state_nbytes``), the global
cache against its cap, and each method's median as a ratio to vLLM's on the same steps.

The token streams are Python's own standard library, tokenised by a small regex tokenizer
(words with their leading space, punctuation runs, newlines): real code with its natural
repeats, present wherever Python is. Workloads:

- ``code-edit``: a code context, then an answer that re-emits spans of it with a few
  tokens changed, joined by new code (a model editing a file or an agent repeating itself);
- ``text``: prose (the library's docstrings) continued by the prose that follows it.

>>> tokens = corpus_tokens("code", 1000)
>>> len(tokens), int(tokens.min()) >= 0
(1000, True)
"""

from __future__ import annotations

import ast
import os
import platform
import re
import statistics
import sysconfig
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from specplug._drafts import accepted_prefix
from specplug._proposer import Proposer
from specplug._errors import InvalidOptionError, SpecplugError

__all__ = [
    "TARGET_US",
    "WORKLOADS",
    "CacheCheck",
    "PerfReport",
    "PerfRow",
    "Workload",
    "build_workload",
    "cache_cap_check",
    "corpus_tokens",
    "measure",
    "run_perf",
]

#: the per-step targets: the median step time in microseconds at a context size
TARGET_US = {8192: 20.0, 65536: 50.0}
#: the memory target: per-request state in bytes per token
TARGET_BYTES_PER_TOKEN = 64.0
WORKLOADS = ("code-edit", "text")
_TOKEN = re.compile(r"\n|[ \t]*\w+|[ \t]*[^\w\s]+|[ \t]+")


# ------------------------------------------------------------------------------ token streams
def _stdlib_files() -> list[Path]:
    return sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))


def _code_pieces() -> Iterator[str]:
    for path in _stdlib_files():
        yield from _TOKEN.findall(path.read_text(encoding="utf-8", errors="replace"))


def _text_pieces() -> Iterator[str]:
    for path in _stdlib_files():
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield from _TOKEN.findall(doc + "\n\n")


_STREAMS: dict[str, np.ndarray] = {}


def corpus_tokens(kind: str, count: int) -> np.ndarray:
    """The first ``count`` token ids of the ``code`` or ``text`` stream (ids by first appearance).

    Ids depend only on what came before, so a longer stream extends a shorter one.
    """
    sources: dict[str, Callable[[], Iterator[str]]] = {"code": _code_pieces, "text": _text_pieces}
    if kind not in sources:
        raise InvalidOptionError(f"token stream {kind!r} is not known; valid: {', '.join(sources)}")
    known = _STREAMS.get(kind)
    if known is not None and len(known) >= count:
        return known[:count]
    vocabulary: dict[str, int] = {}
    out = np.empty(count, dtype=np.int64)
    filled = 0
    for piece in sources[kind]():
        out[filled] = vocabulary.setdefault(piece, len(vocabulary))
        filled += 1
        if filled == count:
            break
    if filled < count:
        raise SpecplugError(f"the {kind} stream of this Python's standard library has only {filled} tokens, not {count}")
    out.flags.writeable = False
    _STREAMS[kind] = out
    return out


@dataclass(frozen=True)
class Workload:
    """A context (the prompt so far) and the tokens the target model goes on to produce."""

    name: str
    context: np.ndarray
    continuation: np.ndarray


def build_workload(
    name: str, context_tokens: int, continuation_tokens: int, seed: int = 0, offset: int = 0
) -> Workload:
    """The ``name`` workload with a context of ``context_tokens`` tokens (deterministic in ``seed``).

    ``offset`` skips that many tokens of the stream first (another part of the library).
    """
    if name not in WORKLOADS:
        raise InvalidOptionError(f"workload {name!r} is not known; valid: {', '.join(WORKLOADS)}")
    if context_tokens < 64:
        raise InvalidOptionError(f"context of {context_tokens} tokens is too short; give at least 64")
    rng = np.random.default_rng(seed)
    if name == "text":
        stream = corpus_tokens("text", offset + context_tokens + continuation_tokens)[offset:]
        return Workload(name, stream[:context_tokens].copy(), stream[context_tokens:].copy())
    stream = corpus_tokens("code", offset + context_tokens + continuation_tokens)[offset:]
    context, fresh = stream[:context_tokens], stream[context_tokens:]
    answer: list[np.ndarray] = []
    length, cursor = 0, 0
    while length < continuation_tokens:
        # a span of the context re-emitted with ~3% of its tokens changed ...
        size = int(rng.integers(20, 200))
        begin = int(rng.integers(0, max(1, context_tokens - size)))
        span = context[begin : begin + size].copy()
        edits = rng.random(len(span)) < 0.03
        span[edits] = rng.choice(context, int(edits.sum()))
        # ... then a few new tokens, as an edit's glue code
        glue = fresh[cursor : cursor + int(rng.integers(5, 30))]
        cursor += len(glue)
        answer += [span, glue]
        length += len(span) + len(glue)
    return Workload(name, context.copy(), np.concatenate(answer)[:continuation_tokens])


# ------------------------------------------------------------------------------- measuring
@dataclass
class Timing:
    """One measured request: step times and what the proposer drafted."""

    step_ns: list[int]
    accepted: int
    drafted_steps: int
    start_ns: int
    state_nbytes: int | None
    tokens: int


def measure(proposer: Proposer, workload: Workload, request_id: object, steps: int, max_tokens: int) -> Timing:
    """Replay ``steps`` steps of ``workload`` on a new request; time ``propose`` + ``extend``.

    Each step extends the request with the accepted draft prefix plus the next true token,
    as an engine's verification would. The request is stopped at the end (so a suffix
    cache gets its output, as after a real request).
    """
    clock = time.perf_counter_ns
    began = clock()
    proposer.start(request_id, workload.context)
    start_ns = clock() - began
    truth = workload.continuation
    position, accepted_total, drafted, times = 0, 0, 0, []
    for _ in range(steps):
        if position >= len(truth):
            break
        t0 = clock()
        draft = proposer.propose(request_id, max_tokens)
        t1 = clock()
        accepted = accepted_prefix(draft.tokens, truth[position:])
        chunk = truth[position : position + accepted + 1].tolist()
        t2 = clock()
        proposer.extend(request_id, chunk)
        t3 = clock()
        times.append((t1 - t0) + (t3 - t2))
        position += len(chunk)
        accepted_total += accepted
        drafted += bool(draft.tokens)
    nbytes = proposer.state_nbytes(request_id)
    proposer.stop(request_id)
    return Timing(times, accepted_total, drafted, start_ns, nbytes, len(workload.context) + position)


def cache_usage(proposer: Proposer) -> tuple[int, int] | None:
    """``(bytes, cap)`` of a proposer's global cache, when it has one that reports them."""
    cache = getattr(proposer, "cache", None)
    nbytes, cap = getattr(cache, "nbytes", None), getattr(cache, "max_bytes", None)
    if callable(nbytes) and isinstance(cap, int):
        return int(nbytes()), cap
    return None


@dataclass
class CacheCheck:
    """Outputs pushed through a suffix cache with a small cap: the cap must hold throughout."""

    cap_bytes: int
    requests: int
    tokens_per_request: int
    peak_bytes: int
    final_bytes: int
    cached_requests: int

    @property
    def within_cap(self) -> bool:
        return self.peak_bytes <= self.cap_bytes


def cache_cap_check(
    create: Callable[..., Proposer], cap_bytes: int = 1 << 20, requests: int = 64, tokens_per_request: int = 2048
) -> CacheCheck:
    """Run ``requests`` requests whose outputs total several times ``cap_bytes``; track the peak."""
    proposer = create("suffix", max_cache_bytes=cap_bytes)
    stream = corpus_tokens("code", 256 + tokens_per_request)
    peak = 0
    for index in range(requests):
        rid = f"cap-{index}"
        proposer.start(rid, stream[:256])
        output = np.roll(stream[256:], index * 97)  # every request answers something a little different
        for begin in range(0, tokens_per_request, 512):
            proposer.extend(rid, output[begin : begin + 512])
        proposer.stop(rid)
        usage = cache_usage(proposer)
        if usage is None:
            raise SpecplugError("the suffix proposer does not report its cache (cache.nbytes(), cache.max_bytes)")
        peak = max(peak, usage[0])
    final = cache_usage(proposer) or (0, cap_bytes)
    cached = len(getattr(proposer, "cache", ()))
    return CacheCheck(cap_bytes, requests, tokens_per_request, peak, final[0], cached)


# -------------------------------------------------------------------------------- the run
@dataclass
class PerfRow:
    """The figures of one proposer on one workload at one context size (medians over repeats)."""

    proposer: str
    kind: str  # "method" or "peer"
    workload: str
    context_tokens: int
    steps: int
    median_us: float
    p90_us: float
    spread_pct: float  # (max - min) / median of the repeats' medians
    accepted_per_step: float
    drafted_share: float
    start_ms: float
    state_bytes_per_token: float | None
    cache_bytes: int | None = None
    cache_cap_bytes: int | None = None
    ratio_to_vllm: float | None = None
    target_us: float | None = None

    @property
    def meets_target(self) -> bool | None:
        return None if self.target_us is None else self.median_us <= self.target_us


@dataclass
class PerfReport:
    rows: list[PerfRow]
    cache_check: CacheCheck | None
    settings: dict[str, Any]
    machine: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        rows = []
        for row in self.rows:
            item = asdict(row)
            item["meets_target"] = row.meets_target
            rows.append(item)
        check = None
        if self.cache_check is not None:
            check = asdict(self.cache_check) | {"within_cap": self.cache_check.within_cap}
        return {"settings": self.settings, "machine": self.machine, "rows": rows, "cache_cap_check": check}


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from specplug._version import __version__

    return {
        "specplug": __version__,
        "python": platform.python_version(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }


def _p90(values: list[int]) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))])


@dataclass
class _Subject:
    name: str
    kind: str
    create: Callable[[], Proposer]
    cache: tuple[int, int] | None = None  # the last measured proposer's global cache: bytes, cap


#: unrelated finished requests run before each measured one (files far from the measured ones),
#: so that global caches hold something, as in a serving engine, without the measured text
PREFILL_REQUESTS = 4
PREFILL_OFFSET = 600_000


def run_perf(
    contexts: Sequence[int],
    *,
    workloads: Sequence[str] = WORKLOADS,
    methods: Sequence[str] = ("ngram", "suffix"),
    peers: Sequence[str] = ("vllm-ngram",),
    steps: int = 2000,
    repeats: int = 3,
    max_tokens: int = 8,
    cap_check: bool = True,
    progress: Callable[[str], None] | None = None,
) -> PerfReport:
    """Measure ``methods`` and ``peers`` on every workload and context size; see the module doc.

    Every measured request runs on a fresh proposer whose global cache first receives
    ``PREFILL_REQUESTS`` unrelated finished requests, so no run sees another's text.
    ``vllm-ngram`` is created with specplug ``ngram``'s ``min_n``/``max_n`` as its
    ``prompt_lookup_min``/``max`` and ``max_tokens`` as its ``num_speculative_tokens``.
    A peer that cannot be created raises (its error names the setup script).
    """
    import specplug
    from specplug.lab.peers import create_peer

    contexts = list(contexts)
    if not contexts or min(contexts) < 64:
        raise InvalidOptionError(f"contexts {contexts}: give context sizes of at least 64 tokens")
    if steps < 1 or repeats < 1 or max_tokens < 1:
        raise InvalidOptionError(f"steps={steps}, repeats={repeats}, max_tokens={max_tokens}: each must be >= 1")
    say = progress or (lambda _message: None)
    subjects = [_Subject(name, "method", lambda name=name: specplug.create(name)) for name in methods]
    ngram_options = getattr(specplug.create("ngram"), "options", None) if "ngram" in methods else None
    for name in peers:
        options: dict[str, Any] = {}
        if name == "vllm-ngram":
            options = {"num_speculative_tokens": max_tokens, "max_model_len": max(contexts) + steps * (max_tokens + 1) + 16}
            if ngram_options is not None:
                options |= {"prompt_lookup_min": ngram_options.min_n, "prompt_lookup_max": ngram_options.max_n}
        say(f"creating peer {name}")
        create_peer(name, **options)  # fails early, with the setup hint, when the peer is missing
        subjects.append(_Subject(name, "peer", lambda name=name, options=options: create_peer(name, **options)))

    continuation = steps * (max_tokens + 1) + 1
    prefill = [
        build_workload("code-edit", 1024, 128 * (max_tokens + 1), seed=100 + index, offset=PREFILL_OFFSET + 8192 * index)
        for index in range(PREFILL_REQUESTS)
    ]

    def fresh(subject: _Subject) -> Proposer:
        proposer = subject.create()
        for index, workload in enumerate(prefill):  # also compiles numba kernels on first use
            measure(proposer, workload, ("prefill", index), 128, max_tokens)
        return proposer

    timings: dict[tuple[str, str, int], list[Timing]] = {}
    for repeat in range(repeats):
        for workload_name in workloads:
            for size in contexts:
                workload = build_workload(workload_name, size, continuation, seed=repeat)
                for subject in subjects:  # interleaved, so that drift on a shared machine hits all alike
                    say(f"repeat {repeat + 1}/{repeats}: {subject.name} on {workload_name} at {size} tokens")
                    proposer = fresh(subject)
                    timing = measure(proposer, workload, "measured", steps, max_tokens)
                    timings.setdefault((subject.name, workload_name, size), []).append(timing)
                    subject.cache = cache_usage(proposer)
                    close = getattr(proposer, "close", None)
                    if callable(close):
                        close()

    rows = []
    for subject in subjects:
        usage = subject.cache
        for workload_name in workloads:
            for size in contexts:
                runs = timings[(subject.name, workload_name, size)]
                medians = [statistics.median(run.step_ns) / 1000 for run in runs]
                median = statistics.median(medians)
                total_steps = sum(len(run.step_ns) for run in runs)
                nbytes = [run.state_nbytes / run.tokens for run in runs if run.state_nbytes is not None]
                rows.append(
                    PerfRow(
                        proposer=subject.name,
                        kind=subject.kind,
                        workload=workload_name,
                        context_tokens=size,
                        steps=total_steps,
                        median_us=median,
                        p90_us=statistics.median(_p90(run.step_ns) / 1000 for run in runs),
                        spread_pct=100 * (max(medians) - min(medians)) / median if median else 0.0,
                        accepted_per_step=sum(run.accepted for run in runs) / total_steps,
                        drafted_share=sum(run.drafted_steps for run in runs) / total_steps,
                        start_ms=statistics.median(run.start_ns / 1e6 for run in runs),
                        state_bytes_per_token=max(nbytes) if nbytes else None,
                        cache_bytes=usage[0] if usage else None,
                        cache_cap_bytes=usage[1] if usage else None,
                        target_us=TARGET_US.get(size) if subject.kind == "method" else None,
                    )
                )
    baseline = {(row.workload, row.context_tokens): row.median_us for row in rows if row.proposer == "vllm-ngram"}
    for row in rows:
        vllm = baseline.get((row.workload, row.context_tokens))
        row.ratio_to_vllm = row.median_us / vllm if vllm else None

    check = None
    if cap_check and "suffix" in methods:
        say("checking the suffix cache against a 1 MiB cap")
        check = cache_cap_check(specplug.create)
    settings = {
        "contexts": contexts,
        "workloads": list(workloads),
        "prefill_requests": PREFILL_REQUESTS,
        "methods": list(methods),
        "peers": list(peers),
        "steps": steps,
        "repeats": repeats,
        "max_tokens": max_tokens,
        "targets_us": {str(size): target for size, target in TARGET_US.items()},
        "target_state_bytes_per_token": TARGET_BYTES_PER_TOKEN,
    }
    return PerfReport(rows, check, settings, _machine())
