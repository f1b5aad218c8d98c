"""Cost models: what a verification step and a draft cost, so speculation can aim at goodput.

>>> from specplug.cost import cost_model, plain_step_time
>>> model = cost_model("llama-3.1-8b-h100")
>>> round(plain_step_time(model, batch=1, context=1000) * 1e3, 2)   # milliseconds
7.15
"""

from specplug._cost._files import dump_cost_model, load_cost_model
from specplug._cost._linear import DRAFT_KINDS, CostModel, DraftTable, DraftTerm, LinearCostModel, VerifyTerm
from specplug._errors import CostModelError
from specplug._plugins import cost_model, cost_models
from specplug._registry import CostModelRegistrar, CostModelSpec
from specplug._cost._online import OnlineCostModel
from specplug._cost._steps import plain_step_time, spec_step_time, spec_step_times

__all__ = [
    "DRAFT_KINDS",
    "CostModel",
    "CostModelError",
    "CostModelRegistrar",
    "CostModelSpec",
    "DraftTable",
    "DraftTerm",
    "LinearCostModel",
    "OnlineCostModel",
    "VerifyTerm",
    "cost_model",
    "cost_models",
    "dump_cost_model",
    "load_cost_model",
    "plain_step_time",
    "spec_step_time",
    "spec_step_times",
]
