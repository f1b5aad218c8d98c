"""A random-weight EAGLE head for the test model: vLLM's real EAGLE path, without trained weights.

Its drafts are near-random, so it says nothing about acceptance; it makes vLLM run its
``EagleProposer`` (drafting after bookkeeping with ``disable_padded_drafter_batch``), the path
that MTP and EAGLE models take on GPUs, so the hybrid overlay is exercised there too.
"""

from __future__ import annotations

import json
from pathlib import Path

#: one decoder layer in the target's shape, plus EAGLE's fc over [embedding, hidden state]
_LAYER = {
    "self_attn.q_proj.weight": ("hidden", "hidden"),
    "self_attn.k_proj.weight": ("kv", "hidden"),
    "self_attn.v_proj.weight": ("kv", "hidden"),
    "self_attn.o_proj.weight": ("hidden", "hidden"),
    "mlp.gate_proj.weight": ("inter", "hidden"),
    "mlp.up_proj.weight": ("inter", "hidden"),
    "mlp.down_proj.weight": ("hidden", "inter"),
}


def make_eagle_head(target: str | Path, out: str | Path, seed: int = 0) -> Path:
    """Write an EAGLE-1 head (``EagleLlamaForCausalLM``, one layer) for the Llama model at ``target``."""
    import torch
    from safetensors.torch import save_file

    config = json.loads((Path(target) / "config.json").read_text())
    hidden, heads = config["hidden_size"], config["num_attention_heads"]
    head_dim = config.get("head_dim", hidden // heads)
    sizes = {"hidden": hidden, "kv": config["num_key_value_heads"] * head_dim, "inter": config["intermediate_size"]}
    generator = torch.Generator().manual_seed(seed)

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.02

    tensors = {f"layers.0.{name}": normal(sizes[rows], sizes[cols]) for name, (rows, cols) in _LAYER.items()}
    tensors["layers.0.post_attention_layernorm.weight"] = torch.ones(hidden)
    tensors["fc.weight"] = normal(hidden, 2 * hidden)
    tensors["embed_tokens.weight"] = normal(config["vocab_size"], hidden)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(out / "model.safetensors"))
    head = {key: config[key] for key in ("hidden_size", "intermediate_size", "num_attention_heads",
                                         "num_key_value_heads", "head_dim", "vocab_size", "rms_norm_eps",
                                         "max_position_embeddings", "bos_token_id", "eos_token_id",
                                         "hidden_act", "rope_parameters") if key in config}
    head.update(architectures=["EagleLlamaForCausalLM"], model_type="llama", num_hidden_layers=1,
                tie_word_embeddings=False, dtype="float32")
    (out / "config.json").write_text(json.dumps(head, indent=1))
    return out
