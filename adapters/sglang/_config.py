"""SGLang algorithm names for specplug's methods, and the options and server arguments they take.

Each registered method ``m`` is ``SPECPLUG_M`` (upper case, ``-``/``.`` as ``_``). Options
come from SGLang's own arguments where it has them (``--speculative-num-draft-tokens``: the
verify width, the root included, so drafts hold at most one token fewer) and from one JSON
object in the environment for the rest (``SPECPLUG_SGLANG_OPTIONS='{"min_match": 2}'``): the
environment reaches every scheduler process SGLang starts, and it is checked in the launching
process before any starts.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any, NoReturn

import specplug
from specplug import InvalidOptionError, UnknownMethodError
from specplug.engine import (
    capabilities_of, create_for_engine, methods_composing_engine_drafter, no_drafter, note_served, served_methods,
)

__all__ = [
    "DEFAULT_NUM_DRAFT_TOKENS",
    "LOGGER_NAME",
    "OPTIONS_ENV",
    "OVERLAY_DRAFTERS",
    "PREFIX",
    "REFUSED_DRAFTERS",
    "STATS_FILE_ENV",
    "STATS_INTERVAL_ENV",
    "algorithm_names",
    "check_eagle_options",
    "check_options",
    "create_overlay_method",
    "create_proposer",
    "eagle_algorithm_names",
    "method_of",
    "overlay_algorithm_names",
    "read_options",
    "read_stats_settings",
    "refuse_overlay",
    "refused_overlay_names",
]

#: the logger of the plugin's and the worker's messages (a child of specplug's own)
LOGGER_NAME = "specplug.sglang"
#: algorithm names are PREFIX + the method's name in upper case
PREFIX = "SPECPLUG_"
#: the environment variable holding the method's options as one JSON object
OPTIONS_ENV = "SPECPLUG_SGLANG_OPTIONS"
#: a path (may hold ``{pid}``) where each scheduler process writes specplug's counters as JSON
STATS_FILE_ENV = "SPECPLUG_SGLANG_STATS_FILE"
#: seconds between two writes of that file (0: every step); 30 when unset
STATS_INTERVAL_ENV = "SPECPLUG_SGLANG_STATS_INTERVAL"
#: the verify width when --speculative-num-draft-tokens is not given (the root and 7 drafted tokens)
DEFAULT_NUM_DRAFT_TOKENS = 8


def _algorithm(method: str) -> str:
    return PREFIX + re.sub(r"[^A-Z0-9]", "_", method.upper())


def algorithm_names() -> dict[str, str]:
    """Every registered method's SGLang algorithm name -> the method, sorted by name.

    >>> algorithm_names()["SPECPLUG_SUFFIX"]
    'suffix'
    """
    return {_algorithm(method): method for method in sorted(specplug.method_specs())}


#: SGLang's drafter an overlay name ends with -> the draft source the composing method sees
#: (STANDALONE, a draft model, runs on a subclass of the EAGLE worker: same draft step, same verify;
#: NEXTN, a model's own MTP layers, is SGLang's alias of EAGLE with the model's own path as the draft)
OVERLAY_DRAFTERS = {"EAGLE": "eagle", "EAGLE3": "eagle3", "NEXTN": "mtp", "STANDALONE": "draft_model"}
#: SGLang's drafters the overlay cannot reach, and why (a clause each, from SGLang 0.5.23's workers)
REFUSED_DRAFTERS = {
    "DFLASH": "SGLang's DFLASH worker (DFlashWorkerV2) drafts its block, builds the verify input and verifies it "
              "inside one forward_batch_generation call, with no draft step between them to override",
    "DSPARK": "SGLang's DSPARK worker (DSparkWorkerV2) sizes each request's verify from its draft's per-token "
              "confidences (its verify planner), which a lookup draft does not have",
}


def overlay_algorithm_names() -> dict[str, tuple[str, str]]:
    """Every overlay algorithm name -> (the composing method, its draft source), sorted by name.

    A method that composes the engine's own drafter (``hybrid``, or a plugin's composite) runs
    over SGLang's EAGLE worker as ``SPECPLUG_<METHOD>_EAGLE`` (EAGLE-1 heads and MTP layers) and
    ``SPECPLUG_<METHOD>_EAGLE3`` (EAGLE-3 heads), as ``SPECPLUG_<METHOD>_NEXTN`` over the same
    worker with the model's own MTP layers as the draft (what SGLang's NEXTN is), and over its
    STANDALONE worker (a draft model) as ``SPECPLUG_<METHOD>_STANDALONE``.

    >>> overlay_algorithm_names()["SPECPLUG_HYBRID_STANDALONE"]
    ('hybrid', 'draft_model')
    """
    names: dict[str, tuple[str, str]] = {}
    for method in methods_composing_engine_drafter():
        for drafter, source in OVERLAY_DRAFTERS.items():
            names[f"{_algorithm(method)}_{drafter}"] = (method, source)
    return dict(sorted(names.items()))


def eagle_algorithm_names() -> dict[str, tuple[str, bool]]:
    """The overlay names over SGLang's EAGLE worker -> (the composing method, whether the head is EAGLE-3).

    >>> eagle_algorithm_names()["SPECPLUG_HYBRID_EAGLE3"]
    ('hybrid', True)
    """
    return {
        name: (method, source == "eagle3")
        for name, (method, source) in overlay_algorithm_names().items()
        if source in ("eagle", "eagle3")
    }


def refused_overlay_names() -> dict[str, str]:
    """Each ``SPECPLUG_<METHOD>_<DRAFTER>`` over a drafter the overlay cannot reach (DFLASH, DSPARK) -> its
    one-line refusal, naming SGLang's reason and the overlays that run.

    >>> refused_overlay_names()["SPECPLUG_HYBRID_DFLASH"].startswith("SPECPLUG_HYBRID_DFLASH is not available: SGLang's")
    True
    """
    names: dict[str, str] = {}
    for method in methods_composing_engine_drafter():
        runs = ", ".join(f"{_algorithm(method)}_{name}" for name in OVERLAY_DRAFTERS)
        for drafter, why in REFUSED_DRAFTERS.items():
            name = f"{_algorithm(method)}_{drafter}"
            names[name] = f"{name} is not available: {why}; run {drafter} on its own, or one of {runs}"
    return dict(sorted(names.items()))


def refuse_overlay(algorithm: object) -> NoReturn:
    """SGLang's validation hook for a refused overlay name: raise its one-line refusal."""
    key = algorithm.upper() if isinstance(algorithm, str) else None
    names = refused_overlay_names()
    if key not in names:
        raise UnknownMethodError(algorithm, sorted(names))
    raise InvalidOptionError(names[key])


def create_overlay_method(
    method: str, options: Mapping[str, Any], engine_drafter: specplug.Proposer, worker: str = "EAGLE"
) -> specplug.Proposer:
    """The composing method an overlay runs, with the drafts of SGLang's ``worker`` as its engine drafter."""
    return create_for_engine(method, options, engine_drafter=engine_drafter, engine=f"SGLang's {worker} worker")


def check_eagle_options(algorithm: str, options: Mapping[str, Any], server_args: Any) -> None:
    """Refuse a bad overlay algorithm, option or drafter setting before SGLang starts a process (one-line errors)."""
    names = overlay_algorithm_names()
    key = algorithm.upper() if isinstance(algorithm, str) else None
    if key not in names:
        raise UnknownMethodError(algorithm, sorted(names))
    method, source = names[key]
    worker = "STANDALONE" if source == "draft_model" else "EAGLE"
    # NEXTN drafts with the model's own MTP layers: no draft path means the model's (apply_nextn_defaults)
    if source != "mtp" and not getattr(server_args, "speculative_draft_model_path", None):
        raise _no_drafter(key, method, getattr(server_args, "model_path", None),
                          f"SGLang's {worker} worker is given no --speculative-draft-model-path")
    attn_dp_size = getattr(server_args, "attn_dp_size", None)
    if worker == "STANDALONE" and isinstance(attn_dp_size, int) and attn_dp_size > 1:
        # SGLang refuses its own STANDALONE so; its check is in the hook the overlay's spec class replaces
        raise InvalidOptionError(f"--attn-dp-size = {attn_dp_size} is not valid for {key}: SGLang's STANDALONE "
                                 "worker does not support dp attention; give 1")
    topk = getattr(server_args, "speculative_eagle_topk", None)
    if topk not in (None, 1):
        raise InvalidOptionError(
            f"--speculative-eagle-topk = {topk!r} is not valid for {key}; it must be 1 "
            "(the overlay writes its drafts over EAGLE's chain)"
        )
    if getattr(server_args, "speculative_use_rejection_sampling", False):
        raise InvalidOptionError(
            f"--speculative-use-rejection-sampling is not valid for {key}: the overlay's lookup drafts carry "
            "no draft probabilities; leave it off (SGLang then verifies against the target alone)"
        )
    read_stats_settings()
    # creating it once checks every option the way the worker will
    from specplug.engine import EngineDrafts

    created = create_overlay_method(method, options, EngineDrafts(source), worker)
    note_served(served_methods(method, created))  # this process admits the server's requests


def method_of(algorithm: object) -> str:
    """The specplug method behind an SGLang algorithm name; UnknownMethodError listing the valid ones.

    >>> method_of("specplug_ngram")
    'ngram'
    """
    names = algorithm_names()
    key = algorithm.upper() if isinstance(algorithm, str) else None
    if key not in names:
        raise UnknownMethodError(algorithm, sorted(names))
    return names[key]


def read_options(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The method's options from :data:`OPTIONS_ENV` (none when unset); one clear error when malformed.

    >>> read_options({OPTIONS_ENV: '{"min_match": 2}'})
    {'min_match': 2}
    """
    raw = (os.environ if environ is None else environ).get(OPTIONS_ENV, "").strip()
    if not raw:
        return {}
    try:
        options = json.loads(raw)
    except json.JSONDecodeError as error:
        raise InvalidOptionError(f"{OPTIONS_ENV} = {raw!r:.80} is not valid JSON ({error.msg}); give one JSON object") from None
    if not isinstance(options, dict):
        raise InvalidOptionError(f"{OPTIONS_ENV} = {raw!r:.80} is not valid; give one JSON object of the method's options")
    return options


def read_stats_settings(environ: Mapping[str, str] | None = None) -> tuple[str | None, float]:
    """Where and how often the worker writes its counters (:data:`STATS_FILE_ENV`, :data:`STATS_INTERVAL_ENV`).

    >>> read_stats_settings({STATS_FILE_ENV: "/tmp/s-{pid}.json", STATS_INTERVAL_ENV: "0"})
    ('/tmp/s-{pid}.json', 0.0)
    """
    environ = os.environ if environ is None else environ
    path = environ.get(STATS_FILE_ENV, "").strip() or None
    raw = environ.get(STATS_INTERVAL_ENV, "").strip()
    try:
        interval = float(raw) if raw else 30.0
    except ValueError:
        interval = -1.0
    if not interval >= 0:  # also refuses nan
        raise InvalidOptionError(f"{STATS_INTERVAL_ENV} = {raw!r:.40} is not valid; give seconds >= 0 (0: every step)")
    return path, interval


def create_proposer(algorithm: str, options: Mapping[str, Any], model: str | None = None) -> specplug.Proposer:
    """The proposer an SGLang worker drafts with, created by the method's declared capabilities.

    A method that needs the model's own drafter gets none on this path: without one given in its
    options it is refused (:class:`specplug.NoDrafterError`, naming ``model``).
    """
    method = method_of(algorithm)
    capabilities = capabilities_of(method)
    option = capabilities.engine_drafter_option
    if option is not None and capabilities.engine_drafter_required and option not in options:
        raise _no_drafter(algorithm.upper(), method, model,
                          f"SGLang's n-gram verify path ({algorithm.upper()}) runs none of its own and "
                          f"{OPTIONS_ENV} gives no {option!r}")
    return create_for_engine(method, _with_drafter(method, options), engine="SGLang")


def _no_drafter(algorithm: str, method: str, model: str | None, why: str) -> specplug.NoDrafterError:
    """The one-line refusal of a composing method with nothing to compose, and the ways out in SGLang."""
    overlay = _algorithm(method) + "_EAGLE"
    return no_drafter(
        algorithm,
        model or "the model",
        why=why,
        give=f"run {overlay} (or {overlay}3) with --speculative-draft-model-path HEAD (an EAGLE head; for a model with "
             f"MTP layers, {_algorithm(method)}_NEXTN), or {_algorithm(method)}_STANDALONE with --speculative-draft-model-path "
             "DRAFT (a smaller model with the target's vocabulary)",
        lookups=f"use a lookup algorithm that needs none: {_algorithm('suffix')}, or {_algorithm('adaptive')}",
    )


def _with_drafter(method: str, options: Mapping[str, Any]) -> dict[str, Any]:
    # JSON holds no Proposer: a composing method's drafter option takes a method name, or
    # {"method": name, ...options}, created here (SGLang's n-gram path has no drafter to hand it)
    given = dict(options)
    option = capabilities_of(method).engine_drafter_option
    value = given.get(option) if option is not None else None
    if isinstance(value, str):
        given[option] = specplug.create(value)
    elif isinstance(value, dict):
        inner = dict(value)
        name = inner.pop("method", None)
        if not isinstance(name, str):
            raise InvalidOptionError(
                f"method {method!r}: option {option} = {value!r:.80} is not valid; give a method name "
                'or {"method": NAME, ...its options}'
            )
        given[option] = specplug.create(name, **inner)
    return given


def check_options(
    algorithm: str, options: Mapping[str, Any], num_draft_tokens: object, max_branches: object = 1, model: str | None = None
) -> None:
    """Refuse a bad algorithm, option, draft width or branch count before SGLang starts a process (one-line errors);
    ``model`` names the target where a method needing its drafter is refused."""
    method = method_of(algorithm)
    if num_draft_tokens is not None and (
        isinstance(num_draft_tokens, bool) or not isinstance(num_draft_tokens, int) or num_draft_tokens < 2
    ):
        raise InvalidOptionError(
            f"--speculative-num-draft-tokens = {num_draft_tokens!r} is not valid for {algorithm}; "
            "it must be an int >= 2 (the root plus at least one drafted token)"
        )
    if isinstance(max_branches, bool) or not isinstance(max_branches, int) or max_branches < 1:
        raise InvalidOptionError(
            f"--speculative-ngram-max-bfs-breadth = {max_branches!r} is not valid for {algorithm}; "
            "it must be an int >= 1 (the most branches of a request's draft tree; 1: chains)"
        )
    read_stats_settings()
    # creating it once checks every option (and a composing method's drafter) the way the worker will
    created = create_proposer(algorithm, options, model)
    note_served(served_methods(method, created))  # this process admits the server's requests
