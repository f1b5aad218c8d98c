"""Benchmark method specs: ``name`` or ``name:key=value,key=value``, built fresh per workload.

- ``neural``: the trace's neural drafter (measured acceptance, else simulated);
- a registered method (``ngram``, ``suffix:max_depth=24``, ``hybrid``, an out-of-tree one). How
  it is built comes from the capabilities it declared, never from its name:

  - the option that takes the engine's own drafter (hybrid's ``neural``) gets the trace's
    neural drafter;
  - options that take parts (hybrid's ``lookup``, adaptive's ``candidates``) take method
    names, ``neural`` or ``peer:NAME``, ``+``-separated for several
    (``adaptive:candidates=suffix+neural``); left out, the method's own default parts;
  - the option that takes a cost model gets the benchmark's (``hybrid:cost=null`` compares
    accepted tokens only);
  - a proposer that takes the batch size is told the benchmark's (``set_batch_size``).

  Every drafter inside is metered, so each step is charged for the drafters that ran;
- ``peer:NAME[:key=value,...]``: a peer's real code through ``specplug.lab.peers``;
- ``rule:NAME[:knob=value,...]``: an engine's own rule over the trace's neural drafter and the
  engine's lookup (:mod:`specplug.lab.rules`), its parts metered as a composite's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from specplug import (
    InvalidOptionError, MethodSpec, Proposer, SpecplugError, UnknownMethodError, create, method_specs,
)  # fmt: skip
from specplug._inputs import parse_json
from specplug._plugins import peer_specs, validate_options
from specplug.cost import CostModel, cost_model
from specplug.lab.bench._metered import Metered
from specplug.lab.bench._neural import TraceNeuralProposer
from specplug.lab.trace import TraceRecord

__all__ = ["NEURAL", "BenchMethod", "Built", "build", "is_composite", "parse_method"]

#: the benchmark's name for the trace's neural drafter (a method, and a part of composites)
NEURAL = "neural"
_PEER = "peer:"
_RULE = "rule:"
_MISSING = object()


@dataclass(frozen=True)
class BenchMethod:
    label: str
    name: str
    options: dict[str, Any] = field(default_factory=dict)
    peer: bool = False
    rule: bool = False


@dataclass
class Built:
    """A method built for one workload: the proposer, its metered drafters, and how to replay it."""

    proposer: Proposer
    leaves: list[Metered]
    simulated_neural: bool = False
    #: its drafts depend on the batch size, so each batch size is replayed on its own
    takes_batch_size: bool = False


def _value(text: str) -> Any:
    try:
        return parse_json(text)
    except json.JSONDecodeError:  # not JSON (a name, a path): the text itself
        return text


def parse_method(text: str) -> BenchMethod:
    """Parse a method spec; unknown names and option mistakes fail now, with what is valid.

    >>> parse_method("ngram:min_n=3,max_n=5").options
    {'min_n': 3, 'max_n': 5}
    >>> parse_method("hybrid:lookup=ngram").options
    {'lookup': 'ngram'}
    """
    label = text.strip()
    peer = label.startswith(_PEER)
    rule = label.startswith(_RULE)
    body = label[len(_PEER) :] if peer else label[len(_RULE) :] if rule else label
    name, _, rest = body.partition(":")
    options: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidOptionError(f"method spec {text!r}: {item!r} is not key=value")
        options[key.strip()] = _value(value.strip())
    if peer:
        _check_peer(name, options)
    elif rule:
        from specplug.lab.rules import rule_options

        rule_options(name, options)
        return BenchMethod(label, name, options, rule=True)
    elif name == NEURAL:
        if options:
            raise InvalidOptionError(f"method spec {text!r}: {NEURAL} (the trace's neural drafter) takes no options")
    else:
        spec = _spec(name)
        if spec.capabilities.composite:
            _check_composite(text, spec, options)
        else:
            create(name, **options)  # option mistakes are reported now, not as a failed row later
    return BenchMethod(label, name, options, peer)


def is_composite(method: BenchMethod) -> bool:
    """Whether ``method`` is one of specplug's composites (hybrid, adaptive): it learns statistics
    that ``learnt_state`` keeps."""
    return not (method.rule or method.peer or method.name == NEURAL) and _spec(method.name).capabilities.composite


def _spec(name: str) -> MethodSpec:
    specs = method_specs()
    if name not in specs:
        raise UnknownMethodError(name, [NEURAL, *specs, f"{_PEER}<name>"])
    return specs[name]


def _check_peer(name: str, options: dict[str, Any] | None = None) -> None:
    """A known peer, and its options valid, without creating it (that imports its engine)."""
    specs = peer_specs()
    if name not in specs:
        raise UnknownMethodError(f"{_PEER}{name}", [f"{_PEER}{peer}" for peer in sorted(specs)])
    if options:
        validate_options(f"peer {name!r}", specs[name].options, options)


def _part_names(spec: MethodSpec, option: str, given: object) -> str | list[str]:
    """The parts of ``option`` by name: one name, or a list where the option takes several."""
    default = spec.default_options().get(option, _MISSING)
    value = default if given is _MISSING else given
    if value is _MISSING:
        raise InvalidOptionError(
            f"method {spec.name!r}: option {option!r} takes parts and has no default; "
            f"name them, e.g. {spec.name}:{option}=suffix"
        )
    if isinstance(value, str):
        several = isinstance(default, (list, tuple))
        if "+" in value and isinstance(default, str):
            raise InvalidOptionError(f"method {spec.name!r}: option {option!r} takes one part, not {value!r}")
        if "+" in value or several:
            return [name for name in value.split("+") if name]
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return list(value)
    raise InvalidOptionError(
        f"method {spec.name!r}: option {option!r} = {value!r}: the benchmark takes parts by name "
        f"(a method, {NEURAL} or {_PEER}NAME), '+'-separated for several"
    )


def _each(names: str | list[str]) -> list[str]:
    return names if isinstance(names, list) else [names]


def _check_composite(text: str, spec: MethodSpec, options: dict[str, Any]) -> None:
    """Validate a composite's options now, with stand-ins for the drafters built per workload."""
    capabilities = spec.capabilities
    values = dict(options)
    drafter = capabilities.engine_drafter_option
    if drafter is not None:
        if drafter in options:
            where = "" if capabilities.engine_drafter_required else f", by the name {NEURAL!r} among its parts"
            raise InvalidOptionError(
                f"method spec {text!r}: option {drafter!r} takes the engine's own drafter, which the "
                f"benchmark gives from the trace ({NEURAL}){where}; leave it out"
            )
        if capabilities.engine_drafter_required:
            values[drafter] = TraceNeuralProposer([])
    for option in capabilities.part_options:
        names = _part_names(spec, option, options.get(option, _MISSING))
        for name in _each(names):
            if name.startswith(_PEER):
                _check_peer(name[len(_PEER) :])
            elif name != NEURAL:
                _check_part(text, name)
        # one stand-in object per part: a composite may reject the same object twice
        values[option] = [TraceNeuralProposer([]) for _ in names] if isinstance(names, list) else TraceNeuralProposer([])
    cost = capabilities.cost_option
    if cost is not None and isinstance(options.get(cost), str):
        cost_model(options[cost])  # an unknown name or a bad file fails now, not after the replay
    validate_options(f"method spec {text!r}", spec.options, values)


def _check_part(text: str, name: str) -> None:
    """A part named in a composite's spec is built as ``create(name)`` per workload: try it now."""
    _spec(name)
    try:
        create(name)
    except SpecplugError as error:
        raise InvalidOptionError(
            f"method spec {text!r}: part {name!r} cannot be built on its own ({error}); name parts that "
            f"stand alone: a lookup method, {NEURAL} or {_PEER}NAME"
        ) from None


def build(method: BenchMethod, records: list[TraceRecord], cost: CostModel, batch: int, neural_alpha: float) -> Built:
    """A fresh proposer for ``method`` over ``records``, with its drafters metered."""

    def neural() -> Metered:
        return Metered(TraceNeuralProposer(records, alpha=neural_alpha), "neural")

    def leaf(name: str) -> Metered:
        if name == NEURAL:
            return neural()
        if name.startswith(_PEER):
            return Metered(_peer(name[len(_PEER) :], {}), "lookup")
        return Metered(create(name))

    options = dict(method.options)
    if method.rule:
        from specplug.lab.rules import build_rule, rule_options

        head = neural()
        rule, leaves = build_rule(
            method.name, rule_options(method.name, options), head, cost, batch, lambda part, kind: Metered(part, kind)
        )
        return Built(rule, leaves, _simulated(leaves), rule.takes_batch_size)  # type: ignore[arg-type]
    if method.peer:
        part = Metered(_peer(method.name, options), "lookup")
        return Built(part, [part])
    if method.name == NEURAL:
        part = neural()
        return Built(part, [part], _simulated([part]))
    spec = _spec(method.name)
    capabilities = spec.capabilities
    if not capabilities.composite:
        proposer = create(method.name, **options)
        _tell_batch_size(proposer, batch)
        part = Metered(proposer)
        return Built(part, [part], takes_batch_size=proposer.takes_batch_size)
    leaves: list[Metered] = []
    for option in capabilities.part_options:
        names = _part_names(spec, option, options.get(option, _MISSING))
        parts = [leaf(name) for name in _each(names)]
        leaves += parts
        options[option] = parts if isinstance(names, list) else parts[0]
    if capabilities.engine_drafter_option is not None and capabilities.engine_drafter_required:
        # (one that only may take it, as adaptive, names the trace's drafter among its parts instead)
        head = neural()
        leaves.append(head)
        options[capabilities.engine_drafter_option] = head
    if capabilities.cost_option is not None:
        options.setdefault(capabilities.cost_option, cost)
    proposer = create(method.name, **options)
    _tell_batch_size(proposer, batch)
    return Built(proposer, leaves, _simulated(leaves), proposer.takes_batch_size)


def _tell_batch_size(proposer: Proposer, batch: int) -> None:
    if proposer.takes_batch_size:
        proposer.set_batch_size(batch)


def _simulated(leaves: list[Metered]) -> bool:
    return any(getattr(leaf.inner, "simulated", False) for leaf in leaves)


def _peer(name: str, options: dict[str, Any]) -> Proposer:
    from specplug.lab.bench._peers import create_peer

    return create_peer(name, options)
