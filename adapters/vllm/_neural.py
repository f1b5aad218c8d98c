"""vLLM's neural drafters, and what the overlay may skip or cut for each.

The overlay (:mod:`specplug_adapters.vllm._hybrid`) asks vLLM's drafter for a step's draft only
when a row takes it, runs a shorter draft than vLLM's K where the method's ``neural_max_tokens``
says so, and on a step no row takes the draft runs the drafter's first forward only (``fill``),
keeping its KV cache in step with the request. Whether each of those means anything depends on
how the drafter makes its tokens; this module states it once per vLLM method, so the overlay
reads one record rather than testing names.

Plain dicts and strings only: imports no vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplug import InvalidOptionError

__all__ = ["NEURAL_METHODS", "UNSUPPORTED", "NeuralDrafter", "check_neural_method", "is_mtp", "neural_drafter"]


@dataclass(frozen=True)
class NeuralDrafter:
    """How one of vLLM's neural drafters makes a draft, as far as the overlay cares."""

    #: vLLM's method name
    method: str
    #: all K tokens come from one forward (P-EAGLE, PARD, DFlash, Medusa's heads)
    parallel: bool
    #: the drafter keeps its own KV cache, which a step without its forward leaves behind
    keeps_cache: bool
    #: what ``_as_neural`` sets ``disable_padded_drafter_batch`` to when the user leaves it out
    #: (True: draft after vLLM's bookkeeping, on CPU lists; None: vLLM's own default)
    unpadded: bool | None = None

    @property
    def cuttable(self) -> bool:
        """Whether asking fewer than K tokens costs less. A parallel drafter lays out K query slots
        at build time and reshapes its one forward's output to K columns: a shorter ask saves
        nothing and breaks the reshape, so it is always asked for K and the overlay trims."""
        return not self.parallel

    def unused_pass(self, setting: str) -> str:
        """The overlay's ``unused_neural_pass`` setting as it runs on this drafter.

        ``fill`` on a parallel drafter with a cache: its first forward *is* its whole draft, so
        running it costs the same as drafting; it runs as ``full`` and its drafts are offered too.
        ``fill`` (and ``fill_in_use``) on a drafter without a cache (Medusa's heads read the target's
        hidden state only): there is nothing to keep in step, and vLLM's Medusa refuses a draft
        length other than K, so the pass is skipped.
        """
        if setting in ("fill", "fill_in_use"):
            if not self.keeps_cache:
                return "skip"
            if self.parallel:
                return "full"
        return setting


_SEQUENTIAL = {
    "mtp": NeuralDrafter("mtp", parallel=False, keeps_cache=True, unpadded=True),
    "eagle": NeuralDrafter("eagle", parallel=False, keeps_cache=True, unpadded=True),
    "eagle3": NeuralDrafter("eagle3", parallel=False, keeps_cache=True, unpadded=True),
    # vLLM runs a draft model on its padded batch, before bookkeeping; the overlay reads the tensor
    "draft_model": NeuralDrafter("draft_model", parallel=False, keeps_cache=True),
}
_PARALLEL_ONLY = {
    # a block of K mask queries after the bonus token, one forward; vLLM sets parallel_drafting itself
    "dflash": NeuralDrafter("dflash", parallel=True, keeps_cache=True),
    # K heads over the target's last hidden state; no cache of its own
    "medusa": NeuralDrafter("medusa", parallel=True, keeps_cache=False),
}

#: vLLM methods whose drafts a composing method (``specplug.hybrid``) can overlay; vLLM's
#: model-specific MTP names (``deepseek_mtp``, ``qwen3_next_mtp``, ...: every one ends in ``_mtp``)
#: are accepted as ``mtp``, which vLLM maps them to
NEURAL_METHODS = (*_SEQUENTIAL, *_PARALLEL_ONLY)

#: methods vLLM's config accepts that the overlay cannot run over, and why
UNSUPPORTED = {
    "dspark": "vLLM runs DSpark in its V2 model runner only, and the overlay wraps the V1 runner (V1 refuses it: "
              "\"Model Runner V1 does not support: dspark speculative decoding\")",
    "mlp_speculator": "vLLM accepts it in its speculative config but its V1 model runner builds no drafter "
                      "for it (the runner raises \"Unknown speculative decoding method\")",
    "extract_hidden_states": "it saves the target's hidden states and drafts no tokens",
    "ngram": "it is a lookup, not a neural drafter; specplug.hybrid brings its own lookup (option \"lookup\")",
    "ngram_gpu": "it is a lookup, not a neural drafter; specplug.hybrid brings its own lookup (option \"lookup\")",
    "suffix": "it is a lookup, not a neural drafter; specplug.hybrid brings its own lookup (option \"lookup\")",
    "custom_class": "it is a custom drafter; specplug's lookups run as one (specplug.suffix, specplug.ngram)",
}


def is_mtp(method: str) -> bool:
    """Whether ``method`` is vLLM's ``mtp`` or one of its model-specific MTP names."""
    return method == "mtp" or method.endswith("_mtp")


def check_neural_method(method: object, name: str) -> None:
    """Raise naming the bad value and the valid ones when ``method`` is no neural method the overlay runs on.

    >>> check_neural_method("dflash", "specplug.hybrid")
    >>> check_neural_method("mlp_speculator", "specplug.hybrid")
    Traceback (most recent call last):
    ...
    specplug._errors.InvalidOptionError: specplug.hybrid setting neural = 'mlp_speculator' is not valid: vLLM ...
    """
    if isinstance(method, str) and (method in NEURAL_METHODS or is_mtp(method)):
        return
    why = f": {UNSUPPORTED[method]}" if isinstance(method, str) and method in UNSUPPORTED else ""
    raise InvalidOptionError(
        f"{name} setting neural = {method!r} is not valid{why}; use one of {', '.join(NEURAL_METHODS)} "
        "(or a model-specific MTP name such as deepseek_mtp)"
    )


def neural_drafter(method: str, parallel_drafting: bool = False) -> NeuralDrafter:
    """The record for vLLM's resolved ``method`` (``speculative_config.method``) and its
    ``parallel_drafting`` flag (P-EAGLE on eagle/eagle3, PARD on draft_model).

    >>> neural_drafter("eagle3", parallel_drafting=True).cuttable, neural_drafter("eagle3").cuttable
    (False, True)
    """
    if is_mtp(method):
        method = "mtp"
    if method in _PARALLEL_ONLY:
        return _PARALLEL_ONLY[method]
    if method not in _SEQUENTIAL:
        check_neural_method(method, "the overlay")
    drafter = _SEQUENTIAL[method]
    if parallel_drafting:
        # vLLM runs a parallel drafter on its padded batch only (it refuses disable_padded_drafter_batch)
        return NeuralDrafter(method, parallel=True, keeps_cache=True)
    return drafter
