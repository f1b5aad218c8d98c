"""specplug: speculative-decoding proposers written once, run inside existing engines."""

from specplug._contract import (
    DRAFT_KINDS,
    MAX_TOKEN_ID,
    BatchDrafts,
    BatchStep,
    Draft,
    DraftKind,
    Proposer,
    RequestId,
    accepted_prefix,
    as_token_array,
    check_batch_drafts,
    check_draft,
    check_tree_draft,
    draft_accepted,
)
from specplug._errors import (
    DuplicateNameError,
    InvalidDraftError,
    InvalidOptionError,
    InvalidTokensError,
    RequestStateError,
    SpecplugError,
    UnknownMethodError,
    UnknownNameError,
    UnknownPeerError,
)
from specplug._guard import GuardedProposer
from specplug._hookimpl import hookimpl
from specplug._plugin_faults import PluginError, PluginWarning
from specplug._plugins import create, create_peer, method_specs, methods, peer_specs
from specplug._registry import MethodCapabilities, MethodRegistrar, MethodSpec, PeerRegistrar, PeerSpec
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
    "PeerRegistrar",
    "PeerSpec",
    "PluginError",
    "PluginWarning",
    "Proposer",
    "RequestId",
    "RequestStateError",
    "SpecplugError",
    "UnknownMethodError",
    "UnknownNameError",
    "UnknownPeerError",
    "__version__",
    "accepted_prefix",
    "as_token_array",
    "check_batch_drafts",
    "check_draft",
    "check_tree_draft",
    "create",
    "create_peer",
    "draft_accepted",
    "hookimpl",
    "method_specs",
    "methods",
    "peer_specs",
]
