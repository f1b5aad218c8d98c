"""Tests of the TensorRT-LLM adapter (CPU, without TensorRT-LLM: stand-ins shaped like its sources)."""
