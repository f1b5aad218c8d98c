"""What a proposer returns: a :class:`Draft` of token ids, and the checks every draft passes.

A draft is checked where it is made (:func:`check_draft`, :func:`check_tree_draft`), so an engine
never reads an invalid token; :func:`accepted_prefix` and :func:`draft_accepted` say how much of a
draft verification kept.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from specplug._errors import InvalidDraftError, InvalidTokensError, shown

__all__ = ["DRAFT_KINDS", "Draft", "DraftKind", "MAX_TOKEN_ID", "RequestId", "accepted_prefix", "as_token_array", "check_draft", "check_tree_draft", "draft_accepted"]

RequestId = Hashable

#: what a draft costs: ``"lookup"`` (CPU time only) or ``"neural"`` (forward passes of a head or model)
DraftKind = Literal["lookup", "neural"]
DRAFT_KINDS: tuple[DraftKind, ...] = ("lookup", "neural")
#: the largest token id specplug stores (the kernels keep int32 tokens)
MAX_TOKEN_ID = int(np.iinfo(np.int32).max)
INT64 = np.dtype(np.int64)  # compared by identity: numpy keeps one instance of each builtin dtype


def accepted_prefix(draft: Sequence[int] | np.ndarray, verified: Sequence[int] | np.ndarray) -> int:
    """How many leading tokens of ``draft`` the ``verified`` tokens confirm.

    Verification keeps a draft's tokens up to the first one the target disagrees with, then
    appends its own token: acceptance is the length of the common prefix.

    >>> accepted_prefix((5, 6, 7), [5, 6, 9, 1]), accepted_prefix((), [1]), accepted_prefix((5,), [])
    (2, 0, 0)
    """
    limit = min(len(draft), len(verified))
    accepted = 0
    # a plain loop: drafts are a few tokens, and it stops at the first mismatch
    while accepted < limit and draft[accepted] == verified[accepted]:
        accepted += 1
    return accepted


@dataclass(frozen=True, slots=True)
class Draft:
    """What a proposer drafts for one request step.

    ``tokens`` may be empty (no speculation this step). ``score`` is the expected number
    of accepted tokens where the proposer can estimate it, else None. ``match``, for a lookup's
    draft, is how many of the context's last tokens matched the text it was copied from (None:
    not known; composites keep apart the statistics of drafts after long matches). ``needs_neural``
    is False when a hybrid decided its lookup draft wins, so an adapter may skip the
    model's own MTP/EAGLE pass for this step. ``alternatives`` are other continuations
    worth verifying beside ``tokens``, best first: only :meth:`Proposer.propose_alternatives`
    fills them, for an engine that verifies draft trees (an engine verifying chains reads
    ``tokens`` alone).

    >>> Draft((5, 6), source="ngram", score=1.5).tokens
    (5, 6)
    >>> Draft((5, 6), "suffix", alternatives=((5, 7),)).branches()
    ((5, 6), (5, 7))
    """

    tokens: tuple[int, ...]
    source: str
    score: float | None = None
    needs_neural: bool = field(default=True, compare=False)
    alternatives: tuple[tuple[int, ...], ...] = ()
    match: int | None = field(default=None, compare=False)

    def __len__(self) -> int:
        return len(self.tokens)

    def branches(self) -> tuple[tuple[int, ...], ...]:
        """Every continuation to verify, ``tokens`` first; none when there is no draft."""
        if not self.tokens:
            return ()
        return (self.tokens, *self.alternatives)


def draft_accepted(draft: Draft, verified: Sequence[int] | np.ndarray) -> int:
    """How many tokens of ``draft`` the ``verified`` tokens confirm, along its best branch.

    A tree verifier keeps the longest branch the target agrees with, so a draft with
    alternatives is accepted as far as its best one.

    >>> draft_accepted(Draft((5, 6), "suffix", alternatives=((7, 8, 9),)), [7, 8, 1])
    2
    """
    accepted = accepted_prefix(draft.tokens, verified)
    for branch in draft.alternatives:
        accepted = max(accepted, accepted_prefix(branch, verified))
    return accepted


def check_tree_draft(draft: object, max_tokens: int, max_branches: int, who: str = "proposer") -> Draft:
    """A draft tree made safe to hand an engine, or :class:`InvalidDraftError` naming the bad value.

    ``tokens`` is checked as :func:`check_draft` checks a chain; each alternative must be a
    tuple of ints in ``[0, MAX_TOKEN_ID]`` too. The tree is then shaped to what the engine
    asked for: alternatives past ``max_branches - 1`` are dropped, and so are those that add
    nothing (empty, or a prefix of an earlier branch); the whole tree keeps within
    ``max_tokens`` tokens, a prefix shared with an earlier branch counted once (a branch that
    finds no room left is cut there).

    >>> check_tree_draft(Draft((1, 2, 3), "x", alternatives=((1, 4, 5), (), (6,))), 4, 3).branches()
    ((1, 2, 3), (1, 4))
    >>> check_tree_draft(Draft((1, 2), "x", alternatives=((1, -2),)), 4, 2)
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidDraftError: proposer drafted token -2 at position 1; token ids are ints in [0, 2147483647]
    """
    draft = _checked(draft, max_tokens, who, None)
    tokens, alternatives = draft.tokens, draft.alternatives
    kept: list[tuple[int, ...]] = []
    if alternatives and tokens and max_branches > 1:
        # the tree's nodes so far: every prefix of a kept branch
        nodes = {tokens[:depth] for depth in range(1, len(tokens) + 1)}
        for branch in alternatives:
            shared = 0
            while shared < len(branch) and branch[: shared + 1] in nodes:
                shared += 1
            branch = branch[: shared + max_tokens - len(nodes)]
            if len(branch) <= shared:
                continue  # nothing new (a prefix of an earlier branch), or no room left
            nodes.update(branch[:depth] for depth in range(shared + 1, len(branch) + 1))
            kept.append(branch)
            if len(kept) == max_branches - 1 or len(nodes) == max_tokens:
                break
    if tuple(kept) == alternatives:
        return draft
    return replace(draft, alternatives=tuple(kept))


def as_token_array(tokens: object, what: str = "token_ids") -> np.ndarray:
    """Return ``tokens`` as a 1-D int64 array, or raise naming the bad value.

    The one token-sequence check of every entry point: a list, a tuple or a 1-D array of a
    signed or unsigned integer dtype. Anything else is refused with its type named: a dict or a
    set (whose order is not the sequence's), a masked array (its masked-out values would be
    drafted), an array of floats, objects or times, a str.

    >>> as_token_array([3, 4]).tolist()
    [3, 4]
    >>> as_token_array({5: 1})
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidTokensError: token_ids must be a sequence (list, tuple or 1-D int array) of non-negative ints; got dict {5: 1}
    """
    if tokens.__class__ is np.ndarray:
        if tokens.ndim != 1 or tokens.dtype.kind not in "iu":
            raise InvalidTokensError(
                f"{what} must be a 1-D sequence of non-negative ints; got an array of "
                f"dtype {tokens.dtype} and shape {tokens.shape}"
            )
        array = tokens.astype(np.int64, copy=False)
        if array.size and (int(array.min()) < 0 or int(array.max()) > MAX_TOKEN_ID):
            index = int(np.argmax((array < 0) | (array > MAX_TOKEN_ID)))
            _reject(what, index, int(array[index]))
        return array
    if tokens.__class__ is not list and tokens.__class__ is not tuple:
        if not _in_order(tokens):
            raise InvalidTokensError(
                f"{what} must be a sequence (list, tuple or 1-D int array) of non-negative ints; "
                f"got {type(tokens).__name__} {shown(tokens)}"
            )
        items = list(tokens)
    else:
        items = tokens
    # A plain loop: for the few tokens of a decoding step it is faster than numpy reductions.
    for index, token in enumerate(items):
        if token.__class__ is not int and (
            isinstance(token, bool) or not isinstance(token, (int, np.integer)) or token.dtype.kind not in "iu"
        ):
            raise InvalidTokensError(
                f"{what}[{index}] = {shown(token, 40)} is not an int; token ids are non-negative ints"
            )
        if not 0 <= token <= MAX_TOKEN_ID:
            _reject(what, index, int(token))
    return np.array(items, dtype=np.int64)


def _in_order(tokens: object) -> bool:
    """Whether ``tokens`` is a sequence (an engine's own list type too) or a one-pass iterator,
    read in its order; dicts, sets, strings and arrays that are not plain ndarrays (masked,
    matrix) are not."""
    if isinstance(tokens, (str, bytes, bytearray, np.ndarray)):
        return False
    return isinstance(tokens, (Sequence, Iterator))


def check_draft(draft: object, max_tokens: int, who: str = "proposer") -> Draft:
    """``draft`` if it is a valid draft of at most ``max_tokens`` tokens, else :class:`InvalidDraftError`.

    Valid: a :class:`Draft` whose ``tokens`` is a tuple of at most ``max_tokens`` Python ints in
    ``[0, MAX_TOKEN_ID]``, whose ``alternatives`` is a tuple of at most ``max_tokens`` such tuples
    (each at most ``max_tokens`` long), whose ``source`` is a str, ``score`` a real number or None
    and ``needs_neural`` a bool. Engines write drafts into int32 buffers (or C arrays), trees
    included: anything else would reach them as a wrong token, an overflow or an out-of-bounds
    write. A subclass of Draft is returned copied into a plain Draft (its values read once), so
    nothing it overrides can change what the engine reads after the check.

    >>> check_draft(Draft((5, 6), "x"), 4).tokens
    (5, 6)
    >>> check_draft(Draft((5, -1), "x"), 4)
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidDraftError: proposer drafted token -1 at position 1; token ids are ints in [0, 2147483647]
    >>> check_draft(Draft((5,), "x", alternatives=((-3,),)), 4)
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidDraftError: proposer drafted token -3 at position 0; token ids are ints in [0, 2147483647]
    """
    return _checked(draft, max_tokens, who, max_tokens)


def _checked(draft: object, max_tokens: int, who: str, most_alternatives: int | None) -> Draft:
    """:func:`check_draft`; ``most_alternatives`` None: any number of alternatives of any length
    (a tree is shaped after), their tokens checked all the same."""
    if draft.__class__ is not Draft:
        draft = _plain_draft(draft, who)
    elif (
        draft.source.__class__ is not str or draft.needs_neural.__class__ is not bool
        or (draft.score is not None and draft.score.__class__ is not float)
        or (draft.match is not None and (draft.match.__class__ is not int or draft.match < 0))
    ):
        draft = _plain_draft(draft, who)
    tokens = draft.tokens
    _check_token_tuple(tokens, who, "tokens of type {}; Draft.tokens is a tuple of ints")
    if len(tokens) > max_tokens:
        raise InvalidDraftError("too long", f"{who} drafted {len(tokens)} tokens where {max_tokens} were asked for")
    alternatives = draft.alternatives
    if alternatives or alternatives.__class__ is not tuple:
        _check_alternatives(alternatives, most_alternatives, max_tokens, who)
    return draft


def _plain_draft(draft: object, who: str) -> Draft:
    """A plain :class:`Draft` holding ``draft``'s values, each read once and checked for its type
    (tokens are checked by the caller), or :class:`InvalidDraftError`."""
    if not isinstance(draft, Draft):
        raise InvalidDraftError("not a Draft", f"{who} returned {type(draft).__name__} {shown(draft)}, not a Draft")
    tokens, source, score = draft.tokens, draft.source, draft.score
    needs_neural, alternatives = draft.needs_neural, draft.alternatives
    if source.__class__ is not str:
        raise InvalidDraftError("not a Draft", f"{who} drafted a source of type {type(source).__name__}; Draft.source is a str")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float, np.integer, np.floating)):
            raise InvalidDraftError(
                "not a Draft", f"{who} drafted a score of type {type(score).__name__}; Draft.score is a float or None"
            )
        score = float(score)
    if needs_neural.__class__ is not bool and needs_neural.__class__ is not np.bool_:
        raise InvalidDraftError(
            "not a Draft", f"{who} drafted needs_neural of type {type(needs_neural).__name__}; it is a bool"
        )
    match = draft.match
    if match is not None:
        if isinstance(match, bool) or not isinstance(match, (int, np.integer)) or match < 0:
            raise InvalidDraftError(
                "not a Draft", f"{who} drafted match = {shown(match)}; Draft.match is an int >= 0 or None"
            )
        match = int(match)
    return Draft(tokens, source, score, bool(needs_neural), alternatives, match)


def _check_alternatives(alternatives: object, most: int | None, max_tokens: int, who: str) -> None:
    """Raise unless ``alternatives`` is a tuple of at most ``most`` branches, each a tuple of at
    most ``max_tokens`` valid token ids (``most`` None: any number, of any length)."""
    if alternatives.__class__ is not tuple:
        raise InvalidDraftError(
            "tokens not a tuple",
            f"{who} drafted alternatives of type {type(alternatives).__name__}; Draft.alternatives is a tuple of tuples",
        )
    if most is not None and len(alternatives) > most:
        raise InvalidDraftError("too long", f"{who} drafted {len(alternatives)} alternatives where {most} fit")
    for branch in alternatives:
        _check_token_tuple(branch, who, "an alternative of type {}; branches are tuples of ints")
        if most is not None and len(branch) > max_tokens:
            raise InvalidDraftError(
                "too long", f"{who} drafted an alternative of {len(branch)} tokens where {max_tokens} were asked for"
            )


def _check_token_tuple(tokens: object, who: str, not_a_tuple: str) -> None:
    """Raise unless ``tokens`` is a tuple of valid token ids (``not_a_tuple`` says what was
    drafted instead, ``{}`` standing for its type)."""
    if tokens.__class__ is not tuple:
        raise InvalidDraftError("tokens not a tuple", f"{who} drafted {not_a_tuple.format(type(tokens).__name__)}")
    # a plain loop: a draft is a few tokens, and this is faster than any numpy call
    for token in tokens:
        if token.__class__ is not int or not 0 <= token <= MAX_TOKEN_ID:
            _reject_draft(tokens, who)


def _reject_draft(tokens: tuple, who: str) -> None:
    """Raise naming the first token of ``tokens`` that is not a valid token id."""
    for position, token in enumerate(tokens):
        if token.__class__ is not int:
            raise InvalidDraftError(
                "token not an int",
                f"{who} drafted {shown(token, 40)} ({type(token).__name__}) at position {position}; token ids are Python ints",
            )
        if not 0 <= token <= MAX_TOKEN_ID:
            raise InvalidDraftError(
                "token out of range",
                f"{who} drafted token {token} at position {position}; token ids are ints in [0, {MAX_TOKEN_ID}]",
            )

def _reject(what: str, index: int, token: int) -> None:
    if token < 0:
        raise InvalidTokensError(f"{what}[{index}] = {token} is negative; token ids are non-negative ints")
    raise InvalidTokensError(
        f"{what}[{index}] = {token} is larger than {MAX_TOKEN_ID}, the largest token id specplug stores"
    )
