"""The engines' own speculation rules, written from their sources, as benchmark peers.

``specplug bench -m rule:NAME[:knob=value,...]`` replays one; ``--engine-rules`` adds every
rule with its shipped defaults and ``--tune-rules`` each with its knobs chosen per batch size
on the traces' tune split. Hybrid rules (which of a lookup's and the neural head's drafts to
verify) are in :mod:`._hybrid`, draft-length policies in :mod:`._length`, the engines' own
lookups in :mod:`._lookups`. Where an engine requires the draft length to be set (vLLM,
TensorRT-LLM, Arctic), the default rows use 3, llama.cpp's default ``--spec-draft-n-max``
and SGLang adaptive's starting step count; the tuned rows search it.

>>> sorted(RULES)[:3]
['arctic-disable', 'arctic-switch', 'llamacpp-chain']
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from specplug._proposer import Proposer
from specplug._errors import InvalidOptionError, UnknownMethodError
from specplug.cost import CostModel
from specplug.lab.rules._hybrid import (
    ArcticOptions, ArcticSwitch, LookupFirstChain, LookupFirstOptions, NgramEagle, NgramEagleOptions, SaConfigOptions,
    SaConfigRule,
)  # fmt: skip
from specplug.lab.rules._length import (
    SglangAdaptive, SglangAdaptiveOptions, TrtllmAuto, TrtllmAutoOptions, TrtllmSchedule, TrtllmScheduleOptions,
    VllmPerBatch, VllmPerBatchOptions,
)  # fmt: skip
from specplug.lab.rules._lookups import (
    NgramModLookup, NgramModOptions, SuffixAutomatonLookup, TrtllmNgramLookup, TrtllmNgramOptions,
)  # fmt: skip

__all__ = ["HYBRID", "LENGTH", "RULES", "RuleSpec", "build_rule", "rule_options"]

HYBRID, LENGTH = "hybrid rule", "length policy"
#: the longest draft the tuned rows search, and where a length is tuned, 0 (off) too
_LENGTHS = tuple(range(1, 9))

#: builds the parts a rule needs beside the neural head, from its options and the batch size
PartBuilder = Callable[[Any, int], dict[str, Proposer]]
#: wraps a part for the replay (the benchmark's meter)
Wrap = Callable[[Proposer, str], Proposer]


@dataclass(frozen=True)
class RuleSpec:
    """One engine rule: how to build it and which knob settings its tuned row searches."""

    name: str
    kind: str  # HYBRID or LENGTH
    engine: str  # the engine and setting, as a user writes it
    options: type[BaseModel]
    factory: Callable[..., Proposer]
    parts: PartBuilder
    uses_neural: bool = True
    takes_cost: bool = False
    #: knob settings the tuned row tries (each a dict of options), per batch size
    grid: tuple[dict[str, Any], ...] = ()
    #: what of the options matters at a batch size: settings with the same signature draft alike
    signature: Callable[[Any, int], Hashable] | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _no_parts(options: Any, batch: int) -> dict[str, Proposer]:
    return {}


def _sa_parts(options: Any, batch: int) -> dict[str, Proposer]:
    return {"lookup": SuffixAutomatonLookup()}


def _ngram_mod_parts(options: LookupFirstOptions, batch: int) -> dict[str, Proposer]:
    return {"lookup": NgramModLookup(NgramModOptions(n_match=options.n_match, n_min=options.n_min, n_max=options.n_max))}


def _arctic_parts(options: ArcticOptions, batch: int) -> dict[str, Proposer]:
    if not options.suffix:
        return {}
    from specplug.lab.peers import create_peer

    # vLLM's MAX_SPEC_LEN bounds the suffix draft; the replay's --k bounds it further
    peer = create_peer(
        "arctic-suffix", max_tree_depth=options.suffix_cache_max_depth, max_cached_requests=100_000,
        num_speculative_tokens=128, max_spec_factor=options.suffix_max_spec_factor,
        max_spec_offset=options.suffix_max_spec_offset, min_token_prob=options.suffix_min_token_prob,
    )  # fmt: skip
    return {"lookup": peer}


def _vllm_ngram_parts(options: NgramEagleOptions, batch: int) -> dict[str, Proposer]:
    from specplug.lab.peers import create_peer

    settings: dict[str, Any] = {"num_speculative_tokens": options.num_speculative_tokens_ngram}
    if options.prompt_lookup_min is not None:
        settings["prompt_lookup_min"] = options.prompt_lookup_min
    if options.prompt_lookup_max is not None:
        settings["prompt_lookup_max"] = options.prompt_lookup_max
    return {"lookup": create_peer("vllm-ngram", **settings)}


def _auto_parts(options: TrtllmAutoOptions, batch: int) -> dict[str, Proposer]:
    length, size = options.settings(batch)
    return {"lookup": TrtllmNgramLookup(TrtllmNgramOptions(max_draft_len=max(1, length), max_matching_ngram_size=size))}


def _grid(**axes: Iterable[Any]) -> tuple[dict[str, Any], ...]:
    names = list(axes)
    return tuple(dict(zip(names, values)) for values in itertools.product(*axes.values()))


def _length_at(rule: type, options: Any, batch: int) -> Hashable:
    probe = rule.__new__(rule)
    probe.options, probe.batch_size = options, batch
    return probe.length() if hasattr(probe, "length") else batch


def _schedule_signature(options: TrtllmScheduleOptions, batch: int) -> Hashable:
    return _length_at(TrtllmSchedule, options, batch)


def _arctic_signature(options: ArcticOptions, batch: int) -> Hashable:
    probe = ArcticSwitch.__new__(ArcticSwitch)
    probe.options, probe.batch_size = options, batch
    return (options.model_dump_json(exclude={"disable_by_batch_size", "hard_disable_by_batch_size"}), probe.drafting_share(),
            options.hard_disable_by_batch_size is not None and batch >= options.hard_disable_by_batch_size)


def _auto_signature(options: TrtllmAutoOptions, batch: int) -> Hashable:
    limit = options.max_concurrency
    return None if limit is not None and batch > limit else options.settings(batch)


_SGLANG_SETS = ([1, 3, 5, 7], [1, 2, 3, 4], [2, 4, 6, 8], [1, 2], [2, 3], [0, 1, 2, 3], [0, 1, 3], [0, 1])

RULES: dict[str, RuleSpec] = {
    spec.name: spec
    for spec in (
        RuleSpec(
            "trtllm-sa", HYBRID, "TensorRT-LLM MTP/EAGLE-3 + sa_config (threshold 4)", SaConfigOptions, SaConfigRule,
            _sa_parts, grid=_grid(max_draft_len=_LENGTHS, threshold=(2, 4, 8, 16)),
        ),
        RuleSpec(
            "llamacpp-chain", HYBRID, "llama.cpp --spec-type ngram-mod,draft-mtp (lookup first)", LookupFirstOptions,
            LookupFirstChain, _ngram_mod_parts,
            grid=tuple({"draft_n_max": length, "n_match": match, "n_min": least}
                       for length in (1, 2, 3, 4, 6, 8) for match, least in ((24, 48), (16, 8), (8, 1))),
        ),
        RuleSpec(
            "arctic-switch", HYBRID, "ArcticInference arctic + suffix (suffix when its score >= n_predict)", ArcticOptions,
            ArcticSwitch, _arctic_parts, signature=_arctic_signature,
            grid=_grid(n_predict=_LENGTHS, disable_by_batch_size=(64, None)),
        ),
        RuleSpec(
            "vllm-ngram-eagle", HYBRID, "vLLM ngram-eagle (vLLM PR 24344: n-gram where it matches)", NgramEagleOptions, NgramEagle,
            _vllm_ngram_parts,
            grid=_grid(num_speculative_tokens_eagle=(2, 3, 4, 6, 8), num_speculative_tokens_ngram=(4, 8),
                       prompt_lookup_min=(2, 5), prompt_lookup_max=(5,)),
        ),
        RuleSpec(
            "trtllm-schedule", LENGTH, "TensorRT-LLM draft_len_schedule / max_concurrency over EAGLE-3", TrtllmScheduleOptions,
            TrtllmSchedule, _no_parts, signature=_schedule_signature,
            grid=tuple({"max_draft_len": 8, "draft_len_schedule": {1: 8, 2: length}} for length in (0, *_LENGTHS)),
            notes="default: no schedule (the head's length at every batch size)",
        ),
        RuleSpec(
            "trtllm-auto", LENGTH, "TensorRT-LLM decoding_type AUTO (its n-gram drafter, off above 32 requests)",
            TrtllmAutoOptions, TrtllmAuto, _auto_parts, uses_neural=False, signature=_auto_signature,
            grid=_grid(max_draft_len=(0, 2, 3, 5, 8), max_matching_ngram_size=(3, 5), max_concurrency=(None,)),
            notes="tuned: its NGram decoding type, max_draft_len and max_matching_ngram_size per batch size",
        ),
        RuleSpec(
            "vllm-per-batch", LENGTH, "vLLM num_speculative_tokens_per_batch_size over EAGLE-3", VllmPerBatchOptions,
            VllmPerBatch, _no_parts,
            signature=lambda options, batch: _length_at(VllmPerBatch, options, batch),
            grid=tuple({"num_speculative_tokens": 8, "num_speculative_tokens_per_batch_size": [(1, 1 << 16, length)]}
                       for length in (0, *_LENGTHS)),
            notes="default: no schedule (num_speculative_tokens at every batch size)",
        ),
        RuleSpec(
            "sglang-adaptive", LENGTH, "SGLang --speculative-adaptive over EAGLE-3 (EMA slots per batch size)",
            SglangAdaptiveOptions, SglangAdaptive, _no_parts, takes_cost=True,
            grid=tuple({"strategy": "ema", "slots": {1: {"candidate_steps": steps}}} for steps in _SGLANG_SETS)
            + tuple({"strategy": "throughput_aware", "slots": {1: {"candidate_steps": steps}}}
                    for steps in _SGLANG_SETS if 0 not in steps),
        ),
        RuleSpec(
            "sglang-throughput", LENGTH, "SGLang --speculative-adaptive, strategy throughput_aware", SglangAdaptiveOptions,
            SglangAdaptive, _no_parts, takes_cost=True, extra={"defaults": {"strategy": "throughput_aware"}},
        ),
        RuleSpec(
            "arctic-disable", LENGTH, "ArcticInference disable_by_batch_size (soft 64) over its speculator", ArcticOptions,
            ArcticSwitch, _arctic_parts, signature=_arctic_signature, extra={"defaults": {"suffix": False}},
            grid=_grid(suffix=(False,), n_predict=_LENGTHS, disable_by_batch_size=(None, 8, 32, 64)),
        ),
    )
}


def rule_options(name: str, given: dict[str, Any]) -> BaseModel:
    """The options of rule ``name``: its defaults, then ``given``; a mistake names the valid knobs."""
    spec = RULES.get(name)
    if spec is None:
        raise UnknownMethodError(f"rule:{name}", [f"rule:{known}" for known in sorted(RULES)])
    values = {**spec.extra.get("defaults", {}), **given}
    try:
        return spec.options(**values)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        knobs = ", ".join(spec.options.model_fields)
        raise InvalidOptionError(f"rule:{name}: {where} = {first.get('input')!r:.60}: {first['msg']}; knobs: {knobs}") from None


def build_rule(
    name: str, options: BaseModel, neural: Proposer, cost: CostModel, batch: int, wrap: Wrap
) -> tuple[Proposer, list[Proposer]]:
    """Rule ``name`` with ``options`` over ``neural`` at ``batch``, and its parts as ``wrap``
    returned them (the replay meters them: their calls are what a step is charged)."""
    spec = RULES[name]
    parts = {key: wrap(part, "lookup") for key, part in spec.parts(options, batch).items()}
    kwargs: dict[str, Any] = dict(parts)
    if spec.uses_neural:
        kwargs["neural"] = neural
    if spec.takes_cost:
        kwargs["cost"] = cost
    rule = spec.factory(options, **kwargs)
    rule.set_batch_size(batch)
    leaves = list(parts.values()) + ([neural] if spec.uses_neural else [])
    return rule, leaves
