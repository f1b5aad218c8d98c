"""Composing methods inside vLLM: lookup drafts overlaid on the model's own neural drafts.

A method that composes the engine's own drafter (it declares ``engine_drafter_option``:
``specplug.hybrid``, or a plugin's composite) runs here. vLLM runs its MTP/EAGLE/draft-model
drafter as usual; this overlay then lets the method decide, per request, what goes to
verification. It runs where vLLM's drafts are complete and its bookkeeping is done: at the
return of ``GPUModelRunner.propose_draft_token_ids`` with ``disable_padded_drafter_batch =
true`` (the plugin sets it), when ``sampled_token_ids`` are the per-request CPU lists and
every row's history is in ``input_batch.token_ids_cpu``. The neural drafts reach the method
as an :class:`~specplug.engine.EngineDrafts` proposer, so it sees them as any other Proposer.

vLLM has already paid for the neural pass when the overlay runs, so ``Draft.needs_neural``
saves nothing here; the choice still raises acceptance where the lookup is better.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from specplug import InvalidOptionError
from specplug.engine import EngineDrafting, EngineDrafts, capabilities_of, methods_composing_engine_drafter
from specplug_adapters.vllm._config import PREFIX, create_method, read_settings
from specplug_adapters.vllm._stats import LOGGER_NAME, stats_options

__all__ = ["EngineDrafts", "HybridOverlay"]

log = logging.getLogger(LOGGER_NAME)


class HybridOverlay(EngineDrafting):
    """Replaces vLLM's neural drafts by a composing method's choice, request by request."""

    def __init__(self, vllm_config: Any) -> None:
        settings = read_settings(vllm_config.additional_config)
        if not capabilities_of(settings.method).composes_engine_drafter:
            composing = ", ".join(PREFIX + name for name in methods_composing_engine_drafter())
            raise InvalidOptionError(
                f"{PREFIX}{settings.method} does not compose the model's own drafter, so there is nothing to "
                f"overlay; the overlay runs {composing or 'no registered method'}"
            )
        neural_name = settings.neural or vllm_config.speculative_config.method
        self.settings = settings
        self.engine_drafts = EngineDrafts(str(neural_name))
        super().__init__(create_method(settings, self.engine_drafts), **stats_options(settings))
        log.info("specplug %s overlay on vLLM's %s drafts, options %s", settings.method, neural_name, settings.options)

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
            return _like(drafts, chosen, engine_rows)
        except Exception as error:  # noqa: BLE001 - the overlay must never take the engine down
            self.guard.record_fault("the hybrid overlay", error, "vLLM's own drafts are used this step")
            return drafts

    def _choose(
        self,
        runner: Any,
        num_tokens: int,
        sampled: Sequence[Sequence[int]],
        lengths: np.ndarray,
        neural: list[list[int]],
    ) -> list[list[int]]:
        batch = runner.input_batch
        limit = max(1, num_tokens)
        self.engine_drafts.max_draft_tokens = limit  # vLLM's K this step, which a composite weighs the neural part by
        request_ids = list(batch.req_ids[: len(sampled)])
        engine_rows = [neural[row] if row < len(neural) else [] for row in range(len(sampled))]
        # one call to the method for the whole step: starts, stops, new tokens and choices; vLLM's
        # own drafts are offered once the rows' request ids are known, before the method drafts
        chosen = self.step_token_lists(
            sampled, lengths, batch.token_ids_cpu, np.full(len(sampled), limit, dtype=np.int64), request_ids,
            getattr(runner, "requests", None),
            before_drafting=lambda rows: self.engine_drafts.offer_rows(rows, engine_rows),
        )
        # an empty choice (a row that cannot draft, or a fault) costs only specplug's choice:
        # vLLM's own draft still goes out
        return [tokens or engine_row for tokens, engine_row in zip(chosen, engine_rows)]


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

    >>> _like([[50, 51], [60, 61]], [[2, 3], [60, 61]], [[50, 51], [60, 61]])
    [[2, 3], [60, 61]]
    """
    if not hasattr(original, "tolist"):
        return rows
    import torch

    width = original.shape[1]
    full = [(tokens[:width] + engine[len(tokens) :])[:width] for tokens, engine in zip(rows, engine_rows)]
    return torch.tensor(full, dtype=original.dtype).reshape(original.shape).to(original.device)
