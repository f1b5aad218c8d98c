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
