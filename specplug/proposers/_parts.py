"""Shared pieces of the composite proposers (hybrid, adaptive): resolving parts, drafter kinds."""

from __future__ import annotations

from specplug._contract import Proposer

__all__ = ["NEURAL_NAMES", "draft_kind", "resolve_part"]

#: method names that denote a neural drafter when a proposer does not say its ``draft_kind``
NEURAL_NAMES = frozenset({"neural", "mtp", "eagle", "eagle3", "draft_model", "draft-model", "medusa"})


def resolve_part(part: Proposer | str, option: str) -> Proposer:
    """A proposer object as given, or one created by method name with default options."""
    if isinstance(part, Proposer):
        return part
    from specplug._catalog import create

    return create(part)


def draft_kind(proposer: Proposer) -> str:
    """``"neural"`` or ``"lookup"``: the proposer's ``draft_kind`` attribute, else guessed from its name.

    A cost model prices the two kinds differently: a neural draft costs forward passes of a
    head or a model, a lookup costs CPU time only.
    """
    kind = getattr(proposer, "draft_kind", None)
    if kind in ("neural", "lookup"):
        return kind
    return "neural" if getattr(proposer, "name", "") in NEURAL_NAMES else "lookup"
