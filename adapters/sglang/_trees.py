"""specplug drafts as SGLang draft trees: the token ids and ancestor masks its verify step reads.

SGLang's n-gram verify path takes, for a batch of ``bs`` requests and a width ``n``
(``speculative_num_draft_tokens``), ``ids`` int64[bs*n] and ``mask`` int64[bs*n*n], exactly as
its ``NgramCorpus.batch_get`` returns them: per request, slot 0 is the last committed token (the
root), and ``mask[b, i, j]`` is 1 when node j is node i or one of its ancestors. Every slot is
used: slots no draft fills hold token 0 hanging off the root, so they cost verify width but can
only be accepted where the target itself picks that token (then accepting it is right anyway).
A parent always precedes its children, which is how SGLang derives positions and the
next-token/next-sibling links from the mask.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["PAD_TOKEN", "draft_trees"]

#: the token of a slot no draft fills (what SGLang's own corpus pads with)
PAD_TOKEN = 0


def draft_trees(
    roots: Sequence[int],
    branches: Sequence[Sequence[Sequence[int]]],
    width: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Per request, its root and its branches (token paths below the root) as one flat tree batch.

    A single draft is one branch (a chain); alternatives are more branches, merged where they
    share a prefix. Nodes are numbered breadth first, branches in the order given, and nodes
    past ``width`` are dropped (a branch cut short, never a node without its parent).

    >>> ids, mask = draft_trees([5], [[[6, 7], [6, 8]]], 5)
    >>> ids.tolist()
    [5, 6, 7, 8, 0]
    >>> mask.reshape(5, 5).tolist()
    [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [1, 1, 0, 1, 0], [1, 0, 0, 0, 1]]
    """
    if isinstance(width, bool) or not isinstance(width, int) or width < 1:
        raise ValueError(f"width = {width!r} is not valid; it must be an int >= 1 (speculative_num_draft_tokens)")
    if len(branches) != len(roots):
        raise ValueError(f"{len(roots)} roots but {len(branches)} rows of branches")
    bs = len(roots)
    ids = np.full((bs, width), PAD_TOKEN, dtype=np.int64)
    mask = np.zeros((bs, width, width), dtype=np.int64)
    mask[:, :, 0] = 1  # every node, padding included, hangs off the root
    diagonal = np.arange(width)
    mask[:, diagonal, diagonal] = 1
    for b, (root, row) in enumerate(zip(roots, branches)):
        ids[b, 0] = root
        _fill(ids[b], mask[b], row, width)
    return ids.reshape(-1), mask.reshape(-1)


def _fill(ids: np.ndarray, mask: np.ndarray, row: Sequence[Sequence[int]], width: int) -> None:
    # a trie of the branches: children[node] maps a token to its child's node number
    children: list[dict[int, int]] = [{}]
    parents = [-1]
    tokens = [int(ids[0])]
    depth_nodes: list[list[tuple[int, Sequence[int], int]]] = [[(0, branch, 0) for branch in row]]
    # breadth first: all nodes at depth d are numbered before any at depth d + 1
    while depth_nodes and depth_nodes[-1]:
        following: list[tuple[int, Sequence[int], int]] = []
        for parent, branch, at in depth_nodes[-1]:
            if at >= len(branch):
                continue
            token = int(branch[at])
            node = children[parent].get(token)
            if node is None:
                if len(tokens) >= width:
                    continue  # out of room: this branch ends here
                node = len(tokens)
                children[parent][token] = node
                children.append({})
                parents.append(parent)
                tokens.append(token)
            following.append((node, branch, at + 1))
        depth_nodes.append(following)
    for node in range(1, len(tokens)):
        ids[node] = tokens[node]
        ancestor = node
        while ancestor >= 0:
            mask[node, ancestor] = 1
            ancestor = parents[ancestor]
