"""Cost-model files: TOML in, TOML out, and errors that name the file, line and field.

A file looks like this (seconds; every coefficient >= 0)::

    name = "llama-3.1-8b-h100"
    description = "where the numbers come from"
    step_overhead = 1.21e-3

    [verify]
    per_kv_token = 3.93e-8
    per_batched_token = 2.10e-5
    fixed = 5.89e-3

    [draft.neural]
    per_kv_token = 2.38e-9
    per_draft_token = 8.41e-7
    fixed = 2.14e-3

    [draft.lookup]
    verify_fraction = 0.005875
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from pydantic import ValidationError

from specplug._cost._linear import DRAFT_KINDS, LinearCostModel
from specplug._errors import CostModelError
from specplug._inputs import InputFileError, parse_problem, read_text

__all__ = ["dump_cost_model", "load_cost_model"]

_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+)\s*=")


def _field_line(text: str, loc: tuple[str, ...]) -> int:
    """The line (1-based) where the field at ``loc`` is set, or its table begins, or 1.

    A missing field is reported at its table's header, the best place to add it.
    """
    table: tuple[str, ...] = ()
    best = 1
    for number, line in enumerate(text.splitlines(), start=1):
        header = _TABLE.match(line)
        if header:
            table = tuple(part.strip().strip('"') for part in header.group(1).split("."))
            if table == loc[: len(table)] and len(table) > 0:
                best = number
            continue
        key = _KEY.match(line)
        if key and table + (key.group(1),) == loc:
            return number
    return best


def load_cost_model(path: str | Path) -> LinearCostModel:
    """Read a linear cost model from a TOML file; errors name the file, line and field."""
    path = Path(path)
    try:
        text = read_text(path)
    except InputFileError as error:
        raise CostModelError(f"cost model file {error}") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CostModelError(f"{path}: not valid TOML: {error}") from None
    except (RecursionError, ValueError) as error:  # tomllib raises these bare for deep nesting, huge ints
        problem = parse_problem(error)
        if problem is None:
            raise
        raise CostModelError(f"{path}: not valid TOML: {problem}") from None
    data.setdefault("name", path.stem)
    try:
        return LinearCostModel.model_validate(data)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            loc = tuple(str(part) for part in item["loc"])
            field = ".".join(loc) or "(file)"
            line = _field_line(text, loc)
            if not loc:  # a rule over the whole model
                problems.append(f"{path}: {item['msg'].removeprefix('Value error, ')}")
            elif item["type"] == "missing":
                problems.append(f"{path}:{line}: field {field} is missing")
            elif item["type"] == "extra_forbidden":
                problems.append(f"{path}:{line}: field {field} is not known")
            else:
                problems.append(f"{path}:{line}: field {field} = {item.get('input')!r:.40}: {item['msg']}")
        raise CostModelError("; ".join(problems)) from None


def dump_cost_model(model: LinearCostModel) -> str:
    """The TOML text of ``model``; :func:`load_cost_model` reads it back unchanged."""
    lines = [f"name = {_quote(model.name)}"]
    if model.description:
        lines.append(f"description = {_quote(model.description)}")
    lines.append(f"step_overhead = {model.step_overhead_s!r}")
    lines += ["", "[verify]"]
    lines += [f"{key} = {value!r}" for key, value in model.verify.model_dump().items()]
    for kind in DRAFT_KINDS:
        term = getattr(model.draft, kind)
        lines += ["", f"[draft.{kind}]"]
        lines += [f"{key} = {value!r}" for key, value in term.model_dump().items() if value]
        if not any(term.model_dump().values()):
            lines.append("fixed = 0.0")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
