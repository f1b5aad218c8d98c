"""Builds the shipped prompt files (``prompts/*.jsonl``) from real text.

- ``code_edit*.jsonl``: functions taken with ``ast`` from specplug's own source files, each
  with an edit to make (rename, docstring, type hints, logging); the answer is mostly the
  function again, which is what code-editing assistants spend their tokens on.
- ``agentic.jsonl``: an agent loop transcript (tool call, tool result holding a source file,
  the next tool call to write) over the same files.
- ``chat.jsonl``: first turns of Spec-Bench questions (Apache-2.0, see ``SPEC_BENCH.md``).

Prompts are raw text in a plain "instruction, then answer" layout, so base models (Gemma 3
270M) and instruct models (SmolLM2) both continue them. Run from the repository root::

    .venv/bin/python -m specplug_adapters.llamacpp._make_prompts [SPEC_BENCH_QUESTIONS]
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

#: (file, function or Class.method, edit instruction); the first half tunes, the second half is held out
CODE_EDITS: list[tuple[str, str, str]] = [
    ("specplug/_contract.py", "as_token_array", "Rename the parameter `tokens` to `values` everywhere."),
    ("specplug/_guard.py", "GuardedProposer.propose", "Add a short comment above each `if`."),
    ("specplug/_registry.py", "MethodRegistrar.add", "Rename `origin` to `source_module` everywhere."),
    ("specplug/_catalog.py", "_describe", "Add a docstring and type hints to every local variable."),
    ("specplug/_contract.py", "Proposer.extend", "Rename `accepted` to `n_accepted` everywhere."),
    ("specplug/_manager.py", "build_plugin_manager", "Rename `manager` to `plugins` everywhere."),
    ("specplug/_guard.py", "GuardedProposer._fault", "Replace the logging call by a call to `print` with the same text."),
    ("specplug/_contract.py", "Proposer.propose_batch", "Rename `items` to `pending` and add a comment per line."),
]

#: Spec-Bench categories and how many first turns of each go into chat.jsonl
CHAT_CATEGORIES = {"writing": 2, "qa": 2, "summarization": 2, "rag": 2}


def _function_source(path: Path, dotted: str) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for part in dotted.split("."):
        node = next(
            (n for n in scope if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part), None
        )
        if node is None:
            raise SystemExit(f"{path}: no {dotted}")
        scope = node.body  # type: ignore[attr-defined]
    lines = path.read_text(encoding="utf-8").splitlines()
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])  # type: ignore[union-attr]
    body = lines[start - 1 : node.end_lineno]  # type: ignore[union-attr]
    indent = min(len(line) - len(line.lstrip()) for line in body if line.strip())
    return "\n".join(line[indent:] for line in body)


def code_edit_prompts() -> Iterator[dict[str, str]]:
    for index, (file, function, instruction) in enumerate(CODE_EDITS, start=1):
        source = _function_source(ROOT / file, function)
        prompt = (
            f"Edit this Python function from {file}. {instruction} "
            "Reply with the complete edited function only.\n\n"
            f"```python\n{source}\n```\n\nEdited function:\n\n```python\n"
        )
        yield {"id": f"code-edit-{index}-{function}", "prompt": prompt}


def agentic_prompts() -> Iterator[dict[str, str]]:
    for index, (file, function, instruction) in enumerate(CODE_EDITS[:4], start=1):
        source = _function_source(ROOT / file, function)
        call = json.dumps({"tool": "read_function", "file": file, "name": function})
        prompt = (
            "You are a coding agent. Answer with one JSON tool call per turn. Tools: read_function(file, name), "
            "write_function(file, name, source), run_tests(path).\n\n"
            f"Task: in {file}, edit `{function}`: {instruction}\n\n"
            f"Assistant: {call}\n\n"
            f"Tool result:\n```python\n{source}\n```\n\n"
            f'Assistant: {{"tool": "write_function", "file": "{file}", "name": "{function}", "source": "'
        )
        yield {"id": f"agentic-{index}-{function}", "prompt": prompt}


def chat_prompts(questions: Path) -> Iterator[dict[str, str]]:
    wanted = dict(CHAT_CATEGORIES)
    for line in questions.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if wanted.get(item["category"], 0) > 0:
            wanted[item["category"]] -= 1
            prompt = f"Question: {item['turns'][0].strip()}\n\nAnswer:"
            yield {"id": f"spec-bench-{item['question_id']}-{item['category']}", "prompt": prompt}


def _write(name: str, items: list[dict[str, str]]) -> None:
    path = HERE / "prompts" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items), encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} ({len(items)} prompts)")


def main(argv: list[str]) -> None:
    edits = list(code_edit_prompts())
    half = len(edits) // 2
    _write("code_edit_tune.jsonl", edits[:half])
    _write("code_edit.jsonl", edits[half:])
    _write("agentic.jsonl", list(agentic_prompts()))
    questions = Path(argv[0]) if argv else ROOT.parent / "shared" / "data" / "spec_bench" / "question.jsonl"
    _write("chat.jsonl", list(chat_prompts(questions)))


if __name__ == "__main__":
    main(sys.argv[1:])
