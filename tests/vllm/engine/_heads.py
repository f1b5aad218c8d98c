"""Random-weight drafter heads of the test model's shapes, written as the checkpoints vLLM loads.

A random head's drafts are next to never accepted; what these test is that vLLM builds and runs
the drafter, and that the overlay composes it (the lookup's drafts are the accepted ones).
"""

from __future__ import annotations

import json
from pathlib import Path

#: a token of the test model's vocabulary that stands in the masked slots of a parallel draft
PARALLEL_MASK_TOKEN = 0


def eagle3_head(folder: Path, target_dir: str, *, parallel: bool = False, seed: int = 0) -> str:
    """An EAGLE-3 head for ``target_dir``'s model; ``parallel``: a P-EAGLE head, with ``mask_hidden``
    and the mask token for the masked slots (vLLM refuses a parallel head without them).
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
    }
    if parallel:
        tensors["mask_hidden"] = weight(1, aux * hidden)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(folder / "model.safetensors"))
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "vocab_size", "rms_norm_eps", "max_position_embeddings", "bos_token_id", "eos_token_id",
            "hidden_act", "rope_parameters")
    config = {key: target[key] for key in keep if key in target}
    config.update(architectures=["LlamaForCausalLM"], model_type="llama", num_hidden_layers=1,
                  tie_word_embeddings=False, draft_vocab_size=target["vocab_size"], dtype="float32")
    if parallel:
        config["ptd_token_id"] = PARALLEL_MASK_TOKEN
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


def medusa_head(folder: Path, target_dir: str, heads: int, seed: int = 0) -> str:
    """A Medusa head (``heads`` residual blocks over the target's last hidden state, one LM head shared
    by all, as Medusa-2 checkpoints keep the base model's) in the layout vLLM's ``MedusaModel`` loads."""
    import torch
    from safetensors.torch import save_file

    target = json.loads((Path(target_dir) / "config.json").read_text())
    hidden, vocab = target["hidden_size"], target["vocab_size"]
    generator = torch.Generator().manual_seed(seed)
    tensors = {f"blocks.{head}.layers.0.weight": torch.randn(hidden, hidden, generator=generator) * 0.02
               for head in range(heads)}
    tensors["lm_head.weight"] = torch.randn(vocab, hidden, generator=generator) * 0.02
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"architectures": ["MedusaModel"], "model_type": "medusa", "hidden_size": hidden, "vocab_size": vocab,
              "num_heads": heads, "num_hidden_layers": 1, "original_lm_head": True, "dtype": "float32"}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return str(folder)


def _decoder_layer(prefix: str, target: dict, weight, *, qkv_bias: bool = False) -> dict:
    """One Llama/Qwen2 decoder layer of ``target``'s shapes, under ``prefix`` (HF tensor names)."""
    import torch

    hidden, inner = target["hidden_size"], target["intermediate_size"]
    head_dim = target.get("head_dim", hidden // target["num_attention_heads"])
    q_size = target["num_attention_heads"] * head_dim
    kv_size = target["num_key_value_heads"] * head_dim
    tensors = {
        prefix + "input_layernorm.weight": torch.ones(hidden),
        prefix + "post_attention_layernorm.weight": torch.ones(hidden),
        prefix + "self_attn.q_proj.weight": weight(q_size, hidden),
        prefix + "self_attn.k_proj.weight": weight(kv_size, hidden),
        prefix + "self_attn.v_proj.weight": weight(kv_size, hidden),
        prefix + "self_attn.o_proj.weight": weight(hidden, q_size),
        prefix + "mlp.gate_proj.weight": weight(inner, hidden),
        prefix + "mlp.up_proj.weight": weight(inner, hidden),
        prefix + "mlp.down_proj.weight": weight(hidden, inner),
    }
    if qkv_bias:
        for name, size in (("q", q_size), ("k", kv_size), ("v", kv_size)):
            tensors[f"{prefix}self_attn.{name}_proj.bias"] = torch.zeros(size)
    return tensors


def pard_draft(folder: Path, target_dir: str, seed: int = 0) -> str:
    """A PARD draft model: a one-layer random Llama of the target's shapes and vocabulary (its KV cache
    pages match the target's) whose config names the mask token its K parallel slots read (``pard_token``)."""
    import torch
    from safetensors.torch import save_file

    target = json.loads((Path(target_dir) / "config.json").read_text())
    generator = torch.Generator().manual_seed(seed)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.02

    tensors = _decoder_layer("model.layers.0.", target, weight)
    tensors["model.embed_tokens.weight"] = weight(target["vocab_size"], target["hidden_size"])
    tensors["model.norm.weight"] = torch.ones(target["hidden_size"])
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(folder / "model.safetensors"))
    config = {key: value for key, value in target.items() if key not in ("_model_name_or_path", "transformers_version")}
    config.update(num_hidden_layers=1, tie_word_embeddings=True, dtype="float32", pard_token=PARALLEL_MASK_TOKEN)
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    return str(folder)


def mtp_model(folder: Path, tokenizer_dir: str, seed: int = 0) -> str:
    """A small random MiMo (Qwen2 layers plus one MTP layer, ``MiMoForCausalLM``): a target that
    carries its own MTP drafter, with ``tokenizer_dir``'s tokenizer. vLLM's target loader drops the
    ``mtp_layers`` and its MTP drafter (``MiMoMTP``) loads them with the shared embedding and LM head.
    Two heads of 64 (the CPU attention's smallest head size); its greedy text repeats itself in places
    (on the test prompts), so the lookups have drafts to verify."""
    import shutil

    import torch
    from safetensors.torch import save_file

    source = json.loads((Path(tokenizer_dir) / "config.json").read_text())
    config = {"architectures": ["MiMoForCausalLM"], "model_type": "qwen2", "vocab_size": source["vocab_size"],
              "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
              "num_key_value_heads": 1, "head_dim": 64, "hidden_act": "silu", "rms_norm_eps": 1e-6,
              "max_position_embeddings": 4096,
              "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}, "tie_word_embeddings": False,
              "bos_token_id": source["bos_token_id"], "eos_token_id": source["eos_token_id"],
              "num_nextn_predict_layers": 1, "dtype": "float32"}
    generator = torch.Generator().manual_seed(seed)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.1

    hidden = config["hidden_size"]
    tensors = {"model.embed_tokens.weight": weight(config["vocab_size"], hidden),
               "model.norm.weight": torch.ones(hidden),
               "lm_head.weight": weight(config["vocab_size"], hidden)}
    for layer in range(config["num_hidden_layers"]):
        tensors.update(_decoder_layer(f"model.layers.{layer}.", config, weight, qkv_bias=True))
    mtp = "model.mtp_layers.0."
    tensors.update(_decoder_layer(mtp, config, weight, qkv_bias=True))
    # the MTP layer's own parts: norms of the token's embedding and the target's hidden state, their
    # projection side by side, and a norm after its decoder layer
    for norm in ("token_layernorm", "hidden_layernorm", "final_layernorm"):
        tensors[f"{mtp}{norm}.weight"] = torch.ones(hidden)
    tensors[mtp + "input_proj.weight"] = weight(hidden, 2 * hidden)
    folder.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "generation_config.json",
                 "chat_template.jinja"):
        if (Path(tokenizer_dir) / name).is_file():
            shutil.copy(Path(tokenizer_dir) / name, folder / name)
    return str(folder)
