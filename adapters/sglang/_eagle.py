"""A composing method (``hybrid``) over SGLang's own EAGLE/MTP worker: lookup drafts overlaid on the head's.

``SPECPLUG_<METHOD>_EAGLE`` (``_EAGLE3`` for EAGLE-3 heads, ``_NEXTN`` for a model's own MTP layers) runs SGLang's ``EAGLEWorkerV2``
as it is (``_STANDALONE`` its subclass for a draft model, adapters/sglang/_standalone.py): the head drafts, the target verifies, the head extends over what was accepted. One
method is overridden, the draft worker's ``draft(batch) -> EagleVerifyInput``; after SGLang has
built the step's verify input, :class:`EagleOverlay` hands each request's EAGLE chain to the
method as its neural draft (:class:`specplug.engine.EngineDrafts`) and, where the method picks
another draft (the lookup's), writes that chain's tokens over the EAGLE chain's. With
``--speculative-eagle-topk 1`` (the only top-k the overlay takes) the verify tree is a chain, so
the mask, positions and retrieve links stay valid whatever tokens the chain holds: only the
tokens change. A shorter chosen draft keeps the head's tokens after it (they are verified like
any token, so the output cannot change). The verify, the KV moves, EAGLE's draft extend (over
the accepted tokens, whichever source drafted them) and the metrics stay SGLang's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker, EAGLEWorkerV2

from specplug.engine import EngineDrafting, EngineDrafts
from specplug_adapters.sglang._config import LOGGER_NAME, create_overlay_method, read_options, read_stats_settings
from specplug_adapters.sglang._worker import _History, sync_requests

__all__ = ["EagleOverlay", "SpecplugEagleWorker", "install_overlay"]

log = logging.getLogger(LOGGER_NAME)


class EagleOverlay(EngineDrafting):
    """Per request, the composing method's choice between the EAGLE chain and its own draft."""

    def __init__(self, algorithm: str, method: str, neural_name: str, worker: str = "EAGLE", **stats: Any) -> None:
        self.algorithm = algorithm
        self.worker = worker
        self.engine_drafts = EngineDrafts(neural_name)
        super().__init__(
            create_overlay_method(method, read_options(), self.engine_drafts, worker),
            method=algorithm,
            logger=LOGGER_NAME,
            **stats,
        )
        self._lengths: dict[Any, int] = {}  # request id -> history length at its last decode step

    def choose(
        self,
        request_ids: Sequence[Any],
        histories: Sequence[_History],
        chains: Sequence[Sequence[int]],
        in_step: Sequence[bool] | None = None,
    ) -> list[list[int]]:
        """Per request, the chain to verify below the root: the head's ``chains[row]``, or the method's choice over it.

        ``in_step[row]`` false: that row keeps the head's chain (its history does not end at the root).
        """
        rows, self._lengths = sync_requests(self, self._lengths, request_ids, histories)
        if in_step is not None:
            rows = [request_id if ok else None for request_id, ok in zip(rows, in_step)]
        width = max((len(chain) for chain in chains), default=0)
        self.engine_drafts.max_draft_tokens = width
        for request_id, chain in zip(rows, chains):
            if request_id is not None:
                self.engine_drafts.offer(request_id, chain)
        drafts = self.draft([(request_id, width) for request_id in rows], batch_size=len(rows))
        # an empty choice (a row that cannot draft, or a fault) keeps the head's chain
        return [
            list(draft.tokens) + list(chain[len(draft.tokens) :]) if draft.tokens else list(chain)
            for draft, chain in zip(drafts, chains)
        ]

    def apply(self, batch: Any, verify_input: Any) -> None:
        """Overlay the method's choices on SGLang's verify input, in place (tokens only: the tree is a chain)."""
        try:
            width = verify_input.draft_token_num
            tokens = verify_input.draft_token.view(-1, width)
            rows = tokens.tolist()
            histories = [_History(req.origin_input_ids_unpadded, req.output_ids, ()) for req in batch.reqs]
            if len(rows) != len(histories):
                raise ValueError(f"{len(rows)} verify rows for {len(histories)} requests")
            # the root is the last committed token; a row whose history ends elsewhere is not in step (kept as drafted)
            in_step = [len(history) > 0 and history.tail(len(history) - 1) == [row[0]] for history, row in zip(histories, rows)]
            ids = [req.rid for req in batch.reqs]
            chosen = self.choose(ids, histories, [row[1:] for row in rows], in_step)
            changed = [b for b, row in enumerate(rows) if chosen[b] != row[1:]]
            if changed:
                import torch

                new = torch.tensor([[rows[b][0], *chosen[b]] for b in changed], dtype=tokens.dtype)
                tokens[torch.tensor(changed, device=tokens.device)] = new.to(tokens.device)
                self.counters["overlaid_rows"] += len(changed)
        except Exception as error:  # noqa: BLE001 - the overlay's faults cost its choice, never the scheduler
            self.guard.record_fault(f"the {self.worker} overlay", error, "SGLang's own drafts go to verify this step")
            self.reset()

    def after_draft(self, batch: Any, result: Any, with_topology: bool) -> Any:
        """What an overlaid draft worker's ``draft`` returns: SGLang's ``result``, overlaid unless the batch is idle."""
        if not batch.forward_mode.is_idle():
            self.apply(batch, result[0] if with_topology else result)
        return result

    def reset(self) -> None:
        """Forget every request (SGLang cleared its cache pool, or a fault left the requests' state unknown)."""
        self._lengths.clear()
        self.batch.stop_all()


class _OverlaidDraftWorker(EagleDraftWorker):
    """SGLang's EAGLE draft worker with the overlay applied to each step's verify input."""

    overlay: EagleOverlay

    def draft(self, batch: Any, *, with_topology: bool = False) -> Any:
        return self.overlay.after_draft(batch, super().draft(batch, with_topology=with_topology), with_topology)


def install_overlay(worker: Any, server_args: Any, overlaid_class: type, worker_name: str) -> EagleOverlay | None:
    """Overlay the method named by ``server_args`` on ``worker``'s draft worker (None on a PP stage that does not draft).

    The one override: the draft worker's class becomes ``overlaid_class`` (a subclass of its own
    whose ``draft`` runs SGLang's, then :meth:`EagleOverlay.after_draft`).
    """
    if worker._draft_worker is None:
        return None
    from specplug_adapters.sglang._config import overlay_algorithm_names

    algorithm = str(server_args.speculative_algorithm).upper()
    method, source = overlay_algorithm_names()[algorithm]
    stats_file, stats_interval = read_stats_settings()
    overlay = EagleOverlay(
        algorithm,
        method,
        source,
        worker=worker_name,
        stats_file=stats_file,
        stats_interval=stats_interval,
        details={"engine": "SGLang", "num_draft_tokens": worker.speculative_num_draft_tokens},
    )
    worker._draft_worker.__class__ = overlaid_class
    worker._draft_worker.overlay = overlay
    log.info("specplug %s overlay on SGLang's %s drafts, options %s", method, worker_name, read_options())
    return overlay


class SpecplugEagleWorker(EAGLEWorkerV2):
    """SGLang's EAGLE worker, its draft worker's ``draft`` overlaid with a composing specplug method."""

    def __init__(self, server_args: Any, gpu_id: int, nccl_port: int, target_worker: Any) -> None:
        super().__init__(server_args, gpu_id, nccl_port, target_worker)
        self.overlay = install_overlay(self, server_args, _OverlaidDraftWorker, "EAGLE")

    def clear_cache_pool(self) -> None:
        super().clear_cache_pool()
        overlay = getattr(self, "overlay", None)  # None on a PP stage that does not draft
        if overlay is not None:
            overlay.reset()
