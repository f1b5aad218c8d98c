"""Composing methods inside vLLM: lookup drafts overlaid on the model's own neural drafts.

A method that composes the engine's own drafter (it declares ``engine_drafter_option``:
``specplug.hybrid``, or a plugin's composite) runs here, in place of vLLM's
``GPUModelRunner.propose_draft_token_ids`` with ``disable_padded_drafter_batch = true`` (the
plugin sets it), where ``sampled_token_ids`` are the per-request CPU lists and every row's
history is in ``input_batch.token_ids_cpu``. The method decides first, per request, what goes
to verification; vLLM's MTP/EAGLE/draft-model drafter runs only when some row asks for its
draft. It reaches the method as an :class:`~specplug.engine.EngineDrafts` proposer whose drafts
are fetched on demand, so the method sees it as any other Proposer.

The counters say what vLLM's drafter did each step: ``neural_pass.full`` (its whole pass),
``neural_pass.fill`` or ``neural_pass.skip``. On a step where no row asks for it (every row took the lookup's draft, or none), the
``unused_neural_pass`` setting says what vLLM's drafter does:

- ``"fill"`` (default): only its first forward, at draft length 0 (vLLM's own path for a
  dynamic K of 0): it writes its KV cache for the step's verified tokens, so later neural
  drafts attend to every position, and computes no draft token (no LM-head projection);
- ``"skip"``: nothing; cheapest, but the drafter's KV cache misses those positions for the rest
  of the request (its later drafts attend to stale entries there);
- ``"full"``: its whole pass every step before the method decides (the first overlay's way);
- ``"fill_in_use"``: ``fill`` while the head is in use for the batch (its draft taken, or a
  request joined, within the last :data:`FILL_IDLE_STEPS` steps), ``skip`` otherwise; the counters
  say which. The positions skipped are not re-filled before the head's next draft: vLLM's EAGLE
  forward needs the target's hidden states at those positions, which vLLM keeps for one step only.

The setting is read per drafter (:mod:`specplug_adapters.vllm._neural`): a parallel drafter
(P-EAGLE, PARD, DFlash) makes its whole draft in its first forward, so its ``fill`` runs as
``full`` and it is always asked for vLLM's K; Medusa keeps no cache, so its ``fill`` is a ``skip``.

With ``step_costs = "online"`` (the default) a method that takes a cost model and was given none
gets an :class:`~specplug.cost.OnlineCostModel` learnt from this engine's own times: the time
between two drafting calls is the engine's step over the scheduled tokens (the verification,
observed only on steps that start no request); the overlay's own time on a step where vLLM's
drafter did not run its whole pass is the overhead every step pays (the method, the ``fill``
forward); on a step where it did, what it took beyond that overhead is the neural draft's cost.
So the hybrid chooses the head's draft only where its expected tokens pay for its pass on this
machine, and the composite prices that pass once per batch step (``EngineDrafts.shared_pass``).

Under tensor parallelism every rank runs this overlay, and whether vLLM's drafter runs its pass
(and at which length) decides how many times its collectives are called: every rank must choose
alike. The choice reads the token history and vLLM's drafts (alike on every rank) and the learnt
costs, which come from each rank's clock; so the times are not applied where they are measured:
every :data:`EXCHANGE_EVERY` steps the ranks exchange through vLLM's tensor-parallel group and all
of them learn the times rank 0 measured (:class:`~specplug.engine.AgreedObservations`). Under data
parallelism the drafter's forwards also keep the data-parallel ranks in step, and their batches
(so their choices) differ: the pass runs whole every step there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from specplug import InvalidOptionError
from specplug.cost import OnlineCostModel
from specplug.engine import (
    AgreedObservations,
    EngineDrafting,
    EngineDrafts,
    NEURAL_METHOD,
    RequestControl,
    capabilities_of,
    methods_composing_engine_drafter,
)
from specplug_adapters.vllm._config import PREFIX, create_method, read_settings
from specplug_adapters.vllm._neural import neural_drafter
from specplug_adapters.vllm._requests import controlled_limits, controlled_methods, request_controls
from specplug_adapters.vllm._stats import LOGGER_NAME, stats_options

__all__ = ["EngineDrafts", "HybridOverlay"]

log = logging.getLogger(LOGGER_NAME)

#: ``fill_in_use``: steps without the head's draft (and without a new request) after which the fill stops
FILL_IDLE_STEPS = 8

#: under tensor parallelism: steps between two exchanges of the measured times (one broadcast each)
EXCHANGE_EVERY = 4

#: a measured time, as recorded on a rank and applied on all: ("step", verified tokens, seconds)
#: for the engine's step, ("call", whether vLLM's drafter ran its whole pass, seconds) for the overlay's
Timing = tuple[str, int, float]


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
        #: how vLLM's drafter makes its tokens: what a skipped or shorter pass means for it
        self.drafter = neural_drafter(str(vllm_config.speculative_config.method),
                                      bool(getattr(vllm_config.speculative_config, "parallel_drafting", False)))
        self.unused_neural_pass = self.drafter.unused_pass(settings.unused_neural_pass)
        data_parallel = getattr(getattr(vllm_config, "parallel_config", None), "data_parallel_size", 1) or 1
        if data_parallel > 1 and self.unused_neural_pass != "full":
            # the drafter's forwards synchronise data-parallel ranks, whose batches (and so choices) differ
            log.warning("specplug: data_parallel_size = %s: vLLM's drafter runs its whole pass every step "
                        "(unused_neural_pass = 'full')", data_parallel)
            self.unused_neural_pass = "full"
        self.engine_drafts = EngineDrafts(str(neural_name))
        #: the engine's step and drafter times, learnt here; None when the setting is off
        self.step_costs = OnlineCostModel(name="vllm-online", monotone=True) if settings.step_costs == "online" else None
        self._returned_at: float | None = None  # when the last drafting call returned to vLLM
        self.clock: Callable[[], float] = time.perf_counter  # what times are read from (tests set their own)
        #: the times every rank learns alike: rank 0's, shared under tensor parallelism where choices change
        #: the drafter's passes (with 'full' the pass runs every step whatever is chosen)
        tensor_parallel = getattr(getattr(vllm_config, "parallel_config", None), "tensor_parallel_size", 1) or 1
        shares = tensor_parallel > 1 and self.step_costs is not None and self.unused_neural_pass != "full"
        self.agreed: AgreedObservations[Timing] = AgreedObservations(
            _tensor_parallel_share if shares else None, every=EXCHANGE_EVERY)
        # the first whole pass and first drafting call pay vLLM's one-time setup (seconds on a CPU): not learnt
        self._untimed = {"whole_pass": True, "call": True}
        # fill_in_use: the drafting calls so far, the call up to which the fill runs, the batch's requests
        self._calls, self._fill_until, self._batch_ids = 0, 0, frozenset()
        self._controls: list[RequestControl] | None = None  # this step's per-request controls (None: none asked)
        super().__init__(create_method(settings, self.engine_drafts, self.step_costs), **stats_options(settings))
        #: tokens of vLLM's drafter pass when a row takes its draft (the method's validated
        #: neural_max_tokens, at most the step's K): lookups draft up to K while the head runs only as
        #: far as it is asked; None: the step's K
        self.neural_tokens: int | None = getattr(getattr(self.guard.proposer, "options", None), "neural_max_tokens", None)
        if not self.drafter.cuttable:  # one forward makes all K: asked for K, the choice trims
            self.neural_tokens = None
        log.info("specplug %s overlay on vLLM's %s drafts, options %s", settings.method, neural_name, settings.options)

    def apply(
        self, runner: Any, num_tokens: int, sampled_token_ids: Any, neural_pass: Callable[[int], Any],
        verified_tokens: int | None = None,
    ) -> Any:
        """The step's drafts: the method's choice, with vLLM's drafter run as the setting says.

        ``verified_tokens``: the tokens the engine's step just ran over (None: a step not to learn
        its time from, e.g. one that started a request); with ``step_costs`` online, the step's
        time and the overlay's own are learnt.
        """
        started = self.clock()
        if self.step_costs is not None:
            if verified_tokens and self._returned_at is not None:
                self.agreed.record(("step", int(verified_tokens), started - self._returned_at))
            self._learn_agreed_costs()
        passes: list[int] = []

        def timed_pass(tokens: int) -> Any:
            passes.append(tokens)
            return neural_pass(tokens)

        try:
            return self._apply(runner, num_tokens, sampled_token_ids, timed_pass)
        finally:
            self._returned_at = self.clock()
            if self.step_costs is not None:
                self.agreed.record(("call", int(any(passes)), self._returned_at - started))
                if self.agreed.share is None:  # one rank: learnt at once (exchanges happen only at a step's start)
                    self._learn_agreed_costs()

    def _learn_agreed_costs(self) -> None:
        """Learn the times the ranks agree on (this rank's own where it is the only one); called once
        per step on every rank, before the method chooses."""
        try:
            timings = self.agreed.take()
        except Exception as error:  # noqa: BLE001 - a cost fault must not reach vLLM
            self.guard.record_fault("the ranks' exchange of step costs", error, "this step's times are not learnt")
            return
        for timing in timings:
            self._learn_costs(timing)

    def _learn_costs(self, timing: Timing) -> None:
        """What the engine's step over its verified tokens took, or a drafting call: overhead, or
        (with vLLM's whole pass) the neural draft."""
        kind, value, seconds = timing
        whole_pass = kind == "call" and bool(value)
        try:
            costs = self.step_costs
            if kind == "step":
                costs.observe(value, seconds)
            elif self._untimed["whole_pass" if whole_pass else "call"]:
                self._untimed["whole_pass" if whole_pass else "call"] = False
            elif self.unused_neural_pass == "full":  # the pass runs every step: taking its draft adds nothing
                costs.observe_overhead(seconds)
            elif whole_pass:
                costs.observe_draft("neural", max(0.0, seconds - costs.step_overhead()))
            else:
                costs.observe_overhead(seconds)
            # what was learnt, in the stats (microseconds): a one-token engine step, the head's whole
            # pass beyond the overhead, and the overhead; plus the steps the batch check declined the pass
            counters = self.counters
            counters["costs.step_us"] = round(costs.verify_time(1, 0) * 1e6)
            counters["costs.neural_us"] = round(costs.draft_time("neural", 1, 0, 0.0) * 1e6)
            counters["costs.overhead_us"] = round(costs.step_overhead() * 1e6)
            counters["costs.shared_pass_declined"] = int(getattr(self.guard.proposer, "shared_pass_declined", 0))
        except Exception as error:  # noqa: BLE001 - a cost fault must not reach vLLM
            self.guard.record_fault("the overlay's step costs", error, "this step's times are not learnt")

    def _apply(self, runner: Any, num_tokens: int, sampled_token_ids: Any, neural_pass: Callable[[int], Any]) -> Any:
        """:meth:`apply` without the timing.

        ``neural_pass(k)`` runs vLLM's own drafting at draft length ``k`` and returns its drafts
        (a ``[batch, k]`` tensor or lists). ``sampled_token_ids`` are CPU lists when vLLM drafts
        after its bookkeeping, or the padded ``[batch, K + 1]`` tensor (-1 for rejected
        positions) when it drafts before it (draft models); the row histories then do not hold
        this step's tokens yet.
        """
        if self.unused_neural_pass == "full":
            self.counters["neural_pass.full"] += 1
            return self._overlay(runner, num_tokens, sampled_token_ids, neural_pass(num_tokens))
        head_tokens = num_tokens
        if self.neural_tokens and isinstance(sampled_token_ids, list):  # lists: a draft of any length goes
            head_tokens = min(num_tokens, self.neural_tokens)
        neural = _NeuralPass(neural_pass, head_tokens)
        if self.unused_neural_pass == "fill_in_use":  # the other settings need no batch history
            self._note_batch(runner)
        faults = self.guard.counters["faults"]
        try:
            new_tokens, lengths = self._new_tokens(runner, sampled_token_ids)
            chosen: list[list[int]] | None = self._choose(runner, num_tokens, new_tokens, lengths, neural)
        except Exception as error:  # noqa: BLE001 - the overlay must never take the engine down
            self.guard.record_fault("the hybrid overlay", error, "vLLM's own drafts are used this step")
            chosen = None
        neural.raise_engine_error()  # vLLM's own drafter failed: as it would without the plugin
        if neural.drafts is not None:  # some row asked: vLLM's drafts are there, as in the full overlay
            self.counters["neural_pass.full"] += 1
            self._fill_until = self._calls + FILL_IDLE_STEPS
            if chosen is None:
                return neural.drafts
            engine_rows = self._controlled(_padded_rows(neural.rows, len(chosen)))
            return _like(neural.drafts, [tokens or row for tokens, row in zip(chosen, engine_rows)], engine_rows)
        if chosen is None or self.guard.counters["faults"] > faults:
            drafts = neural.run()  # the method faulted before asking: vLLM's own drafts go out
            neural.raise_engine_error()
            self.counters["neural_pass.full"] += 1
            self._fill_until = self._calls + FILL_IDLE_STEPS
            return drafts
        fill = self.unused_neural_pass == "fill" or (
            self.unused_neural_pass == "fill_in_use" and self._calls <= self._fill_until)
        self.counters["neural_pass.fill" if fill else "neural_pass.skip"] += 1
        if fill:
            neural_pass(0)  # the drafter's KV cache follows the request; no draft token computed
        return chosen  # lists: vLLM takes a draft of any length per request

    def _note_batch(self, runner: Any) -> None:
        """Counts the drafting call; a request new to the batch keeps the ``fill_in_use`` fill going
        (its prompt's positions, and the head's first tries on it, need the drafter's KV cache)."""
        self._calls += 1
        ids = frozenset(getattr(runner.input_batch, "req_ids", ()))
        if ids - self._batch_ids:
            self._fill_until = self._calls + FILL_IDLE_STEPS
        self._batch_ids = ids

    def _overlay(self, runner: Any, num_tokens: int, sampled_token_ids: Any, drafts: Any) -> Any:
        """The full overlay: vLLM's drafter has run; the method chooses per row between its draft and the lookup's."""
        engine_rows = _rows(drafts)
        try:
            new_tokens, lengths = self._new_tokens(runner, sampled_token_ids)
            offered = _padded_rows(engine_rows, len(new_tokens))
            self._controls = None
            chosen = self._run_method(runner, num_tokens, new_tokens, lengths,
                                      lambda rows: self.engine_drafts.offer_rows(rows, offered))
            # an empty choice (a row that cannot draft, or a fault) costs only specplug's choice:
            # vLLM's own draft still goes out
            offered = self._controlled(offered)
            return _like(drafts, [tokens or row for tokens, row in zip(chosen, offered)], engine_rows)
        except Exception as error:  # noqa: BLE001 - the overlay must never take the engine down
            self.guard.record_fault("the hybrid overlay", error, "vLLM's own drafts are used this step")
            return drafts

    @staticmethod
    def _new_tokens(runner: Any, sampled_token_ids: Any) -> tuple[Sequence[Sequence[int]], np.ndarray]:
        if isinstance(sampled_token_ids, list):
            return sampled_token_ids, runner.input_batch.num_tokens_no_spec
        return _padded_new_tokens(runner, sampled_token_ids)

    def _choose(
        self, runner: Any, num_tokens: int, sampled: Sequence[Sequence[int]], lengths: np.ndarray, neural: _NeuralPass
    ) -> list[list[int]]:
        """The method's drafts; vLLM's drafter runs (once, for the whole batch) if a row asks for its draft."""
        def fetch_on_demand(rows: list[Any]) -> None:
            def fetch() -> None:
                self.engine_drafts.offer_rows(rows, _padded_rows(neural.rows_now(), len(rows)))

            self.engine_drafts.on_demand(fetch)

        return self._run_method(runner, num_tokens, sampled, lengths, fetch_on_demand)

    def _run_method(
        self, runner: Any, num_tokens: int, sampled: Sequence[Sequence[int]], lengths: np.ndarray,
        before_drafting: Callable[[list[Any]], None],
    ) -> list[list[int]]:
        """One call to the method for the whole step: starts, stops, new tokens and choices."""
        batch = runner.input_batch
        limit = max(1, num_tokens)  # vLLM's K this step, which a composite weighs the neural part by
        self.engine_drafts.max_draft_tokens = limit
        request_ids = list(batch.req_ids[: len(sampled)])
        requests = getattr(runner, "requests", None)
        self._controls = request_controls(self, request_ids, requests)
        limits = controlled_limits(np.full(len(sampled), limit, dtype=np.int64), self._controls)
        return self.step_token_lists(
            sampled, lengths, batch.token_ids_cpu, limits, request_ids, requests, before_drafting=before_drafting,
            methods=controlled_methods(self._controls),
        )

    def _controlled(self, engine_rows: list[list[int]]) -> list[list[int]]:
        """vLLM's drafts cut to each request's control (a request that is off, or restricted to a
        lookup, gets none): they fill a row the method left empty, which must not undo the request's
        own limit or method."""
        controls = self._controls
        if controls is None:
            return engine_rows
        return [[] if control.method not in (None, NEURAL_METHOD) else row[: control.limit(len(row))]
                for row, control in zip(engine_rows, controls)]


def _tensor_parallel_share(timings: list[Timing]) -> list[Timing]:
    """Rank 0's timings, on every rank of vLLM's tensor-parallel group (a broadcast every rank makes)."""
    from vllm.distributed.parallel_state import get_tp_group

    return list(get_tp_group().broadcast_object(timings, src=0))


class _NeuralPass:
    """vLLM's drafting of one step, run at most once: its drafts, or the error it raised."""

    def __init__(self, run: Callable[[int], Any], num_tokens: int) -> None:
        self._run, self._num_tokens = run, num_tokens
        self.drafts: Any = None
        self.rows: list[list[int]] = []
        self._error: BaseException | None = None

    def run(self) -> Any:
        if self.drafts is None and self._error is None:
            try:
                self.drafts = self._run(self._num_tokens)
                self.rows = _rows(self.drafts)
            except Exception as error:  # noqa: BLE001 - re-raised outside the method's guard
                self._error = error
        return self.drafts

    def rows_now(self) -> list[list[int]]:
        """Per row, vLLM's draft (running the drafter first); none when it failed (re-raised later)."""
        self.run()
        return self.rows

    def raise_engine_error(self) -> None:
        if self._error is not None:
            raise self._error


def _padded_rows(rows: list[list[int]], count: int) -> list[list[int]]:
    return [rows[row] if row < len(rows) else [] for row in range(count)]


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

    A tensor (vLLM's padded drafter batch) needs every row at full width: a shorter choice is
    padded with the engine's own tokens at those positions (they are verified like any draft
    token, so output is unchanged; at worst they are rejected), from ``original`` where a
    request's control cut ``engine_rows``.

    >>> _like([[50, 51], [60, 61]], [[2, 3], [60, 61]], [[50, 51], [60, 61]])
    [[2, 3], [60, 61]]
    """
    if not hasattr(original, "tolist"):
        return rows
    import torch

    width = original.shape[1]
    padding = original.tolist()
    full = [(tokens[:width] + engine[len(tokens) :] + pad[max(len(tokens), len(engine)) :])[:width]
            for tokens, engine, pad in zip(rows, engine_rows, padding)]
    return torch.tensor(full, dtype=original.dtype).reshape(original.shape).to(original.device)
