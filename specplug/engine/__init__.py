"""The engine layer: what every engine adapter shares, written once.

Engines show a drafter their requests as a batch of rows or as one growing history, never
as ``start``/``extend``/``stop`` calls; they must not fail when a proposer does; and they
differ only in where the tokens are and where the drafts go. This layer holds the rest:

- :class:`BatchSync` (rows keyed by request id, or by row with a fingerprint of the history),
  :class:`KeyedHistorySync` (request id -> full history, ended by the engine's free or
  completion) and :class:`SingleRequestSync` / :class:`HistorySync` (one history, extended or
  restarted) turn an engine's view into the proposer's request lifecycle;
- :class:`EngineDrafting` runs one step: the batch size passed on, the drafts, the guard
  (a fault costs one draft), the counters and the :class:`StatsReporter`;
- :func:`step_of_pieces` builds a step's arrays from each row's new tokens (the adapters'
  and ``specplug perf --batch``'s one way to build them);
- :func:`create_for_engine` creates a method from an adapter's settings by its declared
  capabilities: the engine's own drafter (:class:`EngineDrafts` where the engine drafts
  itself) and a measured cost model go where the method says it takes them;
- :func:`no_drafter` and :func:`exit_on_mistake`: a start refused before the engine starts any
  process, in one line and exit status 2 from a command line.
- :class:`AgreedObservations` keeps rank-local measurements (clocks) out of choices that every
  tensor-parallel rank must make alike: rank 0's, shared through the engine's own group;
- :func:`request_control` reads what one request asks of speculation (off, a draft cap, the
  part of a composite method that drafts it) from its engine's free-form request parameters;
  :func:`served_methods` says which method names a server's requests may give.

It imports specplug's core only: no adapter and no engine.
"""

from specplug.engine._drafting import EngineDrafting
from specplug.engine._keyed_history import KeyedHistorySync
from specplug.engine._create import (
    StandInDrafter,
    capabilities_of,
    create_for_engine,
    methods_composing_engine_drafter,
)
from specplug.engine._engine_drafts import EngineDrafts
from specplug.engine._ranks import AgreedObservations
from specplug.engine._request_control import (
    DRAFT_KEY,
    MAX_DRAFT_TOKENS_KEY,
    METHOD_KEY,
    NEURAL_METHOD,
    REQUEST_KEYS,
    RequestControl,
    note_served,
    noted_served,
    request_control,
    served_methods,
)
from specplug.engine._batch_step import step_of_pieces
from specplug.engine._refusal import EXIT_STATUS, exit_on_mistake, no_drafter
from specplug.engine._stats import DEFAULT_LOGGER, StatsReporter, read_stats
from specplug.engine._sync import BatchSync, HistoryPlan, HistoryStep, HistorySync, Lifecycle, SingleRequestSync
from specplug.engine._versions import installed_version, range_problem

__all__ = [
    "DEFAULT_LOGGER",
    "EXIT_STATUS",
    "DRAFT_KEY",
    "MAX_DRAFT_TOKENS_KEY",
    "METHOD_KEY",
    "NEURAL_METHOD",
    "REQUEST_KEYS",
    "AgreedObservations",
    "BatchSync",
    "EngineDrafting",
    "EngineDrafts",
    "HistoryPlan",
    "HistoryStep",
    "HistorySync",
    "KeyedHistorySync",
    "Lifecycle",
    "RequestControl",
    "SingleRequestSync",
    "StandInDrafter",
    "StatsReporter",
    "capabilities_of",
    "create_for_engine",
    "exit_on_mistake",
    "installed_version",
    "methods_composing_engine_drafter",
    "no_drafter",
    "note_served",
    "noted_served",
    "range_problem",
    "read_stats",
    "request_control",
    "served_methods",
    "step_of_pieces",
]
