"""The project builds into a wheel and an sdist that pass ``twine check``, and the wheel works installed.

The wheel goes into a fresh virtual environment (made from the base interpreter, so nothing of
the environment running the tests is visible) with its dependencies, and everything is checked
from there with the working directory outside the checkout: the ``specplug`` command, the
entry points every engine looks for, and each kind of data file the code loads through
``importlib.resources``. What to expect is read from the checkout (pyproject.toml, the data
folders, the registries of this process), so a file added to the tree but not to the package
data, or an entry point that does not load, fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import specplug
import specplug.lab.peers as peers
from specplug.cost import cost_models
from specplug.lab import peers
from specplug.lab.bench._tracegen import PROMPT_SETS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
ENGINE_GROUPS = ("vllm.general_plugins", "sglang.srt.plugins", "specplug")

# Runs inside the fresh venv; prints what the installed package resolves, as JSON.
PROBE = r"""
import json
import pkgutil
from importlib import metadata
from pathlib import Path

import specplug, specplug_adapters, specplug_presets
from specplug._presets import list_presets
from specplug.cost import cost_models
from specplug.lab import peers
from specplug.lab.bench import default_traces
from specplug.lab.bench._tracegen import PROMPT_SETS, load_prompt_sets
from specplug.lab.llamacpp._prompts import load_prompts, shipped_prompts
from specplug_adapters.trtllm._schema import load_schema

packages = sorted(
    info.name for top in (specplug, specplug_adapters, specplug_presets)
    for info in pkgutil.walk_packages(top.__path__, top.__name__ + ".") if info.ispkg
) + ["specplug", "specplug_adapters", "specplug_presets"]
points = {}
for group in GROUPS:
    for point in metadata.entry_points(group=group):
        if point.dist.name == "specplug":
            loaded = point.load()
            module = getattr(loaded, "__module__", None) or loaded.__name__
            points.setdefault(group, {})[point.name] = [point.value, __import__(module, fromlist=["_"]).__file__]
raw = Path(str(shipped_prompts("code_edit"))).parent
print(json.dumps({
    "files": [specplug.__file__, specplug_adapters.__file__, specplug_presets.__file__],
    "packages": sorted(packages),
    "entry_points": points,
    "presets": sorted(f"{p.engine}/{p.name}" for p in list_presets() if p.text.strip()),
    "cost_models": sorted(cost_models()),
    "traces": sorted(p.name for p in default_traces() if p.stat().st_size),
    "prompt_sets": sorted(name for name in PROMPT_SETS if load_prompt_sets([name])),
    "raw_prompts": sorted(p.stem for p in raw.glob("*.jsonl") if load_prompts(shipped_prompts(p.stem))),
    "trtllm_schema": bool(load_schema()),
    "peers": sorted(peers.peer_specs()),
}))
"""


def _run(command: list[str | Path], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    result = subprocess.run([str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], cwd=out)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding the wheel and its dependencies (pip's cache or the index)."""
    where = tmp_path_factory.mktemp("venv") / "venv"
    _run([sys.executable, "-m", "venv", where], cwd=where.parent)
    (wheel,) = dist.glob("*.whl")
    _run([where / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel], cwd=where.parent)
    return where


@pytest.fixture(scope="module")
def probe(venv: Path) -> dict:
    code = f"GROUPS = {ENGINE_GROUPS!r}\n{PROBE}"
    return json.loads(_run([venv / "bin" / "python", "-c", code], cwd=venv.parent).stdout)


def test_wheel_and_sdist_pass_twine_check(dist: Path) -> None:
    assert sorted(path.suffix for path in dist.iterdir()) == [".gz", ".whl"]
    result = _run([sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir())], cwd=dist)
    assert result.stdout.count("PASSED") == 2


def test_the_installed_wheel_is_what_runs(venv: Path, probe: dict) -> None:
    for file in probe["files"]:
        assert Path(file).is_relative_to(venv), f"{file} is not from the installed wheel"
        assert not Path(file).is_relative_to(ROOT)


def test_every_package_of_the_checkout_is_in_the_wheel(probe: dict) -> None:
    imports = {"specplug": "specplug", "adapters": "specplug_adapters", "presets": "specplug_presets"}
    checkout = {
        ".".join((imports[init.relative_to(ROOT).parts[0]], *init.relative_to(ROOT).parts[1:-1]))
        for top in imports for init in (ROOT / top).rglob("__init__.py")
    }
    assert checkout <= set(probe["packages"]), sorted(checkout - set(probe["packages"]))


def test_specplug_methods_runs_from_the_wheel(venv: Path) -> None:
    result = _run([venv / "bin" / "specplug", "methods"], cwd=venv.parent)
    for name in specplug.methods():
        assert name in result.stdout


def test_every_declared_entry_point_loads_from_the_wheel(venv: Path, probe: dict) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]
    assert set(ENGINE_GROUPS) <= set(declared)
    for group in ENGINE_GROUPS:
        found = probe["entry_points"].get(group, {})
        assert {name: value for name, (value, _) in found.items()} == declared[group], group
        for _, module_file in found.values():
            assert Path(module_file).is_relative_to(venv)
    # the lab's peers, registered through the `specplug` group, are there as in the checkout
    assert probe["peers"] == sorted(peers.peer_specs())


def test_every_kind_of_shipped_data_resolves_from_the_wheel(probe: dict) -> None:
    def stems(folder: Path, *suffixes: str) -> list[str]:
        return sorted(path.stem for path in folder.iterdir() if path.suffix in suffixes)

    presets = [f"{engine.name}/{name}" for engine in sorted((ROOT / "presets").iterdir()) if engine.is_dir() and not engine.name.startswith("_")
               for name in stems(engine, ".ini", ".json", ".yaml", ".yml", ".toml")]  # fmt: skip
    assert probe["presets"] == sorted(presets)
    assert probe["cost_models"] == stems(ROOT / "specplug" / "data" / "cost", ".toml") == sorted(cost_models())
    assert probe["traces"] == sorted(path.name for path in (ROOT / "specplug" / "lab" / "data" / "traces").glob("*.jsonl"))
    assert probe["prompt_sets"] == sorted(PROMPT_SETS)
    assert probe["raw_prompts"] == stems(ROOT / "specplug" / "lab" / "data" / "prompts" / "raw", ".jsonl")
    assert probe["trtllm_schema"]
