"""Benchmark method specs: ``name`` or ``name:key=value,key=value``, built fresh per workload.

- a registered method (``ngram``, ``suffix:max_depth=24``): its drafter is metered as a
  lookup (or neural, where it says so);
- ``neural``: the trace's neural drafter (measured acceptance, else simulated);
- ``hybrid[:lookup=NAME,...]``: neural + a lookup (default ``suffix``), cost-aware at the
  benchmark's cost model and batch size (``hybrid:cost=null`` compares accepted tokens only);
- ``adaptive[:candidates=suffix+neural,...]``: cost-aware choice among the ``+``-separated
  candidates, at the benchmark's batch size;
- ``peer:NAME[:key=value,...]``: a peer's real code through ``specplug.peers``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from specplug._catalog import create, methods
from specplug._contract import Proposer
from specplug._errors import InvalidOptionError, UnknownMethodError
from specplug.bench._metered import Metered
from specplug.bench._neural import TraceNeuralProposer
from specplug.cost import CostModel
from specplug.trace import TraceRecord

__all__ = ["BenchMethod", "Built", "parse_method"]


@dataclass(frozen=True)
class BenchMethod:
    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    peer: bool = False

    @property
    def composite(self) -> bool:
        return self.name in ("hybrid", "adaptive")


@dataclass
class Built:
    proposer: Proposer
    leaves: list[Metered]
    simulated_neural: bool = False


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_method(text: str) -> BenchMethod:
    """Parse a method spec; unknown names fail with the list of valid ones.

    >>> parse_method("ngram:min_n=3,max_n=5").options
    {'min_n': 3, 'max_n': 5}
    """
    label = text.strip()
    peer = label.startswith("peer:")
    body = label[len("peer:") :] if peer else label
    name, _, rest = body.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidOptionError(f"method spec {text!r}: {item!r} is not key=value")
        options[key.strip()] = _value(value.strip())
    if not peer and name != "neural" and name not in methods():
        raise UnknownMethodError(name, ["neural", *methods(), "peer:<name>"])
    if peer:
        from specplug.bench._peers import peer_names

        if name not in peer_names():
            raise UnknownMethodError(f"peer:{name}", [f"peer:{peer}" for peer in peer_names()])
    if not peer and name not in ("neural", "hybrid", "adaptive"):
        create(name, **options)  # option mistakes are reported now, not as a failed row later
    return BenchMethod(label, name, options, peer)


def build(method: BenchMethod, records: list[TraceRecord], cost: CostModel, batch: int, neural_alpha: float) -> Built:
    """A fresh proposer for ``method`` over ``records``, with its drafters metered."""

    def neural() -> Metered:
        return Metered(TraceNeuralProposer(records, alpha=neural_alpha), "neural")

    def leaf(name: str) -> Metered:
        if name == "neural":
            return neural()
        if name.startswith("peer:"):
            return Metered(_peer(name[len("peer:") :], {}), "lookup")
        return Metered(create(name))

    options = dict(method.options)
    if method.peer:
        part = Metered(_peer(method.name, options), "lookup")
        return Built(part, [part])
    if method.name == "neural":
        part = neural()
        return Built(part, [part], part.inner.simulated)  # type: ignore[attr-defined]
    if method.name == "hybrid":
        lookup = leaf(str(options.pop("lookup", "suffix")))
        head = neural()
        options.setdefault("cost", cost)
        options.setdefault("batch_size", batch)
        proposer = create("hybrid", neural=head, lookup=lookup, **options)
        return Built(proposer, [lookup, head], head.inner.simulated)  # type: ignore[attr-defined]
    if method.name == "adaptive":
        names = options.pop("candidates", "suffix+neural")
        parts = [leaf(name) for name in str(names).split("+") if name]
        options.setdefault("cost", cost)
        options.setdefault("batch_size", batch)
        proposer = create("adaptive", candidates=parts, **options)
        simulated = any(getattr(part.inner, "simulated", False) for part in parts)
        return Built(proposer, parts, simulated)
    part = Metered(create(method.name, **options))
    return Built(part, [part])


def _peer(name: str, options: dict[str, Any]) -> Proposer:
    from specplug.bench._peers import create_peer

    return create_peer(name, options)
