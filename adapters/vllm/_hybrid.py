"""``specplug.hybrid`` inside vLLM: lookup drafts overlaid on the model's own neural drafts.

vLLM runs its MTP/EAGLE/draft-model drafter as usual; this overlay then decides, per request,
whether that draft or specplug's lookup draft goes to verification (the ``hybrid`` method's
choice). It runs where vLLM's drafts are complete and its bookkeeping is done: at the return
of ``GPUModelRunner.propose_draft_token_ids`` with ``disable_padded_drafter_batch = true``
(the plugin sets it), when ``sampled_token_ids`` are the per-request CPU lists and every
row's history is in ``input_batch.token_ids_cpu``. The neural drafts are handed to the
hybrid as a :class:`EngineDrafts` proposer, so the hybrid sees them as any other Proposer.

vLLM has already paid for the neural pass when the overlay runs, so ``Draft.needs_neural``
saves nothing here; the choice still raises acceptance where the lookup is better.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from specplug import Draft, Proposer, RequestId
from specplug_adapters.vllm._batch import BatchDrafting
from specplug_adapters.vllm._config import create_method, read_settings
from specplug_adapters.vllm._stats import LOGGER_NAME

__all__ = ["EngineDrafts", "HybridOverlay"]

log = logging.getLogger(LOGGER_NAME)


class EngineDrafts(Proposer):
    """The engine's neural drafts of the current step, as a Proposer.

    The adapter :meth:`offer`\\ s each request's draft before asking the hybrid; ``propose``
    returns it (cut to ``max_tokens``). Acceptance is inferred by the base class from the
    tokens that ``extend`` brings, as for every proposer.

    >>> drafts = EngineDrafts("mtp")
    >>> drafts.start("r", [1, 2])
    >>> drafts.offer("r", [7, 8, 9])
    >>> drafts.propose("r", 2).tokens
    (7, 8)
    >>> drafts.extend("r", [7, 5])
    1
    """

    draft_kind = "neural"

    def __init__(self, name: str = "neural") -> None:
        super().__init__()
        self.name = name
        #: the engine's draft length this step (vLLM's K), which the hybrid weighs the neural part by
        self.max_draft_tokens: int | None = None
        self._offered: dict[RequestId, tuple[int, ...]] = {}

    def offer(self, request_id: RequestId, tokens: Sequence[int]) -> None:
        """The engine's draft for ``request_id`` at this step."""
        self._offered[request_id] = tuple(int(token) for token in tokens)

    def _start(self, request_id: RequestId, prompt: np.ndarray) -> None:
        self._offered.pop(request_id, None)

    def _propose(self, request_id: RequestId, max_tokens: int) -> Draft:
        return Draft(self._offered.pop(request_id, ())[:max_tokens], self.name)

    def _extend(self, request_id: RequestId, tokens: np.ndarray) -> None:
        pass

    def _stop(self, request_id: RequestId) -> None:
        self._offered.pop(request_id, None)


class HybridOverlay(BatchDrafting):
    """Replaces vLLM's neural drafts by the hybrid's choice, request by request."""

    def __init__(self, vllm_config: Any) -> None:
        settings = read_settings(vllm_config.additional_config, default_method="hybrid")
        neural_name = settings.neural or vllm_config.speculative_config.method
        self.engine_drafts = EngineDrafts(str(neural_name))
        super().__init__(settings, create_method(settings, neural=self.engine_drafts))
        log.info("specplug hybrid overlay on vLLM's %s drafts, options %s", neural_name, self.settings.options)

    def apply(self, runner: Any, num_tokens: int, sampled_token_ids: Any, drafts: Any) -> Any:
        """The step's drafts after the overlay, in the form vLLM gave them (tensor or lists).

        ``sampled_token_ids`` are CPU lists when vLLM drafted after its bookkeeping, or the
        padded ``[batch, K + 1]`` tensor (-1 for rejected positions) when it drafted before it
        (draft models); the row histories then do not hold this step's tokens yet.
        """
        engine_rows = _rows(drafts)
        try:
            batch = runner.input_batch
            if isinstance(sampled_token_ids, list):
                new_tokens, lengths = sampled_token_ids, batch.num_tokens_no_spec
            else:
                new_tokens, lengths = _padded_new_tokens(runner, sampled_token_ids)
            chosen = self._choose(runner, num_tokens, new_tokens, lengths, engine_rows)
            result = _like(drafts, chosen, engine_rows)
        except Exception as error:  # noqa: BLE001 - the overlay must never take the engine down
            self.guard.record_fault("the hybrid overlay", error, "vLLM's own drafts are used this step")
            return drafts
        self.stats.step()
        return result

    def _choose(
        self,
        runner: Any,
        num_tokens: int,
        sampled: Sequence[Sequence[int]],
        lengths: np.ndarray,
        neural: list[list[int]],
    ) -> list[list[int]]:
        batch = runner.input_batch
        self.engine_drafts.max_draft_tokens = max(1, num_tokens)
        request_ids = list(batch.req_ids[: len(sampled)])
        rows = self.tracker.update(sampled, lengths, batch.token_ids_cpu, request_ids, getattr(runner, "requests", None))
        chosen: list[list[int]] = []
        for row, request_id in enumerate(rows):
            engine_row = neural[row] if row < len(neural) else []
            if request_id is None:
                chosen.append(engine_row)
                continue
            self.engine_drafts.offer(request_id, engine_row)
            draft = self.guard.propose(request_id, max(1, num_tokens))
            # the hybrid drafts nothing only when it faulted (or its request was disabled by a
            # fault): that costs only specplug's choice, vLLM's own draft still goes out
            chosen.append(list(draft.tokens) or engine_row)
        return chosen


def _padded_new_tokens(runner: Any, sampled: Any) -> tuple[list[list[int]], np.ndarray]:
    """Per row, the tokens this step added, and the history lengths they bring, from the padded tensor."""
    rows = sampled.tolist()
    discard = getattr(getattr(runner, "discard_request_mask", None), "np", None)
    new_tokens = [
        [] if discard is not None and bool(discard[row]) else [token for token in tokens if token >= 0]
        for row, tokens in enumerate(rows)
    ]
    before = np.asarray(runner.input_batch.num_tokens_no_spec[: len(rows)], dtype=np.int64)
    return new_tokens, before + np.array([len(tokens) for tokens in new_tokens], dtype=np.int64)


def _rows(drafts: Any) -> list[list[int]]:
    if hasattr(drafts, "tolist"):
        return [list(row) for row in drafts.tolist()]
    return [list(row) for row in drafts]


def _like(original: Any, rows: list[list[int]], engine_rows: list[list[int]]) -> Any:
    """``rows`` in the form of ``original``: lists stay lists; a ``[batch, K]`` tensor stays one.

    A tensor needs every row at full width: a shorter choice is padded with the engine's own
    tokens at those positions (they are verified like any draft token, so output is unchanged;
    at worst they are rejected).
    """
    if not hasattr(original, "tolist"):
        return rows
    import torch

    width = original.shape[1]
    full = [(tokens[:width] + engine[len(tokens) :])[:width] for tokens, engine in zip(rows, engine_rows)]
    return torch.tensor(full, dtype=original.dtype).reshape(original.shape).to(original.device)
