"""TEST HARNESS: runs in every Python started with this folder on PYTHONPATH (SGLang's scheduler
processes included) and adds, when SGLang's torch-native attention backend is imported, the
TARGET_VERIFY branch it lacks (only SGLang's AMX backend has one): each request's draft tree
attends to the request's whole prefix, then to the tree under its ancestor mask."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

_TARGET = "sglang.srt.layers.attention.torch_native_backend"


def _patch(module: Any) -> None:
    import torch
    from torch.nn.functional import scaled_dot_product_attention

    backend = module.TorchNativeAttnBackend
    original = backend.forward_extend
    if getattr(original, "__specplug_harness__", False):
        return

    def forward_extend(self, q, k, v, layer, forward_batch, save_kv_cache=True):
        if not forward_batch.forward_mode.is_target_verify():
            return original(self, q, k, v, layer, forward_batch, save_kv_cache)
        if save_kv_cache and k is not None and v is not None:
            self.token_to_kv_pool.set_kv_buffer(layer, forward_batch.out_cache_loc, k, v)
        spec = forward_batch.spec_info
        n = spec.draft_token_num
        bs = forward_batch.batch_size
        tree = spec.custom_mask.reshape(-1)[: bs * n * n].reshape(bs, n, n).to(torch.bool)
        q_ = q.view(-1, layer.tp_q_head_num, layer.qk_head_dim)
        out = q.new_empty((q_.shape[0], layer.tp_q_head_num, layer.v_head_dim))
        k_cache = self.token_to_kv_pool.get_key_buffer(layer.layer_id)
        v_cache = self.token_to_kv_pool.get_value_buffer(layer.layer_id)
        req_to_token = self.req_to_token_pool.req_to_token
        for b in range(bs):
            prefix = int(forward_batch.seq_lens[b])
            slots = req_to_token[int(forward_batch.req_pool_indices[b]), : prefix + n].long()
            keys = k_cache[slots].movedim(0, 1).to(q_.dtype)
            values = v_cache[slots].movedim(0, 1).to(q_.dtype)
            mask = torch.cat([torch.ones(n, prefix, dtype=torch.bool), tree[b]], dim=1)
            query = q_[b * n : (b + 1) * n].movedim(0, 1)
            result = scaled_dot_product_attention(
                query.unsqueeze(0), keys.unsqueeze(0), values.unsqueeze(0), attn_mask=mask,
                scale=layer.scaling, enable_gqa=layer.tp_q_head_num != layer.tp_k_head_num,
            )
            out[b * n : (b + 1) * n] = result.squeeze(0).movedim(1, 0)
        return out.view(q_.shape[0], -1)

    forward_extend.__specplug_harness__ = True
    backend.forward_extend = forward_extend


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _TARGET:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        execute = loader.exec_module

        def exec_module(module: Any) -> None:
            execute(module)
            _patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AfterImport())
