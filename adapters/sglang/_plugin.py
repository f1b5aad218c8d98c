"""SGLang's general plugin: one SPECPLUG_* speculative algorithm per specplug method.

Each method is ``SPECPLUG_<METHOD>`` on SGLang's n-gram verify path; a method that composes the
engine's own drafter (``hybrid``) is also ``SPECPLUG_<METHOD>_EAGLE``, ``..._EAGLE3`` and ``..._NEXTN``
(the model's own MTP layers), the overlay on SGLang's EAGLE worker, and ``..._STANDALONE``, the overlay on its draft-model worker
(``..._DFLASH`` and ``..._DSPARK`` are registered to be refused with SGLang's reason).

SGLang runs every ``sglang.srt.plugins`` entry point before it parses arguments and again in
each scheduler process, so :func:`register` is idempotent, and it never raises into SGLang:
a name it cannot register is logged and skipped. ``SPECPLUG_SGLANG_PLUGIN=0`` switches it off
(SGLang's own ``SGLANG_PLUGINS`` allow-list works too). It also checks each request's specplug
controls (``custom_params``) where SGLang checks its sampling parameters.

A SPECPLUG_* configuration specplug refuses raises a :class:`specplug.SpecplugError` from
``sgl.Engine(...)``; a server started from the command line (``python -m sglang.launch_server``,
``sglang serve``) prints it as one line and exits with status 2 before any process starts: an
``after`` hook on ``ServerArgs.from_cli_args`` (SGLang's own hook registry) runs the same checks
on the arguments as parsed.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

from specplug import SpecplugError
from specplug.engine import exit_on_mistake
from specplug_adapters.sglang._compat import installed_sglang_version, version_problem
from specplug_adapters.sglang._config import (
    LOGGER_NAME,
    algorithm_names,
    overlay_algorithm_names,
    refused_overlay_names,
)

__all__ = ["DISABLE_ENV", "register", "registered"]
#: set to 0/false/off/no to keep the plugin from registering anything
DISABLE_ENV = "SPECPLUG_SGLANG_PLUGIN"

log = logging.getLogger(LOGGER_NAME)
_lock = threading.Lock()
_registered: set[str] = set()
#: SGLang's parser of a server's command line, checked by :func:`_refuse_on_command_line`
COMMAND_LINE_TARGET = "sglang.srt.server_args.ServerArgs.from_cli_args"
_hooked: list[str] = []


def registered() -> list[str]:
    """The algorithm names this process has registered with SGLang, sorted."""
    return sorted(_registered)


def register() -> None:
    """SGLang's entry point (``sglang.srt.plugins``): idempotent, never raises into SGLang."""
    with _lock:
        if os.environ.get(DISABLE_ENV, "1").strip().lower() in ("0", "false", "off", "no"):
            log.info("specplug SGLang plugin switched off by %s", DISABLE_ENV)
            return
        try:
            from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
            from sglang.srt.speculative.spec_registry import get_spec

            from specplug_adapters.sglang._spec import (
                SpecplugEagle3SpecAlgo,
                SpecplugEagleSpecAlgo,
                SpecplugNextnSpecAlgo,
                SpecplugRefusedSpecAlgo,
                SpecplugSpecAlgo,
                SpecplugStandaloneSpecAlgo,
                validate_eagle_server_args,
                validate_refused_server_args,
                validate_server_args,
            )
        except Exception:  # noqa: BLE001 - a plugin that raises here stops SGLang itself
            log.error("specplug: SGLang's speculative registry does not import; no SPECPLUG_* algorithm", exc_info=True)
            return
        if not _registered:
            problem = version_problem(installed_sglang_version())
            if problem:
                log.warning("specplug: %s", problem)
        algorithms = {name: (SpecplugSpecAlgo, validate_server_args, _worker_factory) for name in algorithm_names()}
        overlays = {
            "eagle": (SpecplugEagleSpecAlgo, _eagle_worker_factory),
            "eagle3": (SpecplugEagle3SpecAlgo, _eagle_worker_factory),
            "mtp": (SpecplugNextnSpecAlgo, _eagle_worker_factory),  # NEXTN: SGLang's EAGLE worker over MTP layers
            "draft_model": (SpecplugStandaloneSpecAlgo, _standalone_worker_factory),
        }
        for name, (_, source) in overlay_algorithm_names().items():
            spec_class, factory = overlays[source]
            algorithms[name] = (spec_class, validate_eagle_server_args, factory)
        for name in refused_overlay_names():
            algorithms[name] = (SpecplugRefusedSpecAlgo, validate_refused_server_args, _refused_worker_factory)
        if not _hooked:
            try:
                from sglang.srt.plugins.hook_registry import HookRegistry, HookType

                HookRegistry.register(COMMAND_LINE_TARGET, _refuse_on_command_line, HookType.AFTER)
                _hooked.append(COMMAND_LINE_TARGET)
            except Exception:  # noqa: BLE001 - without it a refused start is a traceback, not a stop
                log.error("specplug: could not hook %s; a refused start shows SGLang's traceback", COMMAND_LINE_TARGET,
                          exc_info=True)
        try:
            from specplug_adapters.sglang._requests import install_request_check

            install_request_check()
        except Exception:  # noqa: BLE001 - per-request control off; the algorithms still register
            log.error("specplug: could not install its per-request check into SGLang", exc_info=True)
        for name, (spec_class, validate, factory) in algorithms.items():
            if name in _registered:
                continue
            if get_spec(name) is not None:  # registered by an earlier copy of this plugin (a reload)
                _registered.add(name)
                continue
            try:
                SpeculativeAlgorithm.register(
                    name, supports_overlap=True, validate_server_args=validate, spec_class=spec_class
                )(factory)
                _registered.add(name)
            except Exception:  # noqa: BLE001 - one bad name must not cost the others, nor SGLang
                log.error("specplug: could not register %s with SGLang", name, exc_info=True)


def _worker_factory(server_args: Any) -> type:
    # imported here: the worker imports SGLang's scheduler and kernels, which the launcher never needs
    from specplug_adapters.sglang._worker import SpecplugWorker

    return SpecplugWorker


def _eagle_worker_factory(server_args: Any) -> type:
    from specplug_adapters.sglang._eagle import SpecplugEagleWorker

    return SpecplugEagleWorker


def _standalone_worker_factory(server_args: Any) -> type:
    from specplug_adapters.sglang._standalone import SpecplugStandaloneWorker

    return SpecplugStandaloneWorker


def _refused_worker_factory(server_args: Any) -> type:
    # SGLang validates before it builds a worker, so this is reached only if that order changes
    from specplug_adapters.sglang._config import refuse_overlay

    refuse_overlay(getattr(server_args, "speculative_algorithm", None))


def _refuse_on_command_line(server_args: Any, *args: Any, **kwargs: Any) -> None:
    """After SGLang parsed a server's command line: a SPECPLUG_* configuration specplug refuses ends
    the start here, in one line with exit status 2 (SGLang's resolution would raise it later as a traceback)."""
    algorithm = getattr(server_args, "speculative_algorithm", None)
    key = algorithm.upper() if isinstance(algorithm, str) else None
    if key in overlay_algorithm_names():
        from specplug_adapters.sglang._spec import validate_eagle_server_args as validate
    elif key in refused_overlay_names():
        from specplug_adapters.sglang._spec import validate_refused_server_args as validate
    elif key in algorithm_names():
        from specplug_adapters.sglang._spec import validate_server_args as validate
    else:
        return
    try:
        validate(server_args)
    except SpecplugError as error:
        exit_on_mistake(error)
