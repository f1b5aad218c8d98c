"""Stand-ins for the TensorRT-LLM objects the adapter touches, shaped like its sources.

Each class names the file and version it mirrors (NVIDIA/TensorRT-LLM; read, not copied).
Only attributes and calls the sources show are provided, so the adapter cannot rely on more.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from specplug.verify import verify_greedy


class LlmRequestState(enum.Enum):
    """``tensorrt_llm.bindings.LlmRequestState`` (a pybind enum with ``.name``): the states that
    ``_torch/speculative/ngram.py`` and ``pyexecutor/scheduler.py`` compare against (1.2-1.4)."""

    CONTEXT_INIT = 2
    GENERATION_IN_PROGRESS = 3
    GENERATION_TO_COMPLETE = 4
    GENERATION_COMPLETE = 5


class LlmRequest:
    """``tensorrt_llm/_torch/pyexecutor/llm_request.py`` ``LlmRequest`` (1.2-1.4): the Python
    mirrors set in ``__init__`` (``py_request_id``, ``py_end_id``, ``py_orig_prompt_len``,
    ``py_max_new_tokens``, ``py_batch_idx``, ``py_draft_tokens``, the dummy flags), the binding's
    ``request_id``, ``state``, ``is_first_context_chunk`` and ``get_tokens(beam)``."""

    def __init__(self, request_id: int, prompt: Sequence[int], max_new_tokens: int, end_id: int = -1) -> None:
        self.request_id = request_id
        self.py_request_id = request_id
        self.py_end_id = end_id
        self.py_orig_prompt_len = len(prompt)
        self.py_max_new_tokens = max_new_tokens
        self.py_batch_idx = None
        self.py_draft_tokens: list[int] = []
        self.is_attention_dp_dummy = False
        self.is_cuda_graph_dummy = False
        self.state = LlmRequestState.CONTEXT_INIT
        self.is_first_context_chunk = True
        self._tokens = list(prompt)

    def get_tokens(self, beam: int) -> list[int]:
        assert beam == 0
        return list(self._tokens)  # the binding returns a copy


@dataclass
class ScheduledRequests:
    """``tensorrt_llm/_torch/pyexecutor/scheduler.py`` ``ScheduledRequests``: the two lists drafters read."""

    context_requests: list[LlmRequest] = field(default_factory=list)
    generation_requests: list[LlmRequest] = field(default_factory=list)


class Drafter(abc.ABC):
    """``tensorrt_llm/_torch/speculative/drafter.py`` ``Drafter`` as of the releases with
    ``max_draft_len``/``draft_len_schedule`` (2025-26): the constructor's attributes, the one abstract
    method, ``update_max_total_draft_tokens`` and padding to the static length (our own code)."""

    def __init__(self, max_draft_len=None, max_total_draft_tokens=None, max_concurrency=None, draft_len_schedule=None) -> None:
        self.max_draft_len = max_draft_len
        self.max_total_draft_tokens = max_total_draft_tokens
        self._static_max_total_draft_tokens = max_total_draft_tokens
        self.max_concurrency = max_concurrency
        self.draft_len_schedule = draft_len_schedule

    @abc.abstractmethod
    def prepare_draft_tokens(self, scheduled_requests, resource_manager=None) -> None: ...

    def update_max_total_draft_tokens(self, new_max_total_draft_tokens: int) -> None:
        self.max_total_draft_tokens = new_max_total_draft_tokens
        self.max_draft_len = new_max_total_draft_tokens

    def pad_draft_tokens_for_cuda_graph(self, scheduled_requests, resource_manager=None) -> None:
        for request in scheduled_requests.generation_requests:
            request.py_draft_tokens = list(request.py_draft_tokens) + [0] * (
                self._static_max_total_draft_tokens - len(request.py_draft_tokens)
            )


class BaseResourceManager(abc.ABC):
    """``tensorrt_llm/_torch/pyexecutor/resource_manager.py`` ``BaseResourceManager`` (1.2-1.4):
    two abstract methods, the others no-ops."""

    @abc.abstractmethod
    def get_max_resource_count(self) -> int: ...

    @abc.abstractmethod
    def get_needed_resource_to_completion(self, request) -> int: ...

    def add_dummy_requests(self, request_ids) -> None:
        pass

    def prepare_resources(self, scheduled_batch) -> None:
        pass

    def update_resources(self, scheduled_batch) -> None:
        pass

    def free_resources(self, request) -> None:
        pass

    def shutdown(self) -> None:
        pass


def markov_target(vocab: int = 40, seed: int = 7) -> Callable[[Sequence[int]], int]:
    """A deterministic greedy 'model': the next token is a fixed function of the last two, so
    outputs repeat themselves and a lookup drafter gets drafts accepted."""
    import random

    rng = random.Random(seed)
    table = [rng.randrange(vocab) for _ in range(vocab * vocab)]
    return lambda history: table[(history[-1] % vocab) * vocab + history[-2] % vocab]


def plain_output(target: Callable[[Sequence[int]], int], prompt: Sequence[int], max_new: int) -> list[int]:
    history = list(prompt)
    for _ in range(max_new):
        history.append(target(history))
    return history[len(prompt) :]


class Executor:
    """The order in which TensorRT-LLM's PyExecutor (two-model path, no overlap scheduler) drives a
    drafter and its resource manager each step: ``prepare_resources``; ``prepare_draft_tokens``;
    ``pad_draft_tokens_for_cuda_graph``; forward + greedy verification (specplug's reference
    verifier); ``update_resources``; ``free_resources`` for finished requests. Contexts arrive in
    chunks; ``schedule`` (batch size -> draft length) stands in for ``draft_len_schedule``."""

    def __init__(self, drafter, resources, target, *, chunk: int = 64, schedule: Callable[[int], int] | None = None) -> None:
        self.drafter, self.resources, self.target = drafter, resources, target
        self.chunk, self.schedule = chunk, schedule
        self.active: list[LlmRequest] = []
        self.outputs: dict[int, list[int]] = {}
        self.accepted = 0
        self.drafted_lengths: list[tuple[int, int]] = []  # (draft length before padding, limit that step)
        self._done_chunks: dict[int, int] = {}

    def add(self, request: LlmRequest) -> None:
        self.active.append(request)
        self._done_chunks[request.request_id] = 0

    def step(self) -> None:
        batch = ScheduledRequests()
        for request in self.active:
            (batch.context_requests if request.state == LlmRequestState.CONTEXT_INIT else batch.generation_requests).append(request)
        for index, request in enumerate(batch.generation_requests):
            request.py_batch_idx = index
        self.resources.prepare_resources(batch)
        limit = self.drafter.max_total_draft_tokens
        if self.schedule is not None:
            limit = self.schedule(len(self.active))
            self.drafter.update_max_total_draft_tokens(limit)
        for request in batch.generation_requests:
            request.py_draft_tokens = [0] * limit  # the executor's placeholder before drafting
        self.drafter.prepare_draft_tokens(batch, None)
        for request in batch.generation_requests:
            self.drafted_lengths.append((len(request.py_draft_tokens), limit))
        self.drafter.pad_draft_tokens_for_cuda_graph(batch, None)
        for request in batch.context_requests:
            self._prefill(request)
        for request in batch.generation_requests:
            self._verify(request)
        self.resources.update_resources(batch)
        for request in list(self.active):
            if request.state == LlmRequestState.GENERATION_COMPLETE:
                self.resources.free_resources(request)
                self.active.remove(request)
                self.outputs[request.request_id] = request._tokens[request.py_orig_prompt_len :]

    def _prefill(self, request: LlmRequest) -> None:
        done = self._done_chunks[request.request_id] + self.chunk
        self._done_chunks[request.request_id] = done
        request.is_first_context_chunk = done <= self.chunk
        if done >= request.py_orig_prompt_len:
            request._tokens.append(self.target(request._tokens))
            request.state = LlmRequestState.GENERATION_IN_PROGRESS
            self._finish_if_done(request)

    def _verify(self, request: LlmRequest) -> None:
        draft = request.py_draft_tokens
        history = list(request._tokens)
        argmax = []
        for token in [*draft, None]:
            argmax.append(self.target(history))
            if token is not None:
                history.append(token)
        verdict = verify_greedy(draft, argmax)
        room = request.py_orig_prompt_len + request.py_max_new_tokens - len(request._tokens)
        request._tokens += list(verdict.tokens[:room])
        self.accepted += min(verdict.accepted, room)
        self._finish_if_done(request)

    def _finish_if_done(self, request: LlmRequest) -> None:
        if len(request._tokens) - request.py_orig_prompt_len >= request.py_max_new_tokens:
            request.state = LlmRequestState.GENERATION_COMPLETE

    def run(self, max_steps: int = 100_000) -> None:
        for _ in range(max_steps):
            if not self.active:
                return
            self.step()
        raise AssertionError("requests did not finish")
