"""A drafter whose proposer raises at every third draft: what a buggy method does inside vLLM."""

from __future__ import annotations

from typing import Any

from specplug_adapters.vllm import SpecplugDrafter


class Flaky:
    """Forwards to a proposer, raising instead at every ``every``-th ``propose``."""

    def __init__(self, proposer: Any, every: int = 3) -> None:
        self.proposer = proposer
        self.name = getattr(proposer, "name", "flaky")
        self.every = every
        self.calls = 0

    def propose(self, request_id: Any, max_tokens: int) -> Any:
        self.calls += 1
        if self.calls % self.every == 0:
            raise RuntimeError(f"injected fault at draft {self.calls}")
        return self.proposer.propose(request_id, max_tokens)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.proposer, name)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self.proposer


class FaultyDrafter(SpecplugDrafter):
    """vLLM builds it through ``custom_class`` (``--spec-model tests.vllm.engine.faulty.FaultyDrafter``)."""

    def __init__(self, vllm_config: Any, **kwargs: Any) -> None:
        super().__init__(vllm_config, **kwargs)
        self.guard.proposer = Flaky(self.guard.proposer)
