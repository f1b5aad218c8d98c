"""Turning a speculative config that names ``specplug.<method>`` into one vLLM validates.

vLLM's ``SpeculativeConfig`` accepts a fixed list of methods and forbids unknown keys, so a
specplug method travels as vLLM's own ``custom_class`` method (drafter =
:class:`~specplug_adapters.vllm.SpecplugDrafter`), or, for a method that composes the
engine's own drafter (``hybrid``, or any plugin's method that declares
``engine_drafter_option``), as the model's own neural method (MTP/EAGLE/draft model) with
specplug's overlay on top. Which specplug method
runs, and its options, travel in ``additional_config["specplug"]``: the one channel vLLM
hands unchanged to every process (see :data:`SECTION`).

Everything here works on plain dicts and imports no vLLM, so it is tested without an engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import specplug
from specplug import InvalidOptionError, Proposer, UnknownMethodError
from specplug.cost import OnlineCostModel
from specplug.engine import (
    StandInDrafter,
    capabilities_of,
    create_for_engine,
    methods_composing_engine_drafter,
    no_drafter,
    note_served,
    served_methods,
)
from specplug_adapters.vllm._neural import NEURAL_METHODS, check_neural_method, is_mtp, neural_drafter

__all__ = [
    "ADAPTER_KEYS",
    "DRAFTER_PATH",
    "NEURAL_METHODS",
    "PREFIX",
    "SECTION",
    "DrafterSettings",
    "TargetModel",
    "create_method",
    "read_settings",
    "specplug_method",
    "translate",
    "vllm_method_names",
]

#: method names as vLLM sees them: ``specplug.suffix`` for specplug's ``suffix``
PREFIX = "specplug."
#: the key of ``additional_config`` that carries the method and its options to every process
SECTION = "specplug"
#: the custom_class drafter that runs every lookup method
DRAFTER_PATH = "specplug_adapters.vllm.SpecplugDrafter"
#: keys of the specplug section that configure the adapter rather than the method
ADAPTER_KEYS = frozenset({"method", "neural", "stats_file", "stats_interval", "unused_neural_pass", "step_costs"})
#: what vLLM's neural drafter does on a step where no row takes its draft (the overlay's setting)
UNUSED_NEURAL_PASSES = ("fill", "skip", "full", "fill_in_use")
#: where the overlay's method gets its cost model when the options give none: ``online``, learnt from
#: this engine's own step and drafter times; ``off``, the method's own default (hybrid: none)
STEP_COSTS = ("online", "off")


def specplug_method(value: object) -> str | None:
    """The specplug method named by a vLLM method string, or None when it names none.

    >>> specplug_method("specplug.suffix"), specplug_method("ngram")
    ('suffix', None)
    """
    if isinstance(value, str) and value.startswith(PREFIX):
        return value[len(PREFIX) :]
    return None


def vllm_method_names() -> list[str]:
    """Every registered specplug method as vLLM spells it (``specplug.<name>``), sorted."""
    return [PREFIX + name for name in specplug.methods()]


@dataclass(frozen=True)
class TargetModel:
    """What the config check needs of the target model: how the user named it, its architecture,
    and whether it carries MTP layers vLLM can draft with (None: not known, vLLM decides)."""

    name: str
    architecture: str | None = None
    has_mtp: bool | None = None


class DrafterSettings:
    """What a drafter reads from ``additional_config["specplug"]``: method, options, stats."""

    def __init__(
        self,
        method: str,
        options: dict[str, Any],
        *,
        neural: str | None = None,
        stats_file: str | None = None,
        stats_interval: float = 30.0,
        unused_neural_pass: str = "fill",
        step_costs: str = "online",
    ) -> None:
        self.method = method
        self.options = options
        self.neural = neural
        self.stats_file = stats_file
        self.stats_interval = stats_interval
        self.unused_neural_pass = unused_neural_pass
        self.step_costs = step_costs

    def __repr__(self) -> str:
        return f"DrafterSettings(method={self.method!r}, options={self.options!r}, neural={self.neural!r})"


def read_settings(additional_config: Mapping[str, Any] | None, default_method: str = "suffix") -> DrafterSettings:
    """Parse ``additional_config["specplug"]``; a bad value raises naming it and what is valid."""
    section = _section(additional_config)
    method = section.get("method", default_method)
    if specplug_method(method) is not None:
        method = specplug_method(method)
    if not isinstance(method, str) or method not in specplug.methods():
        raise UnknownMethodError(method, specplug.methods())
    interval = section.get("stats_interval", 30.0)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
        raise InvalidOptionError(
            f"additional_config['{SECTION}']['stats_interval'] = {interval!r} is not valid; use seconds >= 0"
        )
    stats_file = section.get("stats_file")
    if stats_file is not None and not isinstance(stats_file, str):
        raise InvalidOptionError(
            f"additional_config['{SECTION}']['stats_file'] = {stats_file!r} is not valid; use a path string"
        )
    unused = section.get("unused_neural_pass", "fill")
    if unused not in UNUSED_NEURAL_PASSES:
        raise InvalidOptionError(
            f"additional_config['{SECTION}']['unused_neural_pass'] = {unused!r} is not valid; use one of "
            + ", ".join(UNUSED_NEURAL_PASSES)
        )
    step_costs = section.get("step_costs", "online")
    if step_costs not in STEP_COSTS:
        raise InvalidOptionError(
            f"additional_config['{SECTION}']['step_costs'] = {step_costs!r} is not valid; use one of "
            + ", ".join(STEP_COSTS)
        )
    neural = section.get("neural")
    options = {key: value for key, value in section.items() if key not in ADAPTER_KEYS}
    return DrafterSettings(method, options, neural=neural, stats_file=stats_file, stats_interval=float(interval),
                           unused_neural_pass=unused, step_costs=step_costs)


def create_method(
    settings: DrafterSettings, engine_drafter: Proposer | None = None, step_costs: object | None = None
) -> Proposer:
    """Create the configured specplug proposer; ``engine_drafter`` is vLLM's own drafter where the method
    composes it, ``step_costs`` the cost model the overlay measures (for a method's cost option left unset)."""
    hint = (
        f"{PREFIX}{settings.method} overlays lookup drafts on the model's own MTP/EAGLE/draft-model drafts, "
        "so it cannot run as a custom_class drafter; use --speculative-config "
        f"'{{\"method\": \"{PREFIX}{settings.method}\", ...}}' with the specplug vLLM plugin enabled"
    )
    return create_for_engine(
        settings.method, settings.options, engine_drafter=engine_drafter, step_costs=step_costs,
        engine="a vLLM custom_class drafter",
        hint=hint,
    )


def translate(
    speculative_config: Mapping[str, Any],
    additional_config: Mapping[str, Any] | None,
    vllm_fields: Iterable[str],
    target: TargetModel | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rewrite a speculative config naming ``specplug.<method>`` for vLLM; others pass unchanged.

    Keys of ``speculative_config`` that are not ``SpeculativeConfig`` fields (``vllm_fields``),
    and those of a nested ``"specplug"`` dict, are the method's options; they join (and win
    over) those in ``additional_config["specplug"]``. Options are checked here, in the process
    that parses the config, by creating the method once, so a mistake fails before any worker
    starts. A method running over the model's own drafter on a ``target`` without MTP layers,
    with no head or draft model given, raises :class:`specplug.NoDrafterError`.
    Returns new dicts ``(speculative_config, additional_config)``.

    >>> spec, extra = translate({"method": "specplug.ngram", "num_speculative_tokens": 4, "max_n": 3},
    ...                         None, ["method", "model", "num_speculative_tokens"])
    >>> spec["method"], spec["model"], extra["specplug"]
    ('custom_class', 'specplug_adapters.vllm.SpecplugDrafter', {'method': 'ngram', 'max_n': 3})
    """
    spec = {str(key).replace("-", "_"): value for key, value in speculative_config.items()}
    extra = dict(additional_config or {})
    name = specplug_method(spec.get("method"))
    if name is None:
        return spec, extra
    if name not in specplug.methods():
        raise UnknownMethodError(PREFIX + name, vllm_method_names())
    fields = set(vllm_fields)
    section = dict(_section(extra))
    nested = spec.pop(SECTION, {})
    if not isinstance(nested, Mapping):
        raise InvalidOptionError(f"speculative_config['{SECTION}'] = {nested!r:.60} is not a dict of specplug options")
    given_method = section.pop("method", None)
    if given_method is not None and (specplug_method(given_method) or given_method) != name:
        raise InvalidOptionError(
            f"speculative_config method {PREFIX + name!r} and additional_config['{SECTION}']['method'] = "
            f"{given_method!r} disagree; give the method in one place"
        )
    section.update(nested)
    section.update({key: spec.pop(key) for key in list(spec) if key not in fields})
    section = {"method": name, **section}
    composes = _runs_on_engine_drafter(name, spec, section)
    if composes:
        _check_drafter(name, spec, section, target)
        spec = _as_neural(spec, section, name)
    else:
        if spec.get("model") not in (None, DRAFTER_PATH):
            composing = ", ".join(PREFIX + method for method in methods_composing_engine_drafter())
            raise InvalidOptionError(
                f"specplug method {PREFIX + name!r} drafts from the text itself and takes no model; "
                f"got model = {spec['model']!r}. Remove it, or use a method that runs on a draft model "
                f"({composing or 'none is registered'})"
            )
        spec["method"] = "custom_class"
        spec["model"] = DRAFTER_PATH
    settings = read_settings({SECTION: section})
    # options checked here, once; a stand-in takes the place of the model's drafter, which does not exist yet
    method = create_method(settings, StandInDrafter() if composes else None,
                           OnlineCostModel() if composes and settings.step_costs == "online" else None)
    # this process admits the server's requests: what they may name as their method is this method's
    note_served(served_methods(name, method))
    extra[SECTION] = section
    return spec, extra


def _runs_on_engine_drafter(name: str, spec: Mapping[str, Any], section: Mapping[str, Any]) -> bool:
    """Whether ``name`` runs over the model's own drafter: always for a method that needs one
    (hybrid), and for one that only may use it (adaptive) when the config names a draft model or
    a neural method, so ``specplug.adaptive`` with an EAGLE head chooses among the head and lookups.

    >>> _runs_on_engine_drafter("adaptive", {}, {}), _runs_on_engine_drafter("adaptive", {"model": "head"}, {})
    (False, True)
    """
    capabilities = capabilities_of(name)
    if not capabilities.composes_engine_drafter:
        return False
    if capabilities.engine_drafter_required:
        return True
    return spec.get("model") not in (None, DRAFTER_PATH) or section.get("neural") is not None


def _check_drafter(name: str, spec: Mapping[str, Any], section: Mapping[str, Any], target: TargetModel | None) -> None:
    """Refuse a composing method with nothing to compose: no ``model`` given, and either a neural
    method that needs one (eagle, eagle3, draft_model) or MTP on a target without MTP layers.

    >>> _check_drafter("hybrid", {}, {}, TargetModel("org/small", "LlamaForCausalLM", has_mtp=False))
    Traceback (most recent call last):
    ...
    specplug._errors.NoDrafterError: specplug.hybrid drafts with the model's own drafter ...
    """
    if spec.get("model") not in (None, DRAFTER_PATH):
        return  # a head or draft model: vLLM loads and checks it
    neural = section.get("neural")
    if neural is None or (isinstance(neural, str) and is_mtp(neural)):
        if target is None or target.has_mtp is not False:
            return
        why = "it has no MTP layers and the speculative config gives no \"model\""
    elif neural in NEURAL_METHODS:
        why = f"neural = {neural!r} drafts with a head or draft model and the speculative config gives no \"model\""
    else:
        return  # not a neural method: _as_neural names the valid ones
    model = "the model"
    if target is not None:
        model = f"{target.name} ({target.architecture})" if target.architecture else target.name
    raise no_drafter(
        PREFIX + name,
        model,
        why=why,
        give="give an EAGLE head or a draft model of the same vocabulary (--spec-model HEAD, or \"model\": HEAD "
             "in --speculative-config)",
        lookups=f"use a lookup method that needs none: {PREFIX}suffix, or {PREFIX}adaptive without \"neural\"",
    )


def _as_neural(spec: dict[str, Any], section: dict[str, Any], name: str) -> dict[str, Any]:
    """A composing method's config for vLLM: its own neural method, which the overlay then edits.

    MTP and EAGLE draft after vLLM's bookkeeping on CPU lists with
    ``disable_padded_drafter_batch`` (set here unless the user chose otherwise), the cheapest
    place to overlay; a draft model and every parallel drafter (P-EAGLE, PARD, DFlash) keep
    vLLM's padded batch, the only one vLLM runs them on, which the overlay also reads. The
    method's own knobs (``parallel_drafting``, ``draft_sample_method``, ...) are vLLM's fields
    and stay in ``spec`` untouched.
    """
    neural = section.get("neural")
    if neural is None:
        # no model: the target's own MTP layers; a model: vLLM detects the method from its config
        neural = "mtp" if spec.get("model") is None else None
    else:
        check_neural_method(neural, PREFIX + name)
    if neural is None:
        del spec["method"]
    else:
        spec["method"] = neural
        if neural_drafter(neural, bool(spec.get("parallel_drafting"))).unpadded:
            spec.setdefault("disable_padded_drafter_batch", True)
    section["neural"] = neural
    return spec


def _section(additional_config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    section = (additional_config or {}).get(SECTION, {})
    if not isinstance(section, Mapping):
        raise InvalidOptionError(
            f"additional_config['{SECTION}'] = {section!r:.60} is not valid; use a dict of specplug settings "
            "such as {\"method\": \"suffix\", \"max_depth\": 24}"
        )
    return section
