"""The vLLM general plugin: ``specplug.<method>`` names for vLLM's speculative config and CLI.

vLLM calls :func:`register` in every process it starts (API server, engine core, workers),
before it parses arguments. Each concern is patched in exactly one place, by wrapping one
vLLM function and calling through to it:

=========================  ==============================================  ======================
concern                    wrapped                                         when
=========================  ==============================================  ======================
config: method names,      ``EngineArgs.create_speculative_config``        at register
options, errors            (rewrites the dict before vLLM validates it)
CLI: ``--spec-method``     ``EngineArgs.add_cli_args``                     at register
choices                    (adds ``specplug.*`` to the parsed choices)
CLI: a refused config is   ``EngineArgs.from_cli_args`` (notes the engine  at register
one line, exit status 2    args a server built from its command line)
overlay of methods that    ``GPUModelRunner.propose_draft_token_ids``      when the runner module
compose the model's        (CPU runner inherits it; the method decides     is first imported
drafter (hybrid)           first, vLLM's drafter runs when a row needs it)
per-request control:        ``SamplingParams.verify`` (vLLM's check of a     at register
checked at admission       request's parameters: a bad ``extra_args``
                           control is the client's HTTP 400)
=========================  ==============================================  ======================

A config specplug refuses (an unknown option; ``specplug.hybrid`` on a model without MTP layers
and no head given) raises a :class:`specplug.SpecplugError` from ``LLM(...)``; a server started
from the command line prints it as one line and exits with status 2 before any engine process
starts. Lookup methods need nothing else: they run as vLLM's own ``custom_class`` drafter. The
plugin writes no state onto vLLM objects; the overlay keeps its per-runner state in a
``WeakKeyDictionary``. ``SPECPLUG_VLLM_PLUGIN=0`` switches it all off (vLLM's
``VLLM_PLUGINS`` allow-list works too); :func:`register` runs once per process.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import os
import threading
import weakref
from typing import Any

from specplug import SpecplugError
from specplug.engine import capabilities_of, exit_on_mistake
from specplug_adapters.vllm import _config
from specplug_adapters.vllm._compat import installed_vllm_version, version_problem
from specplug_adapters.vllm._import_hook import when_imported
from specplug_adapters.vllm._installed import installed, mark_installed
from specplug_adapters.vllm._stats import LOGGER_NAME

__all__ = ["DISABLE_ENV", "RUNNER_MODULE", "installed", "register"]

log = logging.getLogger(LOGGER_NAME)

#: set to 0/false/off/no to keep the plugin from patching anything
DISABLE_ENV = "SPECPLUG_VLLM_PLUGIN"
#: the module of the V1 model runner, whose drafting step the hybrid overlay wraps
RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"
#: marks a vLLM function as wrapped by this plugin (so a second register() leaves it alone)
_MARK = "__specplug_wraps__"

_lock = threading.Lock()
def register() -> None:
    """vLLM's entry point (``vllm.general_plugins``): idempotent, never raises into vLLM."""
    with _lock:
        if os.environ.get(DISABLE_ENV, "1").strip().lower() in ("0", "false", "off", "no"):
            log.info("specplug vLLM plugin switched off by %s", DISABLE_ENV)
            return
        if installed():
            return
        problem = version_problem(installed_vllm_version())
        if problem:
            log.warning("specplug: %s", problem)
        for concern, install in (("config", _install_config), ("cli", _install_cli),
                                 ("cli-exit", _install_command_line_marks), ("requests", _install_requests)):
            try:
                install()
                mark_installed(concern)
            except Exception:  # noqa: BLE001 - a plugin that raises here stops vLLM itself
                log.error("specplug: could not install its %s support into vLLM; it stays off", concern,
                          exc_info=True)
        when_imported(RUNNER_MODULE, _install_hybrid)


# ------------------------------------------------------------------------------ config
def _install_config() -> None:
    from vllm.config import SpeculativeConfig
    from vllm.engine.arg_utils import EngineArgs

    original = EngineArgs.create_speculative_config
    if getattr(original, _MARK, False):
        return
    fields = frozenset(field.name for field in dataclasses.fields(SpeculativeConfig))

    @functools.wraps(original)
    def create_speculative_config(self: Any, *args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else kwargs.get("target_model_config")
        try:
            _translate_engine_args(self, fields, target)
        except SpecplugError as error:
            if _command_line.holds(self):
                exit_on_mistake(error)  # a server's start: one line, exit status 2
            raise
        return original(self, *args, **kwargs)

    setattr(create_speculative_config, _MARK, True)
    EngineArgs.create_speculative_config = create_speculative_config


def _translate_engine_args(args: Any, fields: frozenset[str], target_model_config: Any = None) -> None:
    """Rewrite ``args.speculative_config`` (and ``--spec-*`` flags) naming a specplug method;
    ``target_model_config`` (vLLM's ``ModelConfig``) tells whether the target has MTP layers."""
    spec = dict(args.speculative_config or {})
    flags = (("--spec-method", "method", "spec_method"), ("--spec-model", "model", "spec_model"),
             ("--spec-tokens", "num_speculative_tokens", "spec_tokens"))
    method = getattr(args, "spec_method", None) or spec.get("method")
    if _config.specplug_method(method) is None:
        return
    # vLLM merges the --spec-* flags into the dict itself; done here first, with its error
    for flag, key, attribute in flags:
        value = getattr(args, attribute, None)
        if value is None:
            continue
        if key in spec:
            raise ValueError(f"{flag} and --speculative-config['{key}'] are mutually exclusive")
        spec[key] = value
        setattr(args, attribute, None)
    target = None
    if target_model_config is not None and _composes(method):  # only a method over the model's drafter asks
        from specplug_adapters.vllm._target import target_model

        target = target_model(target_model_config)
    spec, extra = _config.translate(spec, args.additional_config, fields, target)
    args.speculative_config = spec
    args.additional_config = extra
    name = extra[_config.SECTION]["method"]
    if spec.get("method") != "custom_class":  # the method runs over the model's own drafter: the overlay
        _prefer_v1_runner(name)


def _prefer_v1_runner(name: str) -> None:
    """The overlay wraps the V1 model runner; vLLM 0.33 picks V2 for MTP/EAGLE on GPUs."""
    value = os.environ.get("VLLM_USE_V2_MODEL_RUNNER")
    if value is not None and value.strip().lower() in ("1", "true"):
        raise ValueError(
            f"{_config.PREFIX}{name} overlays drafts in vLLM's V1 model runner, but VLLM_USE_V2_MODEL_RUNNER="
            f"{value} asks for V2; unset it"
        )
    os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"  # read by the engine processes started next


# ------------------------------------------------------------------------ per request
def _install_requests() -> None:
    from vllm.sampling_params import SamplingParams

    from specplug_adapters.vllm._requests import check_request

    original = SamplingParams.verify
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def verify(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if self.extra_args:
            check_request(self.extra_args)
        return result

    setattr(verify, _MARK, True)
    SamplingParams.verify = verify


# --------------------------------------------------------------------------------- CLI
def _install_cli() -> None:
    from vllm.engine.arg_utils import EngineArgs

    original = EngineArgs.add_cli_args
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def add_cli_args(parser: Any, *args: Any, **kwargs: Any) -> Any:
        parser = original(parser, *args, **kwargs)
        _widen_choices(parser, "--spec-method", _config.vllm_method_names())
        return parser

    setattr(add_cli_args, _MARK, True)
    EngineArgs.add_cli_args = staticmethod(add_cli_args)


def _widen_choices(parser: Any, option: str, names: list[str]) -> None:
    """Add ``names`` to the choices of ``option`` (argparse checks choices at parse time)."""
    action = parser._option_string_actions.get(option)
    if action is None or action.choices is None:
        return
    choices = list(action.choices)
    action.choices = choices + [name for name in names if name not in choices]


# --------------------------------------------------------------------- CLI exit status
class _Marked:
    """Objects noted by identity, held weakly (vLLM's engine args are unhashable dataclasses)."""

    def __init__(self) -> None:
        self._refs: list[weakref.ref[Any]] = []
        self._lock = threading.Lock()

    def add(self, item: Any) -> None:
        with self._lock:
            self._refs = [ref for ref in self._refs if ref() is not None]
            self._refs.append(weakref.ref(item))

    def holds(self, item: Any) -> bool:
        with self._lock:
            return any(ref() is item for ref in self._refs)


#: engine args built from a server's command line (``vllm serve``, the OpenAI api_server)
_command_line = _Marked()


def _install_command_line_marks() -> None:
    from vllm.engine.arg_utils import EngineArgs

    original = EngineArgs.from_cli_args
    if getattr(original, _MARK, False):
        return
    function = original.__func__  # a classmethod: called for AsyncEngineArgs too

    @functools.wraps(function)
    def from_cli_args(cls: type, *args: Any, **kwargs: Any) -> Any:
        engine_args = function(cls, *args, **kwargs)
        _command_line.add(engine_args)
        return engine_args

    setattr(from_cli_args, _MARK, True)
    EngineArgs.from_cli_args = classmethod(from_cli_args)


# ------------------------------------------------------------------------------ overlay
_overlays: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _install_hybrid(module: Any) -> None:
    try:
        runner_class = module.GPUModelRunner
        original = runner_class.propose_draft_token_ids
    except AttributeError:
        log.error("specplug: %s.GPUModelRunner.propose_draft_token_ids is missing; methods that compose the "
                  "model's own drafter (specplug.hybrid) are off", RUNNER_MODULE)
        return
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def propose_draft_token_ids(self: Any, scheduler_output: Any, sampled_token_ids: Any, *args: Any,
                                **kwargs: Any) -> Any:
        overlay = _overlay_for(self)
        if overlay is None:
            return original(self, scheduler_output, sampled_token_ids, *args, **kwargs)
        num_tokens = int(getattr(scheduler_output, "num_spec_tokens_to_schedule", 0) or self.num_spec_tokens)

        def neural_pass(tokens: int) -> Any:
            """vLLM's own drafting of this step at draft length ``tokens`` (0: its first forward only)."""
            output = scheduler_output if tokens == num_tokens else _with_draft_length(scheduler_output, tokens)
            return original(self, output, sampled_token_ids, *args, **kwargs)

        # the method decides first; vLLM's drafter runs when a row asks for its draft
        return overlay.apply(self, num_tokens, sampled_token_ids, neural_pass, _verified_tokens(scheduler_output))

    setattr(propose_draft_token_ids, _MARK, True)
    runner_class.propose_draft_token_ids = propose_draft_token_ids
    mark_installed("hybrid")


def _verified_tokens(scheduler_output: Any) -> int | None:
    """The tokens the step just ran over, for learning its time; None on a step that started a
    request (its prefill, and the idle time before it, are no verification step)."""
    if getattr(scheduler_output, "scheduled_new_reqs", None):
        return None
    tokens = getattr(scheduler_output, "total_num_scheduled_tokens", None)
    return tokens if isinstance(tokens, int) and tokens > 0 else None


def _with_draft_length(scheduler_output: Any, tokens: int) -> Any:
    """A shallow copy of the step's scheduler output asking vLLM's drafter for ``tokens`` draft
    tokens (vLLM's own dynamic-K field; the original, which the runner keeps, is untouched)."""
    output = copy.copy(scheduler_output)
    output.num_spec_tokens_to_schedule = tokens
    return output


def _overlay_for(runner: Any) -> Any:
    """The runner's overlay, made on first use; None when it runs no method that composes its drafter."""
    try:
        return _overlays[runner]
    except KeyError:
        pass
    overlay = None
    config = getattr(runner, "vllm_config", None)
    section = (getattr(config, "additional_config", None) or {}).get(_config.SECTION) or {}
    if _composes(section.get("method")) and getattr(config, "speculative_config", None) is not None:
        if config.speculative_config.method == "custom_class":
            overlay = None  # the custom_class drafter refuses a composing method with a clear error
        else:
            from specplug_adapters.vllm._hybrid import HybridOverlay

            overlay = HybridOverlay(config)
    _overlays[runner] = overlay
    return overlay


def _composes(method: object) -> bool:
    """Whether the section's method composes the model's own drafter (an unknown one does not)."""
    name = _config.specplug_method(method) or method
    try:
        return capabilities_of(name).composes_engine_drafter
    except KeyError:  # UnknownMethodError: the drafter reports it; no overlay here
        return False
