#!/usr/bin/env python3
"""Extract TensorRT-LLM's speculative-config schema from its ``llm_args.py`` into JSON.

    python scripts/extract_trtllm_schema.py /tmp/llm_args.py --commit <sha> \
        --out adapters/trtllm/data/llm_args_schema.json

The file is parsed with ``ast``, never imported (it needs torch and TensorRT-LLM's
bindings). What is recorded, per class of the ``SpeculativeConfig`` union and the models
its fields nest: the ``decoding_type`` discriminator value, each field's annotation,
default, aliases and status, whether unknown keys are forbidden, what
``supports_backend`` returns, and every ``raise ValueError`` of its validators with the
conditions that lead to it (the enclosing ``if``/``elif``/``else`` tests and loops). The
JSON names the source it came from (repository, path, commit, sha256), so a preset check
can say which TensorRT-LLM it was checked against.

The source is Apache-2.0 (NVIDIA CORPORATION & AFFILIATES); the JSON holds facts taken
from it, with that attribution. The script never fetches anything: give it a downloaded
``llm_args.py`` (or an excerpt holding the classes, which is said in --note).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

FORMAT = 1
UNION_NAME = "SpeculativeConfig"
DISCRIMINATOR = "decoding_type"
#: base classes whose models forbid unknown keys, where the file itself does not say so
#: (TensorRT-LLM's ``llmapi/utils.py`` defines ``StrictBaseModel`` with ``extra="forbid"``)
FORBIDDING_BASES = ("StrictBaseModel",)
_VALIDATORS = ("field_validator", "model_validator")


def _unparse(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) when ``node`` is a JSON-able literal, else (False, None)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False, None
    try:
        json.dumps(value)
    except TypeError:
        if isinstance(value, (set, frozenset)):
            return True, sorted(value)
        return False, None
    return True, value


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        func = node.func
        return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
    return None


def _message(node: ast.AST | None) -> str:
    """A raise's message as written: string parts kept, ``{expr}`` parts shown as they are."""
    if isinstance(node, ast.Call) and node.args:
        arg = node.args[0]
        parts: list[str] = []
        for piece in arg.values if isinstance(arg, ast.JoinedStr) else [arg]:
            if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                parts.append(piece.value)
            elif isinstance(piece, ast.FormattedValue):
                parts.append("{" + ast.unparse(piece.value) + "}")
            elif isinstance(piece, ast.JoinedStr):
                parts.append(_message(ast.Call(func=ast.Name("x"), args=[piece], keywords=[])))
            else:
                parts.append(ast.unparse(piece))
        return "".join(parts)
    return _unparse(node) or ""


def _field(node: ast.AnnAssign) -> dict[str, Any]:
    info: dict[str, Any] = {"type": ast.unparse(node.annotation), "required": False}
    value = node.value
    if value is None:
        info["required"] = True
        return info
    if _call_name(value) in ("Field", "PydanticField"):
        keywords = {kw.arg: kw.value for kw in value.keywords if kw.arg}
        default = value.args[0] if value.args else keywords.get("default")
        if default is None and "default_factory" not in keywords:
            info["required"] = True
        elif default is not None:
            ok, literal = _literal(default)
            if ok and not (isinstance(default, ast.Constant) and default.value is Ellipsis):
                info["default"] = literal
            elif isinstance(default, ast.Constant) and default.value is Ellipsis:
                info["required"] = True
            else:
                info["default_expr"] = ast.unparse(default)
        if "default_factory" in keywords:
            info["default_expr"] = ast.unparse(keywords["default_factory"]) + "()"
        aliases = keywords.get("validation_alias") or keywords.get("alias")
        if aliases is not None:
            names = [_literal(arg)[1] for arg in aliases.args] if isinstance(aliases, ast.Call) else [_literal(aliases)[1]]
            info["aliases"] = [name for name in names if isinstance(name, str)]
        for key in ("status", "description", "ge", "gt", "le", "lt", "min_length", "init"):
            if key in keywords:
                ok, literal = _literal(keywords[key])
                info[key] = literal if ok else ast.unparse(keywords[key])
        return info
    ok, literal = _literal(value)
    if ok:
        info["default"] = literal
    else:
        info["default_expr"] = ast.unparse(value)
    return info


def _checks(body: list[ast.stmt], path: list[str], loops: list[str], out: list[dict[str, Any]]) -> None:
    """Every ``raise`` under ``body`` with the conditions (and loops) on the way to it."""
    for stmt in body:
        if isinstance(stmt, ast.Raise):
            out.append(
                {
                    "when": " and ".join(f"({cond})" for cond in path) if path else "True",
                    "loops": list(loops),
                    "error": _call_name(stmt.exc) or _unparse(stmt.exc),
                    "message": _message(stmt.exc),
                }
            )
        elif isinstance(stmt, ast.If):
            test = ast.unparse(stmt.test)
            _checks(stmt.body, [*path, test], loops, out)
            _checks(stmt.orelse, [*path, f"not ({test})"], loops, out)
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            header = f"for {ast.unparse(stmt.target)} in {ast.unparse(stmt.iter)}"
            _checks(stmt.body, path, [*loops, header], out)
        elif isinstance(stmt, (ast.With, ast.Try, ast.While)):
            _checks(stmt.body, path, loops, out)


def _validator(node: ast.FunctionDef) -> dict[str, Any] | None:
    for decorator in node.decorator_list:
        name = _call_name(decorator)
        if name not in _VALIDATORS:
            continue
        assert isinstance(decorator, ast.Call)
        keywords = {kw.arg: _literal(kw.value)[1] for kw in decorator.keywords if kw.arg}
        fields = [_literal(arg)[1] for arg in decorator.args]
        checks: list[dict[str, Any]] = []
        _checks(node.body, [], [], checks)
        return {
            "name": node.name,
            "kind": name,
            "mode": keywords.get("mode", "after"),
            "fields": [field for field in fields if isinstance(field, str)],
            "checks": checks,
        }
    if node.name == "model_post_init":
        checks = []
        _checks(node.body, [], [], checks)
        return {"name": node.name, "kind": "model_post_init", "mode": "after", "fields": [], "checks": checks}
    return None


def _supports_backend(node: ast.FunctionDef) -> str | None:
    returns = [stmt for stmt in node.body if isinstance(stmt, ast.Return)]
    return ast.unparse(returns[0].value) if len(returns) == 1 and returns[0].value is not None else None


def _class(node: ast.ClassDef) -> dict[str, Any]:
    info: dict[str, Any] = {"bases": [ast.unparse(base) for base in node.bases], "fields": {}, "validators": []}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if name.startswith("_") or ast.unparse(stmt.annotation).startswith("ClassVar"):
                continue
            info["fields"][name] = _field(stmt)
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_config" for t in stmt.targets):
            if isinstance(stmt.value, ast.Call):
                for kw in stmt.value.keywords:
                    if kw.arg == "extra":
                        info["extra"] = _literal(kw.value)[1]
        elif isinstance(stmt, ast.FunctionDef):
            if stmt.name == "supports_backend":
                info["supports_backend"] = _supports_backend(stmt)
            validator = _validator(stmt)
            if validator is not None:
                info["validators"].append(validator)
    if isinstance(node.body[0], ast.Expr) and isinstance(getattr(node.body[0], "value", None), ast.Constant):
        info["doc"] = str(node.body[0].value.value).strip().splitlines()[0]
    return info


def _union_members(tree: ast.Module) -> list[str]:
    for stmt in tree.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else (stmt.targets[0] if isinstance(stmt, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == UNION_NAME and stmt.value is not None:
            return [node.id for node in ast.walk(stmt.value) if isinstance(node, ast.Name) and node.id.endswith("Config")]
    raise SystemExit(f"no `{UNION_NAME}` type alias found: is this TensorRT-LLM's llmapi/llm_args.py?")


def _resolve(name: str, classes: dict[str, dict[str, Any]], seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A class with its bases' fields, validators and settings merged in (nearest wins)."""
    own = classes[name]
    merged: dict[str, Any] = {"fields": {}, "validators": [], "extra": own.get("extra"), "supports_backend": own.get("supports_backend")}
    for base in reversed(own["bases"]):
        if base in FORBIDDING_BASES:
            merged["extra"] = merged["extra"] or "forbid"
        if base in classes and base not in seen:
            parent = _resolve(base, classes, (*seen, name))
            merged["fields"].update(parent["fields"])
            merged["validators"] += parent["validators"]
            merged["extra"] = merged["extra"] or parent["extra"]
            merged["supports_backend"] = merged["supports_backend"] or parent["supports_backend"]
    merged["fields"].update(own["fields"])
    # a subclass's validator of the same name replaces the base's (Python method lookup)
    names = {validator["name"] for validator in own["validators"]}
    merged["validators"] = [v for v in merged["validators"] if v["name"] not in names] + own["validators"]
    return merged


def extract(source: str, *, origin: dict[str, Any]) -> dict[str, Any]:
    """The schema JSON (as a dict) of the ``llm_args.py`` text ``source``."""
    tree = ast.parse(source)
    classes = {node.name: _class(node) for node in tree.body if isinstance(node, ast.ClassDef)}
    members = _union_members(tree)
    missing = [name for name in members if name not in classes]
    if missing:
        raise SystemExit(f"the {UNION_NAME} union names classes the file lacks: {', '.join(missing)}")
    configs: dict[str, Any] = {}
    nested: set[str] = set()
    for name in members:
        resolved = _resolve(name, classes)
        tag = resolved["fields"].get(DISCRIMINATOR, {})
        values = [node.value for node in ast.walk(ast.parse(tag.get("type", "None"))) if isinstance(node, ast.Constant)]
        if not values or not isinstance(values[0], str):
            raise SystemExit(f"{name}: no Literal {DISCRIMINATOR} annotation, cannot tell its tag")
        for field in resolved["fields"].values():
            nested.update(word for word in _words(field["type"]) if word in classes and word not in members)
        configs[values[0]] = {"class": name, "doc": classes[name].get("doc"), **resolved}
    models = {name: {"class": name, "doc": classes[name].get("doc"), **_resolve(name, classes)} for name in sorted(nested)}
    return {
        "format": FORMAT,
        "source": origin,
        "licence": "Facts extracted from NVIDIA TensorRT-LLM (Apache-2.0, (c) NVIDIA CORPORATION & AFFILIATES)",
        "union": {"name": UNION_NAME, "discriminator": DISCRIMINATOR, "members": members},
        "decoding_types": {tag: config["class"] for tag, config in configs.items()},
        "configs": configs,
        "models": models,
    }


def _words(annotation: str) -> list[str]:
    return [node.id for node in ast.walk(ast.parse(annotation)) if isinstance(node, ast.Name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("llm_args", type=Path, help="a downloaded tensorrt_llm/llmapi/llm_args.py")
    parser.add_argument("--commit", required=True, help="the TensorRT-LLM commit (or release tag) the file is from")
    parser.add_argument("--repo", default="NVIDIA/TensorRT-LLM")
    parser.add_argument("--path", default="tensorrt_llm/llmapi/llm_args.py")
    parser.add_argument("--note", default="", help="how the file was obtained (e.g. an excerpt of the classes)")
    parser.add_argument("--out", type=Path, help="JSON file to write (default: stdout)")
    args = parser.parse_args(argv)
    try:
        text = args.llm_args.read_text(encoding="utf-8")
    except OSError as error:
        print(f"extract_trtllm_schema: cannot read {args.llm_args}: {error.strerror}", file=sys.stderr)
        return 2
    origin = {
        "repo": args.repo,
        "path": args.path,
        "commit": args.commit,
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
        "chars": len(text),
        "note": args.note,
    }
    schema = extract(text, origin=origin)
    rendered = json.dumps(schema, indent=1, sort_keys=False) + "\n"
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(rendered, encoding="utf-8")
        print(f"wrote {args.out}: {len(schema['configs'])} decoding types from {args.repo}@{args.commit[:12]}")
    else:
        sys.stdout.write(rendered)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
