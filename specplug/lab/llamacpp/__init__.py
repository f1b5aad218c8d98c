"""Measuring llama.cpp: llama-server settings side by side, tuning presets, in-process drafters.

Built on the llama.cpp adapter's process runner (:class:`specplug_adapters.llamacpp.LlamaServer`):

- :func:`measure_settings` runs settings in interleaved rounds against plain decoding;
- :func:`tune` measures a grid of llama.cpp's n-gram settings and writes the fastest as a
  preset (``specplug tune llama-server``);
- :func:`agreement` tells whether a speculative run's tokens match plain greedy decoding
  (or part from it only at a near-tie);
- :func:`load_prompts` / :func:`shipped_prompts` read sample prompts (JSONL).

The in-process measurement (``_inprocess``, needing llama-cpp-python) and the README's demo
(``python -m specplug.lab.llamacpp._demo``) are imported only when used.
"""

from __future__ import annotations

from specplug.lab.llamacpp._measure import (
    Agreement,
    Measurement,
    Setting,
    agreement,
    first_divergence,
    measure_settings,
)
from specplug.lab.llamacpp._prompts import Prompt, load_prompts, shipped_prompts
from specplug.lab.llamacpp._tune import DEFAULT_CANDIDATES, select_candidates, tune

__all__ = [
    "DEFAULT_CANDIDATES",
    "Agreement",
    "Measurement",
    "Prompt",
    "Setting",
    "agreement",
    "first_divergence",
    "load_prompts",
    "measure_settings",
    "select_candidates",
    "shipped_prompts",
    "tune",
]
