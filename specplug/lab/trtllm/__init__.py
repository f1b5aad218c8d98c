"""Tuning TensorRT-LLM's native speculation knobs (``specplug trtllm tune``).

TensorRT-LLM's own drafters (the ``sa_config`` suffix automaton, NGram, SA) are modeled from
its source and replayed over the lab's traces, so their knobs are chosen without a GPU:
:func:`tune` makes the choices and :func:`render_presets` writes them as the model.yaml
presets shipped in ``presets/trtllm``. The adapter (:mod:`specplug_adapters.trtllm`) runs
specplug's methods inside TensorRT-LLM and needs none of this.
"""

from __future__ import annotations

from specplug.lab.trtllm._tune import TuneReport, compile_schedule, load_records, render_presets, tune

__all__ = ["TuneReport", "compile_schedule", "load_records", "render_presets", "tune"]
