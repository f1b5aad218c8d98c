"""``SpecplugWorker``: a specplug method as SGLang's draft worker, on the n-gram worker's verify path.

SGLang's n-gram worker drafts a tree per request (``_prepare_draft_tokens`` -> ids and an
ancestor mask), then verifies it, moves the accepted tokens' KV and relays them under the
overlap schedule. This subclass keeps all of that and replaces only where drafts come from:
instead of SGLang's C++ corpus, each decode step

1. reads each request's history (``origin_input_ids + output_ids``, plus, under the overlap
   schedule, the accepted tokens not yet in ``output_ids``, as the n-gram worker does);
2. brings the proposer in step and drafts, in one call through the engine layer
   (:meth:`specplug.engine.EngineDrafting.step_requests`, requests by id with their
   histories): new requests start, running ones extend by what they gained, requests gone
   from the decode batch (finished, aborted, retracted) stop, and every request is drafted
   within ``speculative_num_draft_tokens - 1`` tokens (or what its ``custom_params`` ask:
   off, or a cap), the batch size handed on;
3. writes the drafts as SGLang draft trees (:func:`draft_trees`): a chain for a
   single draft, a real tree where the proposer has alternatives (suffix: its vote grown into a
   speculation tree of the voters' continuations), at most ``speculative_ngram_max_bfs_breadth`` branches (1: chains only).
   SGLang's tree verify then accepts the longest branch the target agrees with.

A fault of the proposer costs that request its draft; a fault anywhere in this glue costs the
step's drafts (root-only trees, plain decoding for one step), never the scheduler.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
from sglang.srt.runtime_context import get_device, get_schedule, get_spec
from sglang.srt.speculative.base_spec_worker import BaseSpecWorker
from sglang.srt.speculative.ngram_worker import NGRAMWorker

from specplug.engine import EngineDrafting
from specplug_adapters.sglang._config import LOGGER_NAME, create_proposer, method_of, read_options, read_stats_settings
from specplug_adapters.sglang._requests import request_controls
from specplug_adapters.sglang._trees import draft_trees

__all__ = ["SpecplugWorker"]

log = logging.getLogger(LOGGER_NAME)


class _History(Sequence[int]):
    """A request's tokens without copying them until a slice is asked for (a new request's prompt)."""

    def __init__(self, prompt: Sequence[int], output: Sequence[int], pending: Sequence[int]) -> None:
        self._parts = (prompt, output, pending)
        self._length = sum(len(part) for part in self._parts)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice) and index.step is None:
            # the engine layer reads a history's tail (what it gained, its fingerprint): only those parts
            start, stop, _ = index.indices(self._length)
            return self.tail(start)[: max(stop - start, 0)]
        return [int(token) for part in self._parts for token in part][index]

    def tail(self, start: int) -> list[int]:
        """The tokens from ``start`` on, reading only the parts that hold them."""
        out: list[int] = []
        offset = 0
        for part in self._parts:
            if offset + len(part) > start:
                out.extend(int(token) for token in part[max(0, start - offset) :])
            offset += len(part)
        return out


def sync_requests(
    drafting: EngineDrafting, seen: dict[Any, int], request_ids: Sequence[Any], histories: Sequence[_History]
) -> tuple[list[Any], dict[Any, int]]:
    """Bring ``drafting`` in step with this decode step's requests (None ids are left out of it);
    the EAGLE overlay's sync (it drafts through :meth:`EngineDrafting.draft` after offering the
    head's chains; the worker below syncs and drafts in one ``step_requests``).

    ``seen`` holds each request's history length at its last step; a request extends by what
    it gained since, a new one starts, one absent from the step stops. Returns the rows' ids
    to draft for and the new ``seen``.
    """
    new_tokens: list[list[int]] = []
    for request_id, history in zip(request_ids, histories):
        known = seen.get(request_id)
        start = known if known is not None and known < len(history) else len(history) - 1
        new_tokens.append(history.tail(max(start, 0)) if len(history) else [])
    lengths = [len(history) for history in histories]
    rows = drafting.sync_batch(new_tokens, lengths, histories, list(request_ids))
    return rows, {request_id: length for request_id, length in zip(request_ids, lengths) if request_id is not None}


class _NoCorpus:
    """Stands where the n-gram worker keeps its C++ corpus: specplug's proposer learns through the sync."""

    def synchronize(self) -> None:
        pass

    def reset(self) -> None:
        pass

    def erase_match_state(self, request_ids: list[Any]) -> None:
        pass  # requests that left the batch are stopped by the sync at the next decode step

    def batch_put(self, batch_tokens: list[list[int]]) -> None:
        pass

    def _no_external(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(
            "external n-gram corpora belong to SGLang's NGRAM; specplug's SPECPLUG_* algorithms take none"
        )

    load_external_corpus_named = commit_external_corpus_load = remove_external_corpus = _no_external

    def list_external_corpora(self) -> dict[str, int]:
        return {}


class SpecplugWorker(NGRAMWorker):
    """SGLang's draft worker for every SPECPLUG_* algorithm (the method comes from the algorithm name)."""

    def __init__(self, server_args: Any, gpu_id: int, nccl_port: int, target_worker: Any) -> None:
        # NGRAMWorker.__init__ would build SGLang's C++ corpus; set what its verify path reads instead
        BaseSpecWorker.__init__(self)
        spec = get_spec()
        self.server_args = server_args
        self.enable_overlap = not get_schedule().disable_overlap_schedule
        self._target_worker = target_worker
        self.model_runner = target_worker.model_runner
        self.page_size = get_schedule().page_size
        self.draft_token_num = spec.speculative_num_draft_tokens
        self.speculative_num_draft_tokens = spec.speculative_num_draft_tokens
        self.max_trie_depth = 0  # no corpus to feed
        self.topk = spec.speculative_eagle_topk
        self.speculative_num_steps = spec.speculative_num_steps
        self.device = get_device().device
        self.adaptive_controller = None
        self._prev_decode_rids: set[Any] = set()
        self.grammar_tree_host = None
        self.ngram_corpus = _NoCorpus()
        algorithm = getattr(spec, "speculative_algorithm", None) or server_args.speculative_algorithm
        self.init_drafting(
            str(algorithm),
            self.draft_token_num,
            enable_overlap=self.enable_overlap,
            max_branches=spec.speculative_ngram_max_bfs_breadth,
        )

    def init_drafting(
        self, algorithm: str, draft_token_num: int, *, enable_overlap: bool = False, max_branches: int = 1
    ) -> None:
        """The drafting state: the algorithm's proposer behind the engine layer, no request seen yet.

        Separate from ``__init__`` (which needs SGLang's runtime context) so tests can drive the
        draft source alone. ``max_branches``: most branches per request's tree (1: chains).
        """
        self.algorithm = algorithm.upper()
        self.draft_token_num = draft_token_num
        self.enable_overlap = enable_overlap
        self.max_branches = max_branches
        stats_file, stats_interval = read_stats_settings()
        self.drafting = EngineDrafting(
            create_proposer(self.algorithm, read_options()),
            method=self.algorithm,
            request_method=method_of(self.algorithm),
            logger=LOGGER_NAME,
            stats_file=stats_file,
            stats_interval=stats_interval,
            details={"engine": "SGLang", "max_branches": max_branches, "num_draft_tokens": draft_token_num},
        )

    # ---- the draft source ------------------------------------------------------------------
    def _prepare_draft_tokens(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        histories = self._histories(batch)
        roots = [history.tail(len(history) - 1)[0] if len(history) else 0 for history in histories]
        try:
            limits, methods = request_controls(self.drafting, batch.reqs, self.draft_token_num - 1)
            branches = self.draft_branches([req.rid for req in batch.reqs], histories, limits, methods)
        except Exception as error:  # noqa: BLE001 - the glue's own faults cost this step's drafts only
            self.drafting.guard.record_fault("the SGLang worker", error, "no drafts this step")
            self.drafting.requests.stop_all()  # the sync may be half done: every request restarts next step
            branches = [[] for _ in histories]
        return draft_trees(roots, branches, self.draft_token_num)

    def draft_branches(
        self, request_ids: Sequence[Any], histories: Sequence[_History], limits: Sequence[int] | None = None,
        methods: Sequence[str | None] | None = None,
    ) -> list[list[tuple[int, ...]]]:
        """Per request, its drafts below the root: one branch for a chain, more for a tree, none for no draft.

        ``limits``: per request, its longest draft (None: the tree's width for all); ``methods``: per
        request, the part of the server's method it names (None: none does). One proposer
        call for the step (plus one per row for trees, which have no batch path).
        """
        if limits is None:
            limits = [self.draft_token_num - 1] * len(request_ids)
        rows = [
            (request_id, history, limit) if request_id is not None and len(history) else None
            for request_id, history, limit in zip(request_ids, histories, limits)
        ]
        drafts = self.drafting.step_requests(
            rows,
            stopping=self.drafting.requests.absent(request_ids),  # the decode batch holds every live request
            batch_size=len(rows),
            max_branches=self.max_branches,
            methods=methods,
        )
        return [list(draft.branches()) for draft in drafts]

    def _histories(self, batch: Any) -> list[_History]:
        reqs = batch.reqs
        pending: list[list[int]] = [[] for _ in reqs]
        if self.enable_overlap and not batch.grammar_needs_sync():
            # overlap: last step's accepted tokens are not in output_ids yet (the n-gram worker reads
            # them the same way); one copy to the host for the whole batch
            tokens = batch.spec_info.accept_tokens.cpu().tolist()
            accepted = batch.spec_info.accept_lens.cpu().tolist()
            stride = self.draft_token_num
            pending = [tokens[row * stride : row * stride + accepted[row]] for row in range(len(reqs))]
        return [_History(req.origin_input_ids_unpadded, req.output_ids, pending[row]) for row, req in enumerate(reqs)]

    def _update_ngram_corpus(self, batch: Any) -> None:
        pass  # the proposer learns each request's tokens through the sync at the next step

    def clear_cache_pool(self) -> None:
        self.drafting.requests.stop_all()
        self._prev_decode_rids = set()
