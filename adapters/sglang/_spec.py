"""The spec class SGLang dispatches SPECPLUG_* algorithms through, and their server-argument defaults.

SGLang's scheduler asks an algorithm's spec object what it is at a dozen places. specplug's
algorithms answer as SGLang's own NGRAM does (``is_ngram()`` true): they run on the n-gram
worker's verify path (a draft tree checked under a mask, no draft KV cache, no draft model),
so every NGRAM branch of the scheduler (the overlap relay of accepted tokens, the KV sizing,
the disabled mixed chunk) is the right one. The places that compare the literal name "NGRAM"
instead (the external-corpus API) stay NGRAM's own: specplug has no external corpus.

The overlay algorithms (``SPECPLUG_<METHOD>_EAGLE``/``_EAGLE3``, a composing method over
SGLang's EAGLE worker) answer as SGLang's EAGLE/EAGLE3 do (``is_eagle()`` true): SGLang's EAGLE
worker, KV sizing and verify path run them (``SpecplugEagleSpecAlgo``); ``SPECPLUG_<METHOD>_NEXTN`` is
the same with the model's own path as the draft, as SGLang's NEXTN (``SpecplugNextnSpecAlgo``). ``SPECPLUG_<METHOD>_STANDALONE``
answers as SGLang's STANDALONE (``is_standalone()`` true: a draft model with its own embedding and
LM head, no hidden states carried; ``SpecplugStandaloneSpecAlgo``). The names over drafters the
overlay cannot reach (``_DFLASH``, ``_DSPARK``) are registered only to be refused in one line
(``SpecplugRefusedSpecAlgo``).
"""

from __future__ import annotations

from typing import Any

from sglang.srt.speculative.spec_registry import CustomSpecAlgo

from specplug_adapters.sglang._config import DEFAULT_NUM_DRAFT_TOKENS, check_options, read_options

__all__ = [
    "SpecplugEagle3SpecAlgo",
    "SpecplugEagleSpecAlgo",
    "SpecplugNextnSpecAlgo",
    "SpecplugRefusedSpecAlgo",
    "SpecplugSpecAlgo",
    "SpecplugStandaloneSpecAlgo",
    "apply_defaults",
    "apply_eagle_defaults",
    "apply_nextn_defaults",
    "validate_eagle_server_args",
    "validate_refused_server_args",
    "validate_server_args",
]

#: the running-request cap SGLang's NGRAM sets when none is given (its verify buffers are sized by it)
_DEFAULT_MAX_RUNNING_REQUESTS = 48


class _SpecplugAlgo(CustomSpecAlgo):
    """What every specplug algorithm answers alike: SGLang's own future map (its overlap bookkeeping)."""

    def create_future_map(
        self,
        device: Any,
        req_to_token_pool: Any,
        needs_cpu_seq_lens: bool = True,
        needs_confidence_relay: bool = False,
    ) -> Any:
        from sglang.srt.managers.overlap_utils import FutureMap

        return FutureMap(device, self, req_to_token_pool, needs_cpu_seq_lens, needs_confidence_relay)


class SpecplugSpecAlgo(_SpecplugAlgo):
    """A SPECPLUG_* algorithm: NGRAM's scheduler paths, specplug's worker and defaults."""

    def is_ngram(self) -> bool:
        return True

    def has_draft_kv(self) -> bool:
        return False  # the tree lives only in the verify mask, as NGRAM's

    def carries_draft_hidden_states(self) -> bool:
        return False

    def need_topk(self) -> bool:
        return False

    def get_platform_worker_cls(self) -> type | None:
        return None  # no out-of-tree platform worker replaces specplug's

    def handle_server_args(self, server_args: Any) -> None:
        apply_defaults(server_args)


def apply_defaults(server_args: Any) -> None:
    """Set what SGLang's NGRAM sets for itself: width, chain top-k, steps, no mixed chunk, no CPU overlap.

    ``server_args`` is SGLang's recorder of a plugin's writes (or a plain object in tests):
    reads see the configuration so far, writes are declared as this algorithm's defaults.
    """
    if server_args.device not in ("cuda", "cpu", "xpu"):
        raise ValueError(
            f"--device {server_args.device!r} is not valid for {server_args.speculative_algorithm}; "
            "specplug's algorithms run where SGLang's NGRAM does: cuda, cpu or xpu"
        )
    if server_args.speculative_num_draft_tokens is None:
        server_args.speculative_num_draft_tokens = DEFAULT_NUM_DRAFT_TOKENS
    # the n-gram verify reads a tree from its mask, whatever the top-k; 1 keeps SGLang's top-k
    # paths (page layouts, graph shapes) on their simplest case
    server_args.speculative_eagle_topk = 1
    if server_args.speculative_num_steps is None:
        server_args.speculative_num_steps = server_args.speculative_num_draft_tokens - 1
    server_args.enable_mixed_chunk = False  # as NGRAM: its overlap relay skips what a mixed chunk reads
    if server_args.max_running_requests is None:
        server_args.max_running_requests = _DEFAULT_MAX_RUNNING_REQUESTS
    if server_args.device == "cpu":
        server_args.disable_overlap_schedule = True  # SGLang runs no overlap schedule on a CPU


def validate_server_args(server_args: Any) -> None:
    """SGLang's validation hook: the algorithm, its JSON options and the width, in the launching process."""
    check_options(
        server_args.speculative_algorithm,
        read_options(),
        server_args.speculative_num_draft_tokens,
        getattr(server_args, "speculative_ngram_max_bfs_breadth", 1),
        getattr(server_args, "model_path", None),
    )


#: the draft chain SGLang's EAGLE runs when no width is given (3 head steps, 4 verified tokens)
_DEFAULT_EAGLE_STEPS = 3


class SpecplugEagleSpecAlgo(_SpecplugAlgo):
    """A SPECPLUG_<METHOD>_EAGLE algorithm: SGLang's EAGLE scheduler paths and worker, the overlay on its drafts."""

    def is_eagle(self) -> bool:
        return True

    def has_draft_kv(self) -> bool:
        return True  # the head keeps its KV, as SGLang's EAGLE

    def carries_draft_hidden_states(self) -> bool:
        return True

    def need_topk(self) -> bool:
        return True

    def get_platform_worker_cls(self) -> type | None:
        return None  # an out-of-tree platform's EAGLE worker would bypass the overlay

    def handle_server_args(self, server_args: Any) -> None:
        apply_eagle_defaults(server_args)


class SpecplugEagle3SpecAlgo(SpecplugEagleSpecAlgo):
    """The same over an EAGLE-3 head (SGLang captures the target's auxiliary hidden states for it)."""

    def is_eagle3(self) -> bool:
        return True


class SpecplugNextnSpecAlgo(SpecplugEagleSpecAlgo):
    """A SPECPLUG_<METHOD>_NEXTN algorithm: as SPECPLUG_<METHOD>_EAGLE, the draft being the model's own MTP layers."""

    def handle_server_args(self, server_args: Any) -> None:
        apply_nextn_defaults(server_args)


class SpecplugStandaloneSpecAlgo(_SpecplugAlgo):
    """A SPECPLUG_<METHOD>_STANDALONE algorithm: SGLang's STANDALONE scheduler paths and worker, the overlay
    on its draft model's chains."""

    def is_standalone(self) -> bool:
        return True

    def has_draft_kv(self) -> bool:
        return True  # the draft model keeps its KV, as SGLang's STANDALONE

    def carries_draft_hidden_states(self) -> bool:
        return False  # a plain model drafts from tokens alone

    def need_topk(self) -> bool:
        return True

    def get_platform_worker_cls(self) -> type | None:
        return None  # an out-of-tree platform's worker would bypass the overlay

    def handle_server_args(self, server_args: Any) -> None:
        apply_eagle_defaults(server_args)


class SpecplugRefusedSpecAlgo(_SpecplugAlgo):
    """A composing method over a drafter the overlay cannot reach: registered so that SGLang's validation
    hook refuses it with the reason (:func:`validate_refused_server_args`), never run."""


def apply_eagle_defaults(server_args: Any) -> None:
    """What SGLang sets for its EAGLE, for a chain (top-k 1), with the overlap schedule off.

    The overlay reads each request's history when the head has drafted; under the overlap
    schedule the last step's accepted tokens are not in it yet, so the overlay runs with the
    scheduler synchronous (as SGLang's EAGLE does on a CPU anyway).
    """
    if server_args.speculative_eagle_topk is None:
        server_args.speculative_eagle_topk = 1
    if server_args.speculative_num_steps is None:
        given = server_args.speculative_num_draft_tokens
        server_args.speculative_num_steps = given - 1 if given and given > 1 else _DEFAULT_EAGLE_STEPS
    server_args.speculative_num_draft_tokens = server_args.speculative_num_steps + 1  # a chain: the root and each step
    if server_args.max_running_requests is None:
        server_args.max_running_requests = _DEFAULT_MAX_RUNNING_REQUESTS
    server_args.enable_mixed_chunk = False
    server_args.disable_overlap_schedule = True


def apply_nextn_defaults(server_args: Any) -> None:
    """What SGLang does for its NEXTN (an alias of EAGLE): the draft is the model's own checkpoint, whose MTP
    layers SGLang loads as the draft model (DeepSeek-V3 as ``DeepseekV3ForCausalLMNextN``, MiMo as ``MiMoMTP``,
    ...); then the EAGLE defaults. A draft path given on the command line is kept."""
    if not server_args.speculative_draft_model_path:
        server_args.speculative_draft_model_path = server_args.model_path
        server_args.speculative_draft_model_revision = getattr(server_args, "revision", None)
    apply_eagle_defaults(server_args)


def validate_eagle_server_args(server_args: Any) -> None:
    """SGLang's validation hook for the overlay algorithms: the method, its JSON options and the EAGLE settings."""
    from specplug_adapters.sglang._config import check_eagle_options

    check_eagle_options(server_args.speculative_algorithm, read_options(), server_args)


def validate_refused_server_args(server_args: Any) -> None:
    """SGLang's validation hook for the refused overlay names: always their one-line refusal."""
    from specplug_adapters.sglang._config import refuse_overlay

    refuse_overlay(server_args.speculative_algorithm)
