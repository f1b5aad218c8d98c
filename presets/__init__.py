"""Presets in each engine's own format (llama-server flags and INI, vLLM JSON, SGLang flags, TRT-LLM YAML)."""
