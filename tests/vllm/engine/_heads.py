"""Random-weight drafter heads of the test model's shapes, written as the checkpoints vLLM loads.

A random head's drafts are next to never accepted; what these test is that vLLM builds and runs
the drafter, and that the overlay composes it (the lookup's drafts are the accepted ones).
"""

from __future__ import annotations

import json
from pathlib import Path

#: a token of the test model's vocabulary that stands in the masked slots of a parallel draft
PARALLEL_MASK_TOKEN = 0


def parallel_eagle3_head(folder: Path, target_dir: str, seed: int = 0) -> str:
    """A P-EAGLE head (EAGLE-3 layout, ``mask_hidden`` for the masked slots) for ``target_dir``'s model;
    vLLM names its architecture ``Eagle3`` + the one given here."""
    import torch
    from safetensors.torch import save_file

    target = json.loads((Path(target_dir) / "config.json").read_text())
    hidden, inner = target["hidden_size"], target["intermediate_size"]
    head_dim = target.get("head_dim", hidden // target["num_attention_heads"])
    q_size = target["num_attention_heads"] * head_dim
    kv_size = target["num_key_value_heads"] * head_dim
    aux = 3  # EAGLE-3 reads three of the target's layers
    generator = torch.Generator().manual_seed(seed)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.02

    ones = torch.ones(hidden)
    tensors = {
        "midlayer.input_layernorm.weight": ones.clone(),
        "midlayer.hidden_norm.weight": ones.clone(),
        "midlayer.post_attention_layernorm.weight": ones.clone(),
        # the first layer's attention reads the token's embedding and the hidden state side by side
        "midlayer.self_attn.q_proj.weight": weight(q_size, 2 * hidden),
        "midlayer.self_attn.k_proj.weight": weight(kv_size, 2 * hidden),
        "midlayer.self_attn.v_proj.weight": weight(kv_size, 2 * hidden),
        "midlayer.self_attn.o_proj.weight": weight(hidden, q_size),
        "midlayer.mlp.gate_proj.weight": weight(inner, hidden),
        "midlayer.mlp.up_proj.weight": weight(inner, hidden),
        "midlayer.mlp.down_proj.weight": weight(hidden, inner),
        "fc.weight": weight(hidden, aux * hidden),
        "norm.weight": ones.clone(),
        "lm_head.weight": weight(target["vocab_size"], hidden),
        "mask_hidden": weight(1, aux * hidden),
    }
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(folder / "model.safetensors"))
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "vocab_size", "rms_norm_eps", "max_position_embeddings", "bos_token_id", "eos_token_id",
            "hidden_act", "rope_parameters")
    config = {key: target[key] for key in keep if key in target}
    config.update(architectures=["LlamaForCausalLM"], model_type="llama", num_hidden_layers=1,
                  tie_word_embeddings=False, draft_vocab_size=target["vocab_size"], dtype="float32",
                  ptd_token_id=PARALLEL_MASK_TOKEN)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return str(folder)


def dflash_head(folder: Path, target_dir: str, block: int, seed: int = 0) -> str:
    """A DFlash head (Qwen3 layers reading three of the target's layers; a block of ``block`` masked
    queries after the bonus token) for ``target_dir``'s model."""
    import torch
    from safetensors.torch import save_file

    target = json.loads((Path(target_dir) / "config.json").read_text())
    hidden, inner = target["hidden_size"], target["intermediate_size"]
    head_dim = target.get("head_dim", hidden // target["num_attention_heads"])
    q_size = target["num_attention_heads"] * head_dim
    kv_size = target["num_key_value_heads"] * head_dim
    layers = target["num_hidden_layers"]
    target_layer_ids = [1, layers // 2, layers - 2]
    generator = torch.Generator().manual_seed(seed)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.02

    prefix = "layers.0."
    tensors = {
        prefix + "input_layernorm.weight": torch.ones(hidden),
        prefix + "post_attention_layernorm.weight": torch.ones(hidden),
        prefix + "self_attn.q_proj.weight": weight(q_size, hidden),
        prefix + "self_attn.k_proj.weight": weight(kv_size, hidden),
        prefix + "self_attn.v_proj.weight": weight(kv_size, hidden),
        prefix + "self_attn.o_proj.weight": weight(hidden, q_size),
        prefix + "self_attn.q_norm.weight": torch.ones(head_dim),
        prefix + "self_attn.k_norm.weight": torch.ones(head_dim),
        prefix + "mlp.gate_proj.weight": weight(inner, hidden),
        prefix + "mlp.up_proj.weight": weight(inner, hidden),
        prefix + "mlp.down_proj.weight": weight(hidden, inner),
        "fc.weight": weight(hidden, len(target_layer_ids) * hidden),
        "hidden_norm.weight": torch.ones(hidden),
        "norm.weight": torch.ones(hidden),
        "lm_head.weight": weight(target["vocab_size"], hidden),
    }
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(folder / "model.safetensors"))
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "vocab_size", "rms_norm_eps", "max_position_embeddings", "bos_token_id", "eos_token_id",
            "hidden_act", "rope_parameters")
    config = {key: target[key] for key in keep if key in target}
    config.update(architectures=["DFlashDraftModel"], model_type="qwen3", num_hidden_layers=1,
                  tie_word_embeddings=False, draft_vocab_size=target["vocab_size"], dtype="float32",
                  block_size=block, num_target_layers=layers,
                  dflash_config={"mask_token_id": PARALLEL_MASK_TOKEN, "target_layer_ids": target_layer_ids})
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return str(folder)
