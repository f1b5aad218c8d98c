"""Checking a model.yaml's ``speculative_config`` the way TensorRT-LLM's own models would.

The rules come from ``data/llm_args_schema.json``, which ``scripts/extract_trtllm_schema.py``
extracted from TensorRT-LLM's ``llm_args.py`` (the commit is in the JSON): the decoding types
of the ``SpeculativeConfig`` union and the backends each supports, every field's type (checked
with pydantic itself, so "4" passes where TensorRT-LLM takes it and "four" fails), unknown
keys (the models forbid them), nested models (``sa_config``), and the validators' raises whose
conditions read only the config's own fields. ``draft_len_schedule``'s loop-based rules are
applied here as the JSON records them. A mistake is reported with the file, the key path, the
bad value and what is valid; all mistakes of a file come in one error.
"""

from __future__ import annotations

import ast
import functools
import json
import operator
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt, TypeAdapter, ValidationError

from specplug_adapters.trtllm._settings import BLOCK, DrafterSettings, TrtllmConfigError, read_settings

__all__ = ["SPEC_KEY", "CheckedYaml", "check_model_yaml", "check_speculative_config", "load_schema", "schema_origin"]

#: the top-level key of TensorRT-LLM's LLM arguments that holds the speculative config
SPEC_KEY = "speculative_config"
_USER_PROVIDED = "User_Provided"


@functools.lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The schema shipped in ``specplug_adapters/trtllm/data/llm_args_schema.json``."""
    text = (resources.files(__package__) / "data" / "llm_args_schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def schema_origin(schema: Mapping[str, Any] | None = None) -> str:
    """Where the schema came from, for messages: ``NVIDIA/TensorRT-LLM@10ea1998dc06``."""
    source = (schema or load_schema())["source"]
    return f"{source['repo']}@{source['commit'][:12]}"


# ----------------------------------------------------------------------------- types
_NAMES: dict[str, Any] = {
    "int": int, "float": float, "bool": bool, "str": str, "Path": Path, "object": object, "Any": Any,
    "PositiveInt": PositiveInt, "NonNegativeInt": NonNegativeInt, "NonNegativeFloat": NonNegativeFloat,
    "dict": dict, "list": list, "set": set, "Dict": dict, "List": list, "Set": set,
}  # fmt: skip


def _type(node: ast.expr, models: Mapping[str, Any]) -> Any:
    """A Python type for an annotation node (model names become mappings, checked separately)."""
    if isinstance(node, ast.Constant) and node.value is None:
        return type(None)
    if isinstance(node, ast.Name):
        if node.id in models:
            return dict
        return _NAMES.get(node.id, Any)
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        head = node.value.id
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Literal":
            return Literal[tuple(ast.literal_eval(item) for item in items)]  # type: ignore[misc]
        args = tuple(_type(item, models) for item in items)
        if head == "Optional":
            return Optional[args[0]]
        if head == "Union":
            return Union[args]  # type: ignore[valid-type]
        container = _NAMES.get(head)
        if container in (list, set, dict):
            return container[args] if container is dict else container[args[0]]  # type: ignore[index]
    return Any


@functools.lru_cache(maxsize=512)
def _adapter(annotation: str, constraints: tuple[tuple[str, Any], ...], models: tuple[str, ...]) -> TypeAdapter:
    kind = _type(ast.parse(annotation, mode="eval").body, dict.fromkeys(models))
    if constraints:
        kind = Annotated[kind, Field(**dict(constraints))]
    return TypeAdapter(kind)


def _model_of(annotation: str, models: Mapping[str, Any]) -> str | None:
    for node in ast.walk(ast.parse(annotation, mode="eval")):
        if isinstance(node, ast.Name) and node.id in models:
            return node.id
    return None


# ------------------------------------------------------------------- validator checks
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt,
    ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip


class _Unsupported(Exception):
    """An expression that reads more than the config's own fields: not evaluated here."""


def _evaluate(node: ast.expr, names: Mapping[str, Any]) -> Any:
    """A condition from a validator, over ``names`` (``self``, ``backend``); only plain reads."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise _Unsupported(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        if node.attr.startswith("_") or not hasattr(names["self"], node.attr):
            raise _Unsupported(node.attr)
        return getattr(names["self"], node.attr)
    if isinstance(node, ast.BoolOp):
        values = (_evaluate(value, names) for value in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        value = _evaluate(node.operand, names)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.Compare):
        left = _evaluate(node.left, names)
        for op, right_node in zip(node.ops, node.comparators):
            right = _evaluate(right_node, names)
            try:
                if not _COMPARE[type(op)](left, right):
                    return False
            except TypeError:
                raise _Unsupported("comparison") from None
            left = right
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [_evaluate(item, names) for item in node.elts]
    raise _Unsupported(type(node).__name__)


def _holds(expression: str, names: Mapping[str, Any]) -> bool | None:
    """True or False for an evaluable condition, None for one that reads more than fields."""
    try:
        return bool(_evaluate(ast.parse(expression, mode="eval").body, names))
    except (_Unsupported, SyntaxError):
        return None


def _render(message: str, names: Mapping[str, Any]) -> str:
    """A validator's message with the ``{self.field}`` parts it reads filled in."""
    out, rest = [], message
    while "{" in rest and "}" in rest:
        head, _, tail = rest.partition("{")
        expression, _, rest = tail.partition("}")
        try:
            value = _evaluate(ast.parse(expression, mode="eval").body, names)
        except (_Unsupported, SyntaxError):
            value = "{" + expression + "}"
        out.append(head + str(value))
    return "".join(out) + rest


# ------------------------------------------------------------------------- checking
def _check_model(
    values: Mapping[str, Any],
    config: Mapping[str, Any],
    schema: Mapping[str, Any],
    where: str,
    problems: list[str],
    backend: str,
) -> dict[str, Any]:
    """Check ``values`` against one model of the schema; return them validated, by field name."""
    fields: dict[str, Any] = config["fields"]
    names = {alias: name for name, info in fields.items() for alias in (name, *info.get("aliases", []))}
    models = schema["models"]
    given: dict[str, Any] = {}
    for key, value in values.items():
        name = names.get(key) if isinstance(key, str) else None
        if name is None:
            if config.get("extra") == "forbid":
                problems.append(f"{where}.{key}: unknown key; valid keys: {', '.join(sorted(names))}")
            continue
        info = fields[name]
        nested = _model_of(info["type"], models)
        if nested is not None and isinstance(value, Mapping):
            given[name] = SimpleNamespace(**_check_model(value, models[nested], schema, f"{where}.{key}", problems, backend))
            continue
        constraints = tuple((k, info[k]) for k in ("ge", "gt", "le", "lt", "min_length") if isinstance(info.get(k), (int, float)))
        try:
            given[name] = _adapter(info["type"], constraints, tuple(models)).validate_python(value)
        except ValidationError as error:
            reason = error.errors()[0]["msg"]
            problems.append(f"{where}.{key} = {value!r:.60}: {reason} (TensorRT-LLM's type: {info['type']})")
    for name, info in fields.items():
        if info.get("required") and name not in given and name != "decoding_type":
            problems.append(f"{where}.{name}: required, missing")
    return {**{name: info.get("default") for name, info in fields.items()}, **given}


def _check_rules(merged: dict[str, Any], config: Mapping[str, Any], where: str, problems: list[str], backend: str) -> None:
    names = {"self": SimpleNamespace(**merged), "backend": backend}
    for validator in config["validators"]:
        if validator["mode"] != "after":
            continue
        for check in validator["checks"]:
            if check["loops"] or check["error"] not in ("ValueError", None):
                continue  # loop rules (draft_len_schedule) are applied below, from the same source
            if _holds(check["when"], names):
                problems.append(f"{where}: {_render(check['message'], names)}")
    _check_schedule(merged, where, problems)


def _check_schedule(merged: dict[str, Any], where: str, problems: list[str]) -> None:
    """``DecodingBaseConfig.validate_draft_len_schedule_and_sort``'s rules (loops over the schedule)."""
    schedule, longest = merged.get("draft_len_schedule"), merged.get("max_draft_len")
    if not isinstance(schedule, dict) or not schedule:
        return
    key = f"{where}.draft_len_schedule"
    for batch, length in schedule.items():
        if batch < 1:
            problems.append(f"{key}: batch size threshold must be >= 1, got {batch}")
        if length < 0:
            problems.append(f"{key}: draft length must be >= 0, got {length} (batch size {batch})")
    smallest = min(schedule)
    if longest is not None and schedule[smallest] != longest:
        problems.append(
            f"{key}[{smallest}] = {schedule[smallest]} must equal max_draft_len = {longest}, "
            "because it is the smallest batch-size key"
        )
    if longest is not None:
        for batch, length in schedule.items():
            if length > longest:
                problems.append(f"{key}[{batch}] = {length} is longer than max_draft_len = {longest}")


def check_speculative_config(
    spec: object, source: str = "model.yaml", *, backend: str = "pytorch", schema: Mapping[str, Any] | None = None
) -> list[str]:
    """Every problem TensorRT-LLM would raise for ``speculative_config`` ``spec`` (empty when none)."""
    schema = schema or load_schema()
    where = f"{source}: {SPEC_KEY}"
    if not isinstance(spec, Mapping):
        return [f"{where} = {spec!r:.60} is not a mapping; write `{SPEC_KEY}: {{decoding_type: MTP, max_draft_len: 3}}`"]
    types = schema["decoding_types"]
    tag = spec.get("decoding_type")
    if tag not in types:
        shown = "missing" if tag is None else f"= {tag!r}"
        return [f"{where}.decoding_type {shown}: not a TensorRT-LLM decoding type ({schema_origin(schema)}); valid: {', '.join(types)}"]
    config = schema["configs"][tag]
    supported = config.get("supports_backend")
    if supported and _holds(supported, {"backend": backend, "self": SimpleNamespace()}) is False:
        valid = [name for name, item in schema["configs"].items()
                 if _holds(item.get("supports_backend") or "True", {"backend": backend, "self": SimpleNamespace()}) is not False]  # fmt: skip
        return [f"{where}.decoding_type = {tag!r} does not support the {backend} backend; on {backend}: {', '.join(valid)}"]
    if tag == _USER_PROVIDED:
        return [
            f"{where}.decoding_type = {tag!r} needs a Drafter object, which a YAML file cannot build (TensorRT-LLM "
            f"accepts a string there and fails when it runs). Put the method in a top-level `{BLOCK}:` block "
            "(`specplug preset trtllm specplug-suffix`) and start with `specplug trtllm serve`"
        ]
    problems: list[str] = []
    merged = _check_model(spec, config, schema, where, problems, backend)
    if not problems:
        _check_rules(merged, config, where, problems, backend)
        for name, value in merged.items():
            nested = _model_of(config["fields"][name]["type"], schema["models"]) if name in config["fields"] else None
            if nested is not None and isinstance(value, SimpleNamespace):
                _check_rules(vars(value), schema["models"][nested], f"{where}.{name}", problems, backend)
    return problems


class CheckedYaml:
    """A checked model.yaml: ``engine`` (what TensorRT-LLM gets: the file minus the specplug block)
    and ``settings`` (the specplug block validated, or None when the file has none)."""

    def __init__(self, engine: dict[str, Any], settings: DrafterSettings | None) -> None:
        self.engine = engine
        self.settings = settings


def check_model_yaml(
    data: object,
    source: str = "model.yaml",
    *,
    backend: str = "pytorch",
    schema: Mapping[str, Any] | None = None,
    model: str | None = None,
) -> CheckedYaml:
    """Check a parsed model.yaml; raise :class:`TrtllmConfigError` listing every mistake (``model``: the
    served model, named where the specplug block asks for a drafter it has not).

    Top-level keys other than ``speculative_config`` and ``specplug`` are TensorRT-LLM's own,
    passed through unchanged and checked by TensorRT-LLM when it starts.
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise TrtllmConfigError(f"{source}: the file holds {type(data).__name__}, not a mapping of LLM arguments")
    engine = {key: value for key, value in data.items() if key != BLOCK}
    settings = None
    problems: list[str] = []
    if BLOCK in data:
        if engine.get(SPEC_KEY) is not None:
            problems.append(
                f"{source}: has both `{BLOCK}:` and `{SPEC_KEY}:`; the specplug block becomes the speculative config, "
                "so keep one of them"
            )
        try:
            settings = read_settings(data[BLOCK], source, model=model)
        except TrtllmConfigError as error:
            problems.append(str(error))
    elif SPEC_KEY in engine and engine[SPEC_KEY] is not None:
        problems += check_speculative_config(engine[SPEC_KEY], source, backend=backend, schema=schema)
    if problems:
        raise TrtllmConfigError("\n".join(problems))
    return CheckedYaml(engine, settings)
