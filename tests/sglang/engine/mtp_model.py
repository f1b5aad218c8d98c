"""A random-weight model with an MTP layer, in the layout SGLang loads as MiMo (``MiMoForCausalLM``).

MiMo is Qwen2 with one multi-token-prediction layer stored beside the trunk (``model.mtp_layers.0.*``).
SGLang's NEXTN loads the same checkpoint twice: as the target (``MiMoForCausalLM``, which skips the
MTP layer) and, as the draft, rewritten to ``MiMoMTP`` (the MTP layer over the target's hidden states
and embedding). So an EAGLE worker given the model's own path drafts with the model's own MTP layer,
which is what NEXTN means. The weights are random: the greedy text repeats itself (lookups have
something to draft) and the MTP layer's drafts are near-random; the point is SGLang's real MTP path
running on this CPU. The tokenizer is the test model's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

#: the trunk: small, but head_dim 64 (the CPU attention's smallest) and heads that split in two
_TRUNK = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
          "num_key_value_heads": 2, "max_position_embeddings": 2048}
#: the MTP layer's own tensors beside its decoder layer (MiMo's names)
_MTP_NORMS = ("token_layernorm", "hidden_layernorm", "final_layernorm")


def make_mimo_mtp_model(model_dir: str | Path, out: str | Path, seed: int = 0) -> Path:
    """Write the random MiMo (Qwen2 + one MTP layer) into ``out`` with ``model_dir``'s tokenizer."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    config = Qwen2Config(
        vocab_size=len(tokenizer), tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, torch_dtype="float32", **_TRUNK,
    )
    torch.manual_seed(seed)
    out = Path(out)
    Qwen2ForCausalLM(config).save_pretrained(str(out), safe_serialization=True)
    [weights_file] = out.glob("*.safetensors")
    tensors = load_file(str(weights_file))
    # the MTP layer: a decoder layer in the trunk's shape (a copy of layer 0, perturbed so that it is its own),
    # its two input norms, the projection of [hidden state, embedding] and its final norm
    hidden = config.hidden_size
    for name, tensor in list(tensors.items()):
        if name.startswith("model.layers.0."):
            noise = torch.randn(tensor.shape) * 0.02 if tensor.dim() > 1 else torch.zeros(tensor.shape)
            tensors[name.replace("model.layers.0.", "model.mtp_layers.0.")] = tensor + noise
    for norm in _MTP_NORMS:
        tensors[f"model.mtp_layers.0.{norm}.weight"] = torch.ones(hidden)
    tensors["model.mtp_layers.0.input_proj.weight"] = torch.randn(hidden, 2 * hidden) * 0.02
    save_file({name: tensor.contiguous() for name, tensor in tensors.items()}, str(weights_file),
              metadata={"format": "pt"})
    config_file = out / "config.json"
    written = json.loads(config_file.read_text())
    written.update(architectures=["MiMoForCausalLM"], num_nextn_predict_layers=1)
    config_file.write_text(json.dumps(written, indent=1))
    tokenizer.save_pretrained(str(out))
    if (Path(model_dir) / "generation_config.json").is_file():
        shutil.copy(Path(model_dir) / "generation_config.json", out / "generation_config.json")
    return out
