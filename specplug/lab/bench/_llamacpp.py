"""llama.cpp's own n-gram drafters, measured through llama-server on the traces' prompts.

llama-server reports per response ``timings.draft_n`` (tokens drafted) and
``timings.draft_n_accepted``; with greedy decoding, the steps after the first token are
``predicted_n - 1 - draft_n_accepted``. Those counters are recorded into a trace's
``engine_runs`` by ``specplug trace --llamacpp-types`` and turned into benchmark rows here;
``specplug bench --llamacpp-model`` measures them again in the same run.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from specplug._errors import InvalidOptionError
from specplug.cost import CostModel, plain_step_time, spec_step_time
from specplug.lab.bench._result import Row
from specplug.lab.llamacpp import first_divergence
from specplug.lab.trace import TraceRecord

__all__ = ["LLAMACPP_TYPES", "engine_rows", "measure_llamacpp"]

#: llama.cpp speculative types measured, with their flags (defaults of the build, plus the
#: n-gram map setting a hand search found best on code while the adapter was built: n 4, m 16)
LLAMACPP_TYPES: dict[str, list[str]] = {
    "ngram-simple": ["--spec-type", "ngram-simple"],
    "ngram-map-k": ["--spec-type", "ngram-map-k"],
    "ngram-map-k:n4m16": ["--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-n", "4", "--spec-ngram-map-k-size-m", "16"],
    "ngram-mod": ["--spec-type", "ngram-mod"],
    "ngram-cache": ["--spec-type", "ngram-cache"],
}
PREFIX = "llama.cpp/"


def measure_llamacpp(
    model: str,
    records: Sequence[TraceRecord],
    types: Sequence[str],
    *,
    threads: int = 1,
    draft_max: int = 8,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{record id: {"llama.cpp/<type>": counters}}`` from one llama-server per type."""
    from specplug.lab.bench.llama_server import LlamaServer

    unknown = [name for name in types if name not in LLAMACPP_TYPES]
    if unknown:
        raise InvalidOptionError(f"llama.cpp types {unknown} are not known; valid: {', '.join(LLAMACPP_TYPES)}")
    runs: dict[str, dict[str, dict[str, Any]]] = {record.id: {} for record in records}
    context = max(len(r.prompt_ids) + len(r.output_ids) for r in records) + 64
    for name in types:
        flags = [*LLAMACPP_TYPES[name], "--spec-draft-n-max", str(draft_max)]
        with LlamaServer(model, threads=threads, ctx_size=context, extra=flags) as server:
            for record in records:
                response = server.completion_response(record.prompt_ids, len(record.output_ids))
                runs[record.id][PREFIX + name] = counters(response, record.output_ids)
                if progress:
                    progress(f"llama.cpp {name}: {record.id}")
    return runs


def counters(response: dict[str, Any], expected: Sequence[int]) -> dict[str, Any]:
    """The figures kept from one llama-server response."""
    timings = response.get("timings", {})
    tokens = [int(t) for t in response.get("tokens", [])]
    divergence = first_divergence(list(expected), tokens)
    return {
        "draft_n": int(timings.get("draft_n", 0)),
        "draft_n_accepted": int(timings.get("draft_n_accepted", 0)),
        "predicted_n": int(timings.get("predicted_n", len(tokens))),
        "predicted_per_second": float(timings.get("predicted_per_second", 0.0)),
        "identical": divergence is None,
        "first_divergence": divergence,
    }


def engine_rows(
    workload: str, records: Sequence[TraceRecord], cost: CostModel, batch_sizes: Sequence[int]
) -> list[Row]:
    """Rows for every engine method recorded on all of ``records``.

    Only totals per request are known, so the modeled time spreads a request's drafted
    tokens evenly over its steps at its mean context length (exact for the linear terms
    in batched tokens; the KV term uses the mean context).
    """
    names = sorted({name for record in records for name in record.engine_runs})
    rows = []
    for name in names:
        if not all(name in record.engine_runs for record in records):
            continue
        row = Row(workload, name, source="llama-server", requests=len(records))
        steps = drafted = accepted = tokens = identical = 0
        plain = {batch: 0.0 for batch in batch_sizes}
        spec = {batch: 0.0 for batch in batch_sizes}
        for record in records:
            run = record.engine_runs[name]
            produced = max(int(run["predicted_n"]) - 1, 0)
            record_steps = max(produced - int(run["draft_n_accepted"]), 1)
            steps += record_steps
            drafted += int(run["draft_n"])
            accepted += int(run["draft_n_accepted"])
            tokens += produced
            identical += bool(run.get("identical", True))
            mean_context = len(record.prompt_ids) + 1 + produced // 2
            per_step = int(run["draft_n"]) / record_steps
            kinds = ("lookup",) if run["draft_n"] else ()
            for batch in batch_sizes:
                plain[batch] += produced * plain_step_time(cost, batch, mean_context)
                spec[batch] += record_steps * spec_step_time(cost, batch, mean_context, per_step, kinds)  # type: ignore[arg-type]
        row.steps, row.tokens = steps, tokens
        row.tokens_per_step = tokens / steps if steps else 0.0
        row.accepted_per_step = accepted / steps if steps else 0.0
        row.acceptance_rate = accepted / drafted if drafted else None
        row.speedup = {batch: plain[batch] / spec[batch] for batch in batch_sizes if spec[batch]}
        row.notes = f"output identical in {identical}/{len(records)}"
        ratios = [
            record.engine_runs[name]["predicted_per_second"] / record.meta["plain_tokens_per_s"]
            for record in records
            if _positive(record.meta.get("plain_tokens_per_s")) and _positive(record.engine_runs[name].get("predicted_per_second"))
        ]
        if ratios:
            # wall-clock tokens/s against the plain run of the same prompt (1 thread, shared machine: noisy)
            row.notes += f"; measured {statistics.median(ratios):.2f}x tok/s (median)"
        rows.append(row)
    return rows


def _positive(value: object) -> bool:
    # meta is free-form: a plain rate that is not a finite positive number is left out, not divided by
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")
