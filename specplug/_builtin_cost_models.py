"""The built-in cost-model presets: every ``specplug/data/cost/*.toml`` file, by its stem."""

from __future__ import annotations

from importlib import resources

from specplug._cost._files import load_cost_model
from specplug._hookimpl import hookimpl
from specplug._registry import CostModelRegistrar


@hookimpl
def specplug_register_cost_models(registrar: CostModelRegistrar) -> None:
    folder = resources.files("specplug.data") / "cost"
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".toml"):
            with resources.as_file(entry) as path:
                model = load_cost_model(path)
            summary = model.description.splitlines()[0] if model.description else f"linear model {model.name}"
            registrar.add(entry.name[: -len(".toml")], model, summary=summary, origin="specplug.cost")
