"""``specplug trtllm serve``: trtllm-serve with a ``specplug:`` block in its model.yaml.

A YAML file cannot build a drafter object, so::

    specplug trtllm serve MODEL --config model.yaml [trtllm-serve's other options]

reads model.yaml, checks it (the specplug block against specplug's methods, a
``speculative_config`` against TensorRT-LLM's schema) before anything starts, writes the file
without its ``specplug:`` block to a temporary file, and runs TensorRT-LLM's own ``serve``
command on the same arguments with that file. Only one thing is added: where trtllm-serve hands
its LLM arguments to ``launch_server``, ``speculative_config`` becomes the
``UserProvidedDecodingConfig`` with specplug's drafter and resource manager, and
``launch_server`` is called by keyword (its argument order changed between releases).
Everything else, each option and each other YAML key, reaches TensorRT-LLM unchanged.
"""

from __future__ import annotations

import contextlib
import inspect
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from specplug._inputs import InputFileError, parse_problem, read_text
from specplug_adapters.trtllm._compat import import_trtllm
from specplug_adapters.trtllm._config import build_pair, user_provided_config_class
from specplug_adapters.trtllm._schema import SPEC_KEY, check_model_yaml
from specplug_adapters.trtllm._settings import BLOCK, DrafterSettings, TrtllmConfigError

__all__ = ["CONFIG_FLAGS", "EntryPoints", "LaunchPlan", "plan_launch", "read_yaml", "serve"]

#: trtllm-serve's options that name the model.yaml (``--config`` in newer releases)
CONFIG_FLAGS = ("--config", "--extra_llm_api_options", "--extra-llm-api-options")


def read_yaml(path: Path) -> Any:
    """The parsed YAML file, or TrtllmConfigError naming the file and what is wrong with it."""
    try:
        import yaml
    except ImportError as error:  # PyYAML comes with TensorRT-LLM and with specplug's trtllm extra
        raise TrtllmConfigError(f"reading {path} needs PyYAML: pip install pyyaml") from error
    try:
        text = read_text(path)
    except InputFileError as error:
        raise TrtllmConfigError(str(error)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise TrtllmConfigError(f"{path} is not valid YAML: {error}") from None
    except (RecursionError, ValueError) as error:  # PyYAML raises these bare for deep nesting, huge ints
        problem = parse_problem(error)
        if problem is None:
            raise
        raise TrtllmConfigError(f"{path} is not valid YAML: {problem}") from None


@dataclass
class LaunchPlan:
    """What ``serve`` will do: the checked YAML and where its path sits in the arguments."""

    argv: list[str]
    source: Path
    engine_yaml: dict[str, Any]
    settings: DrafterSettings
    path_index: int  # index in argv of the YAML path (the value of a config flag)
    inline: bool  # the path was given as --config=PATH


def _option(argv: Sequence[str], names: Sequence[str]) -> tuple[int, bool] | None:
    """(index of the value, written inline) of the last of ``names`` in ``argv``; None if absent."""
    found = None
    for index, arg in enumerate(argv):
        for name in names:
            if arg == name and index + 1 < len(argv):
                found = (index + 1, False)
            elif arg.startswith(name + "="):
                found = (index, True)
    return found


def plan_launch(argv: Sequence[str]) -> LaunchPlan:
    """Check the arguments and model.yaml of a launch; TrtllmConfigError on any mistake."""
    argv = list(argv)
    where = _option(argv, CONFIG_FLAGS)
    if where is None:
        raise TrtllmConfigError(
            f"specplug trtllm serve needs the model.yaml with a `{BLOCK}:` block: add --config model.yaml "
            "(or --extra_llm_api_options model.yaml); `specplug preset trtllm specplug-suffix` prints one"
        )
    index, inline = where
    source = Path(argv[index].split("=", 1)[1] if inline else argv[index])
    backend_at = _option(argv, ("--backend",))
    backend = "pytorch"
    if backend_at is not None:
        value = argv[backend_at[0]]
        backend = value.split("=", 1)[1] if backend_at[1] else value
    # trtllm-serve's model is its positional argument, written first (`specplug trtllm serve MODEL --config ...`)
    model = argv[0] if argv and not argv[0].startswith("-") else None
    checked = check_model_yaml(read_yaml(source), str(source), backend=backend, model=model)
    if checked.settings is None:
        raise TrtllmConfigError(
            f"{source} has no top-level `{BLOCK}:` block, so there is nothing for specplug to add: run trtllm-serve "
            f"with it directly, or add e.g. `{BLOCK}: {{method: suffix, max_draft_len: 8}}`"
        )
    return LaunchPlan(argv, source, checked.engine, checked.settings, index, inline)


class EntryPoints:
    """The TensorRT-LLM objects the launcher uses; tests replace them with recorders.

    ``serve_module``: ``tensorrt_llm.commands.serve`` (its ``serve`` click command and the
    ``launch_server`` it calls); ``config_class``: ``UserProvidedDecodingConfig``.
    """

    def __init__(self, serve_module: ModuleType | Any, config_class: type) -> None:
        self.serve_module = serve_module
        self.config_class = config_class

    @classmethod
    def load(cls) -> EntryPoints:
        """TensorRT-LLM's own; MissingEngineError (with how to install it) when it does not import."""
        return cls(import_trtllm("tensorrt_llm.commands.serve"), user_provided_config_class())

    def run_serve(self, argv: list[str]) -> int:
        """trtllm-serve's ``serve`` command on ``argv``; its exit status."""
        command = self.serve_module.serve
        try:
            command.main(args=argv, prog_name="trtllm-serve", standalone_mode=True)
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        return 0


def _with_spec(original: Callable[..., Any], spec: Any) -> Callable[..., Any]:
    """``launch_server`` that adds ``speculative_config`` to its ``llm_args`` and calls ``original`` by keyword."""
    signature = inspect.signature(original)
    if "llm_args" not in signature.parameters:
        raise TrtllmConfigError(
            f"this TensorRT-LLM's launch_server{signature} takes no llm_args; specplug trtllm serve supports the "
            "releases named in docs/trtllm.md"
        )

    def launch_server(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        keywords: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_KEYWORD:
                keywords.update(value)
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                raise TypeError(f"launch_server got extra positional arguments {value!r}; cannot pass them by keyword")
            else:
                keywords[name] = value
        llm_args = keywords["llm_args"]
        if isinstance(llm_args, dict):
            keywords["llm_args"] = {**llm_args, SPEC_KEY: spec}
        else:  # a release that validates the arguments into a model before launch_server
            keywords["llm_args"] = llm_args.model_copy(update={SPEC_KEY: spec})
        return original(**keywords)

    launch_server.__wrapped__ = original  # type: ignore[attr-defined]
    return launch_server


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Iterator[None]:
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def serve(argv: Sequence[str], *, entry_points: EntryPoints | None = None) -> int:
    """Run trtllm-serve on ``argv`` with the specplug block of its model.yaml as the drafter.

    The YAML is checked first (TrtllmConfigError), then TensorRT-LLM imported (MissingEngineError).
    """
    import yaml

    plan = plan_launch(argv)
    entry = entry_points or EntryPoints.load()
    drafter, resources = build_pair(plan.settings)
    spec = entry.config_class(max_draft_len=plan.settings.max_draft_len, drafter=drafter, resource_manager=resources)
    with tempfile.TemporaryDirectory(prefix="specplug-trtllm-") as folder:
        engine_file = Path(folder) / plan.source.name
        engine_file.write_text(yaml.safe_dump(plan.engine_yaml, sort_keys=False), encoding="utf-8")
        args = list(plan.argv)
        flag = args[plan.path_index].split("=", 1)[0]
        args[plan.path_index] = f"{flag}={engine_file}" if plan.inline else str(engine_file)
        with _patched(entry.serve_module, "launch_server", _with_spec(entry.serve_module.launch_server, spec)):
            return entry.run_serve(args)
