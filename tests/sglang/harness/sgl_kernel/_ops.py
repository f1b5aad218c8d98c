"""TEST HARNESS: pure-torch versions of the sgl_kernel ops SGLang's CPU n-gram path calls.

Written from what SGLang's triton/reference kernels compute (their arguments as SGLang passes
them), for tests on this CPU; slow and simple on purpose.
"""

from __future__ import annotations

import torch


def reconstruct_indices_from_tree_mask(
    tree_mask: torch.Tensor,
    seq_lens: torch.Tensor,
    positions: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    batch_size: int,
    draft_token_num: int,
) -> None:
    """Positions and the first-child / next-sibling links of each draft tree, from its ancestor mask."""
    n = draft_token_num
    mask = tree_mask[: batch_size * n * n].reshape(batch_size, n, n).to(torch.bool).cpu()
    for b in range(batch_size):
        retrieve_next_token[b].fill_(-1)
        retrieve_next_sibling[b].fill_(-1)
        for i in range(n):
            depth = int(mask[b, i, :i].sum())
            positions[b * n + i] = int(seq_lens[b]) + depth
            retrieve_index[b, i] = b * n + i
        for i in range(1, n):
            ancestors = [j for j in range(i) if mask[b, i, j]]
            parent = ancestors[-1]
            if int(retrieve_next_token[b, parent]) == -1:
                retrieve_next_token[b, parent] = i
            else:  # the parent's last child so far gets i as its next sibling
                child = int(retrieve_next_token[b, parent])
                while int(retrieve_next_sibling[b, child]) != -1:
                    child = int(retrieve_next_sibling[b, child])
                retrieve_next_sibling[b, child] = i


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """Write each request's new KV locations (packed in ``out_cache_loc``) into its row of ``req_to_token``."""
    offset = 0
    for b in range(req_pool_indices.shape[0]):
        start, end = int(start_offset[b]), int(end_offset[b])
        req_to_token[int(req_pool_indices[b]), start:end] = out_cache_loc[offset : offset + end - start].to(req_to_token.dtype)
        offset += end - start


def assign_extend_cache_locs_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """Read each request's KV locations ``start:end`` from ``req_to_token``, packed into ``out_cache_loc``."""
    offset = 0
    for b in range(req_pool_indices.shape[0]):
        start, end = int(start_offset[b]), int(end_offset[b])
        out_cache_loc[offset : offset + end - start] = req_to_token[int(req_pool_indices[b]), start:end].to(out_cache_loc.dtype)
        offset += end - start


def fill_bonus_tokens_cpu(accept_tokens, accept_lens, bonus_tokens, accept_stride):
    """Each request's last accepted token (its bonus token)."""
    flat = accept_tokens.reshape(-1)
    for b in range(accept_lens.shape[0]):
        bonus_tokens[b] = flat[accept_stride * b + int(accept_lens[b]) - 1]


def fill_accept_out_cache_loc_cpu(accept_index, out_cache_loc, accept_out_cache_loc):
    """The KV locations of the accepted draft slots, packed in order (-1 slots skipped)."""
    index = accept_index.reshape(-1)
    kept = index[index != -1].long()
    accept_out_cache_loc[: kept.numel()] = out_cache_loc[kept].to(accept_out_cache_loc.dtype)


def verify_tree_greedy_cpu(
    predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token, retrive_next_sibling,
    target_predict,
):
    """Greedy tree verification: walk each tree from the root, taking the child equal to the target's token."""
    bs, steps = accept_index.shape
    target = target_predict.reshape(-1)
    for b in range(bs):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted = 0
        node = 0
        for _ in range(1, steps):
            node = int(retrive_next_token[b, node])
            while node != -1:
                if int(candidates[b, node]) == int(target[last]):
                    predicts[last] = target[last]
                    accepted += 1
                    last = int(retrive_index[b, node])
                    accept_index[b, accepted] = last
                    break
                node = int(retrive_next_sibling[b, node])
            if node == -1:
                break
        accept_token_num[b] = accepted
        predicts[last] = target[last]


def copy_all_layer_kv_cache_cpu(data_ptrs, strides, tgt_loc, src_loc):
    """Copy rows ``src_loc`` to ``tgt_loc`` in every KV buffer, given as raw data pointers and row strides in bytes."""
    import ctypes

    pointers = [int(p) for p in data_ptrs.reshape(-1).tolist()]
    row_bytes = [int(s) for s in strides.reshape(-1).tolist()]
    pairs = list(zip(tgt_loc.reshape(-1).tolist(), src_loc.reshape(-1).tolist()))
    for pointer, stride in zip(pointers, row_bytes):
        rows = [(pointer + int(t) * stride, ctypes.string_at(pointer + int(s) * stride, stride)) for t, s in pairs]
        for address, data in rows:  # read every source before writing: targets may overlap sources
            ctypes.memmove(address, data, stride)
