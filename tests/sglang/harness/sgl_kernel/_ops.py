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


# ---- the EAGLE path (tests/sglang/eagle): its draft-slot reads and its tree build ----------------


def assign_draft_cache_locs_contiguous_cpu(req_pool_indices, req_to_token, seq_lens, out_cache_loc, pool_len, topk, num_cols):
    """Each request's ``topk * num_cols`` KV locations from ``seq_lens`` on, packed per request in ``out_cache_loc``."""
    width = topk * num_cols
    for b in range(req_pool_indices.shape[0]):
        start = int(seq_lens[b])
        out_cache_loc[b * width : (b + 1) * width] = req_to_token[int(req_pool_indices[b]), start : start + width].to(
            out_cache_loc.dtype
        )


def build_tree_kernel_efficient_cpu(
    parent_list, top_scores_index, seq_lens, tree_mask, positions, retrieve_index, retrieve_next_token,
    retrieve_next_sibling, topk, spec_steps, draft_token_num, tree_mask_mode,
):
    """EAGLE's draft tree from its top-k picks: per request, node 0 the root, node i the pick
    ``top_scores_index[b, i-1]``, whose parent is the pick that produced it (``parent_list``).

    Writes each node's ancestor row of the mask (the root, itself and its ancestors; mode 1
    QLEN_ONLY: ``n x n`` per request, mode 0 FULL_MASK: ``n x (seq_len + n)`` per request, the
    prefix columns left as the caller filled them), positions ``seq_len + depth``, and the
    first-child / next-sibling links (children in ascending node order).
    """
    if int(tree_mask_mode) not in (0, 1):
        raise NotImplementedError(f"sgl_kernel stand-in: tree mask mode {tree_mask_mode} is not implemented")
    n = draft_token_num
    for b in range(seq_lens.shape[0]):
        seq_len = int(seq_lens[b])
        picks = [int(x) for x in top_scores_index[b, : n - 1]]
        parents = [int(x) for x in parent_list[b]] if parent_list.dim() > 1 and parent_list.shape[1] else []

        def parent_node(node: int) -> int | None:
            # node i >= 1 came from block picks[i-1] // topk: block 0 is the root's, block k the
            # children of pick parents[k]; None when that parent was not picked (a detached node)
            block = picks[node - 1] // topk
            if block == 0:
                return 0
            wanted = parents[block]
            return next((slot + 1 for slot, pick in enumerate(picks) if pick == wanted), None)

        retrieve_index[b] = torch.arange(b * n, (b + 1) * n, dtype=retrieve_index.dtype)
        for node in range(n - 1, 0, -1):  # backwards, so each parent's children end up in order
            parent = parent_node(node)
            if parent is None:
                continue
            first = int(retrieve_next_token[b, parent])
            retrieve_next_token[b, parent] = node
            if first != -1:
                retrieve_next_sibling[b, node] = first
        prefix_sum = int(seq_lens[:b].sum())
        for node in range(n):
            columns = [0]
            depth = 0
            current = node
            while current not in (0, None) and depth < spec_steps:
                columns.append(current)
                depth += 1
                current = parent_node(current)
            positions[b * n + node] = seq_len + depth
            if int(tree_mask_mode) == 1:
                start, offset = n * n * b + n * node, 0
            else:
                start, offset = n * n * b + prefix_sum * n + (seq_len + n) * node, seq_len
            tree_mask[start + offset : start + offset + n] = False
            for column in columns:
                tree_mask[start + offset + column] = True
