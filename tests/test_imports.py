"""The core's imports, read from the source with ``ast``: no cycle, and nothing outside the core.

Every import statement counts, wherever it is (inside a function, under ``TYPE_CHECKING``),
and importing ``a.b.c`` counts as importing the package ``a.b`` too (its ``__init__`` runs
first). A module's own packages are left out of those implied edges (they are initialising
while it is imported, the root ``specplug`` included); importing one explicitly, or a name
from it, counts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import specplug

ROOT = Path(specplug.__file__).parent
#: the rings outside the core; bench, peers, trace and perf are lab code until they move under specplug.lab
NOT_CORE = ("specplug.engine", "specplug.lab", "specplug.cli", "specplug.bench", "specplug.peers", "specplug.trace", "specplug.perf")
OUTSIDE = (*NOT_CORE, "specplug_adapters", "vllm", "llama_cpp", "sglang")


def _module_name(path: Path) -> str:
    parts = ["specplug", *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in ROOT.rglob("*.py")}


ALL = _modules()
CORE = {name: path for name, path in ALL.items() if not name.startswith(NOT_CORE)}


def _imports(name: str, path: Path) -> set[str]:
    """Every module ``name`` imports, with the packages each implies."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & ALL.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):  # some names are the package's own
                found.add(base)
    own = name.split(".")
    ancestors = {".".join(own[:end]) for end in range(1, len(own))}
    implied = set()
    for module in found:
        parts = module.split(".")
        implied.update(".".join(parts[:end]) for end in range(2, len(parts)))
    return {module for module in found | (implied - ancestors) if module != name}


def test_the_core_has_no_import_cycle():
    graph = {name: sorted(module for module in _imports(name, path) if module in CORE) for name, path in CORE.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in graph[module]:
            if state.get(target) == 1:
                cycle = path[path.index(target) :] + [target]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_the_core_imports_nothing_outside_it():
    # module names written as strings (importlib, entry points) count too
    quoted = re.compile(r"""["']((?:specplug|specplug_adapters|vllm|sglang|llama_cpp)(?:\.\w+)*)["']""")
    for name, path in CORE.items():
        imported = _imports(name, path) | set(quoted.findall(path.read_text(encoding="utf-8")))
        bad = sorted(module for module in imported if module.startswith(OUTSIDE))
        assert not bad, f"{name} imports {bad}"


def test_hookspecs_import_no_cost_module():
    assert not {module for module in _imports("specplug.hookspecs", CORE["specplug.hookspecs"]) if "cost" in module}
