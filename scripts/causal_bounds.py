"""How close to the per-position oracle can a policy that does not see the future get?

Issue 16 asks adaptive for 90 % of the oracle at batch 1 on chat (spec-bench). The oracle knows,
at every position, how many tokens each drafter's draft will have accepted; a real policy knows
only what happened before. This script replays one workload's requests (the tune or validation
half) through policies that decide from a little information, each chosen *with hindsight on the
same requests* (fitted in sample, so each is more than its class could get on requests it has not
seen; the state maps are a good fit found by coordinate ascent, not provably the best one):

- ``fixed``: one (drafter, length) for the whole workload (the bench's "best fixed");
- ``per request``: one (drafter, length) per request, the best for that request;
- ``state map``: a (drafter, length) for every value of a state seen at choice time -- the last
  step's accepted tokens (bucketed) and how long a draft the suffix lookup has now (``--rich``:
  finer, and whether the ngram lookup has a draft) -- fitted by coordinate ascent, one map for the
  workload or one per request;
- ``neural, perfect length``: the oracle restricted to the neural drafter (it still knows, per
  step, how many tokens will be accepted);
- ``oracle``: the bench's.

Every step is priced by the bench's cost model (``spec_step_time``; plain decoding is the same
for every policy, so speedups compare as total times). The per-request choices see each request's
future in aggregate, which no causal policy does. Usage (about a minute a half; ``--rich`` three)::

    python scripts/causal_bounds.py [--split tune] [--workload spec-bench] [--batch 1] [--rich]

The last line fits the map on the other half and replays it on this one: what a policy that
learnt beforehand which state calls for which draft would get, out of sample.
"""

from __future__ import annotations

import argparse

import numpy as np

from specplug.cost import cost_model, plain_step_time, spec_step_time
from specplug.lab.bench._methods import parse_method
from specplug.lab.bench._replay import oracle_replay
from specplug.lab.bench._run import _leaf_builders
from specplug.lab.bench._split import split_records
from specplug.lab.bench._synthetic import synthetic_traces
from specplug.lab.trace import read_traces
from specplug.lab.bench import default_traces

K = 8
DRAFTERS = ("ngram", "suffix", "neural")
#: actions: (drafter index, length); (-1, 0) is no draft
ACTIONS = [(-1, 0)] + [(d, n) for d in range(len(DRAFTERS)) for n in range(1, K + 1)]
LAST_BUCKETS = (0, 1, 3, 6)  # the last step's accepted tokens: 0, 1-2, 3-5, 6+ (and "no step yet")
LOOKUP_BUCKETS = (0, 1, 4)  # the suffix lookup's draft length now: 0, 1-3, 4+
#: --rich: the last step's accepted tokens exactly (0..8), the suffix draft's length 0, 1-3, 4-7, 8,
#: and whether the ngram lookup has a draft
RICH_LAST, RICH_LOOKUP = tuple(range(K + 1)), (0, 1, 4, 8)


class Request:
    """One request's drafts at every position: each drafter's draft length and accepted tokens
    when asked for K, and the step times of every action at that position."""

    def __init__(self, record, leaves, cost, batch: int) -> None:
        output = record.output_ids
        self.length = len(output)
        self.drafted = np.zeros((len(leaves), self.length), dtype=np.int64)
        self.accepted = np.zeros((len(leaves), self.length), dtype=np.int64)
        for index, leaf in enumerate(leaves):
            leaf.start(record.id, record.prompt_ids)
            leaf.extend(record.id, output[:1])
            for position in range(1, self.length):
                draft = leaf.propose(record.id, K).tokens
                truth = output[position : min(position + len(draft), self.length - 1)]
                accepted = 0
                while accepted < len(truth) and draft[accepted] == truth[accepted]:
                    accepted += 1
                self.drafted[index, position], self.accepted[index, position] = len(draft), accepted
                leaf.extend(record.id, output[position : position + 1])
            leaf.stop(record.id)
            leaf.reset()
        prompt = len(record.prompt_ids)
        # times[position, action]: a drafter drafts at most what it has (a lookup its match, a head what
        # is left of the output); an empty draft is plain decoding
        self.times = np.zeros((self.length, len(ACTIONS)))
        self.steps = np.zeros((self.length, len(ACTIONS)), dtype=np.int64)  # accepted tokens of the action
        for position in range(1, self.length):
            context = prompt + position
            plain = plain_step_time(cost, batch, context)
            for a, (d, n) in enumerate(ACTIONS):
                if d < 0:
                    self.times[position, a] = plain
                    continue
                drafted = min(n, int(self.drafted[d, position]))
                kind = "neural" if DRAFTERS[d] == "neural" else "lookup"
                self.times[position, a] = spec_step_time(cost, batch, context, drafted, (kind,)) if drafted else plain
                self.steps[position, a] = min(n, int(self.accepted[d, position]))
        self.plain = sum(plain_step_time(cost, batch, prompt + p) for p in range(1, self.length))
        suffix, ngram = DRAFTERS.index("suffix"), DRAFTERS.index("ngram")
        if RICH:
            self.lookup_state = (np.searchsorted(RICH_LOOKUP, self.drafted[suffix], side="right") - 1) * 2 \
                + (self.drafted[ngram] > 0)
        else:
            self.lookup_state = np.searchsorted(LOOKUP_BUCKETS, self.drafted[suffix], side="right") - 1

    def walk(self, policy) -> float:
        """Modeled time of the request under ``policy(position, last accepted or -1)`` -> action."""
        total, position, last = 0.0, 1, -1
        while position < self.length:
            a = policy(position, last)
            total += self.times[position, a]
            last = int(self.steps[position, a])
            position += last + 1
        return total

    def walk_map(self, table: np.ndarray) -> float:
        def policy(position: int, last: int) -> int:
            return table[_state(last, int(self.lookup_state[position]))]

        return self.walk(policy)


RICH = False  # set by --rich before any Request is built
STATES = (len(LAST_BUCKETS) + 1) * len(LOOKUP_BUCKETS)


def _set_states(rich: bool) -> None:
    global RICH, STATES
    RICH = rich
    STATES = (len(RICH_LAST) + 1) * len(RICH_LOOKUP) * 2 if rich else (len(LAST_BUCKETS) + 1) * len(LOOKUP_BUCKETS)


def _state(last: int, lookup: int) -> int:
    buckets, lookups = (RICH_LAST, len(RICH_LOOKUP) * 2) if RICH else (LAST_BUCKETS, len(LOOKUP_BUCKETS))
    last_bucket = 0 if last < 0 else 1 + int(np.searchsorted(buckets, last, side="right")) - 1
    return last_bucket * lookups + lookup


def best_fixed(requests) -> tuple[float, int]:
    totals = [sum(r.walk(lambda p, l, a=a: a) for r in requests) for a in range(len(ACTIONS))]
    best = int(np.argmin(totals))
    return totals[best], best


def best_map(requests, start: int, sweeps: int = 6) -> tuple[float, np.ndarray]:
    """Coordinate ascent over a state -> action table, from the table that takes ``start`` everywhere."""
    table = np.full(STATES, start, dtype=np.int64)
    current = sum(r.walk_map(table) for r in requests)
    for _ in range(sweeps):
        improved = False
        for state in range(STATES):
            keep = table[state]
            for a in range(len(ACTIONS)):
                if a == keep:
                    continue
                table[state] = a
                total = sum(r.walk_map(table) for r in requests)
                if total < current - 1e-12:
                    current, keep, improved = total, a, True
            table[state] = keep
        if not improved:
            break
    return current, table


def requests_of(group, cost, batch: int) -> list[Request]:
    """The workload's requests with every drafter's drafts; one set of drafters for the workload,
    in request order, as the bench's replays (a lookup learns across requests)."""
    methods = [parse_method(name) for name in DRAFTERS]
    builders = _leaf_builders(group, methods, cost, batch, 0.6)
    if list(builders) != list(DRAFTERS):
        raise ValueError(f"drafters {list(builders)}; expected {list(DRAFTERS)}")
    leaves = [fresh() for fresh in builders.values()]
    return [Request(record, leaves, cost, batch) for record in group]


def oracle_time(requests, group, cost, batch: int, drafters=DRAFTERS) -> float:
    """Modeled time of the bench's per-position oracle over ``drafters`` (every step priced as the bench does)."""
    tables = [[(2 if name == "neural" else 1, r.accepted[DRAFTERS.index(name)]) for name in drafters] for r in requests]
    total = 0.0
    for log in oracle_replay(tables, group, cost, batch):
        for context, drafted, bits in zip(log.context.tolist(), log.drafted.tolist(), log.kinds.tolist()):
            kinds = () if not drafted else ("neural",) if bits & 2 else ("lookup",)
            total += spec_step_time(cost, batch, context, drafted, kinds)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="tune")
    parser.add_argument("--workload", default="spec-bench")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--cost", default="llama-3.1-8b-h100")
    parser.add_argument("--rich", action="store_true", help="a finer state: the last step's accepted tokens exactly, "
                        "the suffix draft's length in four buckets, whether the ngram lookup drafts (80 states)")
    args = parser.parse_args()
    _set_states(args.rich)
    cost = cost_model(args.cost)
    records = [record for path in default_traces() for record in read_traces(path)] + synthetic_traces()
    group = [record for record in split_records(records, args.split) if record.workload == args.workload]
    requests = requests_of(group, cost, args.batch)
    plain = sum(r.plain for r in requests)
    oracle = plain / oracle_time(requests, group, cost, args.batch)

    def show(label: str, total: float, note: str = "") -> None:
        x = plain / total
        print(f"| {label} | {x:.3f} | {100 * x / oracle:.1f} % | {note} |")

    print(f"{args.workload}, {args.split} half, batch {args.batch}: {len(group)} requests, "
          f"{sum(r.length - 1 for r in requests)} tokens after the first")
    print("| policy (chosen with hindsight on these requests) | speedup | of the oracle | note |")
    print("|---|---:|---:|---|")
    show("oracle (every drafter, per position)", plain / oracle)
    show("neural drafter, perfect length every step", oracle_time(requests, group, cost, args.batch, ("neural",)))
    total, action = best_fixed(requests)
    d, n = ACTIONS[action]
    show("one fixed (drafter, length)", total, f"{DRAFTERS[d]}@{n}" if d >= 0 else "none")
    per_request = sum(min(r.walk(lambda p, l, a=a: a) for a in range(len(ACTIONS))) for r in requests)
    show("one (drafter, length) per request", per_request)
    pooled, table = min((best_map(requests, start) for start in (action, 0)), key=lambda fit: fit[0])
    show("state map, one for the workload", pooled, f"{STATES} states" + (" (--rich)" if RICH else ": last step's accepted x suffix draft length"))
    own = sum(min(best_map([r], start)[0] for start in (action, 0)) for r in requests)
    show("state map, one per request", own)
    # out of sample: the map fitted on the other half, replayed on this one (a causal policy learnt beforehand)
    other = "validation" if args.split == "tune" else "tune"
    fit_group = [record for record in split_records(records, other) if record.workload == args.workload]
    fit_requests = requests_of(fit_group, cost, args.batch)
    _, fit_action = best_fixed(fit_requests)
    _, fitted = min((best_map(fit_requests, start) for start in (fit_action, 0)), key=lambda fit: fit[0])
    show(f"state map fitted on the {other} half (out of sample)", sum(r.walk_map(fitted) for r in requests))


if __name__ == "__main__":
    main()
