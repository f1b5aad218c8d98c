"""An EAGLE-1 draft head's forward in torch, as vLLM runs it, and its chained greedy acceptance.

One implementation for the two users: ``scripts/train_eagle_head.py`` trains :class:`EagleHead`,
and ``specplug trace --neural-head`` records a saved head's accepted length at every output
position of a trace (:func:`draft_acceptance`). The head is what vLLM's ``eagle`` method loads
(``EagleLlamaForCausalLM``): ``fc`` over [embedding of the next token, the target's post-norm
hidden state], one Llama decoder layer without its input norm, the target's embedding and LM head.

torch and safetensors are imported only inside the functions that need them: importing this
module costs nothing.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from specplug._inputs import is_dir, is_file
from specplug._outputs import short_path

__all__ = ["HEAD_ARCHITECTURE", "EagleHead", "HeadLayoutError", "draft_acceptance", "load_eagle_head"]

#: the architecture name vLLM's ``eagle`` method loads for a Llama target
HEAD_ARCHITECTURE = "EagleLlamaForCausalLM"


class HeadLayoutError(ValueError):
    """A head folder that is not an EAGLE-1 head for the given target (one line, names what is wrong)."""


class EagleHead:
    """The head's own weights, named as vLLM's EagleLlamaForCausalLM loads them (embed/LM head shared)."""

    def __init__(self, config: dict, generator=None, weights: dict | None = None):
        """Random weights from ``generator`` (training), or ``weights`` by name (a saved head)."""
        import torch

        hidden = config["hidden_size"]
        self.heads, self.kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
        self.head_dim = config.get("head_dim", hidden // self.heads)
        self.eps = config["rms_norm_eps"]
        theta = (config.get("rope_parameters") or {}).get("rope_theta", config.get("rope_theta", 10000.0))
        self.inv_freq = 1.0 / theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        shapes = self.weight_shapes(config)
        if weights is not None:
            self.params = {name: weights[name].to(torch.float32) for name in shapes}
            return
        self.params = {name: (torch.randn(*shape, generator=generator) / math.sqrt(shape[1])).requires_grad_()
                       for name, shape in shapes.items() if len(shape) == 2}
        self.params["layers.0.post_attention_layernorm.weight"] = torch.ones(hidden, requires_grad=True)

    @staticmethod
    def weight_shapes(config: dict) -> dict[str, tuple[int, ...]]:
        """The head's own weights by vLLM's names, with their shapes for a target of ``config``."""
        hidden, heads = config["hidden_size"], config["num_attention_heads"]
        inter, kv = config["intermediate_size"], config["num_key_value_heads"] * config.get("head_dim", hidden // heads)
        return {"fc.weight": (hidden, 2 * hidden),
                "layers.0.self_attn.q_proj.weight": (hidden, hidden),
                "layers.0.self_attn.k_proj.weight": (kv, hidden),
                "layers.0.self_attn.v_proj.weight": (kv, hidden),
                "layers.0.self_attn.o_proj.weight": (hidden, hidden),
                "layers.0.mlp.gate_proj.weight": (inter, hidden),
                "layers.0.mlp.up_proj.weight": (inter, hidden),
                "layers.0.mlp.down_proj.weight": (hidden, inter),
                "layers.0.post_attention_layernorm.weight": (hidden,)}

    def _rope(self, x, length: int):
        import torch

        angles = torch.arange(length, dtype=torch.float32)[:, None] * self.inv_freq[None]
        cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([angles.sin()] * 2, -1)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    def unrolled(self, embeds, features, steps: int):
        """Outputs of draft steps 1..steps at every position: row i of step k drafts token i+2 from
        the hidden state step k-1 produced at row i-1, attending to step 1's keys up to row i-k+1 and
        to steps 2..k's own keys on the diagonal chain, as vLLM's KV cache holds them."""
        import torch
        import torch.nn.functional as F

        p = self.params
        batch, length, hidden = embeds.shape
        group = self.heads // self.kv_heads
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        outputs, keys, values = [], [], []
        hidden_in = features
        for step in range(1, steps + 1):
            x = torch.cat([embeds, hidden_in], -1) @ p["fc.weight"].T
            q = self._rope((x @ p["layers.0.self_attn.q_proj.weight"].T).view(batch, length, self.heads, -1).transpose(1, 2), length)
            k = self._rope((x @ p["layers.0.self_attn.k_proj.weight"].T).view(batch, length, self.kv_heads, -1).transpose(1, 2), length)
            v = (x @ p["layers.0.self_attn.v_proj.weight"].T).view(batch, length, self.kv_heads, -1).transpose(1, 2)
            k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
            if step == 1:
                attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                scale = 1.0 / math.sqrt(self.head_dim)
                base = (q @ keys[0].transpose(-1, -2)) * scale
                base = base.masked_fill(~causal.tril(-(step - 1)), float("-inf"))
                # step m's key for row i sits at row i-(step-m): shift it down by that many rows
                chain_k = [self._shift(key, step - m) for m, key in enumerate(keys[1:] + [k], start=2)]
                chain_v = [self._shift(value, step - m) for m, value in enumerate(values[1:] + [v], start=2)]
                extra = torch.stack([(q * key).sum(-1) * scale for key in chain_k], -1)
                weights = torch.cat([base, extra], -1).softmax(-1)
                weights = torch.nan_to_num(weights)
                attn = weights[..., :length] @ values[0]
                for index, value in enumerate(chain_v):
                    attn = attn + weights[..., length + index, None] * value
            keys.append(k)
            values.append(v)
            attn = attn.transpose(1, 2).reshape(batch, length, hidden) @ p["layers.0.self_attn.o_proj.weight"].T
            residual = x + attn
            normed = residual * torch.rsqrt(residual.pow(2).mean(-1, keepdim=True) + self.eps)
            normed = normed * p["layers.0.post_attention_layernorm.weight"]
            mlp = (F.silu(normed @ p["layers.0.mlp.gate_proj.weight"].T) * (normed @ p["layers.0.mlp.up_proj.weight"].T))
            out = mlp @ p["layers.0.mlp.down_proj.weight"].T + residual
            outputs.append(out)
            hidden_in = self._shift(out, 1)
        return outputs

    @staticmethod
    def _shift(x, rows: int):
        """Move rows down by ``rows`` along the sequence axis (-2), zeros on top."""
        import torch.nn.functional as F

        if rows == 0:
            return x
        return F.pad(x, (0, 0, rows, 0))[..., :x.shape[-2], :]


def load_eagle_head(head_dir: str | Path, target_config: dict[str, Any]) -> EagleHead:
    """The head saved in ``head_dir`` (config.json + model.safetensors), checked against the target's config."""
    from safetensors.torch import load_file

    head_dir = Path(head_dir)
    config_path, weights_path = head_dir / "config.json", head_dir / "model.safetensors"
    if not is_dir(head_dir):
        raise HeadLayoutError(f"head folder {short_path(head_dir)} does not exist")
    if not is_file(config_path) or not is_file(weights_path):
        raise HeadLayoutError(f"head folder {short_path(head_dir)} must hold config.json and model.safetensors (vLLM's eagle layout)")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise HeadLayoutError(f"{config_path}: not a readable JSON config ({error})") from None
    if not isinstance(config, dict) or HEAD_ARCHITECTURE not in (config.get("architectures") or []):
        found = config.get("architectures") if isinstance(config, dict) else None
        raise HeadLayoutError(f"{config_path}: architectures must list {HEAD_ARCHITECTURE}, got {found!r}")
    for key in ("vocab_size", "hidden_size"):
        if config.get(key) != target_config.get(key):
            raise HeadLayoutError(
                f"{config_path}: {key} {config.get(key)!r} does not match the target's {target_config.get(key)!r}"
            )
    try:
        weights = load_file(str(weights_path))
    except Exception as error:  # safetensors raises its own error types for a damaged file
        raise HeadLayoutError(f"{weights_path}: not a readable safetensors file ({error})") from None
    # the layer's sizes come from the head's own config; the target's fills in what it leaves out
    merged = {**target_config, **{key: value for key, value in config.items() if value is not None}}
    shapes = EagleHead.weight_shapes(merged)
    missing = sorted(set(shapes) - set(weights))
    if missing:
        raise HeadLayoutError(f"{weights_path}: missing {', '.join(missing)} (vLLM's eagle layout: fc.weight, layers.0.*)")
    for name, shape in shapes.items():
        if tuple(weights[name].shape) != shape:
            raise HeadLayoutError(f"{weights_path}: {name} has shape {tuple(weights[name].shape)}, expected {shape}")
    return EagleHead(merged, weights=weights)


def draft_acceptance(head: EagleHead, features, tokens, prompt_len: int, k: int, embed, lm_head) -> list[int]:
    """Chained greedy accepted length of ``k``-token drafts at every output position.

    ``tokens`` is prompt + output (1-D ids), ``features`` the target's post-norm last hidden
    state at every one of them. Entry ``i`` counts how many of the head's greedy drafts made
    after ``tokens[:prompt_len + i]`` equal ``tokens[prompt_len + i:]``, stopping at the first
    miss (as a verifier accepts). All positions draft at once (:meth:`EagleHead.unrolled`): while
    every earlier draft matched, the token a draft step is fed is the recorded one.
    """
    import torch

    total = int(tokens.shape[0])
    outputs = total - prompt_len
    if outputs <= 0:
        return []
    if prompt_len < 2:
        raise ValueError(f"a head needs a prompt of at least 2 tokens to draft from, got {prompt_len}")
    # row t reads token t+1's embedding and the feature at t; a draft after tokens[:P+i] starts at row P+i-2
    first = prompt_len - 2
    with torch.no_grad():
        steps = head.unrolled(embed[tokens[1:]][None], features[:-1][None], min(k, outputs))
        # match[s, i]: step s+1 of the draft at output position i equals output[i+s] (rows P+i+s-2)
        match = torch.zeros(k, outputs, dtype=torch.bool)
        for step, out in enumerate(steps):
            rows = out[0, first + step : total - 2]  # rows P-2+s .. total-3: output positions 0 .. outputs-1-s
            predicted = (rows @ lm_head.T).argmax(-1)
            match[step, : outputs - step] = predicted == tokens[prompt_len + step:]
        accepted = match.to(torch.int64).cumprod(0).sum(0)
    return [int(value) for value in accepted]
