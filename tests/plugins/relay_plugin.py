"""An out-of-tree composite method, ``relay``, published by a test distribution through a real
entry point (see ``tests/conftest.py``'s ``relay_distribution``).

It is built like the built-in composites but named nothing like them, so a test that gives it
the same treatment as ``hybrid`` proves that adapters and the bench read capabilities, not
names: it composes the engine's own drafter (option ``head``), has a lookup part (``backup``),
takes a cost model (``price``) and the batch size. It drafts the head's tokens when the head
has any, else the backup's.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

import specplug


class RelayOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    head: specplug.Proposer
    backup: specplug.Proposer | str = "ngram"
    price: object | None = None
    batch_size: int = Field(1, ge=1)


class Relay(specplug.Proposer):
    name = "relay"
    draft_kind = "neural"
    takes_batch_size = True

    def __init__(self, options: RelayOptions) -> None:
        super().__init__()
        self.head = options.head
        self.backup = specplug.create(options.backup) if isinstance(options.backup, str) else options.backup
        self.price = options.price
        self.batch_size = options.batch_size
        self.batch_sizes_seen: list[int] = []

    def set_batch_size(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.batch_sizes_seen.append(batch_size)

    def _start(self, request_id: specplug.RequestId, prompt: np.ndarray) -> None:
        self.head.start(request_id, prompt)
        self.backup.start(request_id, prompt)

    def _propose(self, request_id: specplug.RequestId, max_tokens: int) -> specplug.Draft:
        draft = self.head.propose(request_id, max_tokens)
        if draft.tokens:
            return specplug.Draft(draft.tokens, f"relay:{draft.source}", None)
        backup = self.backup.propose(request_id, max_tokens)
        return specplug.Draft(backup.tokens, f"relay:{backup.source}", None, needs_neural=False)

    def _extend(self, request_id: specplug.RequestId, tokens: np.ndarray) -> None:
        self.head.extend(request_id, tokens)
        self.backup.extend(request_id, tokens)

    def _stop(self, request_id: specplug.RequestId) -> None:
        self.head.stop(request_id)
        self.backup.stop(request_id)


@specplug.hookimpl
def specplug_register_methods(registrar: specplug.MethodRegistrar) -> None:
    registrar.add(
        "relay",
        Relay,
        options=RelayOptions,
        summary="the engine's own draft when it has one, else a lookup's (a test composite)",
        capabilities=specplug.MethodCapabilities(
            kind="neural", engine_drafter_option="head", part_options=("backup",), cost_option="price", takes_batch_size=True
        ),
    )
