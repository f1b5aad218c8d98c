"""Measuring llama.cpp: llama-server settings side by side, tuning presets, in-process drafters.

Built on the llama.cpp adapter's process runner (:class:`specplug_adapters.llamacpp.LlamaServer`):

- :func:`measure_settings` runs settings in interleaved rounds against plain decoding;
- :func:`tune` measures a grid of llama.cpp's n-gram settings and writes the fastest as a
  preset (``specplug tune llama-server``);
- :func:`chain_settings` builds chains of a lookup setting and a model drafter (``tune --draft``),
  :func:`check_drafter` refuses a drafter type the binary lacks or a draft file that is no GGUF;
- :func:`check_mtp_settings` refuses a ``draft-mtp`` setting on a GGUF without MTP layers
  (``blk.N.nextn.*`` tensors) before any server starts;
- :func:`agreement` tells whether a speculative run's tokens match plain greedy decoding
  (or part from it only at a near-tie);
- :func:`load_prompts` / :func:`shipped_prompts` read sample prompts (JSONL).

The in-process measurement (``_inprocess``, needing llama-cpp-python) and the README's demo
(``python -m specplug.lab.llamacpp._demo``) are imported only when used.
"""

from __future__ import annotations

from specplug.lab.llamacpp._chain import CHAIN_LOOKUPS, DRAFT_LENGTHS, Drafter, chain_settings, check_drafter, drafter_types, with_drafter
from specplug.lab.llamacpp._measure import (
    Agreement,
    Measurement,
    Setting,
    agreement,
    first_divergence,
    measure_settings,
)
from specplug.lab.llamacpp._prompts import Prompt, load_prompts, shipped_prompts
from specplug.lab.llamacpp._mtp import MTP_TENSOR, check_mtp_settings, mtp_tensors, uses_model_mtp
from specplug.lab.llamacpp._tune import DEFAULT_CANDIDATES, preset_settings, select_candidates, tune

__all__ = [
    "CHAIN_LOOKUPS",
    "DEFAULT_CANDIDATES",
    "DRAFT_LENGTHS",
    "MTP_TENSOR",
    "Agreement",
    "Drafter",
    "Measurement",
    "Prompt",
    "Setting",
    "agreement",
    "chain_settings",
    "check_drafter",
    "check_mtp_settings",
    "drafter_types",
    "first_divergence",
    "load_prompts",
    "measure_settings",
    "mtp_tensors",
    "preset_settings",
    "select_candidates",
    "shipped_prompts",
    "tune",
    "uses_model_mtp",
    "with_drafter",
]
