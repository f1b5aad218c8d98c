"""The most tokens per step ANY lookup proposer could reach on a workload's traces.

A lookup proposer drafts a span of text it has seen. At output position ``p`` the most it can get
accepted is ``L(p)``: the longest prefix (at most ``k`` tokens, and short of the request's last
token) of the true continuation ``output[p:]`` that occurs anywhere in the text seen so far.
``p + L(p)`` never decreases with ``p`` (a suffix of a seen span is seen), so taking the longest
draft at every step reaches the end in the fewest steps: the bound is exact for that seen text.

Seen text, three variants:
  local    the request's prompt + its output so far (no cache across requests);
  +outputs also the outputs of earlier requests of the workload (what suffix's global cache holds);
  +all     also the prompts of earlier requests.
An ``anchor`` of m counts only spans that follow an occurrence of the context's last m tokens:
the most a proposer that drafts the continuation of a suffix match (suffix, vLLM's n-gram with
prompt_lookup_min = m) can reach, were it to pick the best such occurrence at every step.

The replay conventions are those of ``specplug bench``: the first output token comes from prefill,
tokens per step = (output tokens - 1) / steps, pooled over the workload's requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from specplug.lab.trace import TraceRecord

__all__ = ["BOUND_COLUMNS", "VARIANTS", "bound", "bound_table"]

VARIANTS = ("local", "+outputs", "+all")

#: the table's columns: (seen-text variant, anchor)
BOUND_COLUMNS: tuple[tuple[str, int], ...] = (("local", 0), ("+outputs", 0), ("+all", 0), ("+outputs", 1), ("+outputs", 2))


class _Seen:
    """Every span of at most ``k`` tokens of the text seen so far, as a set of tuples."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.spans: set[tuple[int, ...]] = set()
        self.text: list[int] = []

    def add(self, tokens: Iterable[int]) -> None:
        for token in tokens:
            self.text.append(token)
            n = len(self.text)
            for length in range(1, min(self.k, n) + 1):
                self.spans.add(tuple(self.text[n - length :]))

    def separate(self) -> None:
        self.text = []  # spans never cross two sequences

    def longest(self, continuation: Sequence[int]) -> int:
        length = 0  # the set is prefix-closed, so a linear walk suffices
        while length < len(continuation) and tuple(continuation[: length + 1]) in self.spans:
            length += 1
        return length


def bound(records: Sequence[TraceRecord], k: int, variant: str, anchor: int = 0) -> tuple[int, int]:
    """(tokens after the first, steps) of the longest-lookup replay over ``records`` in order."""
    if variant not in VARIANTS:
        raise ValueError(f"seen-text variant {variant!r} is not one of {', '.join(VARIANTS)}")
    if k < 1 or anchor < 0:
        raise ValueError(f"k must be >= 1 and anchor >= 0, got k={k}, anchor={anchor}")
    history: list[tuple[list[int], list[int]]] = []
    tokens = steps = 0
    for record in records:
        seen = _Seen(k + anchor)
        for prompt, output in history if variant != "local" else ():
            if variant == "+all":
                seen.add(prompt)
                seen.separate()
            seen.add(output)
            seen.separate()
        output = list(record.output_ids)
        seen.add(record.prompt_ids)
        seen.add(output[:1])
        reach = [0] * len(output)
        for p in range(1, len(output)):
            context = tuple(list(record.prompt_ids) + output[:p])[-anchor:] if anchor else ()
            reach[p] = max(0, seen.longest(context + tuple(output[p : min(p + k, len(output) - 1)])) - len(context))
            seen.add(output[p : p + 1])
        p = 1
        while p < len(output):
            p += reach[p] + 1
            steps += 1
        tokens += len(output) - 1
        history.append((list(record.prompt_ids), output))
    return tokens, steps


def bound_table(groups: dict[str, list[TraceRecord]], ks: Sequence[int]) -> str:
    """The bound per workload and draft length, as a Markdown table (tokens per step)."""
    lines = [
        "| workload | k | local | +outputs | +all | +outputs, match >= 1 | +outputs, match >= 2 |",
        "|---|---|---|---|---|---|---|",
    ]
    for workload, records in groups.items():
        for k in ks:
            cells = []
            for variant, anchor in BOUND_COLUMNS:
                tokens, steps = bound(records, k, variant, anchor)
                cells.append(f"{tokens / steps:.2f}" if steps else "-")
            lines.append(f"| {workload} | {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
