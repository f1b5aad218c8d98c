"""specplug: speculative-decoding proposers written once, run inside existing engines."""

from specplug._batch import BatchDrafts, BatchStep, check_batch_drafts
from specplug._drafts import DRAFT_KINDS, MAX_TOKEN_ID, Draft, DraftKind, RequestId, accepted_prefix, as_token_array, check_draft, check_tree_draft, draft_accepted
from specplug._proposer import Proposer
from specplug._errors import (
    DuplicateNameError,
    InvalidDraftError,
    InvalidOptionError,
    InvalidTokensError,
    NoDrafterError,
    RequestStateError,
    SpecplugError,
    UnknownMethodError,
    UnknownNameError,
)
from specplug._guard import GuardedProposer
from specplug._hookimpl import hookimpl
from specplug._plugin_faults import PluginError, PluginWarning
from specplug._plugins import create, method_specs, methods
from specplug._registry import MethodCapabilities, MethodRegistrar, MethodSpec
from specplug._version import __version__

__all__ = [
    "DRAFT_KINDS",
    "MAX_TOKEN_ID",
    "BatchDrafts",
    "BatchStep",
    "Draft",
    "DraftKind",
    "DuplicateNameError",
    "GuardedProposer",
    "InvalidDraftError",
    "InvalidOptionError",
    "InvalidTokensError",
    "MethodCapabilities",
    "MethodRegistrar",
    "MethodSpec",
    "NoDrafterError",
    "PluginError",
    "PluginWarning",
    "Proposer",
    "RequestId",
    "RequestStateError",
    "SpecplugError",
    "UnknownMethodError",
    "UnknownNameError",
    "__version__",
    "accepted_prefix",
    "as_token_array",
    "check_batch_drafts",
    "check_draft",
    "check_tree_draft",
    "create",
    "draft_accepted",
    "hookimpl",
    "method_specs",
    "methods",
]
