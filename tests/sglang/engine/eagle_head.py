"""A random-weight EAGLE head for the test model, in the layout SGLang's ``LlamaForCausalLMEagle`` loads.

Its drafts are near-random, so it says nothing about acceptance; it makes SGLang run its real
EAGLE worker (draft forward, tree build, verify, draft extend) on this CPU, so the hybrid
overlay is exercised on the path a trained head takes on a GPU. SGLang shares the target's
embedding and LM head with an EAGLE-1 head, so the head holds one decoder layer (without its
input norm, as EAGLE's first layer) and EAGLE's ``fc`` over [embedding, target hidden state].
"""

from __future__ import annotations

import json
from pathlib import Path

#: one decoder layer in the target's shape (rows, columns by size name)
_LAYER = {
    "self_attn.q_proj.weight": ("hidden", "hidden"),
    "self_attn.k_proj.weight": ("kv", "hidden"),
    "self_attn.v_proj.weight": ("kv", "hidden"),
    "self_attn.o_proj.weight": ("hidden", "hidden"),
    "mlp.gate_proj.weight": ("inter", "hidden"),
    "mlp.up_proj.weight": ("inter", "hidden"),
    "mlp.down_proj.weight": ("hidden", "inter"),
}
_COPIED = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
           "rms_norm_eps", "max_position_embeddings", "bos_token_id", "eos_token_id", "hidden_act", "rope_parameters",
           "rope_theta")


def make_sglang_eagle_head(target: str | Path, out: str | Path, seed: int = 0) -> Path:
    """Write a one-layer EAGLE-1 head (``LlamaForCausalLMEagle``) for the Llama model at ``target``."""
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
    tensors["fc.bias"] = torch.zeros(hidden)
    # SGLang replaces the embedding and the LM head with the target's own (EAGLE-1 shares them); untied,
    # since SGLang deletes both before sharing
    tensors["embed_tokens.weight"] = normal(config["vocab_size"], hidden)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(out / "model.safetensors"))
    head = {key: config[key] for key in _COPIED if key in config}
    head.update(architectures=["LlamaForCausalLMEagle"], model_type="llama", num_hidden_layers=1,
                tie_word_embeddings=False, torch_dtype="float32")
    (out / "config.json").write_text(json.dumps(head, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json"):  # SGLang reads the draft's tokenizer files if present
        source = Path(target) / name
        if source.is_file():
            (out / name).write_bytes(source.read_bytes())
    return out
