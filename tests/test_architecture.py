"""The rings hold: arrows between specplug's packages point inward only, and no import cycle.

Read from the installed packages' source with ast, so it sees every import: top-level,
inside functions, under ``TYPE_CHECKING``, module names handed to importlib as strings, and the
packages an import runs first (importing ``a.b.c`` runs ``a.b``).

    core         specplug (all but the three below)  imports the core only, and no engine library
    engine layer specplug.engine                     imports the core; no engine library
    adapters     specplug_adapters.<engine>          the core, the engine layer, its own engine
    lab          specplug.lab                        anything but the CLI
    CLI          specplug.cli                        anything
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

PACKAGES = ("specplug", "specplug_adapters")
#: inference engines and GPU stacks: the core and the engine layer never import them
_IMPORTERS = frozenset({"import_module", "__import__", "find_spec"})
ENGINE_LIBRARIES = frozenset({"vllm", "llama_cpp", "sglang", "tensorrt_llm", "torch", "triton", "arctic_inference"})


def ring(module: str) -> str:
    """The ring of a specplug module.

    >>> ring("specplug.proposers.lookup.suffix"), ring("specplug.engine._sync"), ring("specplug_adapters.vllm")
    ('core', 'engine', 'adapter:vllm')
    """
    parts = module.split(".")
    if parts[0] == "specplug_adapters":
        return f"adapter:{parts[1]}" if len(parts) > 1 else "adapter"
    if len(parts) > 1 and parts[1] in ("engine", "lab", "cli"):
        return parts[1]
    return "core"


def allowed(source: str, target: str) -> bool:
    """Whether a module of ring ``source`` may import one of ring ``target``."""
    if source == target or target == "core":
        return True
    if source == "core":
        return False
    if source == "engine":
        return False
    if source.startswith("adapter"):
        return target in ("engine", "adapter")  # an adapter's glue, never another adapter's or the lab
    if source == "lab":
        return target != "cli"
    return source == "cli"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        assert spec is not None and spec.submodule_search_locations, f"{package} is not installed"
        root = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(root).with_suffix("").parts
            name = ".".join((package, *relative))
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(module: str, path: Path, known: set[str]) -> set[str]:
    """Modules and external top-level names that ``module`` imports (resolved, incl. importlib strings)."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    targets: set[str] = set()

    def add(name: str) -> None:
        # the longest known module that ``name`` starts with (``from pkg import name`` may name a module)
        while name and name not in known and "." in name:
            name = name.rsplit(".", 1)[0]
        targets.add(name if name in known else name.split(".")[0])

    # module names as strings count where code can import them: importlib's arguments and the
    # entries of literal tables (a plugin list); a logger named like its module does not
    named: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in _IMPORTERS:
            named.extend(node.args[:1])
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            named.extend(node.elts)
        elif isinstance(node, ast.Dict):  # values: a plugin table's keys are plugin names
            named.extend(node.values)
    for node in named:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            targets.add(node.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                add(f"{base}.{alias.name}")
    # importing a.b.c runs the package a.b first: an implied arrow, except into the module's own
    # packages (already initialising while it is imported)
    own = {".".join(module.split(".")[:end]) for end in range(1, module.count(".") + 2)}
    for target in list(targets):
        parts = target.split(".")
        targets.update(p for end in range(1, len(parts)) if (p := ".".join(parts[:end])) in known and p not in own)
    targets.discard(module)
    return targets


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {module: _imports(module, path, known) for module, path in modules.items()}


def test_the_graph_covers_every_ring(graph):
    rings = {ring(module) for module in graph}
    assert {"core", "engine", "lab", "cli", "adapter:vllm", "adapter:llamacpp", "adapter:trtllm"} <= rings


def test_arrows_point_inward_only(graph):
    bad = sorted(
        f"{module} ({ring(module)}) -> {target} ({ring(target)})"
        for module, targets in graph.items()
        for target in targets
        if target in graph and not allowed(ring(module), ring(target))
    )
    assert not bad, "imports against the rings:\n" + "\n".join(bad)


def test_core_and_engine_layer_import_no_engine(graph):
    bad = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if ring(module) in ("core", "engine")
        for target in targets
        if target.split(".")[0] in ENGINE_LIBRARIES
    )
    assert not bad, "engine libraries imported by the core or the engine layer:\n" + "\n".join(bad)


def test_no_import_cycle(graph):
    internal = {module: {target for target in targets if target in graph} for module, targets in graph.items()}
    cycles = [_shortest_cycle(internal, component) for component in _cycles(internal)]
    assert not cycles, "import cycles (one loop of each):\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def _shortest_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """The shortest loop from the component's first module back to it (breadth-first)."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & members):
                if target == start:
                    return [*paths[node], start]
                if target not in paths:
                    paths[target] = [*paths[node], target]
                    following.append(target)
        frontier = following
    return component


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_checks_catch_a_bad_arrow_and_a_cycle():
    assert not allowed("core", "lab") and not allowed("engine", "adapter:vllm")
    assert not allowed("adapter:vllm", "adapter:llamacpp") and not allowed("adapter:vllm", "lab")
    assert allowed("lab", "adapter:llamacpp") and allowed("cli", "lab") and allowed("adapter:vllm", "engine")
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
