"""A random Llama small enough for two CPU ranks, for the engines' tensor-parallel tests: 4 attention heads and
2 KV heads (any split of 2 divides them; SmolLM2's 9 heads do not), head_dim 64 (the CPU attention's smallest),
with the test model's tokenizer. Its greedy text repeats itself, so the lookups have drafts to verify."""

from __future__ import annotations

import shutil
from pathlib import Path


def tiny_llama(model_dir: str, out_dir: str) -> None:
    """Write the random Llama into ``out_dir`` with ``model_dir``'s tokenizer and generation config."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, torch_dtype="float32",
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    if (Path(model_dir) / "generation_config.json").is_file():
        shutil.copy(Path(model_dir) / "generation_config.json", Path(out_dir) / "generation_config.json")
