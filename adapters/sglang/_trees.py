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
    share a prefix. Branches claim the ``width - 1`` slots in the order given (the first, the
    proposer's own draft, whole before any alternative), a branch that finds no slot left ends
    there (never a node without its parent); then nodes are numbered breadth first.

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
        if row:
            _fill(ids[b], mask[b], row, width)
    return ids.reshape(-1), mask.reshape(-1)


def _fill(ids: np.ndarray, mask: np.ndarray, row: Sequence[Sequence[int]], width: int) -> None:
    # a trie of the branches, built in priority order: children[node] maps a token to its child
    children: list[dict[int, int]] = [{}]
    tokens: list[int] = [int(ids[0])]
    for branch in row:
        node = 0
        for token in branch:
            token = int(token)
            child = children[node].get(token)
            if child is None:
                if len(tokens) >= width:
                    break  # out of slots: this branch ends here
                child = len(tokens)
                children[node][token] = child
                children.append({})
                tokens.append(token)
            node = child
    # numbered breadth first (parents before children, as SGLang's corpus numbers its trees)
    order = [0]
    parent_slot = [-1]
    for position in range(len(tokens)):
        for child in children[order[position]].values():
            order.append(child)
            parent_slot.append(position)
    for slot in range(1, len(order)):
        ids[slot] = tokens[order[slot]]
        mask[slot] |= mask[parent_slot[slot]]  # the parent's ancestors, itself included
