"""A specplug method published through a real ``specplug`` entry point by a test distribution:
``flaky`` drafts as suffix does but raises at every third draft, what a buggy plugin method does
inside SGLang's scheduler (installed by tests/sglang/engine/test_faults.py)."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

import specplug


class FlakyOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    every: int = Field(3, ge=1)


class Flaky(specplug.Proposer):
    name = "flaky"

    def __init__(self, options: FlakyOptions) -> None:
        super().__init__()
        self.inner = specplug.create("suffix")
        self.every = options.every
        self.calls = 0

    def _start(self, request_id: specplug.RequestId, prompt: np.ndarray) -> None:
        self.inner.start(request_id, prompt)

    def _propose(self, request_id: specplug.RequestId, max_tokens: int) -> specplug.Draft:
        self.calls += 1
        if self.calls % self.every == 0:
            raise RuntimeError(f"injected fault at draft {self.calls}")
        return self.inner.propose(request_id, max_tokens)

    def _extend(self, request_id: specplug.RequestId, tokens: np.ndarray) -> None:
        self.inner.extend(request_id, tokens)

    def _stop(self, request_id: specplug.RequestId) -> None:
        self.inner.stop(request_id)


@specplug.hookimpl
def specplug_register_methods(registrar):
    registrar.add("flaky", Flaky, options=FlakyOptions, summary="suffix, raising at every third draft (a test)")
