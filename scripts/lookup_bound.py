"""Upper bound of tokens per step for ANY lookup proposer on the shipped traces.

A lookup proposer drafts a span of text it has seen. At output position ``p`` the most it can get
accepted is ``L(p)``: the longest prefix (at most ``k`` tokens, and short of the request's last
token) of the true continuation ``output[p:]`` that occurs anywhere in the text seen so far.
``p + L(p)`` never decreases with ``p`` (a suffix of a seen span is seen), so taking the longest
draft at every step reaches the end in the fewest steps: the bound is exact for that seen text.

Seen text, three variants:
  local    the request's prompt + its output so far (no cache across requests);
  +outputs also the outputs of earlier requests of the workload (what suffix's global cache holds);
  +all     also the prompts of earlier requests.
"match >= m" columns count only spans that follow an occurrence of the context's last m tokens:
the most a proposer that drafts the continuation of a suffix match (suffix, vLLM's n-gram with
prompt_lookup_min = m) can reach, were it to pick the best such occurrence at every step.

Usage: .venv/bin/python scripts/lookup_bound.py [--k 5,8,16] [workload ...]   (about 20 s)
The replay conventions are those of ``specplug bench`` (first output token from prefill, tokens
per step = (output tokens - 1) / steps, pooled over the workload's requests).
"""

from __future__ import annotations

import argparse

from specplug.lab.bench import default_traces, workloads_of
from specplug.lab.trace import read_traces


class Seen:
    """Every span of at most ``k`` tokens of the text seen so far, as a set of tuples."""

    def __init__(self, k: int) -> None:
        self.k, self.spans, self.text = k, set(), []

    def add(self, tokens) -> None:
        for token in tokens:
            self.text.append(token)
            n = len(self.text)
            for length in range(1, min(self.k, n) + 1):
                self.spans.add(tuple(self.text[n - length :]))

    def separate(self) -> None:
        self.text = []  # spans never cross two sequences

    def longest(self, continuation) -> int:
        length = 0  # the set is prefix-closed, so a linear walk suffices
        while length < len(continuation) and tuple(continuation[: length + 1]) in self.spans:
            length += 1
        return length


def bound(records, k: int, variant: str, anchor: int = 0) -> tuple[int, int]:
    """(tokens after the first, steps) of the longest-lookup replay over ``records`` in order.

    ``anchor`` > 0 only counts spans that follow an occurrence of the context's last ``anchor``
    tokens (what a proposer that drafts the continuation of a suffix match can reach).
    """
    history: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    tokens = steps = 0
    for record in records:
        seen = Seen(k + anchor)
        for prompt, output in history if variant != "local" else ():
            if variant == "+all":
                seen.add(prompt)
                seen.separate()
            seen.add(output)
            seen.separate()
        output = record.output_ids
        seen.add(record.prompt_ids)
        seen.add(output[:1])
        reach = [0] * len(output)
        for p in range(1, len(output)):
            context = tuple(record.prompt_ids + output[:p])[-anchor:] if anchor else ()
            reach[p] = max(0, seen.longest(context + output[p : min(p + k, len(output) - 1)]) - len(context))
            seen.add(output[p : p + 1])
        p = 1
        while p < len(output):
            p += reach[p] + 1
            steps += 1
        tokens += len(output) - 1
        history.append((record.prompt_ids, output))
    return tokens, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workloads", nargs="*", help="default: every shipped workload and mixed")
    parser.add_argument("--k", default="5,8,16")
    args = parser.parse_args()
    groups = workloads_of([record for path in default_traces() for record in read_traces(path)])
    columns = [("local", 0), ("+outputs", 0), ("+all", 0), ("+outputs", 1), ("+outputs", 2)]
    print("| workload | k | local | +outputs | +all | +outputs, match >= 1 | +outputs, match >= 2 |")
    print("|---|---|---|---|---|---|---|")
    for workload in args.workloads or list(groups):
        for k in (int(k) for k in args.k.split(",")):
            cells = []
            for variant, anchor in columns:
                tokens, steps = bound(groups[workload], k, variant, anchor)
                cells.append(f"{tokens / steps:.2f}")
            print(f"| {workload} | {k} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
