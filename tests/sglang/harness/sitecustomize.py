"""TEST HARNESS: runs in every Python started with this folder on PYTHONPATH (SGLang's scheduler
processes included) and completes SGLang's torch-native attention backend where only SGLang's
AMX backend (AVX-512/AMX CPUs) serves speculative decoding:

- when the torch-native backend is imported, the TARGET_VERIFY branch it lacks: each request's
  draft tree attends to the request's whole prefix, then to the tree under its ancestor mask
  (``n x n`` per request: the n-gram path's mask, and EAGLE's QLEN_ONLY mask on a CPU);
- when SGLang's EAGLE draft-backend factory is imported, ``torch_native`` as a draft backend:
  the draft extend runs on the plain torch-native backend, and the multi-step draft decode
  (chains, ``topk`` 1) on one torch-native backend per step, step ``i`` seeing the prefix and
  the ``i + 1`` draft tokens written so far."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Any

_TORCH_NATIVE = "sglang.srt.layers.attention.torch_native_backend"
_DRAFT_UTILS = "sglang.srt.speculative.draft_utils"


def _patch_torch_native(module: Any) -> None:
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


def _patch_draft_backends(module: Any) -> None:
    factory = module.DraftBackendFactory
    original = factory._create_backend
    if getattr(original, "__specplug_harness__", False):
        return

    def _create_backend(self, backend_name, backend_map, error_template, stamps_children=False):
        prefill, decode = module.attention_backends()
        configured = decode if backend_name == "decode_attention_backend" else prefill
        if (self.draft_attn_backend or configured) != "torch_native":
            return original(self, backend_name, backend_map, error_template, stamps_children)
        from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend

        if not stamps_children:  # the draft extend: a plain extend over the accepted tokens
            backend = TorchNativeAttnBackend(self.draft_model_runner)
        else:
            if self.topk != 1:
                raise NotImplementedError("test harness: the torch-native draft decode serves topk 1 (chains) only")
            backend = _MultiStepDraft(TorchNativeAttnBackend, self.draft_model_runner, self.speculative_num_steps)
        backend.prefill_attention_backend_str = backend.decode_attention_backend_str = "torch_native"
        return backend

    _create_backend.__specplug_harness__ = True
    factory._create_backend = _create_backend


class _MultiStepDraft:
    """EAGLE's draft decode container: one backend per step, step ``i`` seeing ``seq_len + i + 1`` tokens."""

    def __init__(self, backend_class: Any, runner: Any, num_steps: int) -> None:
        class _Step(backend_class):
            def __init__(self, runner: Any, step: int) -> None:
                super().__init__(runner)
                self.step = step

            def forward_decode(self, q, k, v, layer, forward_batch, save_kv_cache=True):
                seq_lens = forward_batch.seq_lens
                forward_batch.seq_lens = seq_lens + self.step + 1  # the draft tokens so far are this step's keys
                try:
                    return super().forward_decode(q, k, v, layer, forward_batch, save_kv_cache)
                finally:
                    forward_batch.seq_lens = seq_lens

        self.attn_backends = [_Step(runner, step) for step in range(num_steps - 1)]
        self.topk = 1
        self.speculative_num_steps = num_steps

    def init_forward_metadata(self, forward_batch: Any) -> None:
        for backend in self.attn_backends:
            backend.init_forward_metadata(forward_batch)


_PATCHES = {_TORCH_NATIVE: _patch_torch_native, _DRAFT_UTILS: _patch_draft_backends}


class _AfterImport(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        patch = _PATCHES.get(fullname)
        if patch is None:
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
            patch(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


if not any(isinstance(finder, _AfterImport) for finder in sys.meta_path):
    sys.meta_path.insert(0, _AfterImport())
