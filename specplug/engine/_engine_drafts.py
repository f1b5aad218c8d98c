"""The engine's own drafts, as a Proposer a composite can take as its engine drafter."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from specplug import Draft, Proposer, RequestId

__all__ = ["EngineDrafts"]


class EngineDrafts(Proposer):
    """The drafts an engine's own drafter (MTP/EAGLE head, draft model) made this step, as a Proposer.

    Where the engine runs its drafter itself, the adapter :meth:`offer`\\ s each request's
    draft before asking the composite; ``propose`` returns it (cut to ``max_tokens``). It
    drafts nothing when nothing was offered since the last ``propose``. Acceptance is
    inferred by the base class from the tokens that ``extend`` brings, as for every proposer.
    The adapter sets ``max_draft_tokens`` to the engine's draft length of the step.

    An engine whose drafter is costly can instead let the composite decide first: with
    :meth:`on_demand` the drafts of the step come from a callable that runs the drafter and
    offers them, called only when the composite asks this part for a draft; a step that asks
    no row never runs it.

    >>> drafts = EngineDrafts("mtp")
    >>> drafts.start("r", [1, 2])
    >>> drafts.offer("r", [7, 8, 9])
    >>> drafts.propose("r", 2).tokens
    (7, 8)
    >>> drafts.extend("r", [7, 5])
    1
    """

    draft_kind = "neural"
    #: the engine's drafter runs once for the whole batch, whichever rows take its drafts
    shared_pass = True

    def __init__(self, name: str = "neural") -> None:
        super().__init__()
        self.name = name
        self.max_draft_tokens: int | None = None
        self._offered: dict[RequestId, tuple[int, ...]] = {}
        self._fetch: Callable[[], None] | None = None

    def on_demand(self, fetch: Callable[[], None]) -> None:
        """This step's drafts come from ``fetch`` (which offers them), called at the first draft asked.

        Earlier offers are dropped: a row that was not asked at an earlier step must not get
        that step's draft now.

        >>> drafts = EngineDrafts("eagle")
        >>> drafts.start("r", [1, 2])
        >>> runs = []
        >>> drafts.on_demand(lambda: runs.append(drafts.offer("r", [7, 8])))
        >>> len(runs), drafts.propose("r", 2).tokens, len(runs)
        (0, (7, 8), 1)
        """
        self._offered.clear()
        self._fetch = fetch

    def offer(self, request_id: RequestId, tokens: Sequence[int]) -> None:
        """The engine's draft for ``request_id`` at this step."""
        self._offered[request_id] = tuple(int(token) for token in tokens)

    def offer_rows(self, request_ids: Sequence[RequestId | None], drafts: Sequence[Sequence[int]]) -> None:
        """The engine's drafts of a whole step, row by row (a row whose id is None is skipped).

        >>> drafts = EngineDrafts("mtp")
        >>> drafts.offer_rows(["a", None], [[7, 8], [9]])
        >>> drafts._offered
        {'a': (7, 8)}
        """
        offered = self._offered
        for request_id, tokens in zip(request_ids, drafts):
            if request_id is not None:
                offered[request_id] = tuple(map(int, tokens))

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        # an offer may come before the start: a batch step starts the request and drafts it at
        # once (stop clears what a finished request left)
        pass

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        if self._fetch is not None:  # the first row asked this step: run the engine's drafter once
            fetch, self._fetch = self._fetch, None
            fetch()
        return Draft(self._offered.pop(request_id, ())[:max_tokens], self.name)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        pass

    def _stop(self, request_id: RequestId) -> None:
        self._offered.pop(request_id, None)
