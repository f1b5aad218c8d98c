"""Observations every rank of a tensor-parallel engine applies alike: rank 0's, shared.

Under tensor parallelism each rank runs its own copy of an adapter, and a choice that changes
what the drafter's collectives do (run the neural pass or not, at which length) must come out the
same on every rank, or the ranks call their collectives a different number of times and hang.
Choices are made from the token history, which ranks share, and from learnt step costs, which
come from each rank's own clock. :class:`AgreedObservations` keeps the clocks out of the
choices: a rank records what it measured, and every ``every`` calls the ranks exchange through
the engine's own group (one ``share`` call, a collective every rank makes at the same call) and
all of them apply the list rank 0 recorded. Between exchanges nothing is applied, so the learnt
state moves at the same calls on every rank.

>>> agreed = AgreedObservations()  # one rank: what it records is applied at its next call
>>> agreed.record(("step", 1, 0.02))
>>> agreed.take()
[('step', 1, 0.02)]
>>> agreed.take()
[]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["AgreedObservations"]

Observation = TypeVar("Observation")

#: rank 0's recorded list in, the same list out on every rank (a broadcast over the engine's group)
Share = Callable[[list], list]


class AgreedObservations(Generic[Observation]):
    """A rank's measurements, applied on every rank as rank 0 recorded them.

    ``share``: None for one rank (applied at the next :meth:`take`), else the engine group's
    broadcast from rank 0, which every rank reaches at the same :meth:`take` (``take`` is called
    once per step on every rank). ``every``: steps between exchanges (one collective each).
    """

    def __init__(self, share: Share | None = None, *, every: int = 1) -> None:
        if every < 1:
            raise ValueError(f"every = {every!r} is not valid; it must be >= 1")
        self.share = share
        self.every = every
        self._recorded: list[Observation] = []
        self._takes = 0
        #: exchanges made so far (each one collective on the engine's group)
        self.exchanges = 0

    def record(self, observation: Observation) -> None:
        """A measurement of this rank, applied once the ranks have agreed on it."""
        self._recorded.append(observation)

    def take(self) -> list[Observation]:
        """The observations to apply now, the same on every rank: rank 0's, at an exchange; else none."""
        self._takes += 1
        if self.share is None:
            taken, self._recorded = self._recorded, []
            return taken
        if self._takes % self.every:
            return []
        mine, self._recorded = self._recorded, []
        self.exchanges += 1
        return list(self.share(mine))
