"""A composing method (``hybrid``) over SGLang's STANDALONE worker: lookup drafts overlaid on a draft model's.

SGLang's ``StandaloneWorkerV2`` is its EAGLE worker with another draft worker
(``StandaloneDraftWorker``: a whole model with its own embedding and LM head, loaded from
``--speculative-draft-model-path``); it inherits the EAGLE draft step, ``draft(batch) ->
EagleVerifyInput``, and the verify. So ``SPECPLUG_<METHOD>_STANDALONE`` is the EAGLE overlay
(:class:`~specplug_adapters.sglang._eagle.EagleOverlay`) on that draft worker, the draft model's
chain being the method's neural draft (source ``draft_model``).
"""

from __future__ import annotations

from typing import Any

from sglang.srt.speculative.standalone_worker_v2 import StandaloneDraftWorker, StandaloneWorkerV2

from specplug_adapters.sglang._eagle import EagleOverlay, install_overlay

__all__ = ["SpecplugStandaloneWorker"]


class _OverlaidStandaloneDraftWorker(StandaloneDraftWorker):
    """SGLang's STANDALONE draft worker with the overlay applied to each step's verify input."""

    overlay: EagleOverlay

    def draft(self, batch: Any, *, with_topology: bool = False) -> Any:
        return self.overlay.after_draft(batch, super().draft(batch, with_topology=with_topology), with_topology)


class SpecplugStandaloneWorker(StandaloneWorkerV2):
    """SGLang's STANDALONE worker, its draft worker's ``draft`` overlaid with a composing specplug method."""

    def __init__(self, server_args: Any, gpu_id: int, nccl_port: int, target_worker: Any) -> None:
        super().__init__(server_args, gpu_id, nccl_port, target_worker)
        self.overlay = install_overlay(self, server_args, _OverlaidStandaloneDraftWorker, "STANDALONE")

    def clear_cache_pool(self) -> None:
        super().clear_cache_pool()
        overlay = getattr(self, "overlay", None)  # None on a PP stage that does not draft
        if overlay is not None:
            overlay.reset()
